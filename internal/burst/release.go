package burst

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Reasons of the node events (and of the states) of a release.
const (
	// ReasonIdleReleased is the reason of the Cordoned state of a burst
	// node released for idleness, and of the event that released it.
	ReasonIdleReleased = "IdleReleased"
	// ReasonTakenBack is the reason of the Ready state of a released node
	// taken back, and of its event.
	ReasonTakenBack = "TakenBack"
)

// ReleaseOptions configures a Releaser.
type ReleaseOptions struct {
	// After is how long no work may have run on a burst node before it is
	// released (burst.idleRelease); 0 releases none (released nodes are
	// still taken back).
	After time.Duration
	// Policy is the burst policy: released nodes are taken back for work
	// it lets burst now (Allows), as the Elastic reconciler asks for it.
	Policy sched.BurstPolicy
	// Every is Run's period; default 10 seconds.
	Every time.Duration
	// User names the platform in the audit log; default "gpufleet".
	User   string
	Now    func() time.Time
	Logger *slog.Logger
}

// Releaser gives back burst capacity idle for burst.idleRelease. A burst node (PoolKind burst)
// that is Ready with no qualification asked for, schedulable and ready in
// its cluster, with no workload running (or placed) on it, is released
// once it has been idle for After: its state becomes Cordoned, reason
// IdleReleased, so the scheduler places nothing more there and the
// cluster's autoscaler, which removes empty nodes, can take it away
// (gpufleet neither cordons nor deletes it in its cluster: with no
// gpufleet pod left it is the autoscaler's). Each release and take-back
// is a node event, an audit entry (user User, the cordon or uncordon it
// amounts to) and a log line; gpufleet get nodes shows the state and
// describe node the reason.
//
// The idle time is read from the store alone, not from memory, so that a
// restart or a change of leader keeps it where the store allows: a node
// is idle since the end of the last work on it, read from the allocation
// intervals of the last 2 × After (work that ran between two Steps
// counts; an open interval is work running); a node with no work in that
// time since its record's last write (updatedAt: when it came, or when
// what gpufleet reads of it last changed); and never since before its
// status took its state, when it has one (a registration, a
// qualification passed, an uncordon, a take-back). A node whose last work
// ended within After before a restart is thus released when it would
// have been; a node without work in that time waits After from its
// record's last write, when it came or last changed (a server's start
// writes again only the nodes of a Kubernetes cluster that changed, and
// those whose state takes no work). A node whose record is rewritten all the time (a local
// node's heartbeat) and that runs no work is never released, which is
// meant: releasing is for a cluster's autoscaled nodes.
//
// A released node is taken back (Ready again, reason TakenBack), at the
// first Step (every Every) that finds
//
//   - work waiting for capacity (reason Unschedulable) that the burst policy
//     lets burst now, and every replica fits on a pool's schedulable nodes
//     and released nodes still ready in their cluster (the Elastic
//     reconciler counts the same room and asks no new node for it,
//     poolRoom): in the cheapest such pool (Policy.Prices), the released
//     nodes it needs are taken back, none when its nodes in service hold
//     the work;
//   - work running on it (a placement that raced the release);
//   - that it is no longer a burst node (its pool's kind changed).
//
// A released node that its cluster removed stays in the store as it was;
// taken back, it is Ready but not schedulable (its cluster no longer
// lists it), so the Elastic reconciler then asks for new nodes, and it is
// not released again (only schedulable nodes are). An operator may
// uncordon a released node too (gpufleet uncordon node); only the
// reason IdleReleased marks a release, so a cordon of an operator's is
// never taken back here.
type Releaser struct {
	Store *store.Store
	opts  ReleaseOptions
	log   *slog.Logger
}

// NewReleaser returns a Releaser with the options' defaults filled in.
func NewReleaser(s *store.Store, opts ReleaseOptions) *Releaser {
	opts.Every = cmp.Or(opts.Every, 10*time.Second)
	opts.User = cmp.Or(opts.User, "gpufleet")
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Releaser{Store: s, opts: opts, log: opts.Logger}
}

// Run releases and takes back every Every until ctx ends.
func (r *Releaser) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Every)
	defer t.Stop()
	for {
		if err := r.Step(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("release idle burst nodes", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errUnchanged aborts a status update that found the node changed since
// the snapshot: nothing is written.
var errUnchanged = errors.New("the node changed")

// Step takes back what is needed, then releases what has been idle long
// enough. It goes on past a node it cannot change and returns the first
// error.
func (r *Releaser) Step(ctx context.Context) error {
	now := r.opts.Now().UTC()
	snap, err := r.Store.Snapshot(ctx)
	if err != nil {
		return err
	}
	statuses, err := r.Store.NodeStatuses(ctx)
	if err != nil {
		return fmt.Errorf("node statuses: %w", err)
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	busy := map[core.NodeName]bool{}
	for _, w := range snap.Running {
		for _, n := range core.Nodes(w.Status.Placement) {
			busy[n] = true
		}
	}

	// Take back.
	released := releasedNodes(snap, statuses)
	// node → why, in words every caller may read (node events and
	// status name no workload), and what only the audit and the log say.
	type reason struct{ why, detail string }
	back := map[core.NodeName]reason{}
	for _, n := range snap.Nodes {
		switch st, ok := statuses[n.Name]; {
		case !ok || st.State != core.NodeCordoned || st.Reason != ReasonIdleReleased:
		case !n.Burst():
			back[n.Name] = reason{why: "its pool is no longer a burst pool"}
		case busy[n.Name]:
			back[n.Name] = reason{why: "work was placed on it"}
		}
	}
	pools := burstPools(snap, r.opts.Policy.Prices)
	for _, w := range snap.Pending {
		if len(released) == 0 {
			break
		}
		if w.Status.Reason != sched.ReasonUnschedulable || !r.opts.Policy.Allows(className(w), w, now) {
			continue
		}
		for _, pool := range pools {
			ok, need := poolRoom(snap, pool, w.Request, released)
			if !ok {
				continue
			}
			// The cheapest pool with room; none to take back when its
			// nodes in service hold the work.
			for _, n := range need {
				back[n] = reason{why: "work that may burst waits for capacity, and this node can hold it", detail: "workload " + string(w.ID)}
				delete(released, n) // taken for this one
			}
			break
		}
	}
	for _, name := range slices.Sorted(maps.Keys(back)) {
		if err := r.takeBack(ctx, name, back[name].why, back[name].detail, now); err != nil {
			keep(err)
		}
	}

	// Release.
	if r.opts.After <= 0 {
		return first
	}
	cutoff := now.Add(-r.opts.After)
	var idle []*core.Node
	for _, n := range snap.Nodes {
		if !n.Burst() || !n.Schedulable || n.NotReady || !n.State.Takes() || busy[n.Name] {
			continue
		}
		if st, ok := statuses[n.Name]; ok && (st.Validate != nil || st.Since.After(cutoff)) {
			continue // a qualification is asked for (the lifecycle's), or a state too recent
		}
		idle = append(idle, n)
	}
	if len(idle) == 0 {
		return first
	}
	// The upper bound is past now: a placement stamped by a clock a
	// little ahead counts too.
	allocs, err := r.Store.AllocationsBetween(ctx, now.Add(-2*r.opts.After), now.Add(24*time.Hour))
	if err != nil {
		return cmp.Or(first, fmt.Errorf("allocations of the last %s: %w", 2*r.opts.After, err))
	}
	lastEnd := map[core.NodeName]time.Time{}
	for _, a := range allocs {
		end := now.Add(24 * time.Hour) // open: running
		if a.End != nil {
			end = *a.End
		}
		if end.After(lastEnd[a.Node]) {
			lastEnd[a.Node] = end
		}
	}
	for _, n := range idle {
		since, worked := lastEnd[n.Name]
		if !worked {
			since = n.UpdatedAt
		}
		if since.After(cutoff) {
			continue
		}
		if err := r.release(ctx, n.Name, now); err != nil {
			keep(err)
		}
	}
	return first
}

// release cordons an idle burst node with reason IdleReleased.
func (r *Releaser) release(ctx context.Context, name core.NodeName, now time.Time) error {
	msg := fmt.Sprintf("no gpufleet work has run here for %s (burst.idleRelease): released, it takes no new work, so that its cluster's autoscaler can remove it", r.opts.After)
	err := r.update(ctx, name, now, "released", "release idle burst node", "/cordon", msg, "", func(n *core.Node, st *core.NodeStatus) bool {
		return n.Burst() && n.Schedulable && !n.NotReady && st.State.Takes() && st.Validate == nil
	}, core.NodeCordoned, ReasonIdleReleased)
	if err != nil {
		return fmt.Errorf("release node %s: %w", name, err)
	}
	return nil
}

// takeBack returns a released node to service with reason TakenBack;
// detail, when set, is said in the audit entry and the log only.
func (r *Releaser) takeBack(ctx context.Context, name core.NodeName, why, detail string, now time.Time) error {
	msg := "taken back after its release: " + why
	err := r.update(ctx, name, now, "taken back", "take back released burst node", "/uncordon", msg, detail, func(_ *core.Node, st *core.NodeStatus) bool {
		return st.State == core.NodeCordoned && st.Reason == ReasonIdleReleased
	}, core.NodeReady, ReasonTakenBack)
	if err != nil {
		return fmt.Errorf("take back node %s: %w", name, err)
	}
	return nil
}

// update moves the node to state with reason and msg when may still holds
// of it in the store's transaction, recording a node event and an audit
// entry (action, and the API call it amounts to, verb) with it, and logs
// that the node was done so. The node's status and event are served to
// every caller: msg names no workload; detail (a workload's ID), when
// set, goes to the audit entry (admins only) and the log. A node that no longer qualifies, or is gone,
// is left as it is, quietly.
func (r *Releaser) update(ctx context.Context, name core.NodeName, now time.Time, done, action, verb, msg, detail string,
	may func(*core.Node, *core.NodeStatus) bool, to core.NodeState, reason string) error {
	audited := msg
	if detail != "" {
		audited += " (" + detail + ")"
	}
	entry := &core.AuditEntry{Time: now, User: r.opts.User, Action: action, Method: http.MethodPost,
		Path: "/api/v1/nodes/" + string(name) + verb, Object: string(name), Status: http.StatusOK, Message: audited}
	var from core.NodeState
	_, err := r.Store.UpdateNodeStatus(store.WithAudit(ctx, entry), name, now, func(n *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		if !may(n, st) {
			return nil, errUnchanged
		}
		from = cmp.Or(st.State, core.NodeReady)
		st.State, st.Reason, st.Message, st.Since = to, reason, msg, now
		return []core.NodeEvent{{Time: now, Type: core.EventNormal, Reason: reason, Message: msg, GPU: -1, From: from, To: to}}, nil
	})
	switch {
	case errors.Is(err, errUnchanged), errors.Is(err, core.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	r.log.Info("burst node "+done, "node", name, "from", from, "to", to, "reason", reason, "message", audited)
	return nil
}

// releasedNodes are the burst nodes released for idleness (Cordoned,
// reason IdleReleased) that their cluster still reports ready.
func releasedNodes(snap *core.Snapshot, statuses map[core.NodeName]core.NodeStatus) map[core.NodeName]bool {
	out := map[core.NodeName]bool{}
	for _, n := range snap.Nodes {
		st, ok := statuses[n.Name]
		if ok && st.State == core.NodeCordoned && st.Reason == ReasonIdleReleased && n.Burst() && !n.NotReady {
			out[n.Name] = true
		}
	}
	return out
}

// burstPools are the pools of the burst nodes, cheapest first (by
// prices; an unpriced pool after every priced one; then by name).
func burstPools(snap *core.Snapshot, prices map[string]int64) []string {
	var out []string
	for _, n := range snap.Nodes {
		if n.Burst() && !slices.Contains(out, n.Pool) {
			out = append(out, n.Pool)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		pa, okA := prices[a]
		pb, okB := prices[b]
		switch {
		case okA != okB && okA:
			return -1
		case okA != okB:
			return 1
		}
		return cmp.Or(cmp.Compare(pa, pb), cmp.Compare(a, b))
	})
	return out
}
