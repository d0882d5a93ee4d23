package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestWarn(t *testing.T) {
	s := fixture(t)
	ctx := t.Context()
	w := submit(t, s, 1000)
	warnings := func() int {
		evs, err := s.Events(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Type == core.EventWarning && e.Reason == "IdleWarning" {
				n++
			}
		}
		return n
	}
	if ok, err := s.Warn(ctx, w.ID, 1, "IdleWarning", "idle", t0); ok || err != nil {
		t.Errorf("Warn on a pending workload = %v, %v; want false, nil", ok, err)
	}
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if ok, err := s.Warn(ctx, w.ID, 2, "IdleWarning", "idle", t0); ok || err != nil {
		t.Errorf("Warn on another attempt = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.Warn(ctx, w.ID, 1, "IdleWarning", "idle for 50m", t0.Add(time.Minute)); !ok || err != nil {
		t.Errorf("Warn on the running attempt = %v, %v; want true, nil", ok, err)
	}
	if _, err := s.RequestStop(ctx, w.ID, "Idle", "idle", t0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Warn(ctx, w.ID, 1, "IdleWarning", "idle", t0); ok {
		t.Error("Warn on a workload being stopped recorded an event")
	}
	if n := warnings(); n != 1 {
		t.Errorf("%d warnings recorded, want 1", n)
	}
	if _, err := s.Warn(ctx, "wl-missing", 1, "IdleWarning", "idle", t0); err == nil {
		t.Error("Warn on a missing workload: no error")
	}
}

// TestSubmittedEventIsTheRow: a workload's creation is listed first, from
// its row (ID 0, its creation time, who submitted it to which team), and
// an earlier version's stored creation event is listed instead, once.
func TestSubmittedEventIsTheRow(t *testing.T) {
	s := fixture(t)
	ctx := t.Context()
	w := submit(t, s, 1000)
	later := t0.Add(time.Second)
	if _, err := s.ApplyPlan(ctx, core.Plan{Unplaced: []core.Decision{{Workload: w.ID, Reason: "QuotaLimit", Message: "team a is at its limit"}}}, later); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Event{
		{WorkloadID: w.ID, Time: t0, Type: core.EventNormal, Reason: "Submitted", Message: "submitted by alice to team a", To: core.Pending},
		{WorkloadID: w.ID, Time: later, Type: core.EventNormal, Reason: "QuotaLimit", Message: "team a is at its limit"},
	}
	if len(evs) == 2 {
		want[1].ID = evs[1].ID // given by the store
	}
	if diff := cmp.Diff(want, evs, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if s.pg != nil && evs[len(evs)-1].ID == 0 {
		t.Errorf("a stored event has ID 0")
	}

	old := submit(t, s, 1000) // as an earlier version stored it: with its event
	if err := s.do(ctx, func(tx *wtx) error {
		return addEvent(tx, core.Event{WorkloadID: old.ID, Time: t0, Reason: "Submitted", Message: "submitted by alice to team a", To: core.Pending})
	}); err != nil {
		t.Fatal(err)
	}
	evs, err = s.Events(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Reason != "Submitted" || evs[0].ID == 0 {
		t.Errorf("events of a workload whose creation was stored = %+v, want that one event", evs)
	}
	if evs, err := s.Events(ctx, "wl-gone"); err != nil || len(evs) != 0 {
		t.Errorf("events of no workload = %+v, %v; want none", evs, err)
	}
}

// TestExplanationEventsInPlanOrder: a plan's explanations are written in
// chunks of several rows (addEvents); each workload gets its own event,
// with its own reason and message, in the plan's order, across chunks of
// every size. (On SQLite they are kept in memory, with no ID: the order
// of their IDs is checked on PostgreSQL only.)
func TestExplanationEventsInPlanOrder(t *testing.T) {
	s := fixture(t)
	ctx := t.Context()
	const n = 256 + 32 + 8 + 4 + 1
	var plan core.Plan
	for i := range n {
		w := submit(t, s, 1000)
		reason := "QuotaLimit"
		if i%3 == 0 {
			reason = "Unschedulable"
		}
		plan.Unplaced = append(plan.Unplaced, core.Decision{Workload: w.ID, Reason: reason, Message: fmt.Sprintf("decision %d", i)})
	}
	if _, err := s.ApplyPlan(ctx, plan, t0); err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for i, d := range plan.Unplaced {
		evs, err := s.Events(ctx, d.Workload)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[1].Reason != d.Reason || evs[1].Message != d.Message || evs[1].WorkloadID != d.Workload {
			t.Fatalf("decision %d: events %+v, want Submitted then %s %q", i, evs, d.Reason, d.Message)
		}
		w, err := s.Workload(ctx, d.Workload)
		if err != nil || w.Status.Reason != d.Reason || w.Status.Message != d.Message {
			t.Errorf("decision %d: status %+v, %v", i, w.Status, err)
		}
		if s.pg == nil {
			continue // kept in memory, with no ID (explain.go)
		}
		if evs[1].ID <= last {
			t.Errorf("decision %d: event ID %d after %d: not in plan order", i, evs[1].ID, last)
		}
		last = evs[1].ID
	}
}
