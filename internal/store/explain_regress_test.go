package store

// Regression tests for the pending explanations kept in memory on SQLite
// (explain.go), from a review of the change: each failed before its fix.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// TestExplanationNotTakenBackByAWrite: a write that took a pending
// workload from the view before a cycle's explanation (AddOutputs,
// AddMetrics: POST /workloads/{id}/outputs works on a pending workload)
// must not commit the older explanation back into the view (carry-
// Explanation), nor make the next cycle record the same event again.
func TestExplanationNotTakenBackByAWrite(t *testing.T) {
	s, w := explainedFixture(t)
	ctx := context.Background()

	read, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.do(ctx, func(tx *wtx) error { // as AddOutputs does
			w, err := getForUpdate(tx, w.ID)
			if err != nil {
				return err
			}
			close(read)
			<-release
			w.Status.Outputs = &core.Outputs{Accepted: 1}
			return putStatus(tx, w)
		})
	}()
	<-read
	explainOne(t, s, w.ID, "Unschedulable", "no room", t0.Add(2*time.Second)) // the cycle, meanwhile
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := s.Workload(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	// (The write stored the kept events, the cycle's included: putStatus.)
	evs, err := s.Events(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1].Reason; got.Status.Reason != last {
		t.Errorf("view's reason %q, last event %q (%v): the write took the explanation back, its event stayed", got.Status.Reason, last, reasons(evs))
	}
	// The next cycle explains it again.
	explainOne(t, s, w.ID, "Unschedulable", "no room", t0.Add(3*time.Second))
	if _, err := s.RequestStop(ctx, w.ID, "Cancelled", "", t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	evs, err = s.Events(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Reason == evs[i-1].Reason && evs[i].From == "" && evs[i-1].From == "" {
			t.Errorf("events %v: explanation %q recorded twice in a row", reasons(evs), evs[i].Reason)
		}
	}
}

// TestIdempotentReplayShowsTheExplanation: a submission retried with its
// idempotency key answers the row, which on SQLite does not hold the
// explanation: the reply must say why it waits, as Workload does.
func TestIdempotentReplayShowsTheExplanation(t *testing.T) {
	sqliteOnly(t)
	s := fixture(t)
	ctx := context.Background()
	idem := &Idempotency{Key: "k", Hash: "h"}
	w, _, err := s.CreateWorkload(ctx, workload(1000), idem, t0)
	if err != nil {
		t.Fatal(err)
	}
	explainOne(t, s, w.ID, "QuotaLimit", "at the limit", t0.Add(time.Second))
	again, created, err := s.CreateWorkload(ctx, workload(1000), idem, t0.Add(2*time.Second))
	if err != nil || created {
		t.Fatalf("retry: %v created=%v", err, created)
	}
	cur, err := s.Workload(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.Reason != cur.Status.Reason {
		t.Errorf("idempotent retry answers reason %q, Workload %q", again.Status.Reason, cur.Status.Reason)
	}
}

// TestNominatedNodeSurvivesRestart: a preemptor's nominated node (the
// "promised capacity is state" of docs/ARCHITECTURE.md) is written on
// SQLite too, so that after a restart the preemptor still holds the node
// its victim is freeing.
func TestNominatedNodeSurvivesRestart(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	victim := submit(t, s, 1000)
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: victim.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res)
	}
	p := submit(t, s, 1000)
	plan := core.Plan{
		Preemptions: []core.Preemption{{Victim: victim.ID, Attempt: 1, Preemptor: p.ID, Reason: "Preempted", Message: "for " + string(p.ID)}},
		Unplaced:    []core.Decision{{Workload: p.ID, Reason: "Preempting", Message: "waiting on n1", Nominated: "n1"}},
	}
	if _, err := s.ApplyPlan(ctx, plan, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Workload(ctx, p.ID); got.Status.Nominated != "n1" {
		t.Fatalf("nominated %q before the restart", got.Status.Nominated)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	v, _ := s.Workload(ctx, victim.ID)
	got, _ := s.Workload(ctx, p.ID)
	if v.Status.StopRequested == "" {
		t.Fatalf("victim's stop request lost")
	}
	if got.Status.Nominated != "n1" {
		t.Errorf("after a restart the victim is still stopping (%s, for %s) but the preemptor's nominated node is %q, want n1", v.Status.StopRequested, v.Status.PreemptedBy, got.Status.Nominated)
	}
}

// TestExplainConcurrentWithReadsAndWrites: the control loop's explain,
// the writer (placements, cancels, outputs on pending workloads) and
// readers (Events, Workloads, Workload) at once, for the race detector,
// and Events never listing one explanation event twice.
func TestExplainConcurrentWithReadsAndWrites(t *testing.T) {
	sqliteOnly(t)
	s := fixture(t)
	ctx := context.Background()
	var ids []core.WorkloadID
	for range 40 {
		ids = append(ids, submit(t, s, 1000).ID)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the loop
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var ds []core.Decision
			for _, id := range ids {
				ds = append(ds, core.Decision{Workload: id, Reason: fmt.Sprintf("R%d", i%3), Message: "m"})
			}
			if _, err := s.ApplyPlan(ctx, core.Plan{Unplaced: ds}, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	errs := make(chan error, 100)
	for range 3 { // readers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, id := range ids {
					evs, err := s.Events(ctx, id)
					if err != nil {
						errs <- err
						return
					}
					for i := range evs {
						for j := i + 1; j < len(evs); j++ {
							if evs[i].From == "" && sameEvent(evs[i], evs[j]) {
								errs <- fmt.Errorf("%s: event %s at %s listed twice: %v", id, evs[i].Reason, evs[i].Time, reasons(evs))
								return
							}
						}
					}
					if _, err := s.Workload(ctx, id); err != nil {
						errs <- err
						return
					}
				}
				if _, err := s.Workloads(ctx, WorkloadFilter{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i, id := range ids { // the writer: outputs, then a cancel
		if _, err := s.AddOutputs(ctx, id, core.Outputs{Accepted: 1}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := s.RequestStop(ctx, id, "Cancelled", "", t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Millisecond) // the writer's pace: the readers run between its writes
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id := range s.explained {
		if w := s.active[id]; w == nil || w.Status.Phase != core.Pending {
			t.Errorf("explanation events of %s kept in memory, which is not pending", id)
		}
	}
}

// TestKeptEventTimeIsUTC: an explanation event kept in memory reads as
// its stored copy will, in UTC with no monotonic reading, whatever the
// cycle's clock gave (time.Now: local, monotonic).
func TestKeptEventTimeIsUTC(t *testing.T) {
	sqliteOnly(t)
	s := fixture(t)
	w := submit(t, s, 1000)
	at := t0.Add(time.Second).In(time.FixedZone("CET", 3600))
	explainOne(t, s, w.ID, "QuotaLimit", "at the limit", at)
	evs, err := s.Events(context.Background(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if loc := evs[len(evs)-1].Time.Location(); loc != time.UTC {
		t.Errorf("explanation event kept in memory has time %s (zone %s); stored events are UTC", evs[len(evs)-1].Time, loc)
	}
}

// TestExplanationAfterCrashKeepsTheRow: a write of a pending workload's
// row that records no event of its own (AddOutputs) stores the kept
// explanation events with the explanation it writes; so after a crash,
// which loses the events kept in memory, Open does not take an older
// stored explanation over the row's newer one.
func TestExplanationAfterCrashKeepsTheRow(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	w := submit(t, s, 1000)
	explainOne(t, s, w.ID, "Unschedulable", "no node", t0.Add(time.Second))
	if err := s.Close(); err != nil { // stores the Unschedulable event
		t.Fatal(err)
	}
	s = open(t, path)
	explainOne(t, s, w.ID, "QuotaLimit", "at the limit", t0.Add(2*time.Second))
	if _, err := s.AddOutputs(ctx, w.ID, core.Outputs{Accepted: 1}, time.Now()); err != nil { // the row says QuotaLimit
		t.Fatal(err)
	}
	// A crash: what is kept in memory is lost.
	s.mu.Lock()
	clear(s.explained)
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	got, err := s.Workload(ctx, w.ID)
	if err != nil || got.Status.Reason != "QuotaLimit" || got.Status.Message != "at the limit" {
		t.Errorf("after a crash: %q, %q (%v); want the row's QuotaLimit, at the limit", got.Status.Reason, got.Status.Message, err)
	}
	evs, err := s.Events(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Submitted(memory)", "Unschedulable(stored)", "QuotaLimit(stored)"}, reasons(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
