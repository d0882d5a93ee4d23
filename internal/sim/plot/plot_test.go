package plot

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/sim"
)

// curve returns points at 1%, 2%, ... with the allocations given.
func curve(allocs ...float64) []sim.Point {
	var ps []sim.Point
	for i, a := range allocs {
		ps = append(ps, sim.Point{Arrived: float64(i+1) / 100, Allocation: a})
	}
	return ps
}

func TestAllocation(t *testing.T) {
	runs := []sim.PackingRun{
		{Policy: "gpufleet", Seed: 1, Curve: curve(0.01, 0.02, 0.03)},
		{Policy: "reservation", Seed: 1, Curve: curve(0.01, 0.02, 0.02)},
	}
	tests := []struct {
		format string
		ok     func([]byte) bool
	}{
		{"svg", func(b []byte) bool {
			return (bytes.HasPrefix(b, []byte("<?xml")) || bytes.HasPrefix(b, []byte("<svg"))) && bytes.Contains(b, []byte("reservation"))
		}},
		{"png", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) }},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Allocation(&buf, tt.format, "pods.csv, seeds 1", runs); err != nil {
				t.Fatal(err)
			}
			if !tt.ok(buf.Bytes()) {
				t.Errorf("%s output does not look right; starts %q", tt.format, buf.Bytes()[:min(40, buf.Len())])
			}
		})
	}
}

func TestPlotAllocationErrors(t *testing.T) {
	withCurve := []sim.PackingRun{{Policy: "gpufleet", Curve: curve(0.01)}}
	tests := []struct {
		name, format string
		runs         []sim.PackingRun
		wantErr      string
	}{
		{"an unknown format", "pdf", withCurve, `"pdf"`},
		{"runs without curves", "svg", []sim.PackingRun{{Policy: "gpufleet"}}, "no run has a curve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Allocation(&bytes.Buffer{}, tt.format, "t", tt.runs)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %s", err, tt.wantErr)
			}
		})
	}
}
