package accept

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

func TestMergeBelievesThePlatform(t *testing.T) {
	platform := []api.Metric{{Name: "exit_code", Value: 1, Source: api.SourcePlatform}}
	workload := []api.Metric{{Name: "exit_code", Value: 0, Source: api.SourceWorkload}, {Name: "p95_latency_ms", Value: 3, Source: api.SourceWorkload}}
	got, notes := Merge(platform, workload)
	want := []api.Metric{platform[0], workload[1]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "exit_code") {
		t.Errorf("notes: got %q", notes)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[99-i] = float64(i + 1) // 100 down to 1: the order must not matter
	}
	for _, tc := range []struct {
		name    string
		samples []float64
		p       float64
		want    float64
		ok      bool
	}{
		{"p50 of 1..100 is 50", hundred, 50, 50, true},
		{"p95 of 1..100 is 95", hundred, 95, 95, true},
		{"p99 of 1..100 is 99", hundred, 99, 99, true},
		{"p100 is the largest", hundred, 100, 100, true},
		{"p95 of five samples is the largest (rank ceil(4.75) = 5)", []float64{1, 2, 3, 4, 5}, 95, 5, true},
		{"p50 of four samples is the second (rank 2), never an interpolation", []float64{10, 20, 30, 40}, 50, 20, true},
		{"a tiny p is the smallest", []float64{3, 1, 2}, 0.001, 1, true},
		{"one sample is every percentile", []float64{7}, 99, 7, true},
		{"no samples: none", nil, 50, 0, false},
		{"p 0: none", hundred, 0, 0, false},
		{"p over 100: none", hundred, 101, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Percentile(tc.samples, tc.p)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// The samples 1..100 of a metric give p95 95 (nearest rank), inside the
// [94, 96.5] either method of the docs would give; the mean and count
// come with them, in the series' unit and source.
func TestSummarize(t *testing.T) {
	values := make([]float64, 100)
	for i := range values {
		values[i] = float64(i + 1)
	}
	got := Summarize(Series{Name: "step_ms", Unit: "ms", Source: api.SourceWorkload, Values: values})
	want := []api.Metric{
		{Name: "p50_step_ms", Value: 50, Unit: "ms", Source: api.SourceWorkload},
		{Name: "p95_step_ms", Value: 95, Unit: "ms", Source: api.SourceWorkload},
		{Name: "p99_step_ms", Value: 99, Unit: "ms", Source: api.SourceWorkload},
		{Name: "mean_step_ms", Value: 50.5, Unit: "ms", Source: api.SourceWorkload},
		{Name: "count_step_ms", Value: 100, Source: api.SourceWorkload},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
	if got := Summarize(Series{Name: "x", Values: []float64{math.NaN()}}); got != nil {
		t.Errorf("only NaN: got %+v, want none", got)
	}
	results := Evaluate([]string{"p95_step_ms >= 94", "p95_step_ms <= 96.5"}, got)
	if !Passed(results) {
		t.Errorf("criteria on the derived p95: %+v", results)
	}
}

// A workload's own p95 stands beside the samples it wrote: the derived
// figure does not replace it, and the bare name keeps the last value.
func TestWithSummariesKeepsReportedNames(t *testing.T) {
	reported := []api.Metric{
		{Name: "latency_ms", Value: 30, Unit: "ms", Source: api.SourceWorkload},
		{Name: "p95_latency_ms", Value: 12, Unit: "ms", Source: api.SourceWorkload},
	}
	got := WithSummaries(reported, []Series{{Name: "latency_ms", Unit: "ms", Source: api.SourceWorkload, Values: []float64{10, 20, 30}}})
	byName := map[string]float64{}
	for _, m := range got {
		if _, dup := byName[m.Name]; dup {
			t.Errorf("%s twice", m.Name)
		}
		byName[m.Name] = m.Value
	}
	want := map[string]float64{"latency_ms": 30, "p95_latency_ms": 12, "p50_latency_ms": 20, "p99_latency_ms": 30, "mean_latency_ms": 20, "count_latency_ms": 3}
	if diff := cmp.Diff(want, byName); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMemoryHeadroom(t *testing.T) {
	samples := []api.Sample{{Name: "gpu_memory_used_mib", Value: 30000}, {Name: "gpu_memory_used_mib", Value: 72000}, {Name: "other", Value: 1e9}}
	peak, ok := Peak(samples, "gpu_memory_used_mib")
	if !ok || peak != 72000 {
		t.Fatalf("peak: got %v, %v", peak, ok)
	}
	m, ok := MemoryHeadroom(peak, 80000)
	if !ok || m.Name != MetricMemoryHeadroom || m.Value < 0.0999 || m.Value > 0.1001 || m.Source != api.SourcePlatform {
		t.Errorf("got %+v, %v; want memory_headroom_ratio 0.1", m, ok)
	}
	if m, ok := MemoryHeadroom(90000, 80000); !ok || m.Value >= 0 {
		t.Errorf("over the limit: got %+v, want a negative headroom", m)
	}
	if _, ok := MemoryHeadroom(1, 0); ok {
		t.Error("no limit: got a headroom")
	}
	if _, ok := Peak(samples, "nothing"); ok {
		t.Error("no samples: got a peak")
	}
}
