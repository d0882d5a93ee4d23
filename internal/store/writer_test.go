package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// TestWritesReadLikeTheFile checks the writer's shortcuts against the file:
// a workload a write reads (its spec from the view of active workloads, its
// status from the transaction) and returns is the workload a fresh read of
// the row finds, across submits, reasons, a placement and a finish, in one
// batch and over several; and the writer's statements are prepared once.
func TestWritesReadLikeTheFile(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	a, b := submit(t, s, 1000), submit(t, s, 500)
	// A submit and a reason for it in the same transaction: the reason's
	// write reads the workload the submit has just made.
	c := workload(250)
	c.Env = map[string]string{"K": "v"}
	var cid core.WorkloadID
	err := s.do(ctx, func(tx *wtx) error {
		c.ID, c.CreatedAt, c.Status = "wl-samebatch0", t0, core.Status{Phase: core.Pending, Reason: "Submitted"}
		if _, err := tx.Exec(`INSERT INTO workloads (id, team, owner, phase, created_at, spec, status) VALUES (?, 'a', 'alice', 'Pending', ?, ?, ?)`,
			string(c.ID), unixNano(t0), mustJSON(t, &c.Spec), mustJSON(t, &c.Status)); err != nil {
			return err
		}
		tx.changed = append(tx.changed, c)
		cid = c.ID
		return setPendingReason(tx, core.Decision{Workload: c.ID, Reason: "QuotaLimit", Message: "at the limit"}, t0)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Workload(ctx, cid)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Reason != "QuotaLimit" || got.Env["K"] != "v" {
		t.Errorf("same-batch reason: status %+v env %v", got.Status, got.Env)
	}
	res, err := s.ApplyPlan(ctx, core.Plan{
		Placements: []core.Placement{{Workload: a.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}},
		Unplaced:   []core.Decision{{Workload: b.ID, Reason: "Unschedulable", Message: "no room"}},
	}, t0.Add(time.Second))
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	fromFile, err := s.Workload(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromFile, res[0].Workload); diff != "" {
		t.Errorf("placed workload as returned (+) and as read from the file (-):\n%s", diff)
	}
	fin, err := s.Finish(ctx, a.ID, 1, core.Succeeded, "Exited", "exit 0", nil, t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fromFile, _ = s.Workload(ctx, a.ID)
	if diff := cmp.Diff(fromFile, fin); diff != "" {
		t.Errorf("finished workload as returned (+) and as read from the file (-):\n%s", diff)
	}
	// Prepared once: the writer holds the statements it ran, and running
	// them again adds none.
	count := func() (n int) {
		if err := s.do(ctx, func(tx *wtx) error { n = len(tx.s.stmts) + len(tx.s.toPrepare); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	submit(t, s, 100)
	before := count()
	for range 5 {
		submit(t, s, 100)
	}
	if after := count(); before == 0 || after != before {
		t.Errorf("prepared statements: %d after one submit, %d after five more; want the same, not 0", before, after)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
