package sim

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// Replay policies: gpufleet's own, and the reservation baseline, under which
// every fraction of a GPU is rounded up to a whole GPU when it is submitted
// (what a cluster without GPU sharing does).
const (
	ReplayGPUFleet    = sched.PackGPUFleet
	ReplayReservation = sched.PackReservation
)

// ReplayEpoch is the virtual time at which a replayed trace starts.
var ReplayEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultPriority is the priority class of replayed tasks that name none.
const DefaultPriority = "training"

// ReplayConfig is one replay of a trace.
type ReplayConfig struct {
	Nodes []core.Node
	// TraceTeams are the teams the trace describes, with their quotas.
	TraceTeams []trace.Team
	Tasks      []trace.Task
	// Policy is ReplayGPUFleet ("" too) or ReplayReservation.
	Policy string
	// Teams > 0 assigns every task to one of the teams team-1 ... team-N,
	// drawn with Seed, in place of the teams the trace names.
	Teams int
	// Guarantees are the guarantees of those teams, in percent of the GPU
	// capacity, one per team; nil gives every team an equal share.
	Guarantees []float64
	Seed       int64
	// Limit > 0 replays only the first Limit tasks (in submission order)
	// of those that can be replayed.
	Limit int
	// Samples is the number of points of the utilisation curve; 200 when 0.
	Samples int
	// Progress, when set, is called now and then, and once at the end.
	Progress func(ReplayProgress)
	// Prices, when any, price the replay (ReplayResult.Cost): versions of
	// the nodes' pools (a node that names none is in ReplayDefaultPool),
	// EffectiveFrom in virtual time (zero: since always), in Currency
	// (ReplayCurrency when empty). See replay_cost.go.
	Prices   []api.Price
	Currency string
}

// ReplayProgress says how far a replay has got.
type ReplayProgress struct {
	Policy string
	// Virtual is the virtual time reached, from the start of the trace.
	Virtual             time.Duration
	Submitted, Finished int // tasks submitted so far, and of those finished
	Total               int
}

// ReplayResult is what one replay measured. Times are in seconds from the
// start of the trace; shares are fractions of the GPU capacity.
type ReplayResult struct {
	Policy       string `json:"policy"`
	Seed         int64  `json:"seed"`
	Nodes        int    `json:"nodes"`
	CapacityGPUs int    `json:"capacityGPUs"`
	// Submitted tasks; Completed ran to their end; NeverStarted were still
	// waiting when nothing else could happen (no node can ever take them).
	Submitted    int `json:"submitted"`
	Completed    int `json:"completed"`
	NeverStarted int `json:"neverStarted"`
	// Tasks of the trace that were not replayed: CPU-only ones (gpufleet
	// places only GPU work), those that never ran in the source (no run
	// time), and those past Limit.
	SkippedCPUOnly   int `json:"skippedCPUOnly"`
	SkippedNoRuntime int `json:"skippedNoRuntime"`
	SkippedLimit     int `json:"skippedLimit"`
	// Queueing is the delay from submission to the first start, over the
	// tasks that started.
	Queueing Delays `json:"queueingSeconds"`
	// MeanAllocated is the mean share of the capacity held by running
	// tasks from the first submission to the last completion; under the
	// reservation baseline a fraction holds a whole GPU. MeanRequested is
	// the share the running tasks asked for (the same under gpufleet).
	MeanAllocated float64 `json:"meanAllocated"`
	MeanRequested float64 `json:"meanRequested"`
	// Utilisation is the allocated and requested share, each averaged
	// over one of Samples equal intervals of that span.
	Utilisation []UtilisationSample `json:"utilisation"`
	// FirstSubmission and LastCompletion bound the span; Makespan is their
	// difference.
	FirstSubmission float64 `json:"firstSubmissionSeconds"`
	LastCompletion  float64 `json:"lastCompletionSeconds"`
	Makespan        float64 `json:"makespanSeconds"`
	Preemptions     int     `json:"preemptions"`
	// Teams are the per-team figures, by name.
	Teams []ReplayTeam `json:"teams"`
	// Cycles is the number of scheduling cycles run; Seconds the wall time.
	Cycles  int     `json:"cycles"`
	Seconds float64 `json:"seconds"`
	// Cost is what the replay's work cost under ReplayConfig.Prices; nil
	// without prices.
	Cost *ReplayCost `json:"cost,omitempty"`
}

// Delays are quantiles of delays, in seconds.
type Delays struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// UtilisationSample is the mean share of the capacity held (Allocated) and
// asked for (Requested) from Start for one sample interval.
type UtilisationSample struct {
	Start     float64 `json:"start"`
	Allocated float64 `json:"allocated"`
	Requested float64 `json:"requested"`
}

// ReplayTeam is one team's part of a replay.
type ReplayTeam struct {
	Name string `json:"name"`
	// Guaranteed is the team's guarantee as a share of the capacity.
	Guaranteed float64 `json:"guaranteed"`
	Submitted  int     `json:"submitted"`
	Completed  int     `json:"completed"`
	// GPUHours held by the team's tasks (lost work of preempted attempts
	// included); MeanShare is the mean share of the capacity it held over
	// the replay's span.
	GPUHours    float64 `json:"gpuHours"`
	MeanShare   float64 `json:"meanShare"`
	Preemptions int     `json:"preemptions"`
	Queueing    Delays  `json:"queueingSeconds"`
}

// Replay replays a trace in virtual time through the store, the control loop
// and the scheduler that the server runs, with the fake executor standing in
// for the machines. Each task is submitted at its submission time; once
// started it runs for its runtime and exits with code 0. A preempted task
// starts again from the beginning. The clock jumps from one event to the
// next (a submission, an end, or a deadline the scheduler looks at), and the
// loop is stepped until nothing more happens at that instant: nothing
// sleeps.
func Replay(ctx context.Context, cfg ReplayConfig) (ReplayResult, error) {
	wall := time.Now()
	policy := cmp.Or(cfg.Policy, ReplayGPUFleet)
	if err := CheckReplayPolicy(policy); err != nil {
		return ReplayResult{}, fmt.Errorf("replay policy %w", err)
	}
	if err := CheckReplayPrices(cfg.Prices); err != nil {
		return ReplayResult{}, fmt.Errorf("replay: %w", err)
	}
	res := ReplayResult{Policy: policy, Seed: cfg.Seed, Nodes: len(cfg.Nodes), Teams: []ReplayTeam{}, Utilisation: []UtilisationSample{}}
	for _, n := range cfg.Nodes {
		res.CapacityGPUs += len(n.GPUs)
	}
	capacity := int64(res.CapacityGPUs) * 1000
	if capacity == 0 {
		return ReplayResult{}, errors.New("replay: the nodes have no GPUs")
	}

	// 1. The tasks to replay, in submission order.
	tasks := make([]trace.Task, 0, len(cfg.Tasks))
	for _, t := range cfg.Tasks {
		switch {
		case !t.GPUTask():
			res.SkippedCPUOnly++
		case t.Runtime < 0:
			res.SkippedNoRuntime++
		default:
			tasks = append(tasks, t)
		}
	}
	slices.SortStableFunc(tasks, func(a, b trace.Task) int { return cmp.Compare(a.Submitted, b.Submitted) })
	if cfg.Limit > 0 && len(tasks) > cfg.Limit {
		res.SkippedLimit = len(tasks) - cfg.Limit
		tasks = tasks[:cfg.Limit]
	}
	classes := core.DefaultPriorityClasses()
	for _, t := range tasks {
		if _, ok := core.Class(classes, cmp.Or(t.Priority, DefaultPriority)); !ok {
			return ReplayResult{}, fmt.Errorf("replay: task %s: unknown priority class %q", t.Name, t.Priority)
		}
	}

	// 2. Teams.
	teams, teamOf, err := replayTeams(cfg, capacity, tasks)
	if err != nil {
		return ReplayResult{}, err
	}

	// 3. A throwaway store with the nodes and teams.
	dir, err := os.MkdirTemp("", "gpufleet-replay-")
	if err != nil {
		return ReplayResult{}, err
	}
	defer os.RemoveAll(dir)
	ids := 0
	st, err := store.OpenWith(ctx, filepath.Join(dir, "replay.db"), store.Options{NoSync: true, Cache: true, NewID: func() core.WorkloadID {
		ids++
		return core.WorkloadID(fmt.Sprintf("wl-%07d", ids))
	}})
	if err != nil {
		return ReplayResult{}, err
	}
	defer st.Close()
	for _, n := range cfg.Nodes {
		n.UpdatedAt = ReplayEpoch
		if err := st.PutNode(ctx, n); err != nil {
			return ReplayResult{}, fmt.Errorf("replay: node %s: %w", n.Name, err)
		}
	}
	for _, t := range teams {
		if err := st.CreateTeam(ctx, t); err != nil {
			return ReplayResult{}, fmt.Errorf("replay: team %s: %w", t.Name, err)
		}
	}

	// 4. Replay.
	r := &replayer{
		cfg: cfg, policy: policy, tasks: tasks, teamOf: teamOf, store: st, res: &res,
		clock:   ReplayEpoch,
		byID:    map[core.WorkloadID]int{},
		pending: map[core.WorkloadID]bool{},
		running: map[core.WorkloadID]int{},
		teams:   len(teams),
	}
	r.fake = fake.New(fake.Options{Now: r.now})
	opts := sched.DefaultOptions()
	opts.Packing = policy
	r.sched = opts
	r.loop = control.New(control.Options{Store: st, Executor: &replayExecutor{Executor: r.fake, r: r}, Now: r.now, Policy: &opts, Classes: classes})
	if err := r.run(ctx); err != nil {
		return ReplayResult{}, err
	}

	// 5. Measure, from what the store recorded.
	if err := r.measure(ctx, teams, capacity); err != nil {
		return ReplayResult{}, err
	}
	// 6. Price it (replay_cost.go).
	if len(cfg.Prices) > 0 {
		if res.Cost, err = r.cost(ctx); err != nil {
			return ReplayResult{}, err
		}
	}
	res.Seconds = time.Since(wall).Seconds()
	return res, nil
}

// CheckGuarantees checks the guarantees of ReplayConfig.Teams teams: one
// per team, none negative, adding up to at most 100 (percent of the
// capacity); nil is an equal share each, and guarantees need teams > 0.
func CheckGuarantees(teams int, guarantees []float64) error {
	if guarantees == nil {
		return nil
	}
	if teams <= 0 {
		return errors.New("guarantees need a number of teams")
	}
	if len(guarantees) != teams {
		return fmt.Errorf("%d values for %d teams", len(guarantees), teams)
	}
	sum := 0.0
	for _, g := range guarantees {
		if g < 0 || math.IsNaN(g) {
			return fmt.Errorf("a guarantee of %g%% is negative", g)
		}
		sum += g
	}
	if sum > 100+1e-9 {
		return fmt.Errorf("the guarantees add up to %g%%, more than 100%%", sum)
	}
	return nil
}

// replayTeams makes the teams of a replay and names the team of each task.
func replayTeams(cfg ReplayConfig, capacity int64, tasks []trace.Task) ([]core.Team, []core.TeamName, error) {
	teamOf := make([]core.TeamName, len(tasks))
	if err := CheckGuarantees(cfg.Teams, cfg.Guarantees); err != nil {
		return nil, nil, fmt.Errorf("replay: %w", err)
	}
	if cfg.Teams > 0 {
		teams := make([]core.Team, cfg.Teams)
		for i := range teams {
			teams[i] = core.NewTeam(core.TeamName(fmt.Sprintf("team-%d", i+1)), ReplayEpoch)
			if cfg.Guarantees != nil {
				teams[i].Guaranteed = int64(float64(capacity) * cfg.Guarantees[i] / 100)
			} else {
				teams[i].Guaranteed = capacity / int64(cfg.Teams)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x7ea5))
		for i := range tasks {
			teamOf[i] = teams[rng.IntN(cfg.Teams)].Name
		}
		return teams, teamOf, nil
	}
	// The trace's teams keep their quotas; the teams that tasks name
	// without a quota (tasks without a team are in "default") share what
	// those leave of the capacity equally.
	byName := map[core.TeamName]int{}
	var teams []core.Team
	var guaranteed int64
	for _, t := range cfg.TraceTeams {
		team := core.NewTeam(core.TeamName(t.Name), ReplayEpoch)
		team.Guaranteed, team.Limit, team.Weight = t.Guaranteed, t.Limit, max(1, t.Weight)
		byName[team.Name] = len(teams)
		teams = append(teams, team)
		guaranteed += t.Guaranteed
	}
	var unquoted []int
	for i, t := range tasks {
		name := core.TeamName(cmp.Or(t.Team, "default"))
		teamOf[i] = name
		if _, ok := byName[name]; !ok {
			byName[name] = len(teams)
			unquoted = append(unquoted, len(teams))
			teams = append(teams, core.NewTeam(name, ReplayEpoch))
		}
	}
	if len(unquoted) > 0 {
		share := max(0, capacity-guaranteed) / int64(len(unquoted))
		for _, i := range unquoted {
			teams[i].Guaranteed = share
		}
	}
	slices.SortFunc(teams, func(a, b core.Team) int { return cmp.Compare(a.Name, b.Name) })
	return teams, teamOf, nil
}

// replayer is the state of one replay.
type replayer struct {
	cfg    ReplayConfig
	policy string
	sched  sched.Options
	tasks  []trace.Task
	teamOf []core.TeamName
	teams  int
	store  *store.Store
	fake   *fake.Executor
	loop   *control.Loop
	res    *ReplayResult

	clock    time.Time
	ends     eventHeap // attempts' ends
	deadline eventHeap // times the scheduler looks at
	byID     map[core.WorkloadID]int
	pending  map[core.WorkloadID]bool // submitted or requeued, not running
	running  map[core.WorkloadID]int  // running attempt
	finished int
	lastEnd  time.Time
}

func (r *replayer) now() time.Time { return r.clock }

// event is something due at a time: an attempt's end, or a deadline of the
// scheduler about a workload.
type event struct {
	at      time.Time
	seq     int // tie-break: order of scheduling
	id      core.WorkloadID
	attempt int
	kind    eventKind
}

type eventKind int

const (
	endOfAttempt eventKind = iota
	starvationDeadline
	minRuntimeDeadline
)

type eventHeap struct {
	es  []event
	seq int
}

func (h *eventHeap) Len() int { return len(h.es) }
func (h *eventHeap) Less(i, j int) bool {
	return cmp.Or(h.es[i].at.Compare(h.es[j].at), cmp.Compare(h.es[i].seq, h.es[j].seq)) < 0
}
func (h *eventHeap) Swap(i, j int) { h.es[i], h.es[j] = h.es[j], h.es[i] }
func (h *eventHeap) Push(x any)    { h.es = append(h.es, x.(event)) }
func (h *eventHeap) Pop() any {
	e := h.es[len(h.es)-1]
	h.es = h.es[:len(h.es)-1]
	return e
}

func (h *eventHeap) add(e event) {
	e.seq = h.seq
	h.seq++
	heap.Push(h, e)
}

// due pops the next event if it is due at or before t.
func (h *eventHeap) due(t time.Time) (event, bool) {
	if len(h.es) == 0 || h.es[0].at.After(t) {
		return event{}, false
	}
	return heap.Pop(h).(event), true
}

// replayExecutor is the fake executor, watched: each start schedules the
// attempt's end, and each stop (a preemption: the replay cancels nothing)
// puts the workload back among the pending ones.
type replayExecutor struct {
	*fake.Executor
	r *replayer
}

func (x *replayExecutor) Start(ctx context.Context, t executor.Task) error {
	if err := x.Executor.Start(ctx, t); err != nil {
		return err
	}
	r := x.r
	delete(r.pending, t.WorkloadID)
	r.running[t.WorkloadID] = t.Attempt
	task := r.tasks[r.byID[t.WorkloadID]]
	r.ends.add(event{at: r.clock.Add(task.Runtime), id: t.WorkloadID, attempt: t.Attempt, kind: endOfAttempt})
	if r.sched.FairShareReclaim && r.teams > 1 && r.sched.MinRuntime > 0 {
		r.deadline.add(event{at: r.clock.Add(r.sched.MinRuntime), id: t.WorkloadID, attempt: t.Attempt, kind: minRuntimeDeadline})
	}
	return nil
}

func (x *replayExecutor) Stop(ctx context.Context, id core.WorkloadID, attempt int, grace time.Duration) error {
	if err := x.Executor.Stop(ctx, id, attempt, grace); err != nil {
		return err
	}
	if x.r.running[id] == attempt {
		delete(x.r.running, id)
		x.r.pending[id] = true
	}
	return nil
}

// finishBatch bounds the ends delivered between two steps, below the fake
// executor's exit buffer, so that every exit is on its channel when the
// next step drains it.
const finishBatch = 512

// run drives the loop from event to event until nothing is left to happen.
func (r *replayer) run(ctx context.Context) error {
	next := 0 // the next task to submit
	total := len(r.tasks)
	progressEvery := max(1, total/20)
	maxCycles := 50*total + 10000
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// 1. Jump to the next event.
		at, ok := time.Time{}, false
		consider := func(t time.Time) {
			if !ok || t.Before(at) {
				at, ok = t, true
			}
		}
		if next < total {
			consider(ReplayEpoch.Add(r.tasks[next].Submitted))
		}
		if len(r.ends.es) > 0 {
			consider(r.ends.es[0].at)
		}
		if len(r.deadline.es) > 0 {
			consider(r.deadline.es[0].at)
		}
		if !ok {
			break
		}
		r.clock = at
		step := false

		// 2. Submit what is due.
		for next < total && !ReplayEpoch.Add(r.tasks[next].Submitted).After(at) {
			if err := r.submit(ctx, next); err != nil {
				return err
			}
			next++
			step = true
			if next%progressEvery == 0 {
				r.progress(next)
			}
		}
		// 3. End the attempts that are due, a batch at a time.
		n := 0
		for e, ok := r.ends.due(at); ok; e, ok = r.ends.due(at) {
			if !r.fake.Finish(e.id, e.attempt, 0) {
				continue // preempted before its end
			}
			delete(r.running, e.id)
			r.finished++
			r.lastEnd = at
			step = true
			if n++; n%finishBatch == 0 {
				r.settle(ctx)
			}
		}
		// 4. Deadlines matter only while the workload is in the state
		// they are about.
		for e, ok := r.deadline.due(at); ok; e, ok = r.deadline.due(at) {
			switch e.kind {
			case starvationDeadline:
				step = step || r.pending[e.id]
			case minRuntimeDeadline:
				step = step || (r.running[e.id] == e.attempt && len(r.pending) > 0)
			}
		}
		if step {
			r.settle(ctx)
		}
		if r.res.Cycles > maxCycles {
			return fmt.Errorf("replay: %d scheduling cycles for %d tasks; the replay does not settle", r.res.Cycles, total)
		}
	}
	r.progress(next)
	return nil
}

// submit stores task i as a pending workload.
func (r *replayer) submit(ctx context.Context, i int) error {
	t := r.tasks[i]
	req := t.Request
	if r.policy == ReplayReservation && req.Fractional() {
		req.MilliGPU, req.GPUMemoryMiB = 1000, 0
	}
	name := cmp.Or(t.Name, fmt.Sprintf("task-%d", i))
	w := &core.Workload{Spec: core.Spec{Name: name, Team: r.teamOf[i], Owner: "replay", Kind: core.KindJob,
		Priority: cmp.Or(t.Priority, DefaultPriority), Request: req, Command: []string{"replay", name}}}
	out, _, err := r.store.CreateWorkload(ctx, w, nil, r.clock)
	if err != nil {
		return fmt.Errorf("replay: submit task %s: %w", name, err)
	}
	r.byID[out.ID] = i
	r.pending[out.ID] = true
	r.res.Submitted++
	if r.sched.StarvationAfter > 0 {
		r.deadline.add(event{at: r.clock.Add(r.sched.StarvationAfter), id: out.ID, kind: starvationDeadline})
	}
	return nil
}

// settle steps the loop until nothing more happens at this instant: a plan
// that preempts needs a step to send the stops, and the stops' exits one
// more to be recorded.
func (r *replayer) settle(ctx context.Context) {
	for {
		_, plan := r.loop.Step(ctx)
		r.res.Cycles++
		if len(plan.Preemptions) == 0 && len(r.fake.Exits()) == 0 {
			return
		}
	}
}

func (r *replayer) progress(submitted int) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(ReplayProgress{Policy: r.policy, Virtual: r.clock.Sub(ReplayEpoch), Submitted: submitted, Finished: r.finished, Total: len(r.tasks)})
	}
}

// measure fills in the result from the workloads and allocation intervals
// the store recorded.
func (r *replayer) measure(ctx context.Context, teams []core.Team, capacity int64) error {
	res := r.res
	ws, err := r.store.Workloads(ctx, store.WorkloadFilter{})
	if err != nil {
		return err
	}
	allocs, err := r.store.Allocations(ctx, "")
	if err != nil {
		return err
	}
	nodes := map[core.NodeName]*core.Node{}
	for i := range r.cfg.Nodes {
		nodes[r.cfg.Nodes[i].Name] = &r.cfg.Nodes[i]
	}
	firstStart := map[core.WorkloadID]time.Time{}
	for _, a := range allocs {
		if s, ok := firstStart[a.WorkloadID]; !ok || a.Start.Before(s) {
			firstStart[a.WorkloadID] = a.Start
		}
	}

	type teamAcc struct {
		delays []float64
		milliS float64 // milli-GPU seconds held
	}
	acc := map[core.TeamName]*teamAcc{}
	rt := map[core.TeamName]*ReplayTeam{}
	for _, t := range teams {
		acc[t.Name] = &teamAcc{}
		res.Teams = append(res.Teams, ReplayTeam{Name: string(t.Name), Guaranteed: float64(t.Guaranteed) / float64(capacity)})
	}
	for i := range res.Teams {
		rt[core.TeamName(res.Teams[i].Name)] = &res.Teams[i]
	}
	var delays []float64
	first := time.Time{}
	for _, w := range ws {
		if first.IsZero() || w.CreatedAt.Before(first) {
			first = w.CreatedAt
		}
		tm := rt[w.Team]
		tm.Submitted++
		tm.Preemptions += w.Status.Preemptions
		res.Preemptions += w.Status.Preemptions
		if w.Status.Phase == core.Succeeded {
			res.Completed++
			tm.Completed++
		}
		s, ok := firstStart[w.ID]
		if !ok {
			res.NeverStarted++
			continue
		}
		d := s.Sub(w.CreatedAt).Seconds()
		delays = append(delays, d)
		acc[w.Team].delays = append(acc[w.Team].delays, d)
	}
	res.Queueing = delaysOf(delays)
	for name, a := range acc {
		rt[name].Queueing = delaysOf(a.delays)
	}
	if len(ws) == 0 {
		return nil
	}
	end := r.lastEnd
	if end.Before(first) {
		end = first
	}
	res.FirstSubmission = first.Sub(ReplayEpoch).Seconds()
	res.LastCompletion = end.Sub(ReplayEpoch).Seconds()
	res.Makespan = end.Sub(first).Seconds()

	// The utilisation curve: each allocation interval adds what it holds
	// (and what its task asked for) to the samples it overlaps.
	samples := cmp.Or(r.cfg.Samples, 200)
	span := end.Sub(first).Seconds()
	width := span / float64(samples)
	held := make([]float64, samples)  // milli-GPU seconds
	asked := make([]float64, samples) // milli-GPU seconds
	var heldAll, askedAll float64
	for _, a := range allocs {
		stop := end
		if a.End != nil {
			stop = *a.End
		}
		s, e := a.Start.Sub(first).Seconds(), stop.Sub(first).Seconds()
		if e <= s {
			continue
		}
		want := float64(r.asked(a, nodes))
		heldAll += float64(a.MilliGPU) * (e - s)
		askedAll += want * (e - s)
		acc[a.Team].milliS += float64(a.MilliGPU) * (e - s)
		if width <= 0 {
			continue
		}
		for b := int(s / width); b < samples && float64(b)*width < e; b++ {
			lo, hi := max(s, float64(b)*width), min(e, float64(b+1)*width)
			if hi > lo {
				held[b] += float64(a.MilliGPU) * (hi - lo)
				asked[b] += want * (hi - lo)
			}
		}
	}
	capF := float64(capacity)
	if span > 0 {
		res.MeanAllocated = heldAll / (capF * span)
		res.MeanRequested = askedAll / (capF * span)
		for b := range samples {
			res.Utilisation = append(res.Utilisation, UtilisationSample{
				Start:     res.FirstSubmission + float64(b)*width,
				Allocated: held[b] / (capF * width),
				Requested: asked[b] / (capF * width),
			})
		}
	}
	for name, a := range acc {
		rt[name].GPUHours = a.milliS / 1000 / 3600
		if span > 0 {
			rt[name].MeanShare = a.milliS / (capF * span)
		}
	}
	return nil
}

// asked is the share of a device that an allocation's task asked for: what
// it holds, except under the reservation baseline, where a fraction holds a
// whole device.
func (r *replayer) asked(a core.Allocation, nodes map[core.NodeName]*core.Node) int64 {
	req := r.tasks[r.byID[a.WorkloadID]].Request
	switch {
	case !req.Fractional() || r.policy != ReplayReservation:
		return a.MilliGPU
	case req.MilliGPU > 0:
		return req.MilliGPU
	}
	if n := nodes[a.Node]; n != nil && a.GPUIndex < len(n.GPUs) && n.GPUs[a.GPUIndex].MemoryMiB > 0 {
		return min(1000, req.GPUMemoryMiB*1000/n.GPUs[a.GPUIndex].MemoryMiB)
	}
	return a.MilliGPU
}

// delaysOf summarises delays (nearest-rank quantiles).
func delaysOf(vs []float64) Delays {
	if len(vs) == 0 {
		return Delays{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Delays{P50: q(0.50), P95: q(0.95), P99: q(0.99), Mean: sum / float64(len(s)), Max: s[len(s)-1]}
}
