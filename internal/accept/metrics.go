package accept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"unicode"

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

// Bounds on a metrics file.
const (
	MaxMetricsBytes = 64 << 10 // bytes read of $GPUFLEET_METRICS_FILE
	MaxMetrics      = 1000     // metric lines accepted
	MaxUnitLen      = 32
	maxNotes        = 20
)

// ParseMetrics reads what a workload wrote to $GPUFLEET_METRICS_FILE: one
// JSON object a line, {"name":"p95_latency_ms","value":182,"unit":"ms"}.
// Only the first MaxMetricsBytes are read (to the last whole line) and
// only the first MaxMetrics metric lines count. A line that is not such an
// object (malformed JSON, an unknown field, no name or value, a bad name
// or unit) is skipped with a note saying which line and why. A name given
// more than once keeps its last value (a workload may refine a figure as
// it runs), with a note; the metrics come in the order their names first
// appeared, with Source "workload". At most 20 notes, then one that
// counts the rest.
func ParseMetrics(b []byte) ([]api.Metric, []string) {
	var notes []string
	dropped := 0
	note := func(format string, args ...any) {
		if len(notes) < maxNotes {
			notes = append(notes, fmt.Sprintf(format, args...))
		} else {
			dropped++
		}
	}
	if len(b) > MaxMetricsBytes {
		note("the metrics file is %d bytes: only the first %d are read", len(b), MaxMetricsBytes)
		b = b[:MaxMetricsBytes]
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i]
		}
	}
	var out []api.Metric
	index := map[string]int{}
	repeated := map[string]int{}
	accepted := 0
	for no, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if accepted == MaxMetrics {
			note("line %d: more than %d metrics: the rest are ignored", no+1, MaxMetrics)
			break
		}
		var ml struct {
			Name  *string  `json:"name"`
			Value *float64 `json:"value"`
			Unit  string   `json:"unit"`
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ml); err != nil || dec.More() {
			if err == nil {
				err = fmt.Errorf("more than one JSON value")
			}
			note("line %d: skipped: %v", no+1, err)
			continue
		}
		switch {
		case ml.Name == nil || ml.Value == nil:
			note("line %d: skipped: want {\"name\": ..., \"value\": ...}", no+1)
			continue
		case len(*ml.Name) > api.MaxMetricNameLen || !api.MetricNameRE.MatchString(*ml.Name):
			note("line %d: skipped: %q is not a metric name (letters, digits, '_' and '.', at most %d)", no+1, clip(*ml.Name), api.MaxMetricNameLen)
			continue
		case math.IsNaN(*ml.Value) || math.IsInf(*ml.Value, 0):
			note("line %d: skipped: value is not finite", no+1)
			continue
		case len(ml.Unit) > MaxUnitLen || !printable(ml.Unit):
			note("line %d: skipped: unit must be at most %d printable characters", no+1, MaxUnitLen)
			continue
		}
		accepted++
		m := api.Metric{Name: *ml.Name, Value: *ml.Value, Unit: ml.Unit, Source: api.SourceWorkload}
		if i, ok := index[m.Name]; ok {
			out[i] = m
			repeated[m.Name]++
			continue
		}
		index[m.Name] = len(out)
		out = append(out, m)
	}
	for _, m := range out {
		if n := repeated[m.Name]; n > 0 {
			note("%s was reported %d times: the last value (%s) counts", m.Name, n+1, num(m.Value))
		}
	}
	if dropped > 0 {
		notes = append(notes, fmt.Sprintf("and %d more notes", dropped))
	}
	return out, notes
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

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

// Percentiles is p50_, p95_ and p99_ of base ("latency_ms" gives
// p50_latency_ms, p95_latency_ms, p99_latency_ms), nearest-rank, as
// platform metrics in unit; none when there are no samples.
func Percentiles(base, unit string, samples []float64) []api.Metric {
	var out []api.Metric
	for _, p := range []float64{50, 95, 99} {
		if v, ok := Percentile(samples, p); ok {
			out = append(out, api.Metric{Name: fmt.Sprintf("p%g_%s", p, base), Value: v, Unit: unit, Source: api.SourcePlatform})
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
