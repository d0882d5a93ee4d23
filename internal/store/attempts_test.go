package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// place puts w on n1's first replicas GPUs, one replica each, at at.
func place(t *testing.T, s *Store, w *core.Workload, replicas int, at time.Time) {
	t.Helper()
	var as []core.Assignment
	for r := range replicas {
		a := assign("n1", r, 1000)
		a.Replica = r
		as = append(as, a)
	}
	res, err := s.ApplyPlan(context.Background(), core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: as}}}, at)
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
}

// An attempt's end is recorded with what it used, in the transaction of
// its end, and read back after the store is opened again: a requeued
// attempt with its figures, a finished one whose use is unknown, the
// request of all its replicas; a late report of an ended attempt adds
// nothing; a window lists the attempts that ran in it; the team's deletion
// takes them.
func TestAttemptsAreRecordedWithWhatTheyUsed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "attempts.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNode(ctx, node("n1", 2)); err != nil {
		t.Fatal(err)
	}
	spec := workload(1000)
	spec.Request.MilliCPU, spec.Request.MemoryMiB, spec.Request.Replicas = 1500, 2048, 2
	w, _, err := s.CreateWorkload(ctx, spec, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	place(t, s, w, 2, t0)
	used := core.HostUse{CPU: 90*time.Second + 500*time.Millisecond + 1234*time.Nanosecond, PeakMemoryBytes: 1536 << 20}
	if _, err := s.RequeueUsed(ctx, w.ID, 1, core.Preempted, "Preempted", "for wl-x", used, t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	place(t, s, w, 2, t0.Add(11*time.Minute))
	code := 1
	if _, err := s.Finish(ctx, w.ID, 2, core.Failed, "Error", "", &code, t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishUsed(ctx, w.ID, 1, core.Failed, "Error", "", &code, used, t0.Add(21*time.Minute)); !errors.Is(err, core.ErrConflict) {
		t.Errorf("a late finish of attempt 1: %v, want a conflict", err)
	}
	s.Close()

	s = open(t, path)
	first := core.Attempt{Workload: w.ID, Team: "a", Number: 1, Start: t0, End: t0.Add(10 * time.Minute), Phase: core.Preempted, Reason: "Preempted",
		MilliCPU: 3000, MemoryMiB: 4096, Used: core.HostUse{CPU: 90*time.Second + 500*time.Millisecond + time.Microsecond, PeakMemoryBytes: 1536 << 20}}
	second := core.Attempt{Workload: w.ID, Team: "a", Number: 2, Start: t0.Add(11 * time.Minute), End: t0.Add(20 * time.Minute), Phase: core.Failed, Reason: "Error",
		MilliCPU: 3000, MemoryMiB: 4096}
	got, err := s.Attempts(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]core.Attempt{first, second}, got); d != "" {
		t.Errorf("attempts after reopening (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		from, to time.Duration
		want     []core.Attempt
	}{
		{0, time.Hour, []core.Attempt{first, second}},
		{5 * time.Minute, 12 * time.Minute, []core.Attempt{first, second}},
		{10 * time.Minute, 11 * time.Minute, nil},
		{19 * time.Minute, time.Hour, []core.Attempt{second}},
		{20 * time.Minute, time.Hour, nil},
	} {
		got, err := s.AttemptsBetween(ctx, t0.Add(c.from), t0.Add(c.to))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("attempts in [t0+%s, t0+%s) (-want +got):\n%s", c.from, c.to, d)
		}
	}
	if err := s.DeleteTeam(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AttemptsBetween(ctx, t0, t0.Add(time.Hour)); err != nil || len(got) != 0 {
		t.Errorf("after the team's deletion: %+v %v", got, err)
	}
}

// A store made before attempts were recorded is migrated: its workloads
// keep running, and the attempt that ends next is recorded.
func TestAttemptsAreRecordedAfterTheMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNode(ctx, node("n1", 1)); err != nil {
		t.Fatal(err)
	}
	w := submit(t, s, 1000)
	place(t, s, w, 1, t0)
	s.Close()
	db, err := sql.Open(map[string]string{"sqlite": "sqlite", "postgres": "pgx"}[backend], target(t, path))
	if err != nil {
		t.Fatal(err)
	}
	back := []string{"DROP INDEX allocations_span", "DROP TABLE attempts", "PRAGMA user_version = 9"}
	if backend == "postgres" {
		back = []string{"DROP INDEX allocations_span", "DROP TABLE attempts", "UPDATE gpufleet_schema SET version = 2"}
	}
	for _, stmt := range back {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	db.Close()

	s = open(t, path)
	zero := 0
	if _, err := s.FinishUsed(ctx, w.ID, 1, core.Succeeded, "Completed", "", &zero, core.HostUse{CPU: time.Second}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Attempts(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Attempt{{Workload: w.ID, Team: "a", Number: 1, Start: t0, End: t0.Add(time.Minute), Phase: core.Succeeded, Reason: "Completed",
		Used: core.HostUse{CPU: time.Second}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("attempts after the migration (-want +got):\n%s", d)
	}
}
