package control_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// These tests run the loop on its own clock (Options.Now nil) and the fake
// executor on its timers, in a synctest bubble: the loop sleeps until what
// it waits for, on the bubble's clock, which moves only while every
// goroutine waits. With a long Resync, anything that happens sooner than
// the safety resync (60 × Resync) happened because an event or a timer the
// plan asked for woke the loop; and the times the tests read are exact: a
// cycle that runs at once on a change runs with no time passed.

// realLoop starts a loop on the bubble's clock with the given Resync and
// policy (sched.DefaultOptions when nil), waits for its first cycle and
// returns its executor.
func (h *harness) realLoop(resync time.Duration, policy *sched.Options, edit func(*control.Options)) *fake.Executor {
	h.t.Helper()
	ex := fake.New(fake.Options{})
	opts := h.options(ex)
	opts.Now = nil
	opts.Resync = resync
	opts.Policy = policy
	if edit != nil {
		edit(&opts)
	}
	before := h.cycles.Load()
	h.run(control.New(opts))
	h.until("the loop's first cycle", func() (bool, string) { return h.cycles.Load() > before, "none ran" })
	return ex
}

// submitNow submits with the harness's clock set to the bubble's, so that
// the workload's submission time is now.
func (h *harness) submitNow(edit func(*core.Workload)) *core.Workload {
	h.t.Helper()
	h.clock.mu.Lock()
	h.clock.now = time.Now()
	h.clock.mu.Unlock()
	return h.submit(edit)
}

// pendingNode submits a workload that never fits (8 GPUs on a node of 4),
// waits for its explanation and for the cycle that explanation's commit
// runs, and returns the node, for a test to rewrite.
func (h *harness) pendingNode() core.Node {
	h.t.Helper()
	w := h.submitNow(func(w *core.Workload) { w.Request.MilliGPU = 8000 })
	h.waitFor(w.ID, "explained as Unschedulable", func(w *core.Workload) bool { return w.Status.Reason == "Unschedulable" })
	synctest.Wait()
	ns, err := h.store.Nodes(context.Background())
	if err != nil || len(ns) != 1 {
		h.t.Fatalf("nodes: %v %v", ns, err)
	}
	return ns[0]
}

func TestSubmitAndExitWakeTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ex := h.realLoop(time.Hour, nil, nil)

		// A submission is a change: it runs at once, not at a tick (the
		// safety resync is 60 hours away).
		began := time.Now()
		var running []core.WorkloadID
		for range 4 {
			running = append(running, h.submitNow(nil).ID)
		}
		for _, id := range running {
			h.waitRunning(id, 1)
		}
		if d := time.Since(began); d != 0 {
			t.Errorf("four submissions ran %s after their submission, want at once", d)
		}

		// The node is full: the fifth waits, and runs once an exit frees a GPU.
		waiting := h.submitNow(nil)
		h.waitFor(waiting.ID, "explained as Unschedulable", func(w *core.Workload) bool { return w.Status.Reason == "Unschedulable" })
		began = time.Now()
		if !ex.Finish(running[0], 1, 0) {
			t.Fatal("Finish: the task is not running")
		}
		h.waitEnded(running[0])
		h.waitRunning(waiting.ID, 1)
		if d := time.Since(began); d != 0 {
			t.Errorf("the exit started the waiting workload %s later, want at once", d)
		}
	})
}

func TestStarvationWakesTheLoop(t *testing.T) {
	// A workload that asks for the whole node waits behind a running one;
	// once it has waited StarvationAfter, the next cycle reserves the node
	// for it. Nothing else changes: only the wake the plan asked for can
	// run that cycle before the safety resync (6 s).
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		policy := sched.DefaultOptions()
		policy.StarvationAfter = 300 * time.Millisecond
		h.realLoop(100*time.Millisecond, &policy, nil)
		small := h.submitNow(nil)
		h.waitRunning(small.ID, 1)
		big := h.submitNow(func(w *core.Workload) { w.Request.MilliGPU = 4000 })
		h.waitFor(big.ID, "explained as Unschedulable", func(w *core.Workload) bool { return w.Status.Reason == "Unschedulable" })
		if got := h.get(big.ID); strings.Contains(got.Status.Message, "reserved for it") {
			t.Fatalf("reserved before it waited StarvationAfter: %q", got.Status.Message)
		}
		got := h.waitFor(big.ID, "holding a reservation", func(w *core.Workload) bool {
			return strings.Contains(w.Status.Message, "n1 is reserved for it")
		})
		// The wait checks every poll: the reservation came in the poll
		// that ends when it is seen.
		if waited := time.Since(big.CreatedAt); waited < policy.StarvationAfter || waited > policy.StarvationAfter+poll {
			t.Errorf("reserved %s after its submission, want at StarvationAfter (300ms), long before the safety resync (6s): %q", waited, got.Status.Message)
		}
	})
}

func TestMaxRuntimeWakesTheLoop(t *testing.T) {
	// A max runtime passing is a time the loop sleeps until.
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.realLoop(200*time.Millisecond, nil, nil) // safety resync: 12 s
		w := h.submitNow(func(w *core.Workload) { w.MaxRuntime = 300 * time.Millisecond })
		started := h.waitRunning(w.ID, 1).Status.StartedAt
		got := h.waitEnded(w.ID)
		if got.Status.Reason != control.ReasonMaxRuntime {
			t.Fatalf("got %s/%s, want Failed/%s", got.Status.Phase, got.Status.Reason, control.ReasonMaxRuntime)
		}
		if d := got.Status.FinishedAt.Sub(*started); d != w.MaxRuntime {
			t.Errorf("a 300ms max runtime was stopped after %s, want 300ms", d)
		}
	})
}

func TestSafetyResync(t *testing.T) {
	// With nothing to do, the loop still runs every 60 × Resync, and no
	// more often.
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.realLoop(10*time.Millisecond, nil, nil) // safety resync: 600ms
		before := h.cycles.Load()
		time.Sleep(2 * time.Second) // the bubble's clock: a window idle but for the loop's timers
		if n := h.cycles.Load() - before; n != 3 {
			t.Errorf("idle for 2s: %d cycles, want the safety resync's 3 (every 600ms), not one every Resync (10ms)", n)
		}
	})
}

func TestBudgetGateChangeWakesTheLoop(t *testing.T) {
	// The gates are read every Resync; a read that finds them unchanged
	// runs no cycle, one that finds a team's budget spent runs one, which
	// stops the team's running work.
	synctest.Test(t, func(t *testing.T) {
		const resync = 50 * time.Millisecond // safety resync: 3 s
		h := newHarness(t)
		b := &gates{}
		h.realLoop(resync, nil, func(o *control.Options) { o.Budgets = b })
		w := h.submitNow(nil)
		h.waitRunning(w.ID, 1)
		before := h.cycles.Load()
		b.mu.Lock()
		reads := b.reads
		b.mu.Unlock()
		time.Sleep(time.Second) // the bubble's clock: a window with the gates unchanged
		if n := h.cycles.Load() - before; n != 0 {
			t.Errorf("unchanged gates: %d cycles in 1s, want none (the safety resync is 3s)", n)
		}
		b.mu.Lock()
		reads = b.reads - reads
		b.mu.Unlock()
		// A read due at an end of the window, at the same instant as the
		// test's own timer, may fall on either side of it.
		if want := int(time.Second / resync); reads < want-1 || reads > want+1 {
			t.Errorf("the gates were read %d times in 1s, want %d: one every Resync (50ms)", reads, want)
		}

		// Just after the safety resync's cycle, so that only a read of the
		// gates can run the next one before the safety resync's next.
		h.waitCycles(1)
		began := time.Now()
		b.set("a", core.BudgetGate{Exceeded: true, StopRunning: true, Message: "team a has spent its budget", Month: "2026-12"})
		// Stopped, or already requeued by the stop.
		h.waitFor(w.ID, "stopped for its budget", func(w *core.Workload) bool {
			return w.Status.StopRequested == control.ReasonBudgetExceeded || w.Status.Phase == core.Pending && w.Status.Reason == control.ReasonBudgetExceeded
		})
		if d := time.Since(began); d > resync+poll {
			t.Errorf("a spent budget took %s to stop the team's work, want the next read of the gates (every %s)", d, resync)
		}
	})
}

func TestHeartbeatRunsNoCycle(t *testing.T) {
	// A node's record rewritten with only its updatedAt new (the server's
	// heartbeat of its local node) changes nothing the schedule sees: no
	// cycle. A change of the node itself runs one.
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.realLoop(time.Hour, nil, nil)
		n := h.pendingNode()
		before := h.cycles.Load()
		for i := range 5 {
			n.UpdatedAt = time.Now().Add(time.Duration(i) * time.Second).UTC()
			if err := h.store.PutNode(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the loop has taken this heartbeat
		}
		if n := h.cycles.Load() - before; n != 0 {
			t.Errorf("five heartbeats ran %d cycles, want none", n)
		}
		n.Labels = map[string]string{"rack": "r1"}
		before = h.cycles.Load()
		if err := h.store.PutNode(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := h.cycles.Load() - before; n != 1 {
			t.Errorf("a node's new labels ran %d cycles, want 1, at once", n)
		}
	})
}

func TestChangesArePacedUnderAFlood(t *testing.T) {
	// Cycles made to last cycleLen (OnCycle runs inside the cycle): under a
	// stream of submits, a cycle starts no sooner than paceFactor lengths
	// after the last one ended, so the loop runs about one cycle per
	// (1+paceFactor) × cycleLen, not one per cycleLen back to back; and a
	// change after a quiet spell still runs its cycle at once.
	synctest.Test(t, func(t *testing.T) {
		const cycleLen = 15 * time.Millisecond
		const period = (1 + control.PaceFactor) * cycleLen
		h := newHarness(t)
		var started []time.Time
		var mu sync.Mutex
		h.realLoop(time.Hour, nil, func(o *control.Options) {
			next := o.OnCycle
			o.OnCycle = func(d time.Duration, p core.Plan) {
				mu.Lock()
				started = append(started, time.Now().Add(-d))
				mu.Unlock()
				time.Sleep(cycleLen) // the bubble's clock: the cycle's length
				next(d, p)
			}
		})
		count := func() int { mu.Lock(); defer mu.Unlock(); return len(started) }
		// quiet waits until the last cycle's pace is over.
		quiet := func() {
			synctest.Wait()
			time.Sleep(period) // the bubble's clock
		}
		quiet()

		// After a quiet spell a submit runs a cycle at once.
		before := count()
		h.submitNow(func(w *core.Workload) { w.Request.MilliGPU = 8000 }) // never fits: stays pending
		sent := time.Now()
		synctest.Wait()
		if count() == before {
			t.Fatal("no cycle after a submit")
		}
		mu.Lock()
		wait := started[before].Sub(sent)
		mu.Unlock()
		if wait != 0 {
			t.Errorf("after a quiet spell a submit waited %s for its cycle, want it at once", wait)
		}

		// A flood: a submit every 5 ms for 1.2 s.
		quiet()
		const flood = 1200 * time.Millisecond
		before = count()
		for began := time.Now(); time.Since(began) < flood; {
			h.submitNow(func(w *core.Workload) { w.Request.MilliGPU = 8000 })
			time.Sleep(5 * time.Millisecond) // the bubble's clock: the flood's pace
		}
		n := count() - before
		// Back to back: flood/cycleLen = 80; paced: flood/period = 8, and
		// the cycle under way when the flood ends.
		if most := int(flood/period) + 1; n > most {
			t.Errorf("a flood of submits over %s ran %d cycles, want at most %d (one per %s)", flood, n, most, period)
		}
		if least := int(flood / period); n < least {
			t.Errorf("a flood of submits over %s ran %d cycles, want at least %d: scheduled all along", flood, n, least)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := before + 1; i < len(started); i++ {
			// The cycle before started[i] lasted cycleLen, so started[i]
			// comes at least a period after started[i-1].
			if gap := started[i].Sub(started[i-1]); gap < period {
				t.Errorf("cycle %d started %s after the one before, want at least %s", i, gap, period)
			}
		}
	})
}

func TestChangesWaitLessOnceDrained(t *testing.T) {
	// Cycles made to last cycleLen, and a submit every 40 ms that fits:
	// each cycle places all it sees, so a change waits at most
	// DrainedPaceFactor cycle lengths after the last cycle, not
	// PaceFactor: a workload's cycle starts within (1+DrainedPaceFactor)
	// × cycleLen of its submit (with PaceFactor it would wait up to 9
	// lengths), and cycles still start at least that far apart.
	synctest.Test(t, func(t *testing.T) {
		const cycleLen = 15 * time.Millisecond
		const most = (1 + control.DrainedPaceFactor) * cycleLen
		h := newHarness(t)
		type cycle struct {
			start  time.Time
			placed []core.WorkloadID
		}
		var cycles []cycle
		var mu sync.Mutex
		h.realLoop(time.Hour, nil, func(o *control.Options) {
			next := o.OnCycle
			o.OnCycle = func(d time.Duration, p core.Plan) {
				c := cycle{start: time.Now().Add(-d)}
				for _, pl := range p.Placements {
					c.placed = append(c.placed, pl.Workload)
				}
				mu.Lock()
				cycles = append(cycles, c)
				mu.Unlock()
				time.Sleep(cycleLen) // the bubble's clock: the cycle's length
				next(d, p)
			}
		})
		synctest.Wait()
		time.Sleep(10 * cycleLen) // the bubble's clock: the first cycle's pace is over
		sent := map[core.WorkloadID]time.Time{}
		for range 25 {
			w := h.submitNow(func(w *core.Workload) { w.Request.MilliGPU = 100 })
			sent[w.ID] = time.Now()
			time.Sleep(40 * time.Millisecond) // the bubble's clock: the submits' pace
		}
		mu.Lock()
		defer mu.Unlock()
		placedAt := map[core.WorkloadID]time.Time{}
		for i, c := range cycles {
			for _, id := range c.placed {
				placedAt[id] = c.start
			}
			if i > 0 {
				if gap := c.start.Sub(cycles[i-1].start); gap < most {
					t.Errorf("cycle %d started %s after the one before, want at least %s", i, gap, most)
				}
			}
		}
		for id, at := range sent {
			start, ok := placedAt[id]
			if !ok {
				t.Errorf("%s was never placed", id)
				continue
			}
			if wait := start.Sub(at); wait > most {
				t.Errorf("%s waited %s for the cycle that placed it, want at most %s", id, wait, most)
			}
		}
	})
}

func TestOwnPlacementsRunNoCycle(t *testing.T) {
	// A cycle that placed all it saw knows what its commit will hold: the
	// commit's change runs no cycle, and neither does the workload turning
	// ready. The workload's max runtime, which that cycle's plan did not
	// know, still stops it on time.
	synctest.Test(t, func(t *testing.T) {
		// Resync 1 s: a max runtime is due no sooner than that after a
		// cycle, and the safety resync comes after a minute.
		h := newHarness(t)
		h.realLoop(time.Second, nil, nil)
		synctest.Wait()
		time.Sleep(time.Second) // the bubble's clock: the first cycle's pace is over
		before := h.cycles.Load()
		w := h.submitNow(func(w *core.Workload) { w.MaxRuntime = 10 * time.Second })
		sent := time.Now()
		running := h.waitRunning(w.ID, 1)
		synctest.Wait()
		if n := h.cycles.Load() - before; n != 1 {
			t.Errorf("a submit that was placed ran %d cycles, want 1", n)
		}
		if err := h.store.SetReady(context.Background(), w.ID, 1, true, "answered", time.Now()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := h.cycles.Load() - before; n != 1 {
			t.Errorf("after the workload turned ready, %d cycles, want 1", n)
		}
		stopped := h.waitEnded(w.ID)
		if took := time.Since(sent); took > 11*time.Second {
			t.Errorf("stopped %s after the submit, want its max runtime of 10s (running since %s)", took, running.Status.StartedAt)
		}
		if stopped.Status.Reason != control.ReasonMaxRuntime {
			t.Errorf("ended with reason %q, want %q", stopped.Status.Reason, control.ReasonMaxRuntime)
		}
	})
}

func TestBudgetAlertOnAWorkloadADrainedCycleStarted(t *testing.T) {
	// A team at its budget's alert level with nothing running: the alert
	// is raised on its running work, so the cycle that starts its next
	// workload is followed by one that raises it, though that cycle
	// placed all it saw (TestOwnPlacementsRunNoCycle).
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		b := &gates{}
		b.set("a", core.BudgetGate{Alerting: true, Message: "team a spent 80%", Month: "2026-12"})
		h.realLoop(time.Second, nil, func(o *control.Options) { o.Budgets = b })
		synctest.Wait()
		time.Sleep(time.Second) // the bubble's clock: the first cycle's pace is over
		w := h.submitNow(nil)
		h.waitRunning(w.ID, 1)
		h.until("the budget alert on the running workload", func() (bool, string) {
			return countEvents(h.events(w.ID), control.ReasonBudgetAlert) == 1, "none yet"
		})
	})
}

func TestRowChangesRunACycle(t *testing.T) {
	// A workload waits for its team's limit to be raised, or for its
	// node's cordon to be lifted: the loop compares only the workloads
	// while the store's version of the nodes and teams holds, so that
	// row's change alone must move it, and run the cycle that places the
	// workload.
	for _, tt := range []struct {
		name        string
		hold, allow func(*core.Team, *core.Node)
	}{
		{"team", func(tm *core.Team, _ *core.Node) { tm.Limit = 0 }, func(tm *core.Team, _ *core.Node) { tm.Limit = core.Unlimited }},
		{"node", func(_ *core.Team, n *core.Node) { n.Schedulable = false }, func(_ *core.Team, n *core.Node) { n.Schedulable = true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				ctx := context.Background()
				ns, err := h.store.Nodes(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n := ns[0]
				set := func(f func(*core.Team, *core.Node)) {
					t.Helper()
					if _, err := h.store.UpdateTeam(ctx, "a", func(tm *core.Team) error { f(tm, &n); return nil }); err != nil {
						t.Fatal(err)
					}
					if err := h.store.PutNode(ctx, n); err != nil {
						t.Fatal(err)
					}
				}
				set(tt.hold)
				h.realLoop(time.Hour, nil, nil)
				w := h.submitNow(nil)
				h.waitFor(w.ID, "explained", func(w *core.Workload) bool { return w.Status.Reason != "Submitted" && w.Status.Reason != "" })
				synctest.Wait()
				if got := h.get(w.ID); got.Status.Phase != core.Pending {
					t.Fatalf("held workload is %s", got.Status.Phase)
				}
				if tt.name == "team" {
					if _, err := h.store.UpdateTeam(ctx, "a", func(tm *core.Team) error { tt.allow(tm, nil); return nil }); err != nil {
						t.Fatal(err)
					}
				} else {
					tt.allow(nil, &n)
					if err := h.store.PutNode(ctx, n); err != nil {
						t.Fatal(err)
					}
				}
				h.waitRunning(w.ID, 1)
			})
		})
	}
}

func TestManyExplanationsAreAllWritten(t *testing.T) {
	// 300 workloads that can never fit (8 GPUs on a 4-GPU node), and one
	// that runs: one cycle places the one and explains all 300, in
	// several writes of at most 128 explanations each.
	h := newHarness(t)
	var waiting []core.WorkloadID
	for range 300 {
		waiting = append(waiting, h.submit(func(w *core.Workload) { w.Request.MilliGPU = 8000 }).ID)
	}
	runs := h.submit(nil)
	loop := control.New(h.options(h.exec))
	if _, plan := loop.Step(context.Background()); len(plan.Unplaced) != 300 || len(plan.Placements) != 1 {
		t.Fatalf("plan: %d placed, %d unplaced; want 1 and 300", len(plan.Placements), len(plan.Unplaced))
	}
	if got := h.get(runs.ID); got.Status.Phase != core.Running {
		t.Errorf("the one that fits: %s, want Running", got.Status.Phase)
	}
	for _, id := range waiting {
		if got := h.get(id); got.Status.Reason != "Unschedulable" {
			t.Fatalf("%s after the cycle: reason %q, want Unschedulable (each of the 300 explained)", id, got.Status.Reason)
		}
	}
}

func TestHeartbeatsWithinThePaceRunNoCycle(t *testing.T) {
	// A heartbeat that comes while a change waits for its pace (here
	// right after a cycle of 40 ms) still runs no cycle once the pace is
	// over. (A review found every such wait ending in a full cycle, which
	// opened a new pace for the next heartbeat: 6-8 cycles in 1 s of
	// heartbeats.)
	synctest.Test(t, func(t *testing.T) {
		const cycleLen = 40 * time.Millisecond
		const pace = control.PaceFactor * cycleLen
		h := newHarness(t)
		h.realLoop(time.Hour, nil, func(o *control.Options) {
			next := o.OnCycle
			o.OnCycle = func(d time.Duration, p core.Plan) {
				time.Sleep(cycleLen) // the bubble's clock: the cycle's length
				next(d, p)
			}
		})
		n := h.pendingNode()
		time.Sleep(pace) // the bubble's clock: the last cycle's pace is over
		// One real change, then a heartbeat every 10 ms for 1 s.
		before := h.cycles.Load()
		h.submitNow(func(w *core.Workload) { w.Request.MilliGPU = 8000 })
		for began := time.Now(); time.Since(began) < time.Second; {
			n.UpdatedAt = time.Now().UTC()
			if err := h.store.PutNode(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // the bubble's clock: the heartbeats' pace
		}
		time.Sleep(cycleLen + pace) // the bubble's clock: a cycle and its pace, for what the last heartbeat would run
		// The submit's cycle, and the one its explanation's commit runs.
		if got := h.cycles.Load() - before; got != 2 {
			t.Errorf("a submit and 1 s of heartbeats ran %d cycles, want 2", got)
		}
	})
}
