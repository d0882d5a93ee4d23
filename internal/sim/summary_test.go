package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func floatPtr(v float64) *float64 { return &v }

// handRuns are three runs of two policies at two levels: gpufleet with
// seeds 1 and 2, reservation with seed 1.
func handRuns() []PackingRun {
	return []PackingRun{
		{
			Policy: "gpufleet", Seed: 1, Pods: 100, Seconds: 1, FirstFailureArrived: floatPtr(0.9),
			Points: []Point{
				{Arrived: 0.8, ArrivedExact: 0.81, Allocation: 0.80, Reserved: 0.80, Stranded: 0.02, FailedPods: 0},
				{Arrived: 1, ArrivedExact: 1.01, Allocation: 0.96, Reserved: 0.96, Stranded: 0.04, FailedPods: 3},
			},
		},
		{
			Policy: "reservation", Seed: 1, Pods: 100, Seconds: 0.5, FirstFailureArrived: floatPtr(0.7),
			Points: []Point{
				{Arrived: 0.8, ArrivedExact: 0.81, Allocation: 0.70, Reserved: 0.75, FailedPods: 5},
				{Arrived: 1, ArrivedExact: 1.01, Allocation: 0.80, Reserved: 0.90, FailedPods: 20},
			},
		},
		{
			Policy: "gpufleet", Seed: 2, Pods: 110, Seconds: 3,
			Points: []Point{
				{Arrived: 0.8, ArrivedExact: 0.83, Allocation: 0.82, Reserved: 0.82, Stranded: 0.00, FailedPods: 0},
				{Arrived: 1, ArrivedExact: 1.03, Allocation: 1.00, Reserved: 1.00, Stranded: 0.02, FailedPods: 0},
			},
		},
	}
}

func TestSummarize(t *testing.T) {
	got := Summarize(handRuns(), 0.8, 1.0)
	want := []PolicySummary{
		{
			Policy: "gpufleet", Runs: 2, Seeds: []int64{1, 2},
			Pods: Stat{Mean: 105, Min: 100, Max: 110}, Seconds: Stat{Mean: 2, Min: 1, Max: 3},
			// Only seed 1 had a failure: the statistic is over that run.
			FirstFailureArrived: &Stat{Mean: 0.9, Min: 0.9, Max: 0.9}, FailedRuns: 1,
			Levels: []LevelSummary{
				{
					Level: 0.8, Runs: 2, Arrived: Stat{0.82, 0.81, 0.83}, Allocation: Stat{0.81, 0.80, 0.82},
					Reserved: Stat{0.81, 0.80, 0.82}, Stranded: Stat{0.01, 0, 0.02}, FailedPods: Stat{0, 0, 0},
				},
				{
					Level: 1.0, Runs: 2, Arrived: Stat{1.02, 1.01, 1.03}, Allocation: Stat{0.98, 0.96, 1.00},
					Reserved: Stat{0.98, 0.96, 1.00}, Stranded: Stat{0.03, 0.02, 0.04}, FailedPods: Stat{1.5, 0, 3},
				},
			},
		},
		{
			Policy: "reservation", Runs: 1, Seeds: []int64{1},
			Pods: Stat{100, 100, 100}, Seconds: Stat{0.5, 0.5, 0.5},
			FirstFailureArrived: &Stat{0.7, 0.7, 0.7}, FailedRuns: 1,
			Levels: []LevelSummary{
				{Level: 0.8, Runs: 1, Arrived: Stat{0.81, 0.81, 0.81}, Allocation: Stat{0.7, 0.7, 0.7}, Reserved: Stat{0.75, 0.75, 0.75}, FailedPods: Stat{5, 5, 5}},
				{Level: 1.0, Runs: 1, Arrived: Stat{1.01, 1.01, 1.01}, Allocation: Stat{0.8, 0.8, 0.8}, Reserved: Stat{0.9, 0.9, 0.9}, FailedPods: Stat{20, 20, 20}},
			},
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
}

func TestSummarizeEdges(t *testing.T) {
	t.Run("no runs give no summaries", func(t *testing.T) {
		if got := Summarize(nil); len(got) != 0 {
			t.Errorf("got %v, want none", got)
		}
	})
	t.Run("no failure leaves first failure nil", func(t *testing.T) {
		got := Summarize([]PackingRun{{Policy: "fgd", Seed: 1}})
		if got[0].FirstFailureArrived != nil || got[0].FailedRuns != 0 {
			t.Errorf("first failure %v in %d runs, want nil in 0", got[0].FirstFailureArrived, got[0].FailedRuns)
		}
	})
	t.Run("levels default to DefaultReport", func(t *testing.T) {
		run := PackingRun{Policy: "fgd", Points: []Point{{Arrived: 0.85}, {Arrived: 0.92}}}
		got := Summarize([]PackingRun{run})
		if l := got[0].Levels; len(l) != 2 || l[0].Level != DefaultReport[0] || l[1].Level != DefaultReport[1] {
			t.Errorf("levels %+v, want %v and %v", l, DefaultReport[0], DefaultReport[1])
		}
	})
	t.Run("a level some runs lack is over those that reached it", func(t *testing.T) {
		runs := []PackingRun{
			{Policy: "fgd", Seed: 1, Points: []Point{{Arrived: 0.8, Allocation: 0.8}, {Arrived: 0.9, Allocation: 0.9}}},
			{Policy: "fgd", Seed: 2, Points: []Point{{Arrived: 0.8, Allocation: 0.6}}},
		}
		got := Summarize(runs, 0.8, 0.9)[0].Levels
		if len(got) != 2 || got[0].Runs != 2 || got[1].Runs != 1 || got[1].Allocation.Mean != 0.9 {
			t.Errorf("levels %+v, want 2 runs at 80%% and 1 at 90%% with allocation 0.9", got)
		}
	})
}

func TestCompare(t *testing.T) {
	sums := Summarize(handRuns(), 0.8, 1.0)
	tests := []struct {
		name   string
		a, b   string
		want   Comparison
		wantOK bool
	}{
		{"sharing against reservation at the highest level", "gpufleet", "reservation", Comparison{Level: 1.0, A: 0.98, B: 0.80, Ratio: 0.98 / 0.80}, true},
		{"the other way round", "reservation", "gpufleet", Comparison{Level: 1.0, A: 0.80, B: 0.98, Ratio: 0.80 / 0.98}, true},
		{"a missing policy compares with nothing", "gpufleet", "fgd", Comparison{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Compare(sums, tt.a, tt.b)
			if ok != tt.wantOK {
				t.Fatalf("ok %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
}
