package sched

import (
	"cmp"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// victimIndex orders, for one request shape, the nodes where a preemptor
// of that shape might find victims by a lower bound of what the cheapest
// set there would cost (victimBound), so that a victim search visits the
// nodes cheapest bound first and stops once no node left can beat the
// best set found: it finds the cheapest set of the whole cluster, visiting
// the nodes near the top. The bound counts only what a preemptor could
// take, which depends on its team and rules: the work of other teams over
// their quota (and batch) where it runs within its guarantee, batch and
// what fair-share reclaim may take where it runs within its fair share,
// batch alone where it does neither (the tiers), and its own team's lower
// classes anywhere. So the index keeps one order of every node per tier,
// for the nodes where the preemptor's team runs nothing of a lower class
// (batch aside, which every tier counts), and, per team, tier and class
// value, one order of the nodes where it does (the tier and the team's
// own work below that value counted: teamHeap); a search walks its tier's
// order and its team's together.
//
// Beside them, freeing lists (in name order) the nodes whose future
// already has room for the shape, where a preemptor within its guarantee
// or fair share waits for the stops under way without a victim of its
// own. Each of these orders (the tiers' and freeing) is made when a search
// first uses it. A node that a placement, a preemption, a picture, a hold
// or a change of tier changed (cycle.touch) is noted when the index is
// next used, and bounded again, its entries replaced in place, in each
// order when a search next uses that order (so that a node changed
// several times between two uses of an order is bounded there once; a
// team's orders catch up from the team's own list of changed nodes, when
// a search of the team uses them). The bounds depend on the node, its
// future and the tiers, never on the preemptor: what its rules leave it
// can only cost more.
type victimIndex struct {
	req core.Request
	// orders are the tiers' orders (by bound, devices, name), then
	// freeing's (by name: orderFreeing).
	orders  [orders]shapeOrder
	teams   map[*teamState][]*teamHeap
	cursor  int // into cycle.changed
	stamps  []nodeStamp
	use     []uint8    // by position: usable's answer, 0 until asked, then 1 (no) or 2 (yes)
	aux     []walkItem // walk's frontier, reused
	scratch eligTier   // victimBound's, reused
}

// The orders of a shape's index: one per tier, then freeing.
const (
	orderFreeing = tiers
	orders       = tiers + 1
)

// shapeOrder is one order of a shape's index, with the nodes changed
// since a search last used it.
type shapeOrder struct {
	q    entryHeap
	made bool
	// dirty lists, each once, the usable nodes (by position) whose
	// stamp changed since the order was last current; marked says which.
	dirty  []int32
	marked []bool
}

// nodeStamp is the state of a node, its future and its tiers its entries
// were made at (0: none made yet): the sum of their versions, plus one.
// Each version only grows (the future, once made, stays the node's), so
// two stamps of a node are equal only where none of the three changed.
type nodeStamp uint64

func stampOf(ns *nodeState) nodeStamp {
	s := ns.version + ns.tierVersion + 1
	if ns.future != nil {
		s += ns.future.version
	}
	return nodeStamp(s)
}

// victimEntry is a node's entry in an order: 32 bytes, so that two fit in
// a cache line (the orders' heaps move them about at every change).
type victimEntry struct {
	bound victimCost
	gpus  int32
	pos   int32
	slot  int32 // the entry's place in its heap's where: pos, or the node's place in a team's nodes
}

// entryFor is ns's entry, without its bound, at slot.
func entryFor(ns *nodeState, slot int) victimEntry {
	return victimEntry{gpus: int32(len(ns.node.GPUs)), pos: int32(ns.pos), slot: int32(slot)}
}

// victimIndexFor returns the shape's index, made on first use, with every
// change made to the nodes since noted (the orders catch up when used:
// order).
func (c *cycle) victimIndexFor(req core.Request) *victimIndex {
	k := shapeKey(req)
	x := c.victims.index[k]
	if x == nil {
		x = &victimIndex{req: req, stamps: make([]nodeStamp, len(c.fleet.nodes)), use: make([]uint8, len(c.fleet.nodes)), cursor: len(c.changed), teams: map[*teamState][]*teamHeap{}}
		// Every node's future made and its stamp taken (on several
		// goroutines for many nodes: each reads and changes its own
		// node alone), for the orders made from them.
		inParts(len(c.fleet.nodes), parallelNodesAt, func(lo, hi int) {
			for _, ns := range c.fleet.nodes[lo:hi] {
				ns.futureState(c)
				x.stamps[ns.pos] = stampOf(ns)
				x.usable(ns)
			}
		})
		c.victims.index[k] = x
	}
	for ; x.cursor < len(c.changed); x.cursor++ {
		x.note(c, c.fleet.nodes[c.changed[x.cursor]])
	}
	return x
}

// usable reports whether the shape's index weighs ns at all, which
// depends on the node alone and not its state: it is found once. (The
// nodes of a new index and of a new team order are bounded on several
// goroutines, each node by one: each writes its own node's answer.)
func (x *victimIndex) usable(ns *nodeState) bool {
	if u := x.use[ns.pos]; u != 0 {
		return u == 2
	}
	ok := ns.node.Schedulable && modelOK(ns, x.req) && ns.node.Matches(x.req.NodeSelector) && resides(ns.node, x.req)
	x.use[ns.pos] = 1
	if ok {
		x.use[ns.pos] = 2
	}
	return ok
}

// note notes that ns changed, for each order made, unless it is as it
// was last noted.
func (x *victimIndex) note(c *cycle, ns *nodeState) {
	ns.futureState(c)
	s := stampOf(ns)
	if x.stamps[ns.pos] == s {
		return
	}
	x.stamps[ns.pos] = s
	if !x.usable(ns) {
		return // in no order
	}
	for o := range x.orders {
		if so := &x.orders[o]; so.made && !so.marked[ns.pos] {
			so.marked[ns.pos] = true
			so.dirty = append(so.dirty, int32(ns.pos))
		}
	}
}

// entryOf is ns's entry in order o of the shape's index, and whether it
// has one. It reads the cycle and changes nothing: a new order's nodes
// are bounded on several goroutines.
func (x *victimIndex) entryOf(ns *nodeState, o int) (victimEntry, bool) {
	e := entryFor(ns, ns.pos)
	if !x.usable(ns) {
		return e, false
	}
	f := ns.future // made when the index noted the node
	if o == orderFreeing {
		return e, ns.freeing && fitsWithinAt(f, x.req, -1)
	}
	var ok bool
	e.bound, ok = victimBound(ns, f, x.req, &ns.tiers[o], nil, 0, nil)
	return e, ok
}

// orderNote is a node's entry in a new order (entryOf).
type orderNote struct {
	e  victimEntry
	ok bool
}

// order returns order o of the shape's index (a tier, or orderFreeing),
// made on first use, its changed nodes bounded again.
func (x *victimIndex) order(c *cycle, o int) *entryHeap {
	so := &x.orders[o]
	if !so.made {
		so.made = true
		so.q = newEntryHeap(len(c.fleet.nodes), o == orderFreeing)
		so.marked, so.dirty = make([]bool, len(c.fleet.nodes)), make([]int32, 0, min(len(c.fleet.nodes), 256))
		if o != orderFreeing {
			so.q.h = make([]victimEntry, 0, len(c.fleet.nodes)) // most nodes run batch, which every tier counts
		}
		if !inParallel(len(c.fleet.nodes), parallelNodesAt) {
			for _, ns := range c.fleet.nodes {
				if e, ok := x.entryOf(ns, o); ok {
					so.q.set(e, true, false)
				}
			}
		} else {
			// Each node's entry found on several goroutines, set in the
			// heap here in the nodes' order: the heap is as made one node
			// after the other.
			if cap(c.victims.orderNotes) < len(c.fleet.nodes) {
				c.victims.orderNotes = make([]orderNote, len(c.fleet.nodes))
			}
			notes := c.victims.orderNotes[:len(c.fleet.nodes)]
			inParts(len(c.fleet.nodes), parallelNodesAt, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					notes[i].e, notes[i].ok = x.entryOf(c.fleet.nodes[i], o)
				}
			})
			for i := range notes {
				if notes[i].ok {
					so.q.set(notes[i].e, true, false)
				}
			}
		}
		so.q.init()
		return &so.q
	}
	for _, pos := range so.dirty {
		e, ok := x.entryOf(c.fleet.nodes[pos], o)
		so.q.set(e, ok, true)
		so.marked[pos] = false
	}
	so.dirty = so.dirty[:0]
	return &so.q
}

// noteTeam bounds again in th, an order of ts's nodes, the node at place
// at in ts.nodes.
func (x *victimIndex) noteTeam(c *cycle, th *teamHeap, ts *teamState, at int, fix bool) {
	if ts.lowest[at] >= th.below {
		return // never in th (ownBelow, which holds for the others)
	}
	ns := ts.nodes[at]
	f := ns.futureState(c)
	s := stampOf(ns)
	if th.stamps[at] == s {
		return
	}
	th.stamps[at] = s
	e := entryFor(ns, at)
	ok := x.usable(ns)
	if ok {
		e.bound, ok = victimBound(ns, f, x.req, &ns.tiers[th.tier], ns.own[ts.in[at]], th.below, &x.scratch)
	}
	th.q.set(e, ok, fix)
}

// parallelTeamAt is the fewest nodes a team's new order bounds on several
// goroutines (victimIndex.team).
const parallelTeamAt = 64

// teamNote is what a team's order notes of a node (noteTeamOf).
type teamNote struct {
	stamp nodeStamp
	e     victimEntry
	ok    bool
}

// noteTeamOf is noteTeam's bound of the node at place at in ts.nodes,
// one where ts runs work below th's class, for a new order: it reads the
// cycle and changes nothing but the node (its future, made if not yet),
// its usable answer and scratch.
func (x *victimIndex) noteTeamOf(c *cycle, th *teamHeap, ts *teamState, at int, scratch *eligTier) teamNote {
	ns := ts.nodes[at]
	f := ns.futureState(c)
	n := teamNote{stamp: stampOf(ns), e: entryFor(ns, at)}
	n.ok = x.usable(ns)
	if n.ok {
		n.e.bound, n.ok = victimBound(ns, f, x.req, &ns.tiers[th.tier], ns.own[ts.in[at]], th.below, scratch)
	}
	return n
}

// teamHeap orders the nodes where a team runs work of a class below one
// class value (batch aside), for preemptors of the team of that value in
// one tier: the tier's work and the team's own below that value counted.
type teamHeap struct {
	tier, below int
	q           entryHeap
	// cursor is how far into the team's changed nodes (teamState.changed)
	// the order is current: it catches up when a search uses it.
	cursor int
	stamps []nodeStamp // by place in the team's nodes
}

// team returns the order, for tier and preemptors of class value below, of
// the nodes where ts runs work below that value, made on first use.
func (x *victimIndex) team(c *cycle, ts *teamState, tier, below int) *entryHeap {
	for _, th := range x.teams[ts] {
		if th.tier == tier && th.below == below {
			for ; th.cursor < len(ts.changed); th.cursor++ {
				x.noteTeam(c, th, ts, int(ts.changed[th.cursor]), true)
			}
			return &th.q
		}
	}
	n := 0
	for _, v := range ts.lowest {
		if v < below {
			n++
		}
	}
	th := &teamHeap{tier: tier, below: below, cursor: len(ts.changed)}
	if n > 0 { // else no node is ever noted in it (noteTeam)
		th.q, th.stamps = newEntryHeap(len(ts.nodes), false), make([]nodeStamp, len(ts.nodes))
		th.q.h = make([]victimEntry, 0, n)
	}
	x.teams[ts] = append(x.teams[ts], th)
	if !inParallel(n, parallelTeamAt) {
		for k := range ts.nodes {
			x.noteTeam(c, th, ts, k, false) // (it skips those never in th)
		}
	} else {
		// As the index's own heaps (victimIndexFor): the nodes bounded on
		// several goroutines, each with its own scratch, set in order.
		if cap(c.victims.teamNotes) < len(ts.nodes) {
			c.victims.teamNotes = make([]teamNote, len(ts.nodes), len(c.fleet.nodes))
		}
		notes := c.victims.teamNotes[:len(ts.nodes)]
		inParts(len(ts.nodes), 0, func(lo, hi int) {
			var scratch eligTier
			for k := lo; k < hi; k++ {
				if ts.lowest[k] < below {
					notes[k] = x.noteTeamOf(c, th, ts, k, &scratch)
				}
			}
		})
		for k := range ts.nodes {
			if ts.lowest[k] < below {
				th.stamps[k] = notes[k].stamp
				th.q.set(notes[k].e, notes[k].ok, false)
			}
		}
	}
	th.q.init()
	return &th.q
}

// merged returns t, or, where own holds work of classes below below, a
// tier (made in scratch) that counts it too (work in both is counted
// twice, which only lowers the bound).
func merged(t *eligTier, own []classTier, below int, scratch *eligTier) *eligTier {
	out := t
	for k := range own {
		o := &own[k].t
		if own[k].value >= below {
			break // lowest first
		}
		if !o.any {
			continue
		}
		if !out.any {
			out = o
			continue
		}
		if out != scratch {
			*scratch = eligTier{any: true, frac: out.frac, min: out.min, max: out.max, top: out.top,
				use: append(scratch.use[:0], out.use...), minOn: append(scratch.minOn[:0], out.minOn...)}
			out = scratch
		}
		out.frac = out.frac || o.frac
		out.min, out.max = min(out.min, o.min), max(out.max, o.max)
		for _, h := range o.top {
			out.addTop(h)
		}
		for i := range out.use {
			out.use[i] += o.use[i]
			if m := o.minOn[i]; m > 0 && (out.minOn[i] == 0 || m < out.minOn[i]) {
				out.minOn[i] = m
			}
		}
	}
	return out
}

// fairTiers marks the running workloads fair-share reclaim may take at the
// start of the cycle (rule 4 of victimsFor, whose test it mirrors), and
// lists per team, smallest first, those it may take once the team's usage
// grows (promoteFair).
func (c *cycle) fairTiers() {
	for _, ts := range c.teams.byName {
		ts.unfair, ts.fairs = ts.unfair[:0], ts.fairs[:0]
		for _, r := range ts.running {
			switch {
			case !r.eligible:
			case r.class.IdleOnly:
				r.fair = true
			case r.over && r.w.Status.StartedAt != nil && c.now.Sub(*r.w.Status.StartedAt) >= c.opts.MinRuntime:
				if ts.usage-r.held >= ts.share {
					r.fair = true
					ts.fairs = append(ts.fairs, r)
				} else {
					ts.unfair = append(ts.unfair, r)
				}
			}
		}
		slices.SortStableFunc(ts.unfair, heldAscending)
		slices.SortStableFunc(ts.fairs, heldDescending)
	}
}

func heldAscending(a, b *runningWorkload) int  { return cmp.Compare(a.held, b.held) }
func heldDescending(a, b *runningWorkload) int { return cmp.Compare(b.held, a.held) }

// promoteFair counts in tierFair the workloads of ts that fair-share
// reclaim may take now that its usage grew (its usage without the victims
// other teams took from it at least its fair share without them), and
// notes their nodes changed.
func (c *cycle) promoteFair(ts *teamState) {
	for len(ts.unfair) > 0 && ts.usage-ts.reclaimed-ts.unfair[0].held >= ts.share {
		r := ts.unfair[0]
		ts.unfair = ts.unfair[1:]
		if r.chosen || !r.over {
			continue // chosen, or reclaim may no longer take it (cycle.chose)
		}
		r.fair = true
		i, _ := slices.BinarySearchFunc(ts.fairs, r, heldDescending)
		ts.fairs = slices.Insert(ts.fairs, i, r)
		for _, n := range core.Nodes(r.w.Status.Placement) {
			if ns := c.fleet.byName[n]; ns != nil {
				ns.tiers[tierFair].note(ns, r)
				ns.tierVersion++
				c.touch(ns)
			}
		}
	}
}

// demoteFair takes out of tierFair the workloads of ts that fair-share
// reclaim may no longer take, now that other teams took victims from it
// (the largest first: a team at its fair share without them), and lists
// them again for promoteFair, should its usage grow.
func (c *cycle) demoteFair(ts *teamState) {
	for len(ts.fairs) > 0 {
		r := ts.fairs[0]
		if !r.chosen && r.fair && ts.usage-ts.reclaimed-r.held >= ts.share {
			return
		}
		ts.fairs = ts.fairs[1:]
		if r.chosen || !r.fair {
			continue
		}
		r.fair = false
		i, _ := slices.BinarySearchFunc(ts.unfair, r, heldAscending)
		ts.unfair = slices.Insert(ts.unfair, i, r)
		for i, a := range r.w.Status.Placement {
			if placedBefore(r.w.Status.Placement, i) {
				continue // core.Nodes: each node once, as first named
			}
			if ns := c.fleet.byName[a.Node]; ns != nil {
				ns.retier(r, [tiers]bool{tierFair: true})
				c.touch(ns)
			}
		}
	}
}

// victimBound is a lower bound, in victimCost's order, of what any victim
// set that lets req fit on the node's future f costs, counting t's work
// (and own's below class value below, combined in scratch) as what may be
// taken; false where no set can: the node has
// nothing a preemptor could take, or not the devices req needs once what
// no preemptor may take is counted (non-preemptible
// or stopping work, this cycle's placements, the preemptors pictured in
// the future: what a device holds beyond eligUse). A set is never empty
// (victimSet), so it costs at least the smallest candidate and one
// victim; it frees, on the devices req would take, at least what they
// hold beyond what req leaves room for (for whole GPUs, all of what the
// least used devices it must clear hold, and at least what the least of
// their occupants holds), and no victim frees more than it holds, so
// that it takes at least as many victims as the largest candidates need
// to hold that much together (eligTier.fewest). A fraction takes a whole
// victim where the node has no fractional candidate.
func victimBound(ns, f *nodeState, req core.Request, t *eligTier, own []classTier, below int, scratch *eligTier) (victimCost, bool) {
	t = merged(t, own, below, scratch)
	if !t.any {
		return victimCost{}, false
	}
	var need int64
	switch k := req.WholeGPUs(); {
	case k > 0:
		var held [16]int64
		occ := held[:0]
		free := 0
		var least int64 // the least one victim on a device to clear holds
		for i := range ns.node.GPUs {
			g := &ns.node.GPUs[i]
			if !allows(&req, g) {
				continue
			}
			switch u := f.used[i]; {
			case u.MilliGPU == 0 && u.MemoryMiB == 0:
				free++
			case u.MilliGPU <= t.use[i]:
				occ = append(occ, u.MilliGPU)
				if m := t.minOn[i]; m > 0 && (least == 0 || m < least) {
					least = m
				}
			}
		}
		missing := k - free
		if missing > len(occ) {
			return victimCost{}, false
		}
		if missing <= 0 && fitsSomewhere(f, req) {
			return victimCost{}, false // it fits there already: victimSet takes no one
		}
		if missing > 0 {
			slices.Sort(occ)
			for _, m := range occ[:missing] {
				need += m
			}
			need = max(need, least)
		}
	case req.Fractional():
		// Where a device has room already, a set may be anyone on the
		// node (victimSet takes candidates for host CPU or memory, or for
		// a device the request's share bound allows); elsewhere only a
		// device with something to take yields a set.
		need = -1
		for i := range ns.node.GPUs {
			g := &ns.node.GPUs[i]
			milli, ok := shareMilli(&req, g)
			if !ok || !allows(&req, g) {
				continue
			}
			u := f.used[i].MilliGPU
			if u+milli <= 1000 {
				need = 0
				break
			}
			if t.use[i] <= 0 {
				continue
			}
			if fixed := u - min(u, t.use[i]); fixed+milli > 1000 {
				continue // what stays there leaves no room
			}
			if over := max(0, u+milli-1000, t.minOn[i]); need < 0 || over < need {
				need = over
			}
		}
		if need < 0 {
			if req.MilliCPU == 0 && req.MemoryMiB == 0 {
				return victimCost{}, false
			}
			need = 0
		}
	}
	b := victimCost{whole: req.Fractional() && !t.frac, milli: max(need, t.min), n: 1}
	if t.max > 0 {
		b.n = int32(t.fewest(b.milli))
	}
	return b, true
}

// compareEntry orders a node's bound against a set found: victim cost,
// then the smaller node, then the name (pos), as findVictimsOf chooses.
// It is called for every heap step, so it stops at the first difference.
func compareEntry(k victimCost, gpus, pos int, e victimEntry) int {
	if d := k.compare(e.bound); d != 0 {
		return d
	}
	if gpus != int(e.gpus) {
		return cmp.Compare(gpus, int(e.gpus))
	}
	return cmp.Compare(pos, int(e.pos))
}

func boundLess(a, b victimEntry) bool { return compareEntry(a.bound, int(a.gpus), int(a.pos), b) < 0 }

// entryHeap is a binary heap of at most one entry per node, which knows
// where each node's entry is, so that a node's entry is replaced or
// removed in place.
type entryHeap struct {
	h     []victimEntry
	where []int32 // by slot (victimEntry): index in h, or -1
	byPos bool    // ordered by name (pos) alone, not by bound (boundLess)
}

// newEntryHeap makes a heap of at most nodes entries, ordered by bound
// (boundLess) or, with byPos, by name alone.
func newEntryHeap(nodes int, byPos bool) entryHeap {
	w := make([]int32, nodes)
	for i := range w {
		w[i] = -1
	}
	return entryHeap{where: w, byPos: byPos}
}

// less orders the heap's entries (a method, not a function value, so that
// the comparison is inlined where the heap moves entries).
func (q *entryHeap) less(a, b victimEntry) bool {
	if q.byPos {
		return a.pos < b.pos
	}
	return boundLess(a, b)
}

// init orders the heap after entries were set without fixing.
func (q *entryHeap) init() {
	for i := len(q.h)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// set makes e its node's entry (in, true) or removes the node's entry.
func (q *entryHeap) set(e victimEntry, in, fix bool) {
	i := q.where[e.slot]
	switch {
	case in && i < 0:
		q.h = append(q.h, e)
		q.where[e.slot] = int32(len(q.h) - 1)
		if fix {
			q.up(len(q.h) - 1)
		}
	case in:
		q.h[i] = e
		if fix {
			q.up(int(i))
			q.down(int(q.where[e.slot]))
		}
	case i >= 0:
		n := len(q.h) - 1
		last := q.h[n]
		q.h = q.h[:n]
		q.where[e.slot] = -1
		switch {
		case int(i) == n:
		case !fix:
			q.h[i] = last
			q.where[last.slot] = i
		default:
			q.fill(int(i), last)
		}
	}
}

// fill puts e, the heap's last entry taken off, in the hole left at i by
// an entry removed: the hole goes down to a leaf by the lesser child, and
// e up from there (Floyd's way: the last entry mostly belongs low, and
// each level down costs one comparison where sifting it down costs two).
func (q *entryHeap) fill(i int, e victimEntry) {
	for {
		l := 2*i + 1
		if l >= len(q.h) {
			break
		}
		m := l
		if r := l + 1; r < len(q.h) && q.less(q.h[r], q.h[l]) {
			m = r
		}
		q.h[i] = q.h[m]
		q.where[q.h[i].slot] = int32(i)
		i = m
	}
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(e, q.h[p]) {
			break
		}
		q.h[i] = q.h[p]
		q.where[q.h[i].slot] = int32(i)
		i = p
	}
	q.h[i] = e
	q.where[e.slot] = int32(i)
}

func (q *entryHeap) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.where[q.h[i].slot] = int32(i)
	q.where[q.h[j].slot] = int32(j)
}

func (q *entryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(q.h[i], q.h[p]) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *entryHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(q.h) {
			return
		}
		m := l
		if r := l + 1; r < len(q.h) && q.less(q.h[r], q.h[l]) {
			m = r
		}
		if !q.less(q.h[m], q.h[i]) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

// walkItem is an entry of one of the heaps a walk merges.
type walkItem struct {
	q int8 // which heap
	i int32
}

// walk visits the entries of the heaps qs together, in order, best first,
// without changing them: visit is called with each entry that skip does
// not refuse until it returns false, and the walk ends at the first entry
// that done says is beyond what is wanted (all after it are too).
func (x *victimIndex) walk(qs []*entryHeap, skip func(q int, e victimEntry) bool, done func(e victimEntry) bool, visit func(e victimEntry) bool) {
	aux := x.aux[:0]
	q0 := qs[0] // every heap a walk merges has the same order
	at := func(it walkItem) victimEntry { return qs[it.q].h[it.i] }
	lessAt := func(i, j int) bool { return q0.less(at(aux[i]), at(aux[j])) }
	push := func(it walkItem) {
		aux = append(aux, it)
		for k := len(aux) - 1; k > 0; {
			p := (k - 1) / 2
			if !lessAt(k, p) {
				break
			}
			aux[k], aux[p] = aux[p], aux[k]
			k = p
		}
	}
	for q, h := range qs {
		if len(h.h) > 0 {
			push(walkItem{int8(q), 0})
		}
	}
	for len(aux) > 0 {
		it := aux[0]
		n := len(aux) - 1
		aux[0] = aux[n]
		aux = aux[:n]
		for k := 0; ; {
			l := 2*k + 1
			if l >= len(aux) {
				break
			}
			m := l
			if r := l + 1; r < len(aux) && lessAt(r, l) {
				m = r
			}
			if !lessAt(m, k) {
				break
			}
			aux[k], aux[m] = aux[m], aux[k]
			k = m
		}
		e := at(it)
		if done(e) {
			break
		}
		for _, ch := range [2]int32{2*it.i + 1, 2*it.i + 2} {
			if int(ch) < len(qs[it.q].h) {
				push(walkItem{it.q, ch})
			}
		}
		if !skip(int(it.q), e) && !visit(e) {
			break
		}
	}
	x.aux = aux
}
