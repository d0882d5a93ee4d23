package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func open(t *testing.T, path string) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "gpufleet.db")
	}
	s, err := Open(context.Background(), target(t, path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// teamStore opens the store at path with opts, closed when tb ends, and
// makes team "a" in it.
func teamStore(tb testing.TB, path string, opts Options) *Store {
	tb.Helper()
	ctx := context.Background()
	s, err := OpenWith(ctx, path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		tb.Fatal(err)
	}
	return s
}

// fixture makes a store with team "a" and one node with two 80 GiB GPUs.
func fixture(t *testing.T) *Store {
	t.Helper()
	return fixtureWith(t, Options{})
}

// fixtureWith is fixture opened with opts.
func fixtureWith(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := OpenWith(context.Background(), target(t, filepath.Join(t.TempDir(), "gpufleet.db")), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNode(ctx, node("n1", 2)); err != nil {
		t.Fatal(err)
	}
	return s
}

// fileFixture is fixture on a SQLite file whose path it returns, for
// tests that change the file behind the store's back.
func fileFixture(t *testing.T) (*Store, string) {
	t.Helper()
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "gpufleet.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNode(ctx, node("n1", 2)); err != nil {
		t.Fatal(err)
	}
	return s, path
}

func node(name string, gpus int) core.Node {
	n := core.Node{Name: core.NodeName(name), Schedulable: true}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: "H100", MemoryMiB: 81920})
	}
	return n
}

func workload(milli int64) *core.Workload {
	return &core.Workload{Spec: core.Spec{Name: "w", Team: "a", Owner: "alice", Kind: core.KindJob, Priority: "training",
		Request: core.Request{MilliGPU: milli}, Command: []string{"true"}}}
}

func submit(t *testing.T, s *Store, milli int64) *core.Workload {
	t.Helper()
	w, _, err := s.CreateWorkload(context.Background(), workload(milli), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func assign(node string, gpu int, milli int64) core.Assignment {
	return core.Assignment{Node: core.NodeName(node), GPUIndex: gpu, GPUUUID: fmt.Sprintf("GPU-%s-%d", node, gpu), MilliGPU: milli, MemoryMiB: 81920 * milli / 1000}
}

func TestWorkloadReadFromTheViewIsTheRow(t *testing.T) {
	// On SQLite, Workload serves an active workload from the view; what
	// it serves is what the row holds (decoded from the database by
	// Workloads, with the view's explanation), pending, placed, explained,
	// and once more after the store is opened again (the view loaded from
	// the rows, which do not hold the explanation: explain.go).
	path := filepath.Join(t.TempDir(), "view.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNode(ctx, node("n1", 2)); err != nil {
		t.Fatal(err)
	}
	placed, waiting := submit(t, s, 1000), submit(t, s, 2000)
	plan := core.Plan{
		Placements: []core.Placement{{Workload: placed.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}},
		Unplaced:   []core.Decision{{Workload: waiting.ID, Reason: "Unschedulable", Message: "no room", Nominated: "n1"}},
	}
	if res, err := s.ApplyPlan(ctx, plan, t0.Add(time.Second)); err != nil || res[0].Err != nil {
		t.Fatalf("apply: %v %v", err, res)
	}
	same := func(s *Store, when string) {
		t.Helper()
		rows, err := s.Workloads(ctx, WorkloadFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("%s: %d workloads stored, want 2", when, len(rows))
		}
		for _, row := range rows {
			got, err := s.Workload(ctx, row.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(row, got); diff != "" {
				t.Errorf("%s: Workload(%s) against its row (-row +got):\n%s", when, row.ID, diff)
			}
			reason := got.Status.Reason
			got.Status.Reason = "changed by a caller" // a copy: changes nothing else
			if again, _ := s.Workload(ctx, row.ID); again == nil || again.Status.Reason != reason {
				t.Errorf("%s: a caller's change of its copy reached the view: %+v", when, again)
			}
		}
	}
	same(s, "after the plan")
	if got, _ := s.Workload(ctx, waiting.ID); got == nil || got.Status.Reason != "Unschedulable" || got.Status.Nominated != "n1" {
		t.Errorf("after the plan: %+v, want its explanation", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	same(open(t, path), "opened again")
}

func TestWorkloadNeverOlderThanItsRow(t *testing.T) {
	// A reader that has seen a workload's row Cancelled must never read
	// it Pending from Workload afterwards, even while the writer is
	// between the COMMIT and bringing the view up to it. (A review caught
	// it within 300 rounds before the writer marked what it commits.)
	sqliteOnly(t)
	s := fixture(t)
	ctx := context.Background()
	var older, seen atomic.Int64
	for range 300 {
		w := submit(t, s, 1000)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				sc, err := scanWorkload(s.readRow(ctx, selectWorkload+" WHERE id = ?", string(w.ID)))
				if err != nil {
					return
				}
				if sc.w.Status.Phase == core.Cancelled {
					seen.Add(1)
					if got, _ := s.Workload(ctx, w.ID); got != nil && got.Status.Phase == core.Pending {
						older.Add(1)
					}
					return
				}
			}
		}()
		if _, err := s.RequestStop(ctx, w.ID, "Cancelled", "", t0); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	if older.Load() > 0 {
		t.Errorf("Workload read Pending after the row was seen Cancelled: %d times of %d", older.Load(), seen.Load())
	}
}

func TestCreateAndReadWorkload(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	w := submit(t, s, 250)
	got, err := s.Workload(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, got); diff != "" {
		t.Errorf("read back (-created +read):\n%s", diff)
	}
	if got.Status.Phase != core.Pending || got.Seq == 0 {
		t.Errorf("new workload: phase %s seq %d, want Pending and a sequence number", got.Status.Phase, got.Seq)
	}
	evs, err := s.Events(ctx, w.ID)
	if err != nil || len(evs) != 1 || evs[0].Reason != "Submitted" || evs[0].To != core.Pending {
		t.Errorf("events = %+v, %v; want one Submitted event", evs, err)
	}
	if _, err := s.Workload(ctx, "wl-nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("missing workload: err %v, want ErrNotFound", err)
	}
}

func TestUnknownTeamStoresNothing(t *testing.T) {
	s := fixture(t)
	w := workload(1000)
	w.Team = "nope"
	if _, _, err := s.CreateWorkload(context.Background(), w, nil, t0); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	all, _ := s.Workloads(context.Background(), WorkloadFilter{})
	if len(all) != 0 {
		t.Errorf("%d workloads stored after a failed submit", len(all))
	}
}

func TestIdempotencyKey(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	first, created, err := s.CreateWorkload(ctx, workload(1000), &Idempotency{Key: "k1", Hash: "h1"}, t0)
	if err != nil || !created {
		t.Fatalf("first: created %v err %v", created, err)
	}
	again, created, err := s.CreateWorkload(ctx, workload(1000), &Idempotency{Key: "k1", Hash: "h1"}, t0)
	if err != nil || created || again.ID != first.ID {
		t.Errorf("replay: id %s created %v err %v; want %s, false, nil", again.ID, created, err, first.ID)
	}
	if _, _, err := s.CreateWorkload(ctx, workload(500), &Idempotency{Key: "k1", Hash: "h2"}, t0); !errors.Is(err, core.ErrIdempotency) {
		t.Errorf("same key, other body: err %v, want ErrIdempotency", err)
	}
	all, _ := s.Workloads(ctx, WorkloadFilter{})
	if len(all) != 1 {
		t.Errorf("%d workloads stored, want 1", len(all))
	}
}

func TestConcurrentIdempotentSubmitsCreateOne(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	ids := make([]core.WorkloadID, 50)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			w, _, err := s.CreateWorkload(ctx, workload(1000), &Idempotency{Key: "same", Hash: "h"}, t0)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = w.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent submits with one key made several workloads: %s and %s", ids[0], id)
		}
	}
}

// cacheModes runs f with the store's rows kept in memory (Options.Cache,
// as a server on SQLite opens it: placements are checked against the view
// and the kept nodes) and without (every check reads the rows).
func cacheModes(t *testing.T, f func(t *testing.T, opts Options)) {
	for _, cache := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%t", cache), func(t *testing.T) { f(t, Options{Cache: cache}) })
	}
}

func TestApplyPlanRechecksFit(t *testing.T) { cacheModes(t, testApplyPlanRechecksFit) }

func testApplyPlanRechecksFit(t *testing.T, opts Options) {
	s := fixtureWith(t, opts)
	ctx := context.Background()
	a, b, c := submit(t, s, 600), submit(t, s, 600), submit(t, s, 1000)
	plan := core.Plan{Placements: []core.Placement{
		{Workload: a.ID, Assignments: []core.Assignment{assign("n1", 0, 600)}},
		{Workload: b.ID, Assignments: []core.Assignment{assign("n1", 0, 600)}}, // over-commits GPU 0
		{Workload: c.ID, Assignments: []core.Assignment{assign("n1", 1, 1000)}},
	}}
	res, err := s.ApplyPlan(ctx, plan, t0)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[2].Err != nil {
		t.Errorf("fitting placements rejected: %v, %v", res[0].Err, res[2].Err)
	}
	if !errors.Is(res[1].Err, core.ErrConflict) {
		t.Errorf("over-commit: err %v, want ErrConflict", res[1].Err)
	}
	got, _ := s.Workload(ctx, b.ID)
	if got.Status.Phase != core.Pending || got.Status.Attempts != 0 {
		t.Errorf("rejected workload is %s with %d attempts, want Pending with 0", got.Status.Phase, got.Status.Attempts)
	}
	// Placing an already running workload again is a conflict too.
	res, _ = s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: a.ID, Assignments: []core.Assignment{assign("n1", 0, 600)}}}}, t0)
	if !errors.Is(res[0].Err, core.ErrConflict) {
		t.Errorf("double placement: err %v, want ErrConflict", res[0].Err)
	}
	u, _ := s.Usage(ctx)
	want := map[int]core.GPUUse{0: {MilliGPU: 600, MemoryMiB: 49152}, 1: {MilliGPU: 1000, MemoryMiB: 81920}}
	if diff := cmp.Diff(want, u["n1"].GPUs); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

func TestLifecycleKeepsAllocationIntervals(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	w := submit(t, s, 1000)
	place := core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}
	if res, err := s.ApplyPlan(ctx, place, t0); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res[0].Err)
	}
	if _, err := s.Requeue(ctx, w.ID, 1, core.Preempted, "Preempted", "by wl-x", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Workload(ctx, w.ID)
	if got.Status.Phase != core.Pending || got.Status.Preemptions != 1 || got.Status.Attempts != 1 || len(got.Status.Placement) != 0 {
		t.Errorf("after requeue: %+v", got.Status)
	}
	if res, err := s.ApplyPlan(ctx, place, t0.Add(2*time.Minute)); err != nil || res[0].Err != nil {
		t.Fatalf("place again: %v %v", err, res[0].Err)
	}
	if _, err := s.Finish(ctx, w.ID, 1, core.Succeeded, "Completed", "", nil, t0); !errors.Is(err, core.ErrConflict) {
		t.Errorf("finish of a stale attempt: err %v, want ErrConflict", err)
	}
	code := 0
	if _, err := s.Finish(ctx, w.ID, 2, core.Succeeded, "Completed", "", &code, t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	allocs, _ := s.Allocations(ctx, w.ID)
	if len(allocs) != 2 {
		t.Fatalf("%d allocation intervals, want 2", len(allocs))
	}
	for i, want := range [][2]time.Duration{{0, time.Minute}, {2 * time.Minute, 5 * time.Minute}} {
		a := allocs[i]
		if a.Attempt != i+1 || !a.Start.Equal(t0.Add(want[0])) || a.End == nil || !a.End.Equal(t0.Add(want[1])) || a.MilliGPU != 1000 || a.Team != "a" {
			t.Errorf("interval %d = %+v, want attempt %d from +%s to +%s", i, a, i+1, want[0], want[1])
		}
	}
	evs, _ := s.Events(ctx, w.ID)
	var path []string
	for _, e := range evs {
		if e.To != "" {
			path = append(path, string(e.To))
		}
	}
	want := []string{"Pending", "Running", "Preempted", "Pending", "Running", "Succeeded"}
	if diff := cmp.Diff(want, path); diff != "" {
		t.Errorf("phase path (-want +got):\n%s", diff)
	}
	u, _ := s.Usage(ctx)
	if len(u["n1"].GPUs) != 0 {
		t.Errorf("finished workload still holds %v", u["n1"].GPUs)
	}
}

func TestRequestStop(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	p, r := submit(t, s, 1000), submit(t, s, 1000)
	s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: r.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0)
	got, err := s.RequestStop(ctx, p.ID, "Cancelled", "by alice", t0)
	if err != nil || got.Status.Phase != core.Cancelled {
		t.Errorf("cancel pending: %v %v, want Cancelled", got.Status.Phase, err)
	}
	if _, err := s.RequestStop(ctx, r.ID, "Cancelled", "by alice", t0); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Workload(ctx, r.ID)
	if got.Status.Phase != core.Running || got.Status.StopRequested != "Cancelled" {
		t.Errorf("cancel running: %s stop %q, want Running with a stop request", got.Status.Phase, got.Status.StopRequested)
	}
}

// TestNoGPUOvercommitUnderRandomPlans applies random, often conflicting,
// plans and checks after each that no device holds more than it has.
func TestNoGPUOvercommitUnderRandomPlans(t *testing.T) {
	cacheModes(t, testNoGPUOvercommitUnderRandomPlans)
}

func testNoGPUOvercommitUnderRandomPlans(t *testing.T, opts Options) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			s := fixtureWith(t, opts)
			ctx := context.Background()
			sizes := []int64{250, 500, 1000, 2000}
			for range 30 {
				var plan core.Plan
				for range 1 + rng.IntN(4) {
					size := sizes[rng.IntN(len(sizes))]
					w := submit(t, s, size)
					var as []core.Assignment
					if size >= 1000 {
						for g := range int(size / 1000) {
							as = append(as, assign("n1", (g+rng.IntN(2))%2, 1000))
						}
					} else {
						as = []core.Assignment{assign("n1", rng.IntN(2), size)}
					}
					plan.Placements = append(plan.Placements, core.Placement{Workload: w.ID, Assignments: as})
				}
				if _, err := s.ApplyPlan(ctx, plan, t0); err != nil {
					t.Fatal(err)
				}
				// Finish a random running workload now and then.
				if rng.IntN(3) == 0 {
					running, _ := s.Workloads(ctx, WorkloadFilter{Phases: []core.Phase{core.Running}})
					if len(running) > 0 {
						w := running[rng.IntN(len(running))]
						s.Finish(ctx, w.ID, w.Status.Attempts, core.Succeeded, "Completed", "", nil, t0)
					}
				}
				u, _ := s.Usage(ctx)
				for g, use := range u["n1"].GPUs {
					if use.MilliGPU > 1000 || use.MemoryMiB > 81920 {
						t.Fatalf("gpu %d over-committed: %+v", g, use)
					}
				}
			}
		})
	}
}

// TestNoGPUOvercommitUnderConcurrentPlans applies plans from several
// goroutines at once, beside finishes, so that the writer takes them in
// one transaction: a plan must see the devices an earlier write of the
// same transaction took or freed, which the view of committed workloads
// does not hold yet. No device may hold more than it has, and what
// Snapshot counts must be what the running workloads' rows hold.
func TestNoGPUOvercommitUnderConcurrentPlans(t *testing.T) {
	cacheModes(t, func(t *testing.T, opts Options) {
		s := fixtureWith(t, opts)
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
		var mu sync.Mutex
		placed := 0
		for range 40 {
			var ws []*core.Workload
			for range 8 {
				ws = append(ws, submit(t, s, 1000))
			}
			gpus := make([]int, len(ws))
			for i := range gpus {
				gpus[i] = rng.IntN(2)
			}
			running, err := s.Workloads(ctx, WorkloadFilter{Phases: []core.Phase{core.Running}})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for i, w := range ws {
				wg.Go(func() {
					plan := core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", gpus[i], 1000)}}}}
					res, err := s.ApplyPlan(ctx, plan, t0)
					if err != nil {
						t.Error(err)
						return
					}
					if res[0].Err == nil {
						mu.Lock()
						placed++
						mu.Unlock()
					}
				})
			}
			for _, w := range running {
				wg.Go(func() {
					if _, err := s.Finish(ctx, w.ID, w.Status.Attempts, core.Succeeded, "Completed", "", nil, t0); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			running, err = s.Workloads(ctx, WorkloadFilter{Phases: []core.Phase{core.Running}})
			if err != nil {
				t.Fatal(err)
			}
			held := map[int]int64{}
			for _, w := range running {
				for _, a := range w.Status.Placement {
					held[a.GPUIndex] += a.MilliGPU
				}
			}
			for g, m := range held {
				if m > 1000 {
					t.Fatalf("gpu %d holds %d milli-GPU of the running workloads' rows", g, m)
				}
			}
			u, err := s.Usage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int]int64{}
			for g, use := range u["n1"].GPUs {
				got[g] = use.MilliGPU
			}
			if diff := cmp.Diff(held, got); diff != "" {
				t.Fatalf("Snapshot's usage of n1 differs from the rows' (-rows +snapshot):\n%s", diff)
			}
		}
		if placed == 0 {
			t.Fatal("no plan was placed")
		}
	})
}

func TestAcknowledgedWritesSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpufleet.db")
	s := open(t, path)
	ctx := context.Background()
	s.CreateTeam(ctx, core.NewTeam("a", t0))
	var mu sync.Mutex
	acked := map[core.WorkloadID]bool{}
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			w, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acked[w.ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	s.Close()
	s2 := open(t, path)
	all, err := s2.Workloads(ctx, WorkloadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[core.WorkloadID]int{}
	for _, w := range all {
		seen[w.ID]++
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged workload %s found %d times after reopen", id, seen[id])
		}
	}
	if len(all) != len(acked) {
		t.Errorf("%d workloads after reopen, %d acknowledged", len(all), len(acked))
	}
}

func TestPaging(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	for range 5 {
		submit(t, s, 1000)
	}
	var got []core.WorkloadID
	f := WorkloadFilter{Limit: 2}
	for {
		page, err := s.Workloads(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range page {
			got = append(got, w.ID)
		}
		if len(page) < f.Limit {
			break
		}
		f.AfterSeq = page[len(page)-1].Seq
	}
	all, _ := s.Workloads(ctx, WorkloadFilter{})
	var want []core.WorkloadID
	for _, w := range all {
		want = append(want, w.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" || len(got) != 5 {
		t.Errorf("pages (-all +paged):\n%s", diff)
	}
}

func TestOpenRefusesForeignFiles(t *testing.T) {
	sqliteOnly(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("this is not a database, just some text that is long enough to look like a header...."), 0o600)
	if _, err := Open(context.Background(), garbage); err == nil {
		t.Error("opened a file that is not a database")
	}
	if _, err := Open(context.Background(), dir); err == nil {
		t.Error("opened a directory as the store")
	}
}

func TestTokens(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	exp := t0.Add(time.Hour)
	bob := core.User{Name: "bob", Memberships: []core.Membership{{Team: "a", Role: core.RoleMember}}, CreatedAt: t0}
	if err := s.CreateUser(ctx, bob, core.Token{ID: "tok-first", Name: "laptop", CreatedAt: t0, ExpiresAt: &exp}, "hash1"); err != nil {
		t.Fatal(err)
	}
	u, err := s.UserByTokenHash(ctx, "hash1", t0)
	if err != nil || u.Name != "bob" || !u.Can("a", core.RoleMember) || u.Can("a", core.RoleTeamAdmin) {
		t.Errorf("lookup: %+v %v", u, err)
	}
	if _, err := s.UserByTokenHash(ctx, "hash1", t0.Add(2*time.Hour)); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("expired token: err %v, want ErrNotFound", err)
	}
	carol := core.User{Name: "carol", Memberships: []core.Membership{{Team: "nope", Role: core.RoleViewer}}, CreatedAt: t0}
	if err := s.CreateUser(ctx, carol, core.Token{CreatedAt: t0}, "hash2"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("user in unknown team: err %v, want ErrNotFound", err)
	}
	if _, err := s.UserByTokenHash(ctx, "hash2", t0); !errors.Is(err, core.ErrNotFound) {
		t.Error("token of a refused user was stored")
	}
	// A second token, listed, then revoked: it stops working at once.
	if err := s.CreateToken(ctx, core.Token{ID: "tok-second", User: "bob", Name: "ci", CreatedAt: t0.Add(time.Minute)}, "hash3"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(ctx, core.Token{User: "nobody", CreatedAt: t0}, "hash4"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("token for an unknown user: %v", err)
	}
	if _, err := s.UserByTokenHash(ctx, "hash3", t0); err != nil {
		t.Fatal(err)
	}
	ts, err := s.Tokens(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Token{
		{ID: "tok-second", Name: "ci", User: "bob", CreatedAt: t0.Add(time.Minute)},
		{ID: "tok-first", Name: "laptop", User: "bob", CreatedAt: t0, ExpiresAt: &exp},
	}
	if diff := cmp.Diff(want, ts); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if err := s.RevokeToken(ctx, "tok-second", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByTokenHash(ctx, "hash3", t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("revoked token still authenticates: %v", err)
	}
	if err := s.RevokeToken(ctx, "tok-none", t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("revoking an unknown token: %v", err)
	}
}

func TestUsersAndRoles(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateUser(ctx, core.User{Name: "dan", CreatedAt: t0}, core.Token{CreatedAt: t0}, "h"); err != nil {
		t.Fatal(err)
	}
	u, err := s.UpdateUser(ctx, "dan", func(u *core.User) error {
		u.SetRole("a", core.RoleViewer)
		u.SetRole("b", core.RoleTeamAdmin)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !u.Can("b", core.RoleMember) || u.Can("a", core.RoleMember) || !u.InTeam("a") {
		t.Errorf("roles: %+v", u.Memberships)
	}
	if _, err := s.UpdateUser(ctx, "dan", func(u *core.User) error { u.SetRole("zzz", core.RoleViewer); return nil }); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("role in an unknown team: %v", err)
	}
	got, err := s.User(ctx, "dan")
	if err != nil || len(got.Memberships) != 2 {
		t.Errorf("a refused update changed the user: %+v %v", got, err)
	}
	users, err := s.Users(ctx)
	if err != nil || len(users) != 1 || users[0].Name != "dan" {
		t.Errorf("users: %+v %v", users, err)
	}
}

// A user stored before roles (schema 2: "teams") is a member of each team.
func TestUserFromBeforeRoles(t *testing.T) {
	var u core.User
	if err := json.Unmarshal([]byte(`{"name":"old","teams":["a","b"],"createdAt":"2025-01-01T00:00:00Z"}`), &u); err != nil {
		t.Fatal(err)
	}
	want := []core.Membership{{Team: "a", Role: core.RoleMember}, {Team: "b", Role: core.RoleMember}}
	if diff := cmp.Diff(want, u.Memberships); diff != "" {
		t.Errorf("memberships (-want +got):\n%s", diff)
	}
}

func TestPendingLimits(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenWith(context.Background(), target(t, filepath.Join(dir, "s.db")), Options{MaxPendingPerTeam: 3, MaxPendingPerUser: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	submit := func(owner string) error {
		w := workload(1000)
		w.Owner = owner
		_, _, err := s.CreateWorkload(ctx, w, nil, t0)
		return err
	}
	for i, tc := range []struct {
		owner string
		ok    bool
	}{{"u1", true}, {"u1", true}, {"u1", false}, {"u2", true}, {"u3", false}} {
		if err := submit(tc.owner); (err == nil) != tc.ok || (err != nil && !errors.Is(err, core.ErrLimit)) {
			t.Errorf("submit %d by %s: %v, want ok=%v (or ErrLimit)", i, tc.owner, err, tc.ok)
		}
	}
	ws, _ := s.Workloads(ctx, WorkloadFilter{})
	if len(ws) != 3 {
		t.Errorf("%d workloads stored, want 3: refused submissions must change nothing", len(ws))
	}
}

func TestAuditWithTheChange(t *testing.T) {
	s := fixture(t)
	e := &core.AuditEntry{Time: t0, User: "bob", Role: "member", Action: "create workload", Method: "POST", Path: "/api/v1/workloads", Status: 201}
	ctx := WithAudit(context.Background(), e)
	w, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !AuditWritten(ctx) {
		t.Fatal("the write did not record the audit entry")
	}
	// A refused request records its entry on its own.
	if err := s.AppendAudit(context.Background(), core.AuditEntry{Time: t0.Add(time.Second), User: "eve", Action: "cancel workload", Method: "POST", Path: "/x", Status: 404, Message: "not found"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Audit(context.Background(), AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []core.AuditEntry{
		{ID: 1, Time: t0, User: "bob", Role: "member", Action: "create workload", Method: "POST", Path: "/api/v1/workloads", Object: string(w.ID), Team: string(w.Team), Status: 201},
		{ID: 2, Time: t0.Add(time.Second), User: "eve", Action: "cancel workload", Method: "POST", Path: "/x", Status: 404, Message: "not found"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if got, _ := s.Audit(context.Background(), AuditFilter{User: "eve"}); len(got) != 1 || got[0].User != "eve" {
		t.Errorf("by user: %+v", got)
	}
	if got, _ := s.Audit(context.Background(), AuditFilter{AfterID: 1}); len(got) != 1 || got[0].ID != 2 {
		t.Errorf("after 1: %+v", got)
	}
}

func TestGangAcrossNodes(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.PutNode(ctx, node("n2", 2)); err != nil {
		t.Fatal(err)
	}
	w := workload(1000)
	w.Request.Replicas = 3
	g, _, err := s.CreateWorkload(ctx, w, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	rep := func(r int, a core.Assignment) core.Assignment { a.Replica = r; return a }
	partial := core.Plan{Placements: []core.Placement{{Workload: g.ID, Assignments: []core.Assignment{rep(0, assign("n1", 0, 1000)), rep(1, assign("n1", 1, 1000))}}}}
	res, err := s.ApplyPlan(ctx, partial, t0)
	if err != nil || !errors.Is(res[0].Err, core.ErrInvalid) {
		t.Fatalf("a gang missing a replica: %v %v, want ErrInvalid", err, res[0].Err)
	}
	full := core.Plan{Placements: []core.Placement{{Workload: g.ID, Assignments: []core.Assignment{
		rep(0, assign("n1", 0, 1000)), rep(1, assign("n1", 1, 1000)), rep(2, assign("n2", 0, 1000))}}}}
	if res, err := s.ApplyPlan(ctx, full, t0); err != nil || res[0].Err != nil {
		t.Fatalf("gang: %v %v", err, res[0].Err)
	}
	u, _ := s.Usage(ctx)
	if len(u["n1"].GPUs) != 2 || u["n2"].GPUs[0].MilliGPU != 1000 {
		t.Errorf("usage after the gang: n1 %v n2 %v", u["n1"].GPUs, u["n2"].GPUs)
	}
	// The store sees the gang's share of n2 when it checks another
	// placement there.
	other := submit(t, s, 1000)
	res, _ = s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: other.ID, Assignments: []core.Assignment{assign("n2", 0, 1000)}}}}, t0)
	if !errors.Is(res[0].Err, core.ErrConflict) {
		t.Errorf("placing on the gang's device on its second node: %v, want ErrConflict", res[0].Err)
	}
	code := 0
	if _, err := s.Finish(ctx, g.ID, 1, core.Succeeded, "Completed", "", &code, t0); err != nil {
		t.Fatal(err)
	}
	res, _ = s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: other.ID, Assignments: []core.Assignment{assign("n2", 0, 1000)}}}}, t0)
	if res[0].Err != nil {
		t.Errorf("the gang's device is not free after it finished: %v", res[0].Err)
	}
	allocs, _ := s.Allocations(ctx, g.ID)
	if len(allocs) != 3 || allocs[2].Replica != 2 || allocs[2].Node != "n2" || allocs[2].End == nil {
		t.Errorf("gang allocations: %+v", allocs)
	}
}

// TestMigratesVersion1 opens a store written by the first schema, with a
// running workload, and finds it running on its node after the migration.
func TestMigratesVersion1(t *testing.T) {
	sqliteOnly(t)
	path := filepath.Join(t.TempDir(), "v1.db")
	s := open(t, path)
	ctx := context.Background()
	s.CreateTeam(ctx, core.NewTeam("a", t0))
	s.PutNode(ctx, node("n1", 2))
	w := submit(t, s, 1000)
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	if err := s.CreateUser(ctx, core.User{Name: "bob", Memberships: []core.Membership{{Team: "a", Role: core.RoleMember}}, CreatedAt: t0}, core.Token{CreatedAt: t0}, "0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Take the file back to version 1.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"DROP INDEX allocations_span", "DROP TABLE attempts", "DROP TABLE outputs", "DROP TABLE servers", "DROP TABLE leader_lease", "DROP TABLE acceptance_runs", "DROP TABLE volume_purges", "DROP TABLE volumes", "DROP TABLE secrets", "DROP TABLE node_status", "DROP TABLE node_events", "DROP TABLE evidence",
		"DROP TABLE prices", "DROP TABLE budgets", "DROP INDEX allocations_start", "ALTER TABLE allocations DROP COLUMN outcome", "ALTER TABLE allocations DROP COLUMN pool",
		"DROP INDEX tokens_id", "DROP INDEX tokens_user", "ALTER TABLE tokens DROP COLUMN id", "ALTER TABLE tokens DROP COLUMN name",
		"DROP TABLE audit",
		"DROP TABLE workload_nodes", "ALTER TABLE allocations DROP COLUMN replica", "PRAGMA user_version = 1",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	db.Close()
	s2 := open(t, path)
	if ts, err := s2.Tokens(ctx, "bob"); err != nil || len(ts) != 1 || ts[0].ID != "tok-0123456789" {
		t.Errorf("token after migration: %+v %v", ts, err)
	}
	if u, err := s2.UserByTokenHash(ctx, "0123456789abcdef", t0); err != nil || u.Name != "bob" {
		t.Errorf("token lookup after migration: %v %v", u, err)
	}
	u, err := s2.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u["n1"].GPUs[0].MilliGPU != 1000 {
		t.Errorf("after migration the running workload holds %v, want GPU 0", u["n1"].GPUs)
	}
	other := submit(t, s2, 1000)
	res, _ := s2.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: other.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0)
	if !errors.Is(res[0].Err, core.ErrConflict) {
		t.Errorf("the migrated workload's device was given away: %v", res[0].Err)
	}
}

// TestPendingExplanations: the status always holds the latest explanation;
// an event is recorded only when the reason (or nominated node) changes.
func TestPendingExplanations(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	w := submit(t, s, 1000)
	for i, d := range []core.Decision{
		{Workload: w.ID, Reason: "Unschedulable", Message: "best: n1 with 1"},
		{Workload: w.ID, Reason: "Unschedulable", Message: "best: n1 with 0"},
		{Workload: w.ID, Reason: "QuotaLimit", Message: "team a at its limit"},
	} {
		if _, err := s.ApplyPlan(ctx, core.Plan{Unplaced: []core.Decision{d}}, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Workload(ctx, w.ID)
		if got.Status.Reason != d.Reason || got.Status.Message != d.Message {
			t.Errorf("after decision %d: status %q %q, want %q %q", i, got.Status.Reason, got.Status.Message, d.Reason, d.Message)
		}
	}
	evs, _ := s.Events(ctx, w.ID)
	var reasons []string
	for _, e := range evs {
		reasons = append(reasons, e.Reason)
	}
	if diff := cmp.Diff([]string{"Submitted", "Unschedulable", "QuotaLimit"}, reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestOpenWithOptions(t *testing.T) {
	ctx := context.Background()
	synchronous := func(s *Store) int {
		t.Helper()
		var v int
		if err := s.write.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Run("the default is durable", func(t *testing.T) {
		sqliteOnly(t)
		s := open(t, "")
		// NORMAL: the COMMIT writes the WAL, and the syncer's fsync
		// makes it durable before any write of the batch is
		// acknowledged (durable_test.go).
		if got, want := synchronous(s), 1; got != want || s.wal == nil {
			t.Errorf("PRAGMA synchronous = %d, want %d (NORMAL) with the WAL synced apart (syncer: %v)", got, want, s.wal != nil)
		}
	})
	t.Run("NoSync turns fsync off and NewID names workloads", func(t *testing.T) {
		n := 0
		s, err := OpenWith(ctx, target(t, filepath.Join(t.TempDir(), "sim.db")), Options{NoSync: true, NewID: func() core.WorkloadID {
			n++
			return core.WorkloadID(fmt.Sprintf("wl-%d", n))
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if backend == "sqlite" {
			if got, want := synchronous(s), 0; got != want { // OFF
				t.Errorf("PRAGMA synchronous = %d, want %d (OFF)", got, want)
			}
		}
		if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
			t.Fatal(err)
		}
		var ids []core.WorkloadID
		for range 2 {
			ids = append(ids, submit(t, s, 1000).ID)
		}
		if diff := cmp.Diff([]core.WorkloadID{"wl-1", "wl-2"}, ids); diff != "" {
			t.Errorf("IDs (-want +got):\n%s", diff)
		}
	})
}

func TestCachedNodesFollowWrites(t *testing.T) {
	ctx := context.Background()
	s, err := OpenWith(ctx, target(t, filepath.Join(t.TempDir(), "sim.db")), Options{Cache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	gpus := func() map[core.NodeName]int {
		t.Helper()
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[core.NodeName]int{}
		for _, n := range snap.Nodes {
			out[n.Name] = len(n.GPUs)
			n.GPUs = nil // a caller that changes its copy changes nothing else
		}
		return out
	}
	if err := s.PutNode(ctx, node("n1", 2)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[core.NodeName]int{"n1": 2}, gpus()); diff != "" {
		t.Errorf("after the first PutNode (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[core.NodeName]int{"n1": 2}, gpus()); diff != "" {
		t.Errorf("read again from the cache (-want +got):\n%s", diff)
	}
	if err := s.PutNode(ctx, node("n1", 4)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNode(ctx, node("n2", 1)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[core.NodeName]int{"n1": 4, "n2": 1}, gpus()); diff != "" {
		t.Errorf("after replacing n1 and adding n2 (-want +got):\n%s", diff)
	}
}

func TestCachedTeamsFollowWrites(t *testing.T) {
	// With Options.Cache, Team and Teams (and Snapshot's teams) read the
	// decoded teams from memory: each read after an acknowledged create,
	// update or delete sees it, and a caller that changes its copy changes
	// nothing else.
	ctx := context.Background()
	s, err := OpenWith(ctx, target(t, filepath.Join(t.TempDir(), "cache.db")), Options{Cache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	names := func() []core.TeamName {
		t.Helper()
		ts, err := s.Teams(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []core.TeamName
		for i, tm := range ts {
			out = append(out, tm.Name)
			if snap.Teams[i].Name != tm.Name {
				t.Errorf("Snapshot's team %d is %s, Teams says %s", i, snap.Teams[i].Name, tm.Name)
			}
			ts[i].Residency = append(ts[i].Residency, "mars")
			snap.Teams[i].Residency = append(snap.Teams[i].Residency, "mars")
		}
		return out
	}
	if got := names(); len(got) != 0 {
		t.Errorf("teams of a new store: %v, want none", got)
	}
	for _, n := range []core.TeamName{"vision", "audio"} {
		if err := s.CreateTeam(ctx, core.Team{Name: n, Limit: core.Unlimited, Residency: []string{"eu"}}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]core.TeamName{"audio", "vision"}, names()); diff != "" {
		t.Errorf("after two creates (-want +got):\n%s", diff)
	}
	if _, err := s.UpdateTeam(ctx, "vision", func(tm *core.Team) error { tm.Limit = 3000; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Team(ctx, "vision")
	if err != nil {
		t.Fatal(err)
	}
	if got.Limit != 3000 || !slices.Equal(got.Residency, []string{"eu"}) {
		t.Errorf("vision after the update: limit %d, residency %v; want 3000, [eu] (a caller's append changed the cache?)", got.Limit, got.Residency)
	}
	got.Residency[0] = "us"
	if again, _ := s.Team(ctx, "vision"); again == nil || again.Residency[0] != "eu" {
		t.Errorf("a caller's change of its copy reached the cache: %+v", again)
	}
	if err := s.DeleteTeam(ctx, "audio"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Team(ctx, "audio"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Team(audio) after its delete: %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff([]core.TeamName{"vision"}, names()); diff != "" {
		t.Errorf("after the delete (-want +got):\n%s", diff)
	}
}

func TestReadableAsksTheDatabase(t *testing.T) {
	// Readiness asks Readable whether the database can be read: with the
	// teams answered from memory (Options.Cache), it must still ask the
	// database (a review found /readyz answering ready from the cache
	// after the database was closed).
	ctx := context.Background()
	s, err := OpenWith(ctx, target(t, filepath.Join(t.TempDir(), "ready.db")), Options{Cache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Readable(ctx); err != nil {
		t.Fatalf("Readable on an open store: %v", err)
	}
	if _, err := s.Teams(ctx); err != nil { // fills the cache
		t.Fatal(err)
	}
	s.read.Close()
	if _, err := s.Teams(ctx); err != nil {
		t.Logf("Teams: %v", err) // the cache may answer; Readable may not
	}
	if err := s.Readable(ctx); err == nil {
		t.Error("Readable with the database closed: nil, want the error")
	}
}

// TestApplyPlanSkipsPreemptionsForAGonePreemptor: a preemptor cancelled
// between the snapshot and the commit no longer needs the capacity, so its
// victims keep running (issue 13).
func TestApplyPlanSkipsPreemptionsForAGonePreemptor(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	v, p := submit(t, s, 1000), submit(t, s, 1000)
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: v.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v", err)
	}
	if _, err := s.RequestStop(ctx, p.ID, "Cancelled", "by alice", t0); err != nil {
		t.Fatal(err)
	}
	plan := core.Plan{Preemptions: []core.Preemption{{Victim: v.ID, Attempt: 1, Preemptor: p.ID, Reason: "Reclaimed", Message: "reclaimed by " + string(p.ID)}}}
	if _, err := s.ApplyPlan(ctx, plan, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Workload(ctx, v.ID)
	if got.Status.Phase != core.Running || got.Status.StopRequested != "" {
		t.Errorf("victim of a cancelled preemptor: %s, stop %q; want Running with no stop request", got.Status.Phase, got.Status.StopRequested)
	}
}

func TestRowsVersionFollowsNodeAndTeamWrites(t *testing.T) {
	// On a store one server owns, the version moves with every write of a
	// node or a team, and not with a workload's; elsewhere there is none.
	ctx := context.Background()
	if _, ok := fixture(t).Rows(); ok {
		t.Error("a store without Options.Cache has a rows version")
	}
	s := fixtureWith(t, Options{Cache: true})
	if _, ok := s.Rows(); ok != (backend == "sqlite") {
		t.Fatalf("rows version ok %t on %s, want it on SQLite only", ok, backend)
	}
	if backend != "sqlite" {
		return
	}
	v, _ := s.Rows()
	steps := []struct {
		what  string
		write func() error
		moves bool
	}{
		{"a submit", func() error { _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); return err }, false},
		{"a node", func() error { return s.PutNode(ctx, node("n1", 4)) }, true},
		{"a node's status", func() error {
			_, err := s.UpdateNodeStatus(ctx, "n1", t0, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
				st.State = core.NodeCordoned
				return nil, nil
			})
			return err
		}, true},
		{"a team", func() error { return s.CreateTeam(ctx, core.NewTeam("b", t0)) }, true},
		{"a team's quota", func() error {
			_, err := s.UpdateTeam(ctx, "b", func(tm *core.Team) error { tm.Limit = 2000; return nil })
			return err
		}, true},
		{"a team deleted", func() error { return s.DeleteTeam(ctx, "b") }, true},
	}
	for _, st := range steps {
		if err := st.write(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		got, _ := s.Rows()
		if moved := got != v; moved != st.moves {
			t.Errorf("after %s the version moved: %t, want %t", st.what, moved, st.moves)
		}
		v = got
	}
	// PendingCount is Active's pending, counted as the view changes.
	if err := s.PutNode(ctx, node("n2", 1)); err != nil {
		t.Fatal(err)
	}
	a, b := submit(t, s, 1000), submit(t, s, 1000)
	if _, err := s.RequestStop(ctx, a.ID, "Cancelled", "by alice", t0); err != nil {
		t.Fatal(err)
	}
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: b.ID, Assignments: []core.Assignment{assign("n2", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res[0].Err)
	}
	pending, running := s.Active()
	if s.PendingCount() != len(pending) || len(pending) != 1 || len(running) != 1 {
		t.Errorf("PendingCount %d; Active: %d pending, %d running; want 1, 1 and 1", s.PendingCount(), len(pending), len(running))
	}
}
