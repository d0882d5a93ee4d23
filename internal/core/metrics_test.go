package core

import (
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
	want := []Metric{{Name: "exit_ok", Value: 1, Attempt: 2}, {Name: "p95_latency_ms", Value: 182, Unit: "ms", Attempt: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if len(notes) != 3 || !strings.HasPrefix(notes[0], "line 2:") || !strings.HasPrefix(notes[1], "line 3:") || !strings.HasPrefix(notes[2], "line 5:") {
		t.Errorf("notes %q", notes)
	}
	merged := MergeMetrics([]Metric{{Name: "exit_ok", Value: 0, Attempt: 1}, {Name: "old", Value: 3, Attempt: 1}}, got)
	if diff := cmp.Diff([]Metric{{Name: "exit_ok", Value: 1, Attempt: 2}, {Name: "old", Value: 3, Attempt: 1}, {Name: "p95_latency_ms", Value: 182, Unit: "ms", Attempt: 2}}, merged); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
}
