package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/reclaim"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Options configures a Loop.
type Options struct {
	Store    *store.Store
	Executor executor.Executor
	// Now is the clock; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
	// Resync is how soon the loop runs again after a cycle that left
	// something to retry (a placement the store rejected, a failed stop)
	// and how often it reads the budget gates. Otherwise Run runs a cycle
	// on a change, at a time the plan asks for (wake.go), or at the latest
	// every 60 × Resync (the safety resync); with a clock of the caller's
	// (Now), which it cannot wait on, every Resync. Default one second.
	Resync time.Duration
	// Policy is the scheduling policy; sched.DefaultOptions when zero.
	Policy *sched.Options
	// Classes are the priority classes; core.DefaultPriorityClasses when nil.
	Classes []core.PriorityClass
	// OnCycle, when set, is called after every cycle with its duration and
	// plan; metrics and tests use it.
	OnCycle func(d time.Duration, plan core.Plan)
	// Reporter, when set, is told of starts and ends (metrics).
	Reporter Reporter
	// StartParallelism is how many of a cycle's placements are started at
	// once (Executor.Start must then be safe for concurrent use); 0 or 1
	// starts them one after another. Executors whose Start waits on a
	// remote API (kubernetes: one pod create per replica) or on processes
	// of its own (local: the supervisor and the sandbox) gain from more.
	StartParallelism int
	// Budgets, when set, gates each team's work on its monthly budget.
	Budgets Budgets
	// Secrets opens the team secrets a workload names in SecretEnv and
	// SecretFiles, at its start only.
	Secrets SecretSource
	// Datasets are the host directories workloads may mount, by name
	// (config storage.datasets).
	Datasets map[string]string
	// Volumes, when set, ensures a starting workload's volumes (after the
	// data of a deleted volume of the same name is gone); without, the
	// executor's Volumes are ensured directly.
	Volumes *VolumeReconciler
}

// SecretSource opens team secrets for a start: the environment variables
// the named secrets hold, or their files (secret, key, value). A missing
// secret is an error; the start fails.
type SecretSource interface {
	Env(ctx context.Context, team core.TeamName, names []string) (map[string]string, error)
	Files(ctx context.Context, team core.TeamName, names []string) (map[string]map[string][]byte, error)
}

// Reporter receives what the loop observes, for metrics; its methods must
// return quickly. The loop declares it so that it imports no metrics
// library.
type Reporter interface {
	// WorkloadStarted: an attempt was placed; wait is the time from
	// submission to this start, for first attempts (0 for later ones).
	WorkloadStarted(w *core.Workload, wait time.Duration)
	// WorkloadEnded: an attempt ended in phase (Preempted and Lost for an
	// attempt requeued) with reason.
	WorkloadEnded(w *core.Workload, phase core.Phase, reason string)
}

// Loop is the control loop.
type Loop struct {
	opts Options
	log  *slog.Logger
	// stopping remembers the stops already sent to the executor, per
	// workload attempt, so that each is sent once.
	stopping map[attemptKey]bool
	// unadopted counts failed Adopt calls of running workloads, retried
	// each cycle.
	unadopted map[attemptKey]int
	// alerted remembers, per team, the month (YYYY-MM) its budget alert
	// was raised, so that it is raised once a month (per run of the
	// server: a restart may raise it once more).
	alerted map[core.TeamName]string
	// unrecorded holds the ends of attempts that the loop has seen (an
	// exit, a failed start) but could not record, because the store failed
	// (a full disk): each is tried again, with backoff, until the store
	// takes it. Until then the attempt is never requeued, taken for lost,
	// stopped or preempted: it has ended, and how is decided already.
	unrecorded map[attemptKey]*unrecorded
	// uncertain holds the placements of the last plan whose write failed,
	// with the attempt each would have had, until the next snapshot
	// says whether they were committed (uncertain.go).
	uncertain map[core.WorkloadID]int
	// ownClock: Now is time.Now, so the loop can sleep until a time the
	// plan asks for (wake.go).
	ownClock bool
	// wake is what the last cycle left Run to wait for.
	wake wake
	// rows is the store's version of the nodes and teams read before the
	// snapshot the next cycle takes or is given (store.Rows).
	rows   store.RowsVersion
	rowsOK bool
	// ledger is Options.Budgets; the loop's own Budgets records what the
	// cycle reads of it in wake.
	ledger Budgets
	// starts is Run's launcher (launcher.go); nil under Step, whose
	// cycles start their placements before they return.
	starts *launcher
}

// unrecorded is an attempt's end waiting to be recorded.
type unrecorded struct {
	exit executor.Exit
	// end is what will be recorded, decided from the workload as it was
	// when the end was first seen (nil until the workload could be read),
	// so that a stop asked for later (max runtime, a preemption) does not
	// change the outcome of an attempt that had already ended.
	end *end
	// reported is set once the attempt's outputs (and the warning about
	// a malformed report) are recorded, so that a retry adds them once.
	reported bool
	tries    int
	next     time.Time // wall clock: retry no earlier
}

// end is how an attempt is recorded: Requeue via phase (Preempted or Lost),
// or Finish in phase with the exit code.
type end struct {
	requeue  bool
	phase    core.Phase
	reason   string
	message  string
	exitCode *int
	// used is what the attempt used of its host, as its executor
	// measured it, recorded with its end.
	used core.HostUse
}

// Backoff between tries to record an end: doubling from retryMin up to
// retryMax.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
)

func retryAfter(tries int) time.Duration {
	d := retryMin
	for i := 1; i < tries && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

type attemptKey struct {
	id      core.WorkloadID
	attempt int
}

// New returns a loop; call Reconcile once, then Run.
func New(opts Options) *Loop {
	ownClock := opts.Now == nil
	if ownClock {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Resync <= 0 {
		opts.Resync = time.Second
	}
	l := &Loop{opts: opts, log: opts.Logger, stopping: map[attemptKey]bool{}, unadopted: map[attemptKey]int{}, unrecorded: map[attemptKey]*unrecorded{},
		uncertain: map[core.WorkloadID]int{}, alerted: map[core.TeamName]string{}, ownClock: ownClock}
	if opts.Budgets != nil {
		l.ledger = opts.Budgets
		l.opts.Budgets = gateRecorder{l}
	}
	return l
}

// Reconcile re-adopts the workloads that the store says are Running. Those
// the executor no longer knows are marked Lost and requeued (or, when the
// store cannot write, remembered and recorded once it can).
func (l *Loop) Reconcile(ctx context.Context) error {
	running, err := l.opts.Store.Workloads(ctx, store.WorkloadFilter{Phases: []core.Phase{core.Running}})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for _, w := range running {
		if err := l.adopt(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// maxAdoptTries bounds how often a failing Adopt is retried (once a cycle)
// before the workload is taken for lost.
const maxAdoptTries = 10

// adopt re-attaches to a running workload's task, or settles it when the
// executor no longer knows it. An Adopt that fails (as opposed to one that
// finds nothing) is retried in later cycles: requeueing a task that may
// still run would run it twice.
func (l *Loop) adopt(ctx context.Context, w *core.Workload) error {
	k := attemptKey{w.ID, w.Status.Attempts}
	if l.unrecorded[k] != nil {
		return nil // it has ended: its end waits to be recorded
	}
	ok, err := l.opts.Executor.Adopt(ctx, TaskFor(w))
	if err != nil {
		l.unadopted[k]++
		if l.unadopted[k] < maxAdoptTries {
			l.log.Warn("adopt failed; retrying next cycle", "workload", w.ID, "try", l.unadopted[k], "err", err)
			return nil
		}
		l.log.Error("adopt keeps failing; taking the workload for lost", "workload", w.ID, "err", err)
	}
	delete(l.unadopted, k)
	if ok {
		l.log.Info("re-adopted running workload", "workload", w.ID, "attempt", w.Status.Attempts)
		return nil
	}
	// It is gone: an exit of reason Lost requeues it, or, when it was
	// being stopped, records the stop that was asked for instead of
	// running it again.
	if w.Status.StopRequested == "" {
		l.log.Warn("running workload lost across restart", "workload", w.ID, "attempt", w.Status.Attempts)
	}
	x := executor.Exit{WorkloadID: w.ID, Attempt: w.Status.Attempts, Reason: "Lost",
		Message: "the workload's process was not found after the control plane restarted"}
	if w.Native != nil {
		// Its pods were deleted while no server watched them.
		x.Reason, x.Message = ReasonPodDeleted, "its pods were gone when the server restarted"
	}
	l.exit(ctx, x)
	return nil
}

// Run handles events until ctx ends: it runs a cycle on each change of the
// store, records each exit (whose commit is a change), and between them
// sleeps until the time the last cycle asked for (wake.go).
func (l *Loop) Run(ctx context.Context) error {
	exits := l.opts.Executor.Exits()
	changed := l.opts.Store.Changed()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	l.starts = newLauncher(l.opts.StartParallelism)
	defer func() {
		l.starts.wait()
		l.starts = nil
	}()
	l.cycle(ctx)
	for {
		wall := time.Now()
		next, poll := l.deadlines(wall, l.opts.Now())
		at := next
		if !poll.IsZero() && poll.Before(next) {
			at = poll
		}
		timer.Reset(at.Sub(wall))
		select {
		case <-ctx.Done():
			return nil
		case e := <-exits:
			l.exit(ctx, e)
		case u := <-l.starts.failed:
			l.remember(u)
		case <-changed:
			if time.Now().Before(l.paced()) {
				l.wake.changed = true // run when paced (see deadlines)
				continue
			}
			l.onChange(ctx)
		case <-timer.C:
			if l.wake.changed && !time.Now().Before(l.paced()) {
				// The change's pace is over. Unless something else is
				// due too (then the full cycle below), run it as a
				// change: a heartbeat runs no cycle.
				l.wake.changed = false
				wall := time.Now()
				if other, _ := l.deadlines(wall, l.opts.Now()); wall.Before(other) {
					l.onChange(ctx)
					continue
				}
			}
			// A budget read alone runs a cycle only when a gate changed.
			if time.Now().Before(next) && !l.gatesChanged(ctx) {
				continue
			}
			l.cycle(ctx)
		}
	}
}

// onChange runs a cycle for a change, unless the schedule cannot see it (a
// node's heartbeat).
func (l *Loop) onChange(ctx context.Context) {
	l.wake.changed = false
	snap, same := l.unchanged(ctx)
	if same {
		return
	}
	l.cycleOn(ctx, snap)
}

// Step handles the exits the executor has already delivered, without
// waiting for more, then runs one cycle. It returns how many exits it
// handled and the cycle's plan (empty when the cycle failed; failures are
// logged, as in Run).
//
// Step is Run taken apart for callers that drive the loop themselves under a
// virtual clock, such as the simulator: after each change (a submission, a
// task that ended, the clock passing a deadline) they call Step until
// nothing more happens, instead of calling Run. Never call it while Run
// runs.
func (l *Loop) Step(ctx context.Context) (exits int, plan core.Plan) {
	ch := l.opts.Executor.Exits()
	for {
		select {
		case e := <-ch:
			l.exit(ctx, e)
			exits++
		default:
			return exits, l.cycle(ctx)
		}
	}
}

// cycle is one pass, which returns its plan:
//
//  1. try again to record the ends the store failed to take;
//  2. snapshot the store, and start the placements of an earlier plan
//     whose write failed but which it shows committed (uncertain.go);
//  3. send the stops that were asked for (cancel, max runtime);
//  4. schedule and apply the plan;
//  5. start every placement the store accepted: handed to the launcher
//     under Run (the cycle does not wait), started before it returns under
//     Step.
func (l *Loop) cycle(ctx context.Context) core.Plan { return l.cycleOn(ctx, nil) }

// cycleOn is cycle on a snapshot already taken (nil: it takes one), which
// may be taken before step 1 only when there is nothing to retry.
func (l *Loop) cycleOn(ctx context.Context, snap *core.Snapshot) core.Plan {
	start := time.Now()
	l.wake = wake{}
	defer func() { l.wake.ran = time.Now(); l.wake.took = l.wake.ran.Sub(start) }()
	l.retryUnrecorded(ctx)
	now := l.opts.Now()
	if snap == nil {
		l.rows, l.rowsOK = l.opts.Store.Rows()
		var err error
		if snap, err = l.opts.Store.Snapshot(ctx); err != nil {
			l.log.Error("snapshot", "err", err)
			l.wake.retry = true
			return core.Plan{}
		}
	}
	l.wake.seen = seenOf(snap, l.rows, l.rowsOK)
	l.settleUncertain(ctx, snap)
	if len(l.unadopted) > 0 {
		for _, w := range snap.Running {
			if k := (attemptKey{w.ID, w.Status.Attempts}); l.unadopted[k] > 0 && l.unrecorded[k] == nil {
				if err := l.adopt(ctx, w); err != nil {
					l.log.Error("adopt", "workload", w.ID, "err", err)
				}
			}
		}
		l.wake.retry = len(l.unadopted) > 0
	}
	l.stops(ctx, snap, now)
	l.budgets(ctx, snap, now)
	snap.Classes = l.opts.Classes
	policy := sched.DefaultOptions()
	if l.opts.Policy != nil {
		policy = *l.opts.Policy
	}
	plan := policy.Schedule(snap, now)
	l.planWake(policy, snap, plan, now)
	l.wake.drained = len(plan.Unplaced) == 0
	l.opts.Store.SetShares(plan.Shares)
	// Only the explanations that changed are handed to the store, and no
	// attempt whose end waits to be recorded is preempted: that would
	// requeue, and run again, an attempt that has ended.
	//
	// The explanations go reasonChunk at a time (on PostgreSQL each a
	// write; on SQLite kept in memory but for nominated nodes): the first
	// with the placements and preemptions, the others once the placements
	// are handed to the launcher.
	reasons := changedDecisions(snap, plan.Unplaced)
	first := reasons[:min(len(reasons), reasonChunk)]
	apply := core.Plan{Placements: plan.Placements, Unplaced: first, Preemptions: l.preemptable(plan.Preemptions)}
	if len(apply.Placements) > 0 || len(apply.Unplaced) > 0 || len(apply.Preemptions) > 0 {
		results, err := l.opts.Store.ApplyPlan(ctx, apply, now)
		if err != nil {
			l.log.Error("apply plan", "err", err)
			l.rememberUncertain(snap, apply.Placements)
			l.wake.retry = true
			return core.Plan{}
		}
		var accepted []*core.Workload
		for _, r := range results {
			if r.Err != nil {
				l.log.Info("placement rejected at commit; retrying next cycle", "err", r.Err)
				l.wake.retry = true
				continue
			}
			accepted = append(accepted, r.Workload)
			delete(l.uncertain, r.Workload.ID)
			if rep := l.opts.Reporter; rep != nil {
				var wait time.Duration
				if w := r.Workload; w.Status.Attempts == 1 && w.Status.StartedAt != nil {
					wait = w.Status.StartedAt.Sub(w.CreatedAt)
				}
				rep.WorkloadStarted(r.Workload, wait)
			}
		}
		if l.wake.drained && len(apply.Preemptions) == 0 && len(apply.Unplaced) == 0 && !l.wake.retry && !l.alertDue(accepted) {
			// The plan's own commit needs no cycle (seen.placed), but
			// for the max runtimes of what it started, and a budget
			// alert that waits for a team's work to run (alertDue).
			l.wake.seen.placed(accepted)
			l.wake.at = maxRuntimeWake(l.wake.at, accepted, now)
		}
		if l.starts != nil {
			l.starts.launch(ctx, l, accepted)
		} else {
			l.launchAll(ctx, accepted)
		}
	}
	for rest := reasons[len(first):]; len(rest) > 0; {
		chunk := rest[:min(len(rest), reasonChunk)]
		rest = rest[len(chunk):]
		if _, err := l.opts.Store.ApplyPlan(ctx, core.Plan{Unplaced: chunk}, now); err != nil {
			l.log.Error("apply plan: explain pending workloads", "err", err)
			l.wake.retry = true
			break
		}
	}
	if l.opts.OnCycle != nil {
		l.opts.OnCycle(time.Since(start), plan)
	}
	return plan
}

// preemptable leaves out the preemptions of attempts whose end waits to be
// recorded.
func (l *Loop) preemptable(ps []core.Preemption) []core.Preemption {
	if len(l.unrecorded) == 0 {
		return ps
	}
	var out []core.Preemption
	for _, p := range ps {
		if l.unrecorded[attemptKey{p.Victim, p.Attempt}] == nil {
			out = append(out, p)
		}
	}
	return out
}

// stops asks the executor to stop running workloads whose stop was
// requested, and requests a stop for those past their max runtime. An
// attempt whose end waits to be recorded has ended: it is left alone.
func (l *Loop) stops(ctx context.Context, snap *core.Snapshot, now time.Time) {
	for _, w := range snap.Running {
		if l.unrecorded[attemptKey{w.ID, w.Status.Attempts}] != nil {
			continue
		}
		if w.Status.StopRequested == "" && w.MaxRuntime > 0 && w.Status.StartedAt != nil && now.Sub(*w.Status.StartedAt) >= w.MaxRuntime {
			msg := fmt.Sprintf("ran longer than its max runtime of %s", w.MaxRuntime)
			if _, err := l.opts.Store.RequestStop(ctx, w.ID, ReasonMaxRuntime, msg, now); err != nil {
				l.log.Error("request stop", "workload", w.ID, "err", err)
				l.wake.retry = true
			}
			continue // the store change brings us back here with the flag set
		}
		if w.Status.StopRequested == "" {
			continue
		}
		k := attemptKey{w.ID, w.Status.Attempts}
		if l.stopping[k] {
			continue
		}
		if l.starts.starting(k) {
			// Its Start is under way: stop it once it has returned.
			l.wake.retry = true
			continue
		}
		if a, ok := l.opts.Executor.(executor.StopAnnouncer); ok {
			if err := a.AnnounceStop(w.ID, w.Status.Attempts, w.Status.StopRequested); err != nil {
				l.log.Warn("announce a stop", "workload", w.ID, "err", err)
			}
		}
		if x, ok := l.opts.Executor.(executor.StopExplainer); ok && w.Native != nil {
			x.ExplainStop(w.ID, w.Status.Attempts, w.Status.StopRequested, RedactFor(snap, w.Team, w.Status.Message))
		}
		if err := l.opts.Executor.Stop(ctx, w.ID, w.Status.Attempts, stopGrace(snap, w)); err != nil {
			l.log.Error("stop failed; retrying next cycle", "workload", w.ID, "err", err)
			l.wake.retry = true
			continue
		}
		l.stopping[k] = true
	}
}

// stopGrace is the grace period a stop gives w: its own, or less when a
// drain of its node asks for less (gpufleet drain --grace).
func stopGrace(snap *core.Snapshot, w *core.Workload) time.Duration {
	g := w.Grace()
	if w.Status.StopRequested != core.StopDrained {
		return g
	}
	for _, n := range snap.Nodes {
		if n.DrainGrace > 0 && n.DrainGrace < g && slices.Contains(core.Nodes(w.Status.Placement), n.Name) {
			g = n.DrainGrace
		}
	}
	return g
}

// Reasons recorded by the loop.
const (
	ReasonCompleted  = "Completed"
	ReasonError      = "Error"
	ReasonStartError = "StartError"
	ReasonCancelled  = "Cancelled"
	ReasonMaxRuntime = "MaxRuntimeExceeded"
	ReasonKilled     = "Killed"
	ReasonPreempted  = "Preempted"
	ReasonReclaimed  = "Reclaimed"
)

// launchAll starts the workloads placed in a cycle, StartParallelism at a
// time, and returns when every Start has returned: Step's way (Run hands
// them to its launcher instead). A start failure the
// store could not record is kept, on the loop's goroutine, to be recorded
// later.
func (l *Loop) launchAll(ctx context.Context, ws []*core.Workload) {
	var mu sync.Mutex
	var failed []*unrecorded
	launch := func(w *core.Workload) {
		if u := l.launch(ctx, w); u != nil {
			mu.Lock()
			failed = append(failed, u)
			mu.Unlock()
		}
	}
	n := l.opts.StartParallelism
	if n <= 1 || len(ws) <= 1 {
		for _, w := range ws {
			launch(w)
		}
	} else {
		sem := make(chan struct{}, n)
		var wg sync.WaitGroup
		for _, w := range ws {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				launch(w)
			})
		}
		wg.Wait()
	}
	for _, u := range failed {
		l.remember(u)
	}
}

// launch starts one placed workload. When the start fails and the store
// cannot record it, it returns the failure to record later.
func (l *Loop) launch(ctx context.Context, w *core.Workload) *unrecorded {
	// A launch that has begun is finished even when the loop is shutting
	// down: the placement is committed, and a half-started task would only
	// be found Lost at the next start.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	t := TaskFor(w)
	err := l.resolve(sctx, w, &t)
	if err == nil {
		err = l.opts.Executor.Start(sctx, t)
	}
	if err == nil {
		return nil
	}
	l.log.Warn("start failed", "workload", w.ID, "err", err)
	u := &unrecorded{
		exit: executor.Exit{WorkloadID: w.ID, Attempt: w.Status.Attempts, Reason: ReasonStartError, Message: err.Error()},
		end:  &end{phase: core.Failed, reason: ReasonStartError, message: err.Error()},
	}
	switch {
	case errors.Is(err, executor.ErrUnavailable):
		// Not the workload's fault (its cluster cannot be reached): it is
		// requeued, as a lost attempt is.
		u.exit.Reason = ReasonUnreachable
		u.end = &end{phase: core.Lost, reason: ReasonUnreachable, message: err.Error(), requeue: true}
	case errors.Is(err, executor.ErrNoSpace):
		// Nor is a full disk: nothing of it ran.
		u.exit.Reason = ReasonNoSpace
		u.end = &end{phase: core.Lost, reason: ReasonNoSpace, message: err.Error(), requeue: true}
	}
	if ferr := l.record(sctx, w, u.exit.Attempt, *u.end); ferr != nil {
		l.log.Error("record start failure; retrying", "workload", w.ID, "err", ferr)
		return u
	}
	return nil
}

// resolve completes a task with what the workload names by reference, at
// its start only: the opened values of its secrets and the host paths of
// its datasets. A secret or dataset that is gone fails the start.
func (l *Loop) resolve(ctx context.Context, w *core.Workload, t *executor.Task) error {
	if len(w.SecretEnv)+len(w.SecretFiles) > 0 && l.opts.Secrets == nil {
		return fmt.Errorf("the workload uses secrets and this server keeps none")
	}
	var err error
	if len(w.SecretEnv) > 0 {
		if t.SecretEnv, err = l.opts.Secrets.Env(ctx, w.Team, w.SecretEnv); err != nil {
			return err
		}
	}
	if len(w.SecretFiles) > 0 {
		if t.SecretFiles, err = l.opts.Secrets.Files(ctx, w.Team, w.SecretFiles); err != nil {
			return err
		}
	}
	if len(w.Volumes) > 0 {
		switch vols, ok := l.opts.Executor.(executor.Volumes); {
		case l.opts.Volumes != nil:
			if err := l.opts.Volumes.Ensure(ctx, w.Team, w.Volumes); err != nil {
				return err
			}
		case !ok:
			return fmt.Errorf("the workload mounts volumes and this executor keeps none")
		default:
			if err := ensureVolumes(ctx, l.opts.Store, vols, w.Team, w.Volumes); err != nil {
				return err
			}
		}
	}
	for _, d := range w.Datasets {
		host, ok := l.opts.Datasets[d.Name]
		if !ok {
			return fmt.Errorf("dataset %s is no longer in the server's configuration", d.Name)
		}
		t.Datasets = append(t.Datasets, executor.Dataset{Name: d.Name, HostPath: host, Path: d.Path})
	}
	return nil
}

// exit records the end of an attempt. When the store fails to take it, the
// end is remembered and tried again (retryUnrecorded) until it is recorded:
// an exit is never dropped, and a second report of the same attempt's end
// changes nothing.
func (l *Loop) exit(ctx context.Context, e executor.Exit) {
	k := attemptKey{e.WorkloadID, e.Attempt}
	if l.unrecorded[k] != nil {
		return // its first report waits to be recorded, and stands
	}
	delete(l.stopping, k)
	u := &unrecorded{exit: e}
	if err := l.settle(ctx, u); err != nil {
		l.log.Error("record exit failed; retrying", "workload", e.WorkloadID, "attempt", e.Attempt, "err", err)
		l.remember(u)
	}
}

// remember keeps an end that the store failed to take, for retryUnrecorded.
func (l *Loop) remember(u *unrecorded) {
	u.tries++
	u.next = time.Now().Add(retryAfter(u.tries))
	l.unrecorded[attemptKey{u.exit.WorkloadID, u.exit.Attempt}] = u
}

// retryUnrecorded tries again to record the ends whose time has come.
func (l *Loop) retryUnrecorded(ctx context.Context) {
	now := time.Now()
	for k, u := range l.unrecorded {
		if now.Before(u.next) {
			continue
		}
		if err := l.settle(ctx, u); err != nil {
			u.tries++
			u.next = now.Add(retryAfter(u.tries))
			l.log.Error("record exit failed again; retrying", "workload", k.id, "attempt", k.attempt, "try", u.tries, "err", err)
			continue
		}
		delete(l.unrecorded, k)
		l.log.Info("recorded an exit after a failure of the store", "workload", k.id, "attempt", k.attempt, "tries", u.tries+1)
	}
}

// settle records an attempt's end: finished, or requeued when it was lost
// (unless it was being stopped: then it is gone as asked, and outcome
// records the stop) or preempted. It returns nil once there is nothing left
// to record (done, or the workload has moved on or is gone), and an error
// when the store failed, to try again.
func (l *Loop) settle(ctx context.Context, u *unrecorded) error {
	e := u.exit
	w, err := l.opts.Store.Workload(ctx, e.WorkloadID)
	if errors.Is(err, core.ErrNotFound) {
		l.log.Error("exit of unknown workload", "workload", e.WorkloadID, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	if w.Status.Phase != core.Running || w.Status.Attempts != e.Attempt {
		return nil // a late report of an attempt that is already settled
	}
	if u.end == nil {
		u.end = decide(w, e)
	}
	if !u.reported {
		if err := l.reportOutputs(ctx, e); err != nil {
			return err
		}
		u.reported = true
	}
	return l.record(ctx, w, e.Attempt, *u.end)
}

// ReasonMalformedOutputs is the Warning event of an outputs report that
// was not all read.
const ReasonMalformedOutputs = "MalformedOutputs"

// reportOutputs records what an attempt reported of its completed work
// and of its own figures (metrics), and one Warning event for each report
// naming what of it was skipped. (Recorded
// before the attempt's end, in its own transaction: a crash between the
// two adds the report again when the exit is read anew.)
func (l *Loop) reportOutputs(ctx context.Context, e executor.Exit) error {
	if len(e.OutputsMalformed) > 0 {
		msg := "outputs report: " + strings.Join(e.OutputsMalformed, "; ")
		if _, err := l.opts.Store.Warn(ctx, e.WorkloadID, e.Attempt, ReasonMalformedOutputs, msg, l.opts.Now()); err != nil {
			return err
		}
	}
	if len(e.MetricsMalformed) > 0 {
		msg := "metrics report: " + strings.Join(e.MetricsMalformed, "; ")
		if _, err := l.opts.Store.Warn(ctx, e.WorkloadID, e.Attempt, ReasonMalformedMetrics, msg, l.opts.Now()); err != nil {
			return err
		}
	}
	if len(e.Metrics) > 0 {
		if err := l.opts.Store.AddMetrics(ctx, e.WorkloadID, e.Metrics); err != nil {
			return err
		}
	}
	if e.Outputs == nil {
		return nil
	}
	_, err := l.opts.Store.AddOutputs(ctx, e.WorkloadID, *e.Outputs, l.opts.Now())
	return err
}

// ReasonUnreachable: a start failed because the task's cluster could not be
// reached; the workload is requeued.
const ReasonUnreachable = "ClusterUnreachable"

// ReasonNoSpace: the attempt could not start for want of disk space on its
// node; the workload is requeued.
const ReasonNoSpace = "NoSpace"

// ReasonMalformedMetrics is the Warning event of a metrics report that was
// not all read.
const ReasonMalformedMetrics = "MalformedMetrics"

// decide says how an exit is recorded, from the workload as it is now.
func decide(w *core.Workload, e executor.Exit) *end {
	used := core.HostUse{CPU: core.CPUTime(e.CPUSeconds), PeakMemoryBytes: max(0, e.PeakMemoryBytes)}
	var d *end
	if e.Reason == "Lost" && w.Status.StopRequested == "" {
		d = &end{requeue: true, phase: core.Lost, reason: "ProcessLost", message: e.Message, used: used}
	} else {
		phase, reason, msg := outcome(w, e)
		d = &end{requeue: phase == core.Preempted || phase == core.Lost, phase: phase, reason: reason, message: msg, exitCode: e.ExitCode, used: used}
	}
	if w.Native != nil {
		nativeEnd(w, e, d)
	}
	return d
}

// nativeEnd adapts the end of a native workload's attempt: it is never
// requeued, since its pods are gone (evicted, lost) and their controller,
// if any, makes new ones, which are a new workload; an attempt preempted
// or lost is Failed with its reason (its GPU time, like a lost attempt's,
// did no work that lasts); pods deleted by their owner are Cancelled.
func nativeEnd(w *core.Workload, e executor.Exit, d *end) {
	if e.Reason == ReasonPodDeleted && w.Status.StopRequested == "" {
		*d = end{phase: core.Cancelled, reason: ReasonPodDeleted, message: e.Message, used: d.used}
		return
	}
	if d.requeue {
		d.requeue, d.phase = false, core.Failed
	}
}

// record writes an attempt's end to the store. A conflict (the attempt was
// settled meanwhile) leaves nothing to record.
func (l *Loop) record(ctx context.Context, w *core.Workload, attempt int, d end) error {
	var err error
	if d.requeue {
		_, err = l.opts.Store.RequeueUsed(ctx, w.ID, attempt, d.phase, d.reason, d.message, d.used, l.opts.Now())
	} else {
		_, err = l.opts.Store.FinishUsed(ctx, w.ID, attempt, d.phase, d.reason, d.message, d.exitCode, d.used, l.opts.Now())
	}
	switch {
	case errors.Is(err, core.ErrConflict):
		return nil
	case err != nil:
		return err
	}
	l.ended(w, d.phase, d.reason)
	return nil
}

func (l *Loop) ended(w *core.Workload, phase core.Phase, reason string) {
	if l.opts.Reporter != nil {
		l.opts.Reporter.WorkloadEnded(w, phase, reason)
	}
}

// outcome maps an exit to the final phase and reason.
func outcome(w *core.Workload, e executor.Exit) (core.Phase, string, string) {
	switch w.Status.StopRequested {
	case ReasonPreempted, ReasonReclaimed, ReasonBudgetExceeded, core.StopDrained, core.StopNodeValidating, core.StopDisrupted:
		return core.Preempted, w.Status.StopRequested, w.Status.Message
	case core.StopGPUFailed, core.StopNodeLost:
		return core.Lost, w.Status.StopRequested, w.Status.Message
	case ReasonCancelled:
		return core.Cancelled, ReasonCancelled, w.Status.Message
	case ReasonMaxRuntime:
		return core.Failed, ReasonMaxRuntime, fmt.Sprintf("stopped after its max runtime of %s", w.MaxRuntime)
	case reclaim.ReasonIdle, reclaim.ReasonMemoryExceeded:
		// The monitor's stop: its message has the figures.
		return core.Failed, w.Status.StopRequested, w.Status.Message
	}
	switch {
	case e.Reason != "":
		return core.Failed, e.Reason, e.Message
	case e.ExitCode != nil && *e.ExitCode == 0:
		return core.Succeeded, ReasonCompleted, e.Message
	case e.ExitCode != nil:
		return core.Failed, ReasonError, e.Message
	case e.Signal != "":
		return core.Failed, ReasonKilled, "killed by " + e.Signal
	}
	return core.Failed, ReasonError, "ended without an exit status"
}

// TaskFor builds the executor task for a workload's current attempt.
func TaskFor(w *core.Workload) executor.Task {
	return executor.Task{
		WorkloadID:  w.ID,
		Attempt:     w.Status.Attempts,
		Team:        w.Team,
		Priority:    w.Priority,
		Image:       w.Image,
		Command:     w.Command,
		Env:         w.Env,
		WorkingDir:  w.WorkingDir,
		Request:     w.Request,
		Assignments: w.Status.Placement,
		GracePeriod: w.Grace(),
		Ports:       w.Ports,
		Volumes:     w.Volumes,
		Network:     w.Network,
		Native:      w.Native,
	}
}

// reasonChunk bounds how many pending workloads' explanations one write
// carries: a plan that explains thousands (a flood of submits, a cluster
// that filled) writes them in several writes, so that a submit queued
// meanwhile waits for one of them (a few milliseconds), not for all. (On
// PostgreSQL: on SQLite the store keeps them in memory, but for changes
// of nominated node.)
const reasonChunk = 128

// changedDecisions keeps the decisions that would change a pending
// workload's reason or message.
func changedDecisions(snap *core.Snapshot, ds []core.Decision) []core.Decision {
	if len(ds) == 0 {
		return nil
	}
	cur := make(map[core.WorkloadID]*core.Workload, len(snap.Pending))
	for _, w := range snap.Pending {
		cur[w.ID] = w
	}
	var out []core.Decision
	for _, d := range ds {
		if w := cur[d.Workload]; w == nil || w.Status.Reason != d.Reason || w.Status.Message != d.Message || w.Status.Nominated != d.Nominated {
			out = append(out, d)
		}
	}
	return out
}
