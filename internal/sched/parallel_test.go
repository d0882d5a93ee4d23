package sched_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// TestParallelSetupDecidesAsSequential: on a queue long enough, and nodes
// enough, for newCycle to read them on several goroutines, and for the
// victim indexes to be built on several, the plan is the one made on one
// (GOMAXPROCS 1, where the indexes are built node by node as they are
// caught up), whatever the number of parts. The queue mixes shapes
// first seen late in it, shapes naming models and selectors, teams the
// snapshot does not list, and unknown classes, so that the numbering of
// shapes, the making of teams and levels and the packing mix are exercised
// across the parts' seams.
func TestParallelSetupDecidesAsSequential(t *testing.T) {
	// 256 nodes or more: their states, and the victim indexes, are made in
	// parts too; each team runs work on about 90 of them (victimIndex.team
	// bounds 64 or more in parts).
	snap := benchCluster(1000, 6000)
	r := rand.New(rand.NewPCG(3, 9))
	for i, w := range snap.Pending {
		switch r.IntN(12) {
		case 0:
			w.Request.GPUModels = []string{"H100"}
		case 1:
			w.Request.NodeSelector = map[string]string{"zone": fmt.Sprint("z", r.IntN(3))}
		case 2:
			w.Team = core.TeamName(fmt.Sprintf("unlisted%d", r.IntN(4)))
		case 3:
			w.Priority = "no-such-class"
		case 4:
			w.Request.MilliGPU = int64(100 * (1 + i*7/len(snap.Pending))) // new shapes late in the queue
		}
	}
	now := t0.Add(2 * time.Hour)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	want := sched.DefaultOptions().Schedule(snap, now)
	if len(want.Placements) == 0 || len(want.Preemptions) == 0 {
		t.Fatalf("the cluster exercises too little: %d placements, %d preemptions", len(want.Placements), len(want.Preemptions))
	}
	for _, procs := range []int{2, 3, 5} {
		runtime.GOMAXPROCS(procs)
		got := sched.DefaultOptions().Schedule(snap, now)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GOMAXPROCS=%d: the plan differs from the one made on one goroutine (%d/%d placements, %d/%d preemptions, %d/%d unplaced)",
				procs, len(got.Placements), len(want.Placements), len(got.Preemptions), len(want.Preemptions), len(got.Unplaced), len(want.Unplaced))
		}
	}
}
