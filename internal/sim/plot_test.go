package sim

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/internal/trace"
)

// curve returns points at 1%, 2%, ... with the allocations given.
func curve(allocs ...float64) []Point {
	var ps []Point
	for i, a := range allocs {
		ps = append(ps, Point{Arrived: float64(i+1) / 100, Allocation: a})
	}
	return ps
}

func TestMeanCurves(t *testing.T) {
	runs := []PackingRun{
		{Policy: "gpufleet", Seed: 1, Curve: curve(0.01, 0.02, 0.03)},
		{Policy: "bestfit", Seed: 1, Curve: curve(0.01, 0.01)},
		{Policy: "gpufleet", Seed: 2, Curve: curve(0.01, 0.01)}, // shorter: the mean stops at 2%
		{Policy: "fgd", Seed: 1},                                // no curve: left out
	}
	got := MeanCurves(runs)
	want := []CurveLine{
		{Policy: "gpufleet", Arrived: []float64{1, 2}, Allocation: []float64{1, 1.5}},
		{Policy: "bestfit", Arrived: []float64{1, 2}, Allocation: []float64{1, 1}},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("MeanCurves (-want +got):\n%s", diff)
	}
}

func TestPlotAllocation(t *testing.T) {
	runs := []PackingRun{
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
			if err := PlotAllocation(&buf, tt.format, "pods.csv, seeds 1", runs); err != nil {
				t.Fatal(err)
			}
			if !tt.ok(buf.Bytes()) {
				t.Errorf("%s output does not look right; starts %q", tt.format, buf.Bytes()[:min(40, buf.Len())])
			}
		})
	}
}

func TestPlotAllocationErrors(t *testing.T) {
	withCurve := []PackingRun{{Policy: "gpufleet", Curve: curve(0.01)}}
	tests := []struct {
		name, format string
		runs         []PackingRun
		wantErr      string
	}{
		{"an unknown format", "pdf", withCurve, `"pdf"`},
		{"runs without curves", "svg", []PackingRun{{Policy: "gpufleet"}}, "no run has a curve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := PlotAllocation(&bytes.Buffer{}, tt.format, "t", tt.runs)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %s", err, tt.wantErr)
			}
		})
	}
}

// TestPackingOnTestdataTrace runs every policy on the synthetic trace and
// checks what the summary and the plot rely on: points at each level, a
// curve point every 1%, and whole-GPU reservation serving no more than
// sharing.
func TestPackingOnTestdataTrace(t *testing.T) {
	nf, err := os.Open("testdata/nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	nodes, err := trace.ReadNodes(nf)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open("testdata/pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	pods, err := trace.ReadPods(pf)
	if err != nil {
		t.Fatal(err)
	}
	var runs []PackingRun
	for _, policy := range []string{"gpufleet", "reservation"} {
		for seed := range int64(3) {
			r, err := Packing(PackingConfig{Nodes: nodes, Pods: pods, Policy: policy, Seed: seed, Inflate: 1.3})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Points) != len(DefaultReport) || len(r.Curve) < 129 {
				t.Fatalf("%s seed %d: %d points and %d curve points, want %d and ≥ 129", policy, seed, len(r.Points), len(r.Curve), len(DefaultReport))
			}
			runs = append(runs, r)
		}
	}
	c, ok := Compare(Summarize(runs), "gpufleet", "reservation")
	if !ok || c.Ratio < 1 {
		t.Errorf("sharing serves %.2f× reservation's demand (ok %v), want ≥ 1", c.Ratio, ok)
	}
	if lines := MeanCurves(runs); len(lines) != 2 {
		t.Errorf("%d mean curves, want 2", len(lines))
	}
}
