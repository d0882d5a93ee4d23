package control

import (
	"cmp"
	"context"
	"reflect"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// When Run runs a cycle. A cycle runs on a change: a commit to the store (a
// submission, an exit recorded, a node, a quota), signalled by
// Store.Changed, unless the store's snapshot holds what the last cycle's
// held, but for the nodes' updatedAt (a heartbeat): the same pending
// workloads, unchanged (the store replaces a workload it changes, so they
// compare by identity), the same running ones but for what no cycle reads
// of them (sameToSchedule), the same nodes and teams. What the last cycle
// held includes the placements it committed when it placed all it saw
// (seen.placed), so that commit's own change runs no cycle. Between
// changes the loop sleeps until the first of:
//
//   - the time the last plan asked for (sched.Options.NextWake: a pending
//     workload crossing StarvationAfter or Burst.After, a MinRuntime
//     window ending), or the next max runtime to pass, but no sooner than
//     Resync after the last cycle, so that a queue whose workloads cross
//     one after another costs no more than a cycle every Resync;
//   - the next try to record an end the store failed to take;
//   - Resync after a cycle that left something to retry (a placement the
//     store rejected, a stop or an adopt that failed, a store error);
//   - the safety resync: safetyFactor × Resync after the last cycle, so
//     that nothing waits for ever on a change that was missed.
//
// A change does not start a cycle at once when the last one ended less
// than paceFactor times its own length ago (at most maxPace): it waits for
// that, and the changes that arrive meanwhile share the one cycle. After a
// cycle that left no workload pending (drained: it placed all it saw), the
// wait is drainedPaceFactor times its length instead: the next cycle
// decides only what arrived since, so pacing would save no re-decided
// queue and only delay the new work. A
// change whose wait is over runs as any change does (a heartbeat runs no
// cycle), unless something else is due too. Under a flood of
// changes (a thousand submits a second) that leave work waiting, the loop
// then spends at most 1/(1+paceFactor) of its time in cycles, leaving the
// rest of the CPU to the API and the store's writer, instead of
// re-deciding the whole queue for every submit; while every cycle places
// all that arrived, at most 1/(1+drainedPaceFactor), each cycle starting
// work. A change after a quiet spell, or on a small queue (cycles of
// microseconds), waits for nothing that matters.
//
// With Budgets, the loop also reads the budget gates every Resync (the
// ledger keeps them in memory) and runs a cycle only when one changed.
//
// A clock of the caller's (Options.Now) is one the loop cannot wait on: a
// virtual clock moves in jumps that nothing signals. With one, the safety
// resync is Resync itself, as before the loop was event-driven.

// paceFactor is how many times the last cycle's length a change waits,
// after that cycle, before it starts another; never more than maxPace, so
// that on a cluster whose cycles last a second or more a change still runs
// within about a second of the last cycle.
//
// It was 2 while a cycle waited for its explanations' commit and fsync,
// which made up most of its length. On SQLite they no longer wait (the
// store keeps them in memory, but for changes of nominated node), so a
// cycle's length is mostly CPU: at 2 the loop took a third of a core
// under a flood of submits (266 cycles of 3 ms in BenchmarkSubmit's 3 s,
// against 48 before), at 8 a ninth. A change then waits at most 8 cycle
// lengths: 25 ms behind cycles of 3 ms, the second of maxPace behind
// cycles of 125 ms or more; Volcano and KAI run a cycle each second. On
// PostgreSQL a cycle still waits for its explanations' writes, so there a
// change under a flood now waits up to 8 times that too (measured:
// submits/s unchanged, 1,100–1,170).
//
// drainedPaceFactor is the wait after a cycle that drained the queue. At 1
// the loop spends at most half its time in cycles when every cycle places
// what arrived since the last; with thousands running a cycle's cost is
// mostly the running workloads' (a few ms of CPU at 2,000), and at 8 a
// start would wait up to 9 such cycles at a steady trickle of submits
// (docs/PERFORMANCE.md, the race with kube-scheduler at 40 pods/s).
const (
	paceFactor        = 8
	drainedPaceFactor = 1
	maxPace           = time.Second
)

// safetyFactor is how many Resync periods the safety resync waits with the
// loop's own clock.
const safetyFactor = 60

// wake is what the last cycle left the loop to wait for.
type wake struct {
	// at is the earliest time (on the loop's clock) at which the last
	// plan's decisions could change by time alone, or a max runtime
	// passes; zero when none.
	at time.Time
	// retry: something failed that the next cycle tries again.
	retry bool
	// ran is when (wall clock) the last cycle ended, took how long it
	// lasted.
	ran  time.Time
	took time.Duration
	// changed: a change waits for its cycle until paced says.
	changed bool
	// drained: the last cycle left no workload pending.
	drained bool
	// gates are the budget gates the last cycle applied.
	gates map[core.TeamName]core.BudgetGate
	// seen is what the last cycle's snapshot held.
	seen *seen
}

// seen is what a cycle's snapshot held of the store, to tell a change the
// schedule would see from one it would not.
type seen struct {
	nodes            []core.Node // UpdatedAt cleared
	teams            []core.Team
	pending, running []*core.Workload
	// rows is the store's version of the nodes and teams read before the
	// snapshot (rowsOK: the store has one, store.Rows): while it holds,
	// they are the same, and only the workloads need comparing.
	rows   store.RowsVersion
	rowsOK bool
}

func seenOf(snap *core.Snapshot, rows store.RowsVersion, rowsOK bool) *seen {
	s := &seen{teams: slices.Clone(snap.Teams), pending: slices.Clone(snap.Pending), running: slices.Clone(snap.Running),
		rows: rows, rowsOK: rowsOK}
	for _, n := range snap.Nodes {
		c := *n
		c.UpdatedAt = time.Time{}
		s.nodes = append(s.nodes, c)
	}
	return s
}

// holds reports whether snap holds what s does: the same pending
// workloads, running ones the same to the schedule (sameToSchedule), and
// the same nodes but for their updatedAt, and teams.
func (s *seen) holds(snap *core.Snapshot) bool {
	if s == nil || len(s.nodes) != len(snap.Nodes) || !s.sameWork(snap.Pending, snap.Running) || !reflect.DeepEqual(s.teams, snap.Teams) {
		return false
	}
	for i, n := range snap.Nodes {
		c := *n
		c.UpdatedAt = time.Time{}
		if !reflect.DeepEqual(s.nodes[i], c) {
			return false
		}
	}
	return true
}

// sameWork reports whether pending and running are the workloads s holds:
// the same pending ones, the same running ones to the schedule.
func (s *seen) sameWork(pending, running []*core.Workload) bool {
	return slices.Equal(s.pending, pending) && slices.EqualFunc(s.running, running, sameToSchedule)
}

// sameToSchedule reports whether two versions of a running workload are
// the same to a cycle: the same value, or, while no stop is asked of it
// (whose message a cycle passes on), values that differ only in what no
// cycle reads of a running workload: its reason and message, readiness,
// metrics and outputs. A service turning ready runs no cycle.
func sameToSchedule(a, b *core.Workload) bool {
	if a == b {
		return true
	}
	if a.ID != b.ID || a.Status.StopRequested != "" || b.Status.StopRequested != "" {
		return false
	}
	x, y := *a, *b
	for _, st := range []*core.Status{&x.Status, &y.Status} {
		st.Reason, st.Message, st.Ready, st.Metrics, st.Outputs = "", "", false, nil, nil
	}
	return reflect.DeepEqual(x, y)
}

// placed makes s what the store holds once the placements a cycle applied
// (accepted, as the store returned them) have committed, when nothing else
// in the cycle changed the store: they leave the pending workloads and
// join the running ones, in the store's order (by Seq). The commit's own
// change then runs no cycle. A cycle that placed all it saw (drained) has
// nothing left that the placements could now let in.
func (s *seen) placed(accepted []*core.Workload) {
	if s == nil || len(accepted) == 0 {
		return
	}
	ids := make(map[core.WorkloadID]bool, len(accepted))
	for _, w := range accepted {
		ids[w.ID] = true
	}
	s.pending = slices.DeleteFunc(s.pending, func(w *core.Workload) bool { return ids[w.ID] })
	s.running = slices.DeleteFunc(s.running, func(w *core.Workload) bool { return ids[w.ID] })
	s.running = append(s.running, accepted...)
	slices.SortStableFunc(s.running, func(a, b *core.Workload) int { return cmp.Compare(a.Seq, b.Seq) })
}

// unchanged takes a snapshot after a change and reports whether it holds
// what the last cycle's did, with nothing to retry: then the change needs
// no cycle. Otherwise it returns the snapshot for the cycle (nil when it
// must take its own).
//
// While the store's version of the nodes and teams is the one read before
// the last cycle's snapshot, they are the same, and only the active
// workloads are compared, without a snapshot: a change is a commit, and at
// a steady trickle of starts most commits are the workloads' own, while a
// snapshot copies every node.
func (l *Loop) unchanged(ctx context.Context) (*core.Snapshot, bool) {
	seen := l.wake.seen
	if l.wake.retry || len(l.unrecorded) > 0 || seen == nil {
		return nil, false
	}
	rows, ok := l.opts.Store.Rows()
	if ok && seen.rowsOK && rows == seen.rows {
		if l.opts.Store.PendingCount() != len(seen.pending) {
			return nil, false // a submit, most often: no need to look
		}
		return nil, seen.sameWork(l.opts.Store.Active())
	}
	l.rows, l.rowsOK = rows, ok
	snap, err := l.opts.Store.Snapshot(ctx)
	if err != nil {
		return nil, false // the cycle's own snapshot reports it
	}
	if !seen.holds(snap) {
		return snap, false
	}
	// The same but for what the schedule does not see (a heartbeat): what
	// s holds is as true at this version.
	seen.rows, seen.rowsOK = rows, ok
	return snap, true
}

// paced is when a change may start a cycle: paceFactor times the last
// cycle's length after it ended (drainedPaceFactor after a cycle that
// drained the queue), at most maxPace.
func (l *Loop) paced() time.Time {
	factor := time.Duration(paceFactor)
	if l.wake.drained {
		factor = drainedPaceFactor
	}
	return l.wake.ran.Add(min(factor*l.wake.took, maxPace))
}

// safety is the period of the safety resync.
func (l *Loop) safety() time.Duration {
	if l.ownClock {
		return safetyFactor * l.opts.Resync
	}
	return l.opts.Resync
}

// deadlines says, by the wall clock at wall (the loop's clock reading now),
// when the loop runs its next cycle with nothing changed, and when it next
// reads the budget gates (zero: never; else never after the cycle).
func (l *Loop) deadlines(wall, now time.Time) (cycle, poll time.Time) {
	// The safety resync and a retry count from the last cycle; a read of
	// the gates that runs none does not put them off.
	since := wall.Sub(l.wake.ran)
	d := l.safety() - since
	if l.wake.retry {
		d = min(d, l.opts.Resync-since)
	}
	if !l.wake.at.IsZero() {
		d = min(d, max(l.opts.Resync-since, l.wake.at.Sub(now)))
	}
	for _, u := range l.unrecorded {
		d = min(d, u.next.Sub(wall))
	}
	if l.wake.changed {
		d = min(d, l.paced().Sub(wall))
	}
	d = max(d, 0)
	cycle = wall.Add(d)
	if l.opts.Budgets != nil && l.opts.Resync < d {
		poll = wall.Add(l.opts.Resync)
	}
	return cycle, poll
}

// planWake records, after a cycle, the time its plan asks to be woken at:
// the policy's next wake, or the next max runtime to pass, whichever comes
// first.
func (l *Loop) planWake(policy sched.Options, snap *core.Snapshot, plan core.Plan, now time.Time) {
	l.wake.at = maxRuntimeWake(policy.NextWake(snap, plan, now), snap.Running, now)
}

// maxRuntimeWake is at, or the first time after now at which one of
// running passes its max runtime when that comes sooner.
func maxRuntimeWake(at time.Time, running []*core.Workload, now time.Time) time.Time {
	for _, w := range running {
		if w.Status.StopRequested != "" || w.MaxRuntime <= 0 || w.Status.StartedAt == nil {
			continue
		}
		if t := w.Status.StartedAt.Add(w.MaxRuntime); t.After(now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	return at
}

// gatesChanged reads the budget gates and reports whether they differ
// from those the last cycle applied (or could not be read: the cycle
// reports that).
func (l *Loop) gatesChanged(ctx context.Context) bool {
	gates, err := l.ledger.Gates(ctx, l.opts.Now())
	if err != nil {
		return true
	}
	if len(gates) != len(l.wake.gates) {
		return true
	}
	for team, g := range gates {
		old, ok := l.wake.gates[team]
		if !ok || !sameGate(old, g) {
			return true
		}
	}
	return false
}

// sameGate reports whether two gates decide the same: the message of an
// alert only (spent so far, which grows as work runs) may differ.
func sameGate(a, b core.BudgetGate) bool {
	if !a.Exceeded && !b.Exceeded {
		a.Message, b.Message = "", ""
	}
	return a == b
}

// gateRecorder is the loop's Budgets: the ledger's, recording in the
// loop's wake the gates a cycle applied (an error is retried in Resync).
type gateRecorder struct{ l *Loop }

func (g gateRecorder) Gates(ctx context.Context, now time.Time) (map[core.TeamName]core.BudgetGate, error) {
	gates, err := g.l.ledger.Gates(ctx, now)
	g.l.wake.gates = gates
	if err != nil {
		g.l.wake.retry = true
	}
	return gates, err
}
