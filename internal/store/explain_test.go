package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// rawDB opens the store's file at path apart from the store, to read or
// change its rows behind the store's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// countCommitted counts the workloads readers see committed.
func countCommitted(t *testing.T, s *Store) int {
	list, err := s.Workloads(context.Background(), WorkloadFilter{})
	if err != nil {
		t.Error(err)
	}
	return len(list)
}

// explainedFixture is fixture on SQLite with one pending workload,
// explained QuotaLimit one second after t0.
func explainedFixture(t *testing.T) (*Store, *core.Workload) {
	t.Helper()
	sqliteOnly(t)
	s := fixture(t)
	w := submit(t, s, 1000)
	explainOne(t, s, w.ID, "QuotaLimit", "at the limit", t0.Add(time.Second))
	return s, w
}

// explainOne applies a plan explaining workload id, at t.
func explainOne(t *testing.T, s *Store, id core.WorkloadID, reason, message string, at time.Time) {
	t.Helper()
	if _, err := s.ApplyPlan(context.Background(), core.Plan{Unplaced: []core.Decision{{Workload: id, Reason: reason, Message: message}}}, at); err != nil {
		t.Fatal(err)
	}
}

// reasons lists the reasons of evs, each with whether it is stored (an
// ID), such as "QuotaLimit(stored)".
func reasons(evs []core.Event) []string {
	var out []string
	for _, e := range evs {
		where := "memory"
		if e.ID != 0 {
			where = "stored"
		}
		out = append(out, fmt.Sprintf("%s(%s)", e.Reason, where))
	}
	return out
}

// TestExplanationsLiveInTheView: on SQLite a cycle's explanation goes to
// the view and its event to memory, with no write; the workload's next
// stored event (its admission here) stores them first, in time order,
// and the view forgets them. Reads see them all along: Workload,
// Workloads (rows read from the database) and Events.
func TestExplanationsLiveInTheView(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	w := submit(t, s, 1000)
	db := rawDB(t, path)
	rowReason := func() string {
		t.Helper()
		var status string
		if err := db.QueryRow("SELECT status FROM workloads WHERE id = ?", string(w.ID)).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status
	}
	before := rowReason()
	explainOne(t, s, w.ID, "QuotaLimit", "team a is at its limit", t0.Add(time.Second))
	explainOne(t, s, w.ID, "QuotaLimit", "team a is at its limit (2 ahead)", t0.Add(2*time.Second)) // message only: no event
	explainOne(t, s, w.ID, "Unschedulable", "no room", t0.Add(3*time.Second))
	if got := rowReason(); got != before {
		t.Errorf("row's status %s, want it unwritten: %s", got, before)
	}
	got, err := s.Workload(ctx, w.ID)
	if err != nil || got.Status.Reason != "Unschedulable" || got.Status.Message != "no room" {
		t.Fatalf("Workload = %+v, %v; want the latest explanation", got, err)
	}
	list, err := s.Workloads(ctx, WorkloadFilter{})
	if err != nil || len(list) != 1 || list[0].Status.Reason != "Unschedulable" || list[0].Status.Message != "no room" {
		t.Fatalf("Workloads = %+v, %v; want the latest explanation", list, err)
	}
	evs, err := s.Events(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Submitted(memory)", "QuotaLimit(memory)", "Unschedulable(memory)"}, reasons(evs)); diff != "" {
		t.Errorf("events before the admission (-want +got):\n%s", diff)
	}
	if evs[1].Message != "team a is at its limit" || !evs[1].Time.Equal(t0.Add(time.Second)) {
		t.Errorf("first explanation event %+v, want its own message and time", evs[1])
	}

	// The admission stores them, before its own event.
	mem := s.explainedOf(w.ID) // as a reader racing the commit would have read them
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0.Add(4*time.Second)); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res)
	}
	evs, err = s.Events(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	got3 := reasons(evs)
	if len(got3) < 4 || got3[1] != "QuotaLimit(stored)" || got3[2] != "Unschedulable(stored)" {
		t.Fatalf("events after the admission %v, want both explanations stored before it", got3)
	}
	for i := 2; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID || evs[i].Time.Before(evs[i-1].Time) {
			t.Errorf("event %d (%s, ID %d, %s) after %s (ID %d, %s): out of order", i, evs[i].Reason, evs[i].ID, evs[i].Time, evs[i-1].Reason, evs[i-1].ID, evs[i-1].Time)
		}
	}
	if n := len(s.explainedOf(w.ID)); n != 0 {
		t.Errorf("%d explanation events still in memory once stored", n)
	}
	if diff := cmp.Diff(evs, mergeExplained(evs, mem)); diff != "" {
		t.Errorf("events read from memory before the commit and stored after it are listed twice (-want +got):\n%s", diff)
	}
	if strings.Count(strings.Join(got3, " "), "Unschedulable") != 1 {
		t.Errorf("events %v: an explanation stored twice", got3)
	}
}

// TestExplanationKeptWhenItsWriteFails: a write that stores a workload's
// explanation events and then fails (under its savepoint, as a refused
// write does) leaves them in memory, and the next write stores them once.
func TestExplanationKeptWhenItsWriteFails(t *testing.T) {
	s, w := explainedFixture(t)
	ctx := context.Background()
	refused := fmt.Errorf("refused: %w", core.ErrConflict)
	err := s.do(ctx, func(tx *wtx) error {
		if err := addEvent(tx, core.Event{WorkloadID: w.ID, Time: t0.Add(2 * time.Second), Reason: "Noted"}); err != nil {
			return err
		}
		return refused
	})
	if err != refused {
		t.Fatalf("write = %v, want its refusal", err)
	}
	if n := len(s.explainedOf(w.ID)); n != 1 {
		t.Fatalf("%d explanation events in memory after the failed write, want 1", n)
	}
	// Two writes in one batch: the explanation is stored by the first.
	err = s.do(ctx, func(tx *wtx) error {
		for _, r := range []string{"First", "Second"} {
			if err := addEvent(tx, core.Event{WorkloadID: w.ID, Time: t0.Add(3 * time.Second), Reason: r}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Submitted(memory)", "QuotaLimit(stored)", "First(stored)", "Second(stored)"}, reasons(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestExplanationEventsBounded: a reason that flips every cycle keeps at
// most maxExplained events in memory, the latest.
func TestExplanationEventsBounded(t *testing.T) {
	sqliteOnly(t)
	s := fixture(t)
	w := submit(t, s, 1000)
	const n = maxExplained + 9
	for i := range n {
		explainOne(t, s, w.ID, fmt.Sprintf("Reason%d", i), "", t0.Add(time.Duration(i+1)*time.Second))
	}
	mem := s.explainedOf(w.ID)
	if len(mem) != maxExplained || mem[len(mem)-1].Reason != fmt.Sprintf("Reason%d", n-1) || mem[0].Reason != fmt.Sprintf("Reason%d", n-maxExplained) {
		t.Errorf("kept %v, want the latest %d", reasons(mem), maxExplained)
	}
}

// TestExplanationAfterRestart: the explanation is not on disk; a store
// opened again serves the row's status until a cycle explains it again,
// and a write that changed the workload since has stored the explanation
// it took from the view. The events kept in memory were stored by Close.
func TestExplanationAfterRestart(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	quiet, touched := submit(t, s, 1000), submit(t, s, 1000)
	explainOne(t, s, quiet.ID, "QuotaLimit", "at the limit", t0.Add(time.Second))
	explainOne(t, s, touched.ID, "QuotaLimit", "at the limit", t0.Add(time.Second))
	// A write that changes the pending workload takes its status from the
	// view, explanation included.
	err := s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, touched.ID)
		if err != nil {
			return err
		}
		return putStatus(tx, w)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	// Both show their reason at once: touched's from its row, quiet's
	// from the event Close stored (loadExplanations).
	for _, id := range []core.WorkloadID{quiet.ID, touched.ID} {
		got, err := s.Workload(ctx, id)
		if err != nil || got.Status.Reason != "QuotaLimit" || got.Status.Message != "at the limit" {
			t.Errorf("%s opened again: %+v, %v; want QuotaLimit, at the limit", id, got, err)
		}
	}
	if n := len(s.explainedOf(quiet.ID)); n != 0 {
		t.Errorf("%d explanation events after a restart, want none", n)
	}
	// The first cycle after the restart explains them alike: no event
	// again; a new reason is one.
	explainOne(t, s, quiet.ID, "QuotaLimit", "at the limit", t0.Add(2*time.Second))
	explainOne(t, s, touched.ID, "QuotaLimit", "at the limit", t0.Add(2*time.Second))
	explainOne(t, s, quiet.ID, "Unschedulable", "no node", t0.Add(3*time.Second))
	for _, c := range []struct {
		id   core.WorkloadID
		want []string
	}{
		{quiet.ID, []string{"Submitted(memory)", "QuotaLimit(stored)", "Unschedulable(memory)"}},
		{touched.ID, []string{"Submitted(memory)", "QuotaLimit(stored)"}},
	} {
		evs, err := s.Events(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, reasons(evs)); diff != "" {
			t.Errorf("%s: events after a clean stop and a cycle (-want +got):\n%s", c.id, diff)
		}
	}
}

// TestArrayReadsShowTheExplanation: the reads of an array's tasks from
// their rows (ArrayTasks, ArrayPhases' first task, WorkloadsByID, an
// idempotent replay of the array) give a pending task the explanation the
// view holds.
func TestArrayReadsShowTheExplanation(t *testing.T) {
	sqliteOnly(t)
	s := fixture(t)
	ctx := context.Background()
	idem := &Idempotency{Key: "sweep", Hash: "h"}
	a, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 2}, idem, t0)
	if err != nil {
		t.Fatal(err)
	}
	first := core.ArrayTaskID(a.ID, 0)
	explainOne(t, s, first, "QuotaLimit", "at the limit", t0.Add(time.Second))
	tasks, err := s.ArrayTasks(ctx, a.ID)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("ArrayTasks: %d, %v", len(tasks), err)
	}
	_, phasesFirst, err := s.ArrayPhases(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	byID, err := s.WorkloadsByID(ctx, []core.WorkloadID{first})
	if err != nil {
		t.Fatal(err)
	}
	again, created, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 2}, idem, t0)
	if err != nil || created {
		t.Fatalf("replay: %v, created %v", err, created)
	}
	for what, w := range map[string]*core.Workload{"ArrayTasks": tasks[0], "ArrayPhases": phasesFirst, "WorkloadsByID": byID[first], "replay": again.First} {
		if w == nil || w.ID != first || w.Status.Reason != "QuotaLimit" {
			t.Errorf("%s: %+v, want %s with reason QuotaLimit", what, w, first)
		}
	}
}
