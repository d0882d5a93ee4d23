package core

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMetrics(t *testing.T) {
	in := strings.Join([]string{
		`{"name":"exit_ok","value":1}`,
		`{"name":"Bad-Name","value":1}`,
		`{"name":"no_value"}`,
		`{"name":"p95_latency_ms","value":210,"unit":"ms"}`,
		`[1,2]`,
		`{"name":"p95_latency_ms","value":182,"unit":"ms"}`,
		``,
	}, "\n")
	got, notes := ParseMetrics([]byte(in), 2)
	want := []Metric{{Name: "exit_ok", Value: 1, Attempt: 2}, {Name: "p95_latency_ms", Value: 182, Unit: "ms", Attempt: 2, Samples: []float64{210, 182}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if len(notes) != 3 || !strings.HasPrefix(notes[0], "line 2:") || !strings.HasPrefix(notes[1], "line 3:") || !strings.HasPrefix(notes[2], "line 5:") {
		t.Errorf("notes %q", notes)
	}
	merged := MergeMetrics([]Metric{{Name: "exit_ok", Value: 0, Attempt: 1}, {Name: "old", Value: 3, Attempt: 1}}, got)
	if diff := cmp.Diff([]Metric{{Name: "exit_ok", Value: 1, Attempt: 2}, {Name: "old", Value: 3, Attempt: 1}, {Name: "p95_latency_ms", Value: 182, Unit: "ms", Attempt: 2, Samples: []float64{210, 182}}}, merged); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}

// A name written many times keeps every value as a sample, in order, up
// to MaxMetricSamples in all; later values still move the last value.
func TestParseMetricsKeepsSamples(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "{\"name\":\"step_ms\",\"value\":%d,\"unit\":\"ms\"}\n", i)
	}
	b.WriteString(`{"name":"once","value":7}` + "\n")
	got, notes := ParseMetrics([]byte(b.String()), 1)
	if len(notes) != 0 || len(got) != 2 {
		t.Fatalf("got %+v, notes %q", got, notes)
	}
	if got[0].Value != 100 || len(got[0].Samples) != 100 || got[0].Samples[0] != 1 || got[0].Samples[99] != 100 {
		t.Errorf("step_ms: value %v, %d samples %v", got[0].Value, len(got[0].Samples), got[0].Samples)
	}
	if got[1].Samples != nil {
		t.Errorf("a name written once has no samples: %v", got[1].Samples)
	}

	b.Reset()
	for i := range MaxMetricSamples + 10 {
		fmt.Fprintf(&b, "{\"name\":\"m\",\"value\":%d}\n", i)
	}
	got, notes = ParseMetrics([]byte(b.String()), 1)
	if len(got) != 1 || len(got[0].Samples) != MaxMetricSamples || got[0].Value != MaxMetricSamples+9 {
		t.Errorf("bounded: %d samples, value %v", len(got[0].Samples), got[0].Value)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "10 later values") {
		t.Errorf("notes %q", notes)
	}
}
