package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestCreateArray(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpufleet.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	w := workload(1000)
	w.Env = map[string]string{"LR": "0.1"}
	a, created, err := s.CreateArray(ctx, w, ArrayRange{Start: 3, End: 1002, MaxRunning: 50}, nil, t0)
	if err != nil || !created {
		t.Fatalf("CreateArray: %v (created %v)", err, created)
	}
	if a.First.ID != core.ArrayTaskID(a.ID, 3) {
		t.Errorf("first task %s, want %s", a.First.ID, core.ArrayTaskID(a.ID, 3))
	}
	check := func(s *Store) {
		t.Helper()
		tasks, err := s.ArrayTasks(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 1000 {
			t.Fatalf("%d tasks, want 1000", len(tasks))
		}
		for i, tw := range tasks {
			idx := 3 + i
			want := core.ArrayTask{ID: a.ID, Index: idx, Start: 3, End: 1002, MaxRunning: 50}
			if tw.ID != core.ArrayTaskID(a.ID, idx) || tw.Array == nil || *tw.Array != want {
				t.Fatalf("task %d: id %s array %+v, want %s %+v", i, tw.ID, tw.Array, core.ArrayTaskID(a.ID, idx), want)
			}
			if tw.Env[EnvArrayIndex] != strconv.Itoa(idx) || tw.Env[EnvArrayID] != string(a.ID) || tw.Env["LR"] != "0.1" {
				t.Fatalf("task %d env %v", i, tw.Env)
			}
			if i > 0 && tw.Seq != tasks[i-1].Seq+1 {
				t.Fatalf("task %d seq %d after %d: not in index order", i, tw.Seq, tasks[i-1].Seq)
			}
			if tw.Status.Phase != core.Pending || tw.Owner != "alice" || tw.Team != "a" || !tw.CreatedAt.Equal(t0) {
				t.Fatalf("task %d: %+v", i, tw)
			}
		}
		// The spec written from the template is the spec encoded alone.
		want, _ := json.Marshal(&tasks[500].Spec)
		var got []byte
		if err := s.read.QueryRow("SELECT spec FROM workloads WHERE id = ?", string(tasks[500].ID)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("stored spec\n%s\nwant\n%s", got, want)
		}
		phases, first, err := s.ArrayPhases(ctx, a.ID)
		if err != nil || first == nil || first.ID != tasks[0].ID || phases[core.Pending] != 1000 {
			t.Errorf("ArrayPhases: %v %v %v", phases, first, err)
		}
	}
	check(s)
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != 1000 {
		t.Errorf("snapshot has %d pending, want 1000", len(snap.Pending))
	}
	evs, err := s.Events(ctx, core.ArrayTaskID(a.ID, 7))
	if err != nil || len(evs) != 1 || evs[0].Reason != "Submitted" || evs[0].To != core.Pending {
		t.Errorf("events of task 7: %+v %v", evs, err)
	}
	// Durable: reopened, the store has them all, and its active view too.
	s.Close()
	s2 := open(t, path)
	check(s2)
	if snap, _ := s2.Snapshot(ctx); len(snap.Pending) != 1000 {
		t.Errorf("reopened snapshot has %d pending", len(snap.Pending))
	}
	// Another array's tasks are not this one's.
	if tasks, err := s2.ArrayTasks(ctx, "wl-nosuch"); err != nil || len(tasks) != 0 {
		t.Errorf("no such array: %d tasks, %v", len(tasks), err)
	}
}

// TestCreateArrayAllOrNothing: a write that fails part way through (a
// task's ID is taken, each time it is drawn) stores no task at all, and
// the pending bounds count the whole array.
func TestCreateArrayAllOrNothing(t *testing.T) {
	next := make(chan core.WorkloadID, 4)
	s := teamStore(t, filepath.Join(t.TempDir(), "gpufleet.db"), Options{
		NewID: func() core.WorkloadID { return <-next }, MaxPendingPerTeam: 2000})
	ctx := context.Background()
	next <- "wl-x-700" // a workload whose ID the array's task 700 would take
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
		t.Fatal(err)
	}
	// Drawn three times, the taken ID fails the array (CreateArray draws
	// again on a taken ID, three times in all: ids_test.go).
	next <- "wl-x"
	next <- "wl-x"
	next <- "wl-x"
	if _, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 999}, nil, t0); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("array with a taken task ID: %v, want the IDs taken (core.ErrUnavailable)", err)
	}
	var n int
	if err := s.read.QueryRow("SELECT count(*) FROM workloads").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d workloads stored after the failed array, want 1 (%v)", n, err)
	}
	// A workload's creation is its row, not a stored event (Events).
	if err := s.read.QueryRow("SELECT count(*) FROM events").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d events stored after the failed array, want 0 (%v)", n, err)
	}
	if snap, _ := s.Snapshot(ctx); len(snap.Pending) != 1 {
		t.Fatalf("active view has %d pending, want 1", len(snap.Pending))
	}
	// The bound: 1 pending + 2000 is over 2000; 1 + 1999 is not.
	next <- "wl-y"
	if _, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 1999}, nil, t0); !errors.Is(err, core.ErrLimit) {
		t.Fatalf("array over the team's pending bound: %v, want ErrLimit", err)
	}
	if tasks, _ := s.ArrayTasks(ctx, "wl-y"); len(tasks) != 0 {
		t.Fatalf("%d tasks stored over the bound", len(tasks))
	}
	next <- "wl-z"
	if _, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 1998}, nil, t0); err != nil {
		t.Fatalf("array within the bound: %v", err)
	}
	// Bad ranges are refused before anything is written.
	for _, r := range []ArrayRange{{Start: 5, End: 4}, {Start: -1, End: 3}, {Start: 0, End: core.MaxArrayTasks}, {End: 3, MaxRunning: -1}} {
		next <- "wl-bad"
		if _, _, err := s.CreateArray(ctx, workload(1000), r, nil, t0); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("range %+v: %v, want ErrInvalid", r, err)
		}
		select {
		case <-next:
		default:
		}
	}
}

func TestCreateArrayIdempotentAndCancel(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	idem := &Idempotency{Key: "k", Hash: "h"}
	a, created, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 9, MaxRunning: 2}, idem, t0)
	if err != nil || !created {
		t.Fatal(err, created)
	}
	again, created, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 9, MaxRunning: 2}, idem, t0)
	if err != nil || created || again.ID != a.ID || again.Range != a.Range {
		t.Fatalf("retry: %+v created %v err %v, want array %s", again, created, err, a.ID)
	}
	if _, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 9}, &Idempotency{Key: "k", Hash: "other"}, t0); !errors.Is(err, core.ErrIdempotency) {
		t.Fatalf("same key, other body: %v", err)
	}
	// Task 0 runs; cancel asks it to stop and cancels the rest.
	first := core.ArrayTaskID(a.ID, 0)
	if _, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: first, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil {
		t.Fatal(err)
	}
	n, err := s.CancelArray(ctx, a.ID, "Cancelled", "cancelled by alice", t0.Add(time.Minute))
	if err != nil || n != 10 {
		t.Fatalf("CancelArray: %d changed, %v; want 10", n, err)
	}
	phases, _, _ := s.ArrayPhases(ctx, a.ID)
	if phases[core.Cancelled] != 9 || phases[core.Running] != 1 {
		t.Errorf("phases after cancel: %v", phases)
	}
	w, _ := s.Workload(ctx, first)
	if w.Status.StopRequested != "Cancelled" {
		t.Errorf("running task: stop requested %q", w.Status.StopRequested)
	}
	if snap, _ := s.Snapshot(ctx); len(snap.Pending) != 0 {
		t.Errorf("%d still pending", len(snap.Pending))
	}
	if n, err := s.CancelArray(ctx, a.ID, "Cancelled", "again", t0); err != nil || n != 0 {
		t.Errorf("second cancel: %d, %v", n, err)
	}
}

// BenchmarkCreateArray measures durable array submissions into the store
// (WAL, each acknowledged after its fsync) from GOMAXPROCS concurrent
// submitters (two with -cpu 2, as two users sweeping at once): each op is
// one array of size tasks in one write. It reports tasks/s.
//
//	go test ./internal/store -run '^$' -bench CreateArray -benchtime 20x -cpu 2
func BenchmarkCreateArray(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("tasks=%d", size), func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "gpufleet.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
				b.Fatal(err)
			}
			w := workload(1000)
			w.Env = map[string]string{"DATA": "/data/shard"}
			w.Labels = map[string]string{"sweep": "lr"}
			// One array first, so that the writer has prepared its
			// statements, as a server that has run a while has.
			if _, _, err := s.CreateArray(ctx, w, ArrayRange{Start: 0, End: size - 1}, nil, t0); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := s.CreateArray(ctx, w, ArrayRange{Start: 0, End: size - 1, MaxRunning: 50}, nil, t0); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}

// BenchmarkCancelArray measures cancelling every task of one pending array
// (one write that changes each task and records its event). Its time per
// task should not grow with the array's size.
//
//	go test ./internal/store -run '^$' -bench CancelArray -benchtime 3x
func BenchmarkCancelArray(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("tasks=%d", size), func(b *testing.B) {
			s := teamStore(b, filepath.Join(b.TempDir(), "gpufleet.db"), Options{MaxPendingPerTeam: 1 << 30, MaxPendingPerUser: 1 << 30})
			ctx := context.Background()
			var tasks time.Duration
			for b.Loop() {
				b.StopTimer()
				a, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: size - 1}, nil, t0)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				n, err := s.CancelArray(ctx, a.ID, "Cancelled", "cancelled", t0)
				if err != nil || n != size {
					b.Fatalf("CancelArray: %d of %d, %v", n, size, err)
				}
				tasks += time.Since(start)
			}
			b.ReportMetric(float64(tasks.Nanoseconds())/float64(b.N*size), "ns/task")
		})
	}
}
