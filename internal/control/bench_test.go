package control_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/store"
)

// BenchmarkCycleRunning is the cost of the cycle that places one new
// workload on a fleet where thousands run, as in the Kubernetes race's
// paced rows (a pod's start waits for a cycle, and cycles are paced at
// eight times their length): 300 nodes of 8 GPUs, 50 teams, the store on
// a file as a server opens it (SQLite, Options.Cache), the fake executor. Each iteration submits
// one 1-GPU workload and runs the loop's Step (snapshot, schedule, apply,
// start), so it can run at most the free GPUs' times (-benchtime 300x).
//
//	go test ./internal/control -run '^$' -bench CycleRunning -benchtime 300x
func BenchmarkCycleRunning(b *testing.B) {
	for _, running := range []int{500, 2000} {
		b.Run(fmt.Sprintf("nodes=300/running=%d", running), func(b *testing.B) {
			ctx := context.Background()
			st, err := store.OpenWith(ctx, filepath.Join(b.TempDir(), "gpufleet.db"), store.Options{Cache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for i := range 50 {
				if err := st.CreateTeam(ctx, core.NewTeam(core.TeamName(fmt.Sprintf("t%02d", i)), t0)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 300 {
				n := core.Node{Name: core.NodeName(fmt.Sprintf("n%03d", i)), Schedulable: true, UpdatedAt: t0}
				for g := range 8 {
					n.GPUs = append(n.GPUs, core.GPU{Index: g, UUID: fmt.Sprintf("GPU-%d-%d", i, g), Model: "H100", MemoryMiB: 81920})
				}
				if err := st.PutNode(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
			c := &clock{now: t0}
			ex := fake.New(fake.Options{Now: c.Now})
			loop := control.New(control.Options{Store: st, Executor: ex, Now: c.Now})
			submit := func(i int) {
				w := &core.Workload{Spec: core.Spec{Name: "train", Team: core.TeamName(fmt.Sprintf("t%02d", i%50)), Owner: "alice",
					Kind: core.KindJob, Priority: "training", Request: core.Request{MilliGPU: 1000}, Command: []string{"train"}}}
				if _, _, err := st.CreateWorkload(ctx, w, nil, c.Now()); err != nil {
					b.Fatal(err)
				}
			}
			for i := range running {
				submit(i)
			}
			loop.Step(ctx)
			if snap, err := st.Snapshot(ctx); err != nil || len(snap.Running) != running {
				b.Fatalf("%d running before the clock, want %d (%v)", len(snap.Running), running, err)
			}
			if b.N > 300*8-running {
				b.Fatalf("-benchtime %dx: only %d GPUs are free", b.N, 300*8-running)
			}
			var used time.Duration // the cycles' alone, not the submits'
			i := running
			for b.Loop() {
				b.StopTimer()
				submit(i)
				i++
				b.StartTimer()
				before := cpu(b)
				if _, plan := loop.Step(ctx); len(plan.Placements) != 1 {
					b.Fatalf("cycle placed %d, want 1", len(plan.Placements))
				}
				used += cpu(b) - before
			}
			b.ReportMetric(float64(used.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
