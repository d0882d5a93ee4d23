package sched

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// reservation is a node held against starvation for one workload (see
// "Backfill and starvation" in docs/SCHEDULING.md). It holds only what the workload
// will use there: other workloads may take the rest, and may take what it
// will use when they will be gone before it can start.
type reservation struct {
	w *core.Workload
	// kept is the node as it will be when w can start there, without w:
	// what runs there and will still run then (the workloads started on it
	// since w began to starve that do not end before w can start, and the
	// placements made on it in this cycle that do not either).
	kept *nodeState
	// wants is how many of w's replicas the node holds for it: as many as
	// the node could hold empty, at most w's count.
	wants int
	// start is when w can start there by the max runtimes of what runs
	// there (a stop under way ends within its grace period); zero when
	// that is not known because a workload it waits for has none.
	start time.Time
	// waits lists the workloads w waits for to end there.
	waits []core.WorkloadID
	// inQuota reports whether w ran within its team's guarantee when the
	// reservation was made (see binds).
	inQuota bool
}

// item is a placement on one node that a reservation weighs: a running
// workload or a placement of this cycle.
type item struct {
	req     core.Request
	as      []core.Assignment
	started time.Time
	end     time.Time // zero: no max runtime
}

// endOf is when a running workload will have stopped at the latest: the end
// of its grace period when a stop is under way, else its max runtime; zero
// when not known.
func (c *cycle) endOf(w *core.Workload) time.Time {
	switch {
	case w.Status.StopRequested != "":
		return c.now.Add(w.Grace())
	case w.MaxRuntime > 0 && w.Status.StartedAt != nil:
		return w.Status.StartedAt.Add(w.MaxRuntime)
	}
	return time.Time{}
}

// reserveOn makes ns w's starvation reservation, from what runs on it and
// what this cycle placed on it.
func (c *cycle) reserveOn(ns *nodeState, w *core.Workload) {
	var items []item
	var ids []core.WorkloadID
	for _, r := range ns.running {
		var started time.Time
		if r.w.Status.StartedAt != nil {
			started = *r.w.Status.StartedAt
		}
		items = append(items, item{req: r.w.Request, as: r.w.Status.Placement, started: started, end: c.endOf(r.w)})
		ids = append(ids, r.w.ID)
	}
	for _, p := range ns.placed {
		items = append(items, p)
		ids = append(ids, "")
	}
	empty := newNodeState(ns.node, nil)
	wants := min(w.Request.Count(), replicasFit(empty, w.Request, w.Request.Count()))
	// The start: the first moment (now, or the end of something running
	// there) when what still runs leaves room for what it wants.
	at := func(t time.Time) *nodeState {
		s := empty.clone()
		for _, it := range items {
			if it.end.IsZero() || it.end.After(t) {
				s.add(it.req, it.as, +1)
			}
		}
		return s
	}
	times := []time.Time{c.now}
	for _, it := range items {
		if !it.end.IsZero() && it.end.After(c.now) {
			times = append(times, it.end)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	var start time.Time
	for _, t := range times {
		if replicasFit(at(t), w.Request, wants) >= wants {
			start = t
			break
		}
	}
	// What will still run then: work started since w began to starve
	// (placed next to what the reservation holds) that does not end
	// before; the rest drains.
	since := w.CreatedAt.Add(c.opts.StarvationAfter)
	kept := empty.clone()
	var waits []core.WorkloadID
	for i, it := range items {
		if !it.started.Before(since) && (start.IsZero() || it.end.IsZero() || it.end.After(start)) {
			kept.add(it.req, it.as, +1)
		} else if ids[i] != "" && (it.end.IsZero() || it.end.After(c.now)) {
			waits = append(waits, ids[i])
		}
	}
	slices.Sort(waits)
	ts := c.team(w.Team)
	inQuota := false
	if cl, ok := c.classOf(w); ok && !cl.IdleOnly {
		inQuota, _, _, _ = c.withinGuarantee(w, ts, cl, c.askMilli(w))
	}
	ns.resv = &reservation{w: w, kept: kept, wants: wants, start: start, waits: waits, inQuota: inQuota}
	c.starving.of, c.starving.at = w.ID, ns
}

// replicasFit counts how many replicas of req fit on ns, up to limit.
func replicasFit(ns *nodeState, req core.Request, limit int) int {
	s := ns.clone()
	n := 0
	for n < limit {
		ch, why := onNode(s, req)
		if why != "" {
			break
		}
		as := assignments(ch, req)
		for i := range as {
			as[i].Replica = n
		}
		s.add(req, as, +1)
		n++
	}
	return n
}

// binds reports whether ns's reservation holds against w: a reservation
// never holds against its own workload, and one for a workload that would
// borrow on ns (now: usage grows in a cycle) never holds against a
// workload within its team's guarantee.
func (c *cycle) binds(ns *nodeState, w *core.Workload, inQuota bool) bool {
	r := ns.resv
	return r != nil && r.w.ID != w.ID && (!inQuota || c.guaranteedOn(ns, r.w))
}

// guaranteedOn is guaranteed for w placed on ns: a request by memory is
// charged the share of the device it lands on, so it is judged with the
// least it would take on ns (reclaimOn). A memory request within its
// guarantee at its share of an H100 borrows when it takes an A10 whole.
func (c *cycle) guaranteedOn(ns *nodeState, w *core.Workload) bool {
	if !c.guaranteed(w) {
		return false
	}
	cl, _ := c.classOf(w)
	_, inOn, _, ok := c.reclaimOn(ns, w, cl, c.team(w.Team), c.askMilli(w), true)
	return ok && inOn
}

// backfill decides whether w may take devices as on a reserved node: when
// what the reservation holds still fits next to it (keep: it stays in the
// reservation's picture), or when w will be gone, by its max runtime,
// before the reserved workload can start.
func (c *cycle) backfill(ns *nodeState, w *core.Workload, req core.Request, as []core.Assignment) (ok, keep bool) {
	r := ns.resv
	k := r.kept.clone()
	k.add(req, as, +1)
	if replicasFit(k, r.w.Request, r.wants) >= r.wants {
		return true, true
	}
	if w.MaxRuntime > 0 && !r.start.IsZero() && !c.now.Add(w.MaxRuntime).After(r.start) {
		return true, false
	}
	return false, false
}

// backfillOn finds a place for req on a reserved node that backfill
// accepts: ch when it does, else, for a share of a device, the best other
// device that it accepts.
func (c *cycle) backfillOn(ns *nodeState, w *core.Workload, req core.Request, ch choice) (choice, bool, bool) {
	if ok, keep := c.backfill(ns, w, req, assignments(ch, req)); ok {
		return ch, keep, true
	}
	if req.WholeGPUs() > 0 || ch.gpu < 0 {
		return choice{}, false, false
	}
	best, bestKeep, found := choice{}, false, false
	for i := range ns.node.GPUs {
		g := &ns.node.GPUs[i]
		milli, mem, ok := req.ShareOn(*g)
		if i == ch.gpu || !ok || !allows(&req, g) || ns.used[i].MilliGPU+milli > 1000 || ns.used[i].MemoryMiB+mem > g.MemoryMiB {
			continue
		}
		alt := choice{ns: ns, gpu: i, score: c.scores.scorer.score(ns, req, i)}
		if ok, keep := c.backfill(ns, w, req, assignments(alt, req)); ok && (!found || alt.score < best.score) {
			best, bestKeep, found = alt, keep, true
		}
	}
	return best, bestKeep, found
}

// waitMessage says what a reserved workload waits for on its node.
func (r *reservation) waitMessage(ns *nodeState) string {
	s := fmt.Sprintf("; %s is reserved for it (waiting since %s)", ns.node.Name, r.w.CreatedAt.UTC().Format(time.RFC3339))
	if len(r.waits) == 0 {
		return s
	}
	ids := make([]string, 0, 3)
	for _, id := range r.waits[:min(3, len(r.waits))] {
		ids = append(ids, string(id))
	}
	more := ""
	if len(r.waits) > 3 {
		more = fmt.Sprintf(" and %d more", len(r.waits)-3)
	}
	s += fmt.Sprintf(": it waits there for %s%s to end", strings.Join(ids, ", "), more)
	if !r.start.IsZero() {
		s += fmt.Sprintf(", by %s at the latest (by their max runtimes)", r.start.UTC().Format(time.RFC3339))
	}
	return s
}
