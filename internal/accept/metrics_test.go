package accept

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

func TestParseMetrics(t *testing.T) {
	in := `{"name":"p95_latency_ms","value":182,"unit":"ms"}
not json
{"name":"throughput_per_second","value":40}

{"name":"p95_latency_ms","value":190,"unit":"ms"}
{"name":"bad name","value":1}
{"name":"x"}
{"name":"y","value":1,"extra":true}
{"name":"z","value":"1"}
`
	got, notes := ParseMetrics([]byte(in))
	want := []api.Metric{
		{Name: "p95_latency_ms", Value: 190, Unit: "ms", Source: api.SourceWorkload},
		{Name: "throughput_per_second", Value: 40, Source: api.SourceWorkload},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	for _, want := range []string{"line 2: skipped", "line 6: skipped", "line 7: skipped", "line 8: skipped", "line 9: skipped", "p95_latency_ms was reported 2 times: the last value (190) counts"} {
		if !strings.Contains(strings.Join(notes, "\n"), want) {
			t.Errorf("notes %q: want one with %q", notes, want)
		}
	}
}

func TestParseMetricsIsBounded(t *testing.T) {
	var b strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&b, "{\"name\":\"metric_number_%d\",\"value\":%d,\"unit\":\"units_of_something_long\"}\n", i, i)
	}
	got, notes := ParseMetrics([]byte(b.String()))
	if b.Len() <= MaxMetricsBytes {
		t.Fatalf("test input is only %d bytes", b.Len())
	}
	if len(got) == 0 || len(got) > MaxMetrics {
		t.Errorf("got %d metrics, want 1 to %d", len(got), MaxMetrics)
	}
	if len(notes) == 0 || !strings.Contains(notes[0], "only the first 65536") {
		t.Errorf("notes: got %q", notes)
	}
	var many strings.Builder
	for i := range 1100 {
		fmt.Fprintf(&many, "{\"name\":\"m\",\"value\":%d}\n", i)
	}
	got, notes = ParseMetrics([]byte(many.String()))
	if len(got) != 1 || got[0].Value != MaxMetrics-1 {
		t.Errorf("got %+v, want m = %d (the last of the first %d lines)", got, MaxMetrics-1, MaxMetrics)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "more than 1000 metrics") {
		t.Errorf("notes: got %q", notes)
	}
	var junk strings.Builder
	for range 100 {
		junk.WriteString("junk\n")
	}
	_, notes = ParseMetrics([]byte(junk.String()))
	if len(notes) != maxNotes+1 || notes[maxNotes] != "and 80 more notes" {
		t.Errorf("got %d notes, last %q", len(notes), notes[len(notes)-1])
	}
}

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
	got := Percentiles(MetricLatency, "ms", hundred)
	want := []api.Metric{
		{Name: "p50_latency_ms", Value: 50, Unit: "ms", Source: api.SourcePlatform},
		{Name: "p95_latency_ms", Value: 95, Unit: "ms", Source: api.SourcePlatform},
		{Name: "p99_latency_ms", Value: 99, Unit: "ms", Source: api.SourcePlatform},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Percentiles (-want +got):\n%s", diff)
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
