package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
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
		var events []core.Event
		if err := setPendingReason(tx, core.Decision{Workload: c.ID, Reason: "QuotaLimit", Message: "at the limit"}, t0, &events); err != nil {
			return err
		}
		return addEvents(tx, events)
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

// TestSnapshotKeepsSubmissionOrder checks the ordered view against the
// file: after submits, placements, finishes and cancels in random order,
// Snapshot's Pending and Running workloads are those the file holds, in
// submission order, and so they are again after a reopen.
func TestSnapshotKeepsSubmissionOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpufleet.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutNode(ctx, node("n1", 8)); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []core.WorkloadID
	for i := range 300 {
		now := t0.Add(time.Duration(i) * time.Second)
		switch r := rng.IntN(10); {
		case r < 5 || len(ids) == 0:
			ids = append(ids, submit(t, s, 1000).ID)
		case r < 7:
			id := ids[rng.IntN(len(ids))]
			s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: id, Assignments: []core.Assignment{assign("n1", rng.IntN(8), 1000)}}}}, now)
		case r < 8:
			id := ids[rng.IntN(len(ids))]
			s.Finish(ctx, id, 1, core.Succeeded, "Exited", "exit 0", nil, now)
		default:
			id := ids[rng.IntN(len(ids))]
			s.RequestStop(ctx, id, "Cancelled", "by the test", now)
		}
	}
	check := func(s *Store) {
		t.Helper()
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range append(slices.Clone(snap.Pending), snap.Running...) {
			got = append(got, fmt.Sprintf("%d %s %s", w.Seq, w.ID, w.Status.Phase))
		}
		slices.Sort(got) // Pending then Running, each in order: compare as sets, then check order
		var want []string
		fromFile, err := s.Workloads(ctx, WorkloadFilter{Phases: []core.Phase{core.Pending, core.Running}})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range fromFile {
			want = append(want, fmt.Sprintf("%d %s %s", w.Seq, w.ID, w.Status.Phase))
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("active workloads, file (-) and snapshot (+):\n%s", diff)
		}
		for _, q := range [][]*core.Workload{snap.Pending, snap.Running} {
			if !slices.IsSortedFunc(q, func(a, b *core.Workload) int { return int(a.Seq - b.Seq) }) {
				t.Errorf("snapshot queue not in submission order")
			}
		}
		if len(snap.Pending) == 0 || len(snap.Running) == 0 {
			t.Errorf("the random run left %d pending and %d running; want some of each", len(snap.Pending), len(snap.Running))
		}
	}
	check(s)
	s.Close()
	check(open(t, path))
}
