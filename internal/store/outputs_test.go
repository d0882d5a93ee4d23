package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Outputs are recorded as they are reported, each at its time: a window
// lists those reported in it, the status keeps the sums, a report of egress
// alone is no row, and a team's deletion takes its rows.
func TestOutputsAreRecordedAtTheirTime(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	w := submit(t, s, 1000)
	for i, o := range []core.Outputs{{Accepted: 30, Unit: "requests"}, {Accepted: 5, Rejected: 1, Unit: "requests"}, {EgressBytes: 100}, {Accepted: 2, Unit: "images"}} {
		if _, err := s.AddOutputs(ctx, w.ID, o, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.OutputsBetween(ctx, t0.Add(time.Hour), t0.Add(4*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []OutputsReport{
		{Workload: w.ID, At: t0.Add(time.Hour), Unit: "requests", Accepted: 5, Rejected: 1},
		{Workload: w.ID, At: t0.Add(3 * time.Hour), Unit: "images", Accepted: 2},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("outputs of [t0+1h, t0+4h) (-want +got):\n%s", d)
	}
	st, err := s.Workload(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o := st.Status.Outputs; o == nil || o.Accepted != 37 || o.Rejected != 1 || o.EgressBytes != 100 {
		t.Errorf("status sums %+v, want 37 accepted, 1 rejected, 100 bytes", o)
	}
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	zero := 0
	if _, err := s.Finish(ctx, w.ID, 1, core.Succeeded, "Completed", "", &zero, t0.Add(5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTeam(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OutputsBetween(ctx, t0, t0.Add(24*time.Hour)); err != nil || len(got) != 0 {
		t.Errorf("after the team's deletion: %+v %v", got, err)
	}
}

// A store made before outputs had times keeps what its workloads had
// reported: the migration records each workload's sums once, at its finish.
func TestOutputsReportedBeforeTheirTimesWereKeptAreKept(t *testing.T) {
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
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if _, err := s.AddOutputs(ctx, w.ID, core.Outputs{Accepted: 12, Rejected: 3, Unit: "images"}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	end := t0.Add(90*time.Minute + 250*time.Millisecond)
	zero := 0
	if _, err := s.Finish(ctx, w.ID, 1, core.Succeeded, "Completed", "", &zero, end); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Take the store back to the version before outputs had times.
	db, err := sql.Open(map[string]string{"sqlite": "sqlite", "postgres": "pgx"}[backend], target(t, path))
	if err != nil {
		t.Fatal(err)
	}
	back := []string{"DROP INDEX allocations_span", "DROP TABLE attempts", "DROP TABLE outputs", "PRAGMA user_version = 8"}
	if backend == "postgres" {
		back = []string{"DROP INDEX allocations_span", "DROP TABLE attempts", "DROP TABLE outputs", "UPDATE gpufleet_schema SET version = 1"}
	}
	for _, stmt := range back {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(stmt, err)
		}
	}
	db.Close()
	s2 := open(t, path)
	got, err := s2.OutputsBetween(ctx, t0, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []OutputsReport{{Workload: w.ID, At: end, Unit: "images", Accepted: 12, Rejected: 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("outputs after the migration (-want +got):\n%s", d)
	}
}
