package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
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
		cid = "wl-samebatch0"
		return submitAndExplain(t, tx, c, cid)
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

// TestBareWriteFailingAfterItsChangeFailsTheBatch: a submit runs with no
// savepoint (doBare), so a failure after its row is written (here its
// audit entry, refused by a trigger) must not leave the row behind: the
// whole batch fails and nothing is stored, rather than a workload the
// caller was told failed and the view never saw.
func TestBareWriteFailingAfterItsChangeFailsTheBatch(t *testing.T) {
	s, _ := fileFixture(t)
	ctx := context.Background()
	if _, err := s.write.ExecContext(ctx, "CREATE TRIGGER boom BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'boom'); END"); err != nil {
		t.Fatal(err)
	}
	actx := WithAudit(ctx, &core.AuditEntry{Time: t0, User: "alice", Role: "member", Action: "submit", Method: "POST", Path: "/api/v1/workloads"})
	if _, _, err := s.CreateWorkload(actx, workload(1000), nil, t0); err == nil {
		t.Fatal("submit whose audit entry failed was acknowledged")
	}
	var n int
	if err := s.read.QueryRow("SELECT count(*) FROM workloads").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d workloads stored after the failed submit, want 0 (%v)", n, err)
	}
	if snap, err := s.Snapshot(ctx); err != nil || len(snap.Pending) != 0 {
		t.Errorf("view: %v pending (%v), want none", snap, err)
	}
	// A refusal (a missing team) fails the write alone, with its own error.
	if _, err := s.write.ExecContext(ctx, "DROP TRIGGER boom"); err != nil {
		t.Fatal(err)
	}
	w := workload(1000)
	w.Team = "nope"
	if _, _, err := s.CreateWorkload(ctx, w, nil, t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("submit to a missing team: %v, want not found", err)
	}
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
		t.Errorf("submit after: %v", err)
	}
}

// TestWriteAfterDeleteInOneBatchFindsNothing: a finished workload whose row
// a team's deletion removed earlier in the same batch is not found by a
// later write of the batch (it is read from its row, not from what the
// batch changed).
func TestWriteAfterDeleteInOneBatchFindsNothing(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	w := submit(t, s, 1000)
	if _, err := s.RequestStop(ctx, w.ID, "Cancelled", "", t0); err != nil {
		t.Fatal(err)
	}
	err := s.do(ctx, func(tx *wtx) error {
		c, err := getForUpdate(tx, w.ID)
		if err != nil {
			return err
		}
		c.Status.Message = "touched"
		if err := putStatus(tx, c); err != nil { // the batch changed it: it is in tx.changed
			return err
		}
		if _, err := tx.Exec("DELETE FROM workloads WHERE id = ?", string(w.ID)); err != nil {
			return err
		}
		if _, err := getForUpdate(tx, w.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("getForUpdate after the row's deletion: %v, want not found", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestExplanationOutOfStepFails: an explanation is written only on a row
// still Pending; one the view takes for pending but whose row says
// otherwise (changed behind the store's back here) fails the write rather
// than write a pending status over it. That is setPendingReason,
// PostgreSQL's explanations; on SQLite ApplyPlan writes no explanation at
// all (explain.go), and leaves the row as it is.
func TestExplanationOutOfStepFails(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	w := submit(t, s, 1000)
	db := rawDB(t, path)
	if _, err := db.Exec("UPDATE workloads SET phase = 'Cancelled' WHERE id = ?", string(w.ID)); err != nil {
		t.Fatal(err)
	}
	d := core.Decision{Workload: w.ID, Reason: "QuotaLimit", Message: "at the limit"}
	err := s.do(ctx, func(tx *wtx) error {
		var events []core.Event
		return setPendingReason(tx, d, t0, &events, new([]pendingStatus))
	})
	if err == nil {
		t.Error("explanation written over a row that is not Pending")
	}
	if _, err := s.ApplyPlan(ctx, core.Plan{Unplaced: []core.Decision{d}}, t0); err != nil {
		t.Errorf("ApplyPlan of an explanation on SQLite: %v, want nil: it writes nothing", err)
	}
	var status string
	if err := db.QueryRow("SELECT status FROM workloads WHERE id = ?", string(w.ID)).Scan(&status); err != nil || strings.Contains(status, "QuotaLimit") {
		t.Errorf("status %s (%v): the explanation was written", status, err)
	}
}

// TestExplanationSharesNothingWithACaller explains, in the batch of the
// write that made it, a workload whose value that write hands to its caller
// (as a submit does): the view keeps the explanation's copy, so a caller
// changing its value afterwards must not change what the store serves.
func TestExplanationSharesNothingWithACaller(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	c := workload(250)
	c.Env = map[string]string{"K": "v"}
	c.Command = []string{"train"}
	err := s.do(ctx, func(tx *wtx) error {
		return submitAndExplain(t, tx, c, "wl-handedout")
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Env["K"] = "changed by the caller"
	c.Command[0] = "changed"
	got, err := s.Workload(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Reason != "QuotaLimit" || got.Env["K"] != "v" || got.Command[0] != "train" {
		t.Errorf("served reason %q, env %v, command %v; want QuotaLimit, the env and command as written", got.Status.Reason, got.Env, got.Command)
	}
}

// submitAndExplain stores c as pending with ID id in tx, as a submit does
// (its value in tx.changed, handed to the caller as CreateWorkload's out),
// and then explains it as a plan in the same batch would: QuotaLimit.
func submitAndExplain(t *testing.T, tx *wtx, c *core.Workload, id core.WorkloadID) error {
	c.ID, c.CreatedAt, c.Status = id, t0, core.Status{Phase: core.Pending, Reason: "Submitted"}
	if _, err := tx.Exec(`INSERT INTO workloads (id, team, owner, phase, created_at, spec, status) VALUES (?, 'a', 'alice', 'Pending', ?, ?, ?)`,
		string(c.ID), unixNano(t0), mustJSON(t, &c.Spec), mustJSON(t, &c.Status)); err != nil {
		return err
	}
	tx.changed = append(tx.changed, c)
	var events []core.Event
	var statuses []pendingStatus
	if err := setPendingReason(tx, core.Decision{Workload: c.ID, Reason: "QuotaLimit", Message: "at the limit"}, t0, &events, &statuses); err != nil {
		return err
	}
	if err := putPendingStatuses(tx, statuses); err != nil {
		return err
	}
	return addEvents(tx, events)
}
