package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/store"
)

// A checkpoint outlives its workload for the retention, then goes; an
// active workload's stays.
func TestSweepCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenWith(ctx, filepath.Join(dir, "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ex, err := local.New(local.Options{DataDir: dir, Isolation: local.Isolation{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTeam(ctx, core.NewTeam("a", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := st.PutNode(ctx, core.Node{Name: "n1", Schedulable: true, GPUs: []core.GPU{{Index: 0, UUID: "g0", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	mk := func(finish time.Time) core.WorkloadID {
		w, _, err := st.CreateWorkload(ctx, &core.Workload{CreatedAt: finish, Spec: core.Spec{Team: "a", Priority: "training", Command: []string{"x"},
			Request: core.Request{MilliGPU: 250}}}, nil, finish)
		if err != nil {
			t.Fatal(err)
		}
		if !finish.IsZero() {
			res, err := st.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{{Node: "n1", GPUIndex: 0, GPUUUID: "g0", MilliGPU: 250, MemoryMiB: 20480}}}}}, finish)
			if err != nil || res[0].Err != nil {
				t.Fatal(err, res)
			}
			zero := 0
			if _, err := st.Finish(ctx, w.ID, 1, core.Succeeded, "Completed", "", &zero, finish); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, "workloads", string(w.ID), "checkpoint"), 0o700); err != nil {
			t.Fatal(err)
		}
		return w.ID
	}
	old, recent, active := mk(time.Now().Add(-2*time.Hour)), mk(time.Now().Add(-time.Minute)), mk(time.Time{})
	swept := map[core.WorkloadID]bool{}
	sweepOnce(ctx, st, localSweeper{ex}, time.Hour, swept, slog.New(slog.DiscardHandler))
	if !swept[old] || len(swept) != 1 {
		t.Errorf("swept %v, want only %s", swept, old)
	}
	for id, want := range map[core.WorkloadID]bool{old: false, recent: true, active: true} {
		_, err := os.Stat(filepath.Join(dir, "workloads", string(id), "checkpoint"))
		if got := err == nil; got != want {
			t.Errorf("checkpoint of %s kept %t, want %t", id, got, want)
		}
	}
}
