package sim

import (
	"os"
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
