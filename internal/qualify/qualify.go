package qualify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Reasons of the stops the lifecycle asks for; the control loop requeues
// each stopped workload.
const (
	ReasonDrained    = core.StopDrained
	ReasonValidating = core.StopNodeValidating
	ReasonGPUFailed  = core.StopGPUFailed
	ReasonNodeLost   = core.StopNodeLost
)

// Options configure a Qualifier.
type Options struct {
	Store  *store.Store
	Runner Runner
	Now    func() time.Time
	Logger *slog.Logger
	// Local is the node of this machine: the only one whose commands
	// this server can run. Other nodes (Kubernetes) are qualified with
	// their evidence recorded as not available.
	Local core.NodeName
	// Level is the dcgmi diag level at registration (1 to 3; default 1).
	Level int
	// Every schedules a qualification of each node (0: off).
	Every time.Duration
	// RequireDCGM fails a node whose machine has no dcgmi.
	RequireDCGM bool
	// Drain stops the work on the devices under test (requeued) instead
	// of waiting for it to end.
	Drain bool
	// Timeout bounds each command (default: 1 minute, and 30 minutes for
	// dcgmi diag).
	Timeout time.Duration
	// Sandbox runs the CUDA probe exactly as a workload runs, on the local
	// node; nil where this server runs no workloads of its own (the probe
	// is then recorded as not available).
	Sandbox Sandbox
	// CUDAProbe is the CUDA probe's path; empty looks for CUDAProbeName
	// beside the server's binary, then for python3.
	CUDAProbe string
	// Tick is how often the qualifier looks at the nodes (default 1 s).
	Tick time.Duration
	// LostAfter is how long a node its cluster reports not ready stays so
	// before it is Lost and its work requeued (default 30 s); RequeueAfter
	// is how long its work then has to stop before it is requeued without
	// waiting for the executor, which cannot reach a lost node (default
	// 30 s).
	LostAfter, RequeueAfter time.Duration
}

// Qualifier runs the lifecycle.
type Qualifier struct {
	opts Options
	log  *slog.Logger
	// step serialises Step: one qualification of a node at a time, and
	// notReady is Step's alone.
	step sync.Mutex
	mu   sync.Mutex
	xids map[xidKey]int64
	// notReady remembers since when each node has been reported not
	// ready (this run of the server).
	notReady map[core.NodeName]time.Time
}

type xidKey struct {
	node core.NodeName
	gpu  int
	code int
}

// New returns a Qualifier.
func New(opts Options) *Qualifier {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Level == 0 {
		opts.Level = 1
	}
	if opts.Runner == nil {
		opts.Runner = Exec{}
	}
	if opts.Tick <= 0 {
		opts.Tick = time.Second
	}
	if opts.LostAfter <= 0 {
		opts.LostAfter = 30 * time.Second
	}
	if opts.RequeueAfter <= 0 {
		opts.RequeueAfter = 30 * time.Second
	}
	return &Qualifier{opts: opts, log: opts.Logger, xids: map[xidKey]int64{}, notReady: map[core.NodeName]time.Time{}}
}

// Run qualifies nodes until ctx ends.
func (q *Qualifier) Run(ctx context.Context) error {
	t := time.NewTicker(q.opts.Tick)
	defer t.Stop()
	for {
		q.Step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Step looks at every node once: a node Registering, or with a
// qualification asked, is qualified once its devices under test are free;
// a Draining node whose work has stopped is Cordoned; a qualification is
// asked for nodes due by the schedule.
func (q *Qualifier) Step(ctx context.Context) {
	q.step.Lock()
	defer q.step.Unlock()
	// The statuses first, then the snapshot: work placed on a node before
	// it began draining is then in the snapshot, and none is placed on a
	// draining node after. Read the other way round, a snapshot taken just
	// before a placement and statuses just after a drain made a node with
	// work running Cordoned at once.
	statuses, err := q.opts.Store.NodeStatuses(ctx)
	if err != nil {
		q.log.Error("qualify: node statuses", "err", err)
		return
	}
	snap, err := q.opts.Store.Snapshot(ctx)
	if err != nil {
		q.log.Error("qualify: snapshot", "err", err)
		return
	}
	now := q.opts.Now().UTC()
	scheduled := false
	busyOn := runningByNode(snap)
	for _, n := range snap.Nodes {
		st, ok := statuses[n.Name]
		busy := busyOn[n.Name]
		if q.lost(ctx, n, st, busy, now) || !ok {
			continue // lost, or a node without a lifecycle (not registered through one)
		}
		switch {
		case st.State == core.NodeDraining:
			q.drain(ctx, n, busy, now)
		case st.State == core.NodeRegistering || st.State == core.NodeValidating || st.Validate != nil:
			q.qualify(ctx, n, st, busy, now)
		case q.opts.Every > 0 && !scheduled && st.State == core.NodeReady && (st.LastQualified == nil || now.Sub(*st.LastQualified) >= q.opts.Every):
			// One scheduled qualification per step: the fleet is not
			// taken out of service at once.
			scheduled = true
			q.Validate(ctx, n.Name, q.opts.Level, nil, false, "", "scheduled qualification (qualification.every)")
		}
	}
}

// lost handles a node its cluster reports not ready: past LostAfter it is
// Lost, its work is stopped and, past RequeueAfter, requeued without the
// executor; once ready again it returns through qualification. It reports
// whether the node is lost (nothing else is done about it then).
func (q *Qualifier) lost(ctx context.Context, n *core.Node, st core.NodeStatus, busy []*core.Workload, now time.Time) bool {
	if !n.NotReady {
		delete(q.notReady, n.Name)
		if st.State == core.NodeLost && st.Validate == nil && st.Reason == "NotReady" {
			q.Validate(ctx, n.Name, q.opts.Level, nil, false, "", "its cluster reports it ready again")
		}
		return false
	}
	since, seen := q.notReady[n.Name]
	if !seen {
		q.notReady[n.Name] = now
		since = now
	}
	if st.State != core.NodeLost {
		if now.Sub(since) < q.opts.LostAfter {
			return false
		}
		q.update(ctx, n.Name, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
			return []core.NodeEvent{transition(st, core.NodeLost, "NotReady",
				fmt.Sprintf("its cluster has reported it not ready since %s: its work is requeued; it returns through qualification", since.Format(time.RFC3339)), "", now)}, nil
		})
		q.stop(ctx, busy, ReasonNodeLost, fmt.Sprintf("node %s is lost (not ready since %s); requeued", n.Name, since.Format(time.RFC3339)))
		return true
	}
	// Work the executor could not stop on a lost node is requeued.
	for _, w := range busy {
		if w.Status.StopRequested == ReasonNodeLost && now.Sub(st.Since) >= q.opts.RequeueAfter {
			if _, err := q.opts.Store.Requeue(ctx, w.ID, w.Status.Attempts, core.Lost, ReasonNodeLost, w.Status.Message, now); err != nil {
				q.log.Error("qualify: requeue from a lost node", "workload", w.ID, "err", err)
			}
		}
	}
	return true
}

// running lists the running workloads with a device on node.
func running(snap *core.Snapshot, node core.NodeName) []*core.Workload {
	var out []*core.Workload
	for _, w := range snap.Running {
		if slices.Contains(core.Nodes(w.Status.Placement), node) {
			out = append(out, w)
		}
	}
	return out
}

// runningByNode is running for every node at once: one pass over the
// running workloads, not one per node.
func runningByNode(snap *core.Snapshot) map[core.NodeName][]*core.Workload {
	out := map[core.NodeName][]*core.Workload{}
	for _, w := range snap.Running {
		for _, n := range core.Nodes(w.Status.Placement) {
			out[n] = append(out[n], w)
		}
	}
	return out
}

// holds reports whether w holds one of the devices gpus of node (any
// device when gpus is empty).
func holds(w *core.Workload, node core.NodeName, gpus []int) bool {
	for _, a := range w.Status.Placement {
		if a.Node == node && (len(gpus) == 0 || slices.Contains(gpus, a.GPUIndex)) {
			return true
		}
	}
	return false
}

func (q *Qualifier) stop(ctx context.Context, ws []*core.Workload, reason, msg string) {
	for _, w := range ws {
		if w.Status.StopRequested != "" {
			continue
		}
		if _, err := q.opts.Store.RequestStop(ctx, w.ID, reason, msg, q.opts.Now()); err != nil {
			q.log.Error("qualify: stop", "workload", w.ID, "err", err)
		}
	}
}

func (q *Qualifier) drain(ctx context.Context, n *core.Node, busy []*core.Workload, now time.Time) {
	if len(busy) > 0 {
		q.stop(ctx, busy, ReasonDrained, fmt.Sprintf("node %s is draining; requeued to run elsewhere", n.Name))
		return
	}
	q.update(ctx, n.Name, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		if st.State != core.NodeDraining {
			return nil, nil
		}
		return []core.NodeEvent{transition(st, core.NodeCordoned, "Drained", "its work has stopped; it takes no new work until uncordoned", "", now)}, nil
	})
}

// transition moves st to state and returns the event that records it.
func transition(st *core.NodeStatus, to core.NodeState, reason, msg, by string, now time.Time) core.NodeEvent {
	e := core.NodeEvent{Time: now, Type: core.EventNormal, Reason: reason, Message: msg, GPU: -1, From: st.State, To: to, By: by}
	if to == core.NodeFailed || to == core.NodeLost {
		e.Type = core.EventWarning
	}
	st.State, st.Reason, st.Message, st.Since = to, reason, msg, now
	return e
}

func (q *Qualifier) update(ctx context.Context, name core.NodeName, fn func(*core.Node, *core.NodeStatus) ([]core.NodeEvent, error)) (core.NodeStatus, error) {
	st, err := q.opts.Store.UpdateNodeStatus(ctx, name, q.opts.Now(), fn)
	if err != nil {
		q.log.Error("qualify: update node", "node", name, "err", err)
	}
	return st, err
}

// Validate asks for a qualification of a node at level (of the given
// devices only; all when gpus is empty), by a person (by) or the platform;
// drain requeues the work on the devices under test instead of waiting
// for it (as qualification.policy drain does for every qualification). The
// request says what it will wait for and for how long (Waits), as of now.
// A node already being qualified is core.ErrConflict.
func (q *Qualifier) Validate(ctx context.Context, name core.NodeName, level int, gpus []int, drain bool, by, reason string) (core.NodeStatus, error) {
	if level < 1 || level > 3 {
		return core.NodeStatus{}, fmt.Errorf("level %d: want 1, 2 or 3: %w", level, core.ErrInvalid)
	}
	snap, err := q.opts.Store.Snapshot(ctx)
	if err != nil {
		return core.NodeStatus{}, err
	}
	now := q.opts.Now().UTC()
	return q.opts.Store.UpdateNodeStatus(ctx, name, now, func(n *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		if st.Validate != nil || st.State == core.NodeValidating || st.State == core.NodeRegistering {
			return nil, fmt.Errorf("node %s is already being qualified: %w", name, core.ErrConflict)
		}
		for _, g := range gpus {
			if !slices.ContainsFunc(n.GPUs, func(x core.GPU) bool { return x.Index == g }) {
				return nil, fmt.Errorf("node %s has no GPU %d: %w", name, g, core.ErrInvalid)
			}
		}
		var onIt []*core.Workload
		for _, w := range running(snap, name) {
			if holds(w, name, gpus) {
				onIt = append(onIt, w)
			}
		}
		req := &core.ValidateRequest{Level: level, GPUs: gpus, By: by, Reason: reason, At: now, Drain: drain}
		req.Waits = Waits(onIt, len(gpus) == 0, drain || q.opts.Drain, name, now)
		st.Validate = req
		return []core.NodeEvent{{Time: now, Reason: "ValidationRequested", Message: fmt.Sprintf("qualification at level %d%s: %s; %s", level, gpuList(gpus), reason, req.Waits), GPU: -1, By: by}}, nil
	})
}

// maxNamed bounds the workloads Waits names.
const maxNamed = 5

// Waits says what a qualification of node will wait for, as of now: the
// work running on its devices under test (onIt), whether the whole node
// then takes no new work, and, when it waits (not drain), for how long:
// until the latest of their max runtimes, or without a bound when one of
// them has none. With drain the work is requeued at once.
func Waits(onIt []*core.Workload, whole, drain bool, node core.NodeName, now time.Time) string {
	meanwhile := ""
	if whole {
		meanwhile = "; meanwhile the node takes no new work"
	}
	if len(onIt) == 0 {
		return "no work runs on the devices under test: the qualification starts at once" + meanwhile
	}
	ids := make([]string, 0, maxNamed)
	for i, w := range onIt {
		if i == maxNamed {
			ids = append(ids, fmt.Sprintf("and %d more", len(onIt)-maxNamed))
			break
		}
		ids = append(ids, string(w.ID))
	}
	what := fmt.Sprintf("%d running %s (%s)", len(onIt), plural(len(onIt), "workload", "workloads"), strings.Join(ids, ", "))
	if drain {
		return "drains for it: " + what + " requeued now, then the qualification runs" + meanwhile
	}
	var latest time.Time
	unbounded := 0
	for _, w := range onIt {
		if w.MaxRuntime <= 0 || w.Status.StartedAt == nil {
			unbounded++
			continue
		}
		if end := w.Status.StartedAt.Add(w.MaxRuntime); end.After(latest) {
			latest = end
		}
	}
	how := fmt.Sprintf("until %s at the latest (their max runtimes, %s from now)", latest.UTC().Format(time.RFC3339), latest.Sub(now).Round(time.Second))
	if unbounded > 0 {
		how = fmt.Sprintf("with no bound: %d of them %s no max runtime", unbounded, plural(unbounded, "has", "have"))
	}
	return fmt.Sprintf("waits for %s to end, %s%s; node validate %s --drain requeues them instead, gpufleet uncordon %s gives the qualification up",
		what, how, meanwhile, node, node)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func gpuList(gpus []int) string {
	if len(gpus) == 0 {
		return ""
	}
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g)
	}
	return " of GPU " + strings.Join(s, ",")
}
