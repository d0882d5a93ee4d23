package accept

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpufleet/gpufleet/api"
)

// Names of the metrics the platform measures and the rules know. A
// workload may report any other name.
const (
	MetricExitCode          = "exit_code"                    // the stage workload's exit status (the worst of them)
	MetricQueueWait         = "queue_wait_seconds"           // submitted to running
	MetricStart             = "start_seconds"                // running to the process started
	MetricRestarts          = "restarts"                     // attempts beyond the first
	MetricGPUMemoryPeak     = "gpu_memory_peak_mib"          // highest GPU memory sample
	MetricMemoryHeadroom    = "memory_headroom_ratio"        // 1 - peak / limit
	MetricRecovery          = "recovery_seconds"             // disruption to running again
	MetricTimeToFirstResult = "time_to_first_result_seconds" // reported by the workload
	MetricThroughput        = "throughput_per_second"        // completed units per second
	MetricLatency           = "latency_ms"                   // base name of p50_/p95_/p99_latency_ms
	MetricP95Latency        = "p95_latency_ms"
	MetricCheckpointRestore = "checkpoint_restore_seconds"
)

// Merge puts the platform's metrics and a workload's together. The
// platform's come first and win: a workload that reports a name the
// platform measures (exit_code, say) is not believed, with a note.
func Merge(platform, workload []api.Metric) ([]api.Metric, []string) {
	out := slices.Clone(platform)
	have := map[string]bool{}
	for _, m := range platform {
		have[m.Name] = true
	}
	var notes []string
	for _, m := range workload {
		if have[m.Name] {
			notes = append(notes, fmt.Sprintf("%s: the workload's value (%s) is ignored: the platform measures it", m.Name, num(m.Value)))
			continue
		}
		out = append(out, m)
	}
	return out, notes
}

// Percentile is the nearest-rank percentile p (0 < p <= 100) of samples:
// the smallest sample such that at least p% of the samples are at or below
// it, that is sorted[ceil(p/100 × n) - 1]. It is always one of the
// samples, never an interpolation. NaN samples are left out; false when
// none is left or p is outside (0, 100].
func Percentile(samples []float64, p float64) (float64, bool) {
	if !(p > 0 && p <= 100) {
		return 0, false
	}
	s := make([]float64, 0, len(samples))
	for _, v := range samples {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return 0, false
	}
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1], true
}

// Series is the values of one metric reported more than once in a stage
// (by the workload, or measured by the load generator), in the order they
// came.
type Series struct {
	Name   string
	Unit   string
	Source string
	Values []float64
}

// SummaryPercentiles are the percentiles Summarize derives.
var SummaryPercentiles = []float64{50, 95, 99}

// Summarize is what criteria may judge of a series: p50_NAME, p95_NAME
// and p99_NAME (Percentile, nearest rank), mean_NAME and count_NAME, in
// the series' unit (count_ has none) and source. NaN values are left out;
// none when no value is left.
func Summarize(s Series) []api.Metric {
	var sum float64
	n := 0
	for _, v := range s.Values {
		if !math.IsNaN(v) {
			sum += v
			n++
		}
	}
	if n == 0 {
		return nil
	}
	var out []api.Metric
	for _, p := range SummaryPercentiles {
		v, _ := Percentile(s.Values, p)
		out = append(out, api.Metric{Name: fmt.Sprintf("p%g_%s", p, s.Name), Value: v, Unit: s.Unit, Source: s.Source})
	}
	return append(out,
		api.Metric{Name: "mean_" + s.Name, Value: sum / float64(n), Unit: s.Unit, Source: s.Source},
		api.Metric{Name: "count_" + s.Name, Value: float64(n), Source: s.Source})
}

// WithSummaries adds Summarize's metrics of each series to metrics, but
// for a name metrics has already: a workload that reports p95_latency_ms
// itself keeps its own figure beside the samples it wrote.
func WithSummaries(metrics []api.Metric, series []Series) []api.Metric {
	have := make(map[string]bool, len(metrics))
	for _, m := range metrics {
		have[m.Name] = true
	}
	out := slices.Clone(metrics)
	for _, s := range series {
		for _, m := range Summarize(s) {
			if !have[m.Name] {
				have[m.Name] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// Peak is the highest value of the samples named name; false when none.
func Peak(samples []api.Sample, name string) (float64, bool) {
	peak, ok := 0.0, false
	for _, s := range samples {
		if s.Name == name && !math.IsNaN(s.Value) && (!ok || s.Value > peak) {
			peak, ok = s.Value, true
		}
	}
	return peak, ok
}

// MemoryHeadroom is memory_headroom_ratio = 1 - peak/limit, the share of
// the memory limit the workload never used (negative when it went over).
// False when the limit is not positive or either figure is not finite.
func MemoryHeadroom(peak, limit float64) (api.Metric, bool) {
	if !(limit > 0) || math.IsInf(limit, 0) || math.IsNaN(peak) || math.IsInf(peak, 0) {
		return api.Metric{}, false
	}
	return api.Metric{Name: MetricMemoryHeadroom, Value: 1 - peak/limit, Unit: "ratio", Source: api.SourcePlatform}, true
}
