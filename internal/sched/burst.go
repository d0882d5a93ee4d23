package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// BurstPolicy says when a node of a burst pool (core.PoolBurst, paid
// capacity for peaks) may take a workload: only as a last resort, for a
// class that may burst, once the workload has waited long enough for the
// other pools. Running work on a burst node is preempted like anywhere
// else.
type BurstPolicy struct {
	// After is how long a workload must have waited for capacity in the
	// other pools before a burst node takes it, counted from the later of
	// its submission and its last preemption (Status.PreemptedAt), so that
	// a preemption never moves work into a paid pool by itself. 0: at once.
	After time.Duration
	// Classes names the priority classes that may burst; none (nil or
	// empty) means no class may.
	Classes []string
	// Prices are the pools' relative GPU-hour prices, in any one unit:
	// among the burst nodes a workload may use, those of the cheapest pool
	// come first. A pool without a price comes after every priced one;
	// pools priced alike fall to the packing policy, then the node name.
	Prices map[string]int64
}

// DefaultBurstPolicy: production and training may burst after waiting 2
// minutes; no prices (every burst pool alike).
func DefaultBurstPolicy() BurstPolicy {
	return BurstPolicy{After: 2 * time.Minute, Classes: []string{"production", "training"}}
}

// Allows reports whether the policy lets a workload of the named
// priority class onto a burst node at now: the class is listed and the
// workload has waited After since the later of its submission and its last
// preemption. It does not say whether anything else has room (the last
// resort rule is the cycle's): the control loop may use it to decide
// whether to ask an elastic burst pool for capacity.
func (p BurstPolicy) Allows(class string, w *core.Workload, now time.Time) bool {
	return slices.Contains(p.Classes, class) && p.waited(w, now) >= p.After
}

// waited is how long w has waited for capacity at now (0 when it has no
// submission time).
func (p BurstPolicy) waited(w *core.Workload, now time.Time) time.Duration {
	since := waitedSince(w)
	if since.IsZero() {
		return 0
	}
	return max(0, now.Sub(since))
}

// burstState is what a cycle knows about bursting: whether any node is in
// a burst pool (if none, nothing here costs anything), and whether the
// replica being placed now is placed on burst nodes only (the second
// pass, see place).
type burstState struct {
	any  bool
	pass bool
}

// waitedSince is when w started waiting for capacity: its submission, or
// its last preemption if later.
func waitedSince(w *core.Workload) time.Time {
	t := w.CreatedAt
	if at := w.Status.PreemptedAt; at != nil && at.After(t) {
		t = *at
	}
	return t
}

// mayBurst reports whether w may go to a burst node now, and if not, why
// ("class batch may not burst", "may burst ... after 2m (waited 40s)"),
// where pools names the burst pools it could use.
func (c *cycle) mayBurst(w *core.Workload) bool {
	ok, _ := c.burstVerdict(w, "")
	return ok
}

func (c *cycle) burstVerdict(w *core.Workload, pools string) (bool, string) {
	class, _ := c.classOf(w)
	name := class.Name
	if name == "" {
		name = w.Priority
	}
	if !slices.Contains(c.opts.Burst.Classes, name) {
		return false, fmt.Sprintf("class %s may not burst", name)
	}
	if waited := c.opts.Burst.waited(w, c.now); waited < c.opts.Burst.After {
		// Rounded down to 10 s, so that the message (which the control
		// loop records when it changes) is not rewritten every cycle.
		return false, fmt.Sprintf("waits for capacity; may burst to %s after %s (waited %s)", pools, short(c.opts.Burst.After), short(waited.Truncate(10*time.Second)))
	}
	return true, ""
}

// short renders a duration without trailing zero units: 2m, 1h30m, 40s.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// mayUse reports whether w may ever be placed on ns by residency and, for
// a burst node, by the burst policy now: a node it may not use is neither
// where it is placed, nor where it preempts, nor what it reserves.
func (c *cycle) mayUse(ns *nodeState, w *core.Workload) bool {
	return resides(ns.node, w.Request) && (!ns.node.Burst() || c.mayBurst(w))
}

// resides reports whether the node is in one of the request's regions
// (residency), or the request has none.
func resides(n *core.Node, req core.Request) bool {
	return len(req.Regions) == 0 || slices.Contains(req.Regions, n.Region)
}

// price is the burst price of a node's pool, and whether it has one.
func (c *cycle) price(ns *nodeState) (int64, bool) {
	p, ok := c.opts.Burst.Prices[ns.node.Pool]
	return p, ok
}

// cheaper orders burst choices: a priced pool before an unpriced one, the
// lower price first; 0 when alike.
func (c *cycle) cheaper(a, b *nodeState) int {
	pa, oka := c.price(a)
	pb, okb := c.price(b)
	switch {
	case oka != okb && oka:
		return -1
	case oka != okb:
		return 1
	}
	return cmp.Compare(pa, pb)
}

// poolOf names a node's pool for messages (the node itself when it has
// none).
func poolOf(n *core.Node) string {
	if n.Pool != "" {
		return n.Pool
	}
	return string(n.Name)
}

// burstNote adds to the message of a workload that found no room outside
// the burst pools what bursting would do for it: nothing when no burst
// node it could use (residency, selector, models) exists; otherwise why it
// may not burst yet, or (tried, the burst pass's message) that the burst
// pools have no room either.
func (c *cycle) burstNote(w *core.Workload, tried string) string {
	if !c.burst.any {
		return ""
	}
	var pools []string
	for _, ns := range c.fleet.nodes {
		if ns.node.Burst() && ns.node.Schedulable && resides(ns.node, w.Request) && ns.node.Matches(w.Request.NodeSelector) && modelOK(ns, w.Request) {
			pools = append(pools, poolOf(ns.node))
		}
	}
	if len(pools) == 0 {
		return ""
	}
	slices.Sort(pools)
	pools = slices.Compact(pools)
	list := plural(len(pools), "pool ", "pools ") + strings.Join(pools, ", ")
	if ok, why := c.burstVerdict(w, list); !ok {
		return "; " + why
	}
	if tried == "" {
		return ""
	}
	return "; may burst, but " + list + " " + plural(len(pools), "has", "have") + " no room either: " + tried
}

// residencyNote says, for a workload with a residency that found no room,
// that residency is what keeps it waiting where nodes outside it have
// room: "residency eu-west: the nodes there are full (onprem); nodes in
// us-east have room but are outside its residency". "" without a
// residency.
func (c *cycle) residencyNote(w *core.Workload) string {
	req := w.Request
	if len(req.Regions) == 0 {
		return ""
	}
	var inside, outside []string
	free := req
	free.Regions = nil
	for _, ns := range c.fleet.nodes {
		if !ns.node.Schedulable {
			continue
		}
		if resides(ns.node, req) {
			inside = append(inside, poolOf(ns.node))
			continue
		}
		if _, why := onNode(ns, free); why == "" {
			outside = append(outside, ns.node.Region)
		}
	}
	s := "residency " + strings.Join(req.Regions, ", ") + ": no node there is schedulable"
	if len(inside) > 0 {
		slices.Sort(inside)
		s = "residency " + strings.Join(req.Regions, ", ") + ": the nodes there are full (" + strings.Join(slices.Compact(inside), ", ") + ")"
	}
	if len(outside) > 0 {
		slices.Sort(outside)
		outside = slices.Compact(outside)
		for i, r := range outside {
			if r == "" {
				outside[i] = "no region"
			}
		}
		s += "; nodes in " + strings.Join(outside, ", ") + " have room but are outside its residency"
	}
	return s
}
