package control

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
)

// TestUncertainPlacementsStartOnceCommitted: the placements of a plan
// whose write failed are started when a later snapshot shows them Running
// at the attempt the plan gave them, once; one the snapshot still shows
// Pending at the attempt before (a view behind the commit) is kept for a
// later snapshot; one at another attempt is forgotten, never started.
func TestUncertainPlacementsStartOnceCommitted(t *testing.T) {
	ex := fake.New(fake.Options{})
	l := New(Options{Executor: ex})
	ctx := context.Background()
	w := func(id string, phase core.Phase, attempts int) *core.Workload {
		x := &core.Workload{ID: core.WorkloadID(id)}
		x.Command = []string{"sleep", "60"}
		x.Status.Phase, x.Status.Attempts = phase, attempts
		if phase == core.Running {
			x.Status.Placement = []core.Assignment{{Node: "n1", MilliGPU: 1000}}
		}
		return x
	}
	started := func() []string {
		var out []string
		for _, tk := range ex.Running() {
			out = append(out, fmt.Sprintf("%s/%d", tk.WorkloadID, tk.Attempt))
		}
		return out
	}

	l.rememberUncertain(&core.Snapshot{Pending: []*core.Workload{w("a", core.Pending, 0), w("b", core.Pending, 0), w("c", core.Pending, 2), w("d", core.Pending, 0)}},
		[]core.Placement{{Workload: "a"}, {Workload: "b"}, {Workload: "c"}, {Workload: "d"}})

	// a was committed; b's commit is not in the view yet; c was requeued
	// since and d placed again by another write (neither is at the
	// attempt the plan gave it).
	l.settleUncertain(ctx, &core.Snapshot{Running: []*core.Workload{w("a", core.Running, 1), w("d", core.Running, 2)},
		Pending: []*core.Workload{w("b", core.Pending, 0), w("c", core.Pending, 3)}})
	if diff := cmp.Diff([]string{"a/1"}, started()); diff != "" {
		t.Errorf("started after the first snapshot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[core.WorkloadID]int{"b": 1}, l.uncertain); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}

	// The view catches up with b; a, started already, is not started again.
	l.settleUncertain(ctx, &core.Snapshot{Running: []*core.Workload{w("a", core.Running, 1), w("b", core.Running, 1), w("c", core.Running, 3)}})
	if diff := cmp.Diff([]string{"a/1", "b/1"}, started()); diff != "" {
		t.Errorf("started after the second snapshot (-want +got):\n%s", diff)
	}
	if len(l.uncertain) != 0 {
		t.Errorf("still uncertain: %v", l.uncertain)
	}
}
