package sched

import (
	"cmp"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// nodeState is one node as this cycle sees it.
type nodeState struct {
	node *core.Node
	// pos is the node's place in name order; version counts its changes
	// (add), so that scores cached per node know when they are stale.
	pos     int
	version uint64
	frag    *fragCache
	used    []core.GPUUse // by position in node.GPUs
	cpu     int64
	mem     int64
	models  []string // distinct device models
	// multiDomain is set when the node's devices span several NVLink
	// domains; firstDomain is the domain of its devices otherwise.
	multiDomain bool
	firstDomain int
	// Summaries, kept current by add and remove: devices with nothing
	// allocated, and the largest free share of any device.
	freeWhole int
	maxFree   int64
	// reservedFor lists the workloads the node is held for: preemptors
	// waiting for their victims, or one starving workload. Other workloads
	// place on it only where their placement also fits what the node is
	// held for (its future, or its reservation).
	reservedFor []core.WorkloadID
	// resv is the node's starvation reservation, if any (see reservation).
	resv *reservation
	// future is the node as it will be once every stop under way has
	// happened and every waiting preemptor has taken its place; victims are
	// chosen against it. Made on first use.
	future *nodeState
	// stages are earlier states of the future, one for each preemptor
	// planned on the node before the last: the node once the victims of
	// the first k preemptors are gone and those k placed. A preemptor may
	// count only on its own victims and those chosen before it, so a
	// placement made now must fit every stage, not only the last.
	stages []*nodeState
	// pictures counts the preemptors placed in the future.
	pictures int
	// holdVersion counts changes to reservedFor and resv.
	holdVersion uint64
	// freeing is set when stops are under way or planned on the node.
	freeing bool
	// stoppingMilli is what workloads already stopping hold (at most) here.
	stoppingMilli int64
	// running lists the workloads running here, for preemption.
	running []*runningWorkload
	// tiers describe the running workloads preemptors might take here,
	// for the victim search's bound (victimBound): tierOver those over
	// their team's quota (batch included), tierFair batch and what
	// fair-share reclaim may take now, tierIdle batch alone; teams lists
	// the teams with preemptible work here other than batch (not
	// stopping), and own (in the same order) describes it by class,
	// lowest first: what their own higher classes may take.
	tiers       [tiers]eligTier
	teams       []*teamState
	own         [][]classTier
	teamAt      []int  // in the same order: the node's place in the team's nodes
	tierVersion uint64 // counts changes to tiers
	// placed lists this cycle's placements here, for a reservation.
	placed []item
}

func newNodeState(n *core.Node, u *core.NodeUsage) *nodeState {
	return newNodeStateIn(&nodeState{}, n, u)
}

// newNodeStateIn is newNodeState made in ns, a node state given back
// (pendingBuffers: zero but for its device slice, which it reuses).
func newNodeStateIn(ns *nodeState, n *core.Node, u *core.NodeUsage) *nodeState {
	used := slices.Grow(ns.used[:0], len(n.GPUs))[:len(n.GPUs)]
	clear(used)
	*ns = nodeState{node: n, used: used}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if u != nil {
			ns.used[i] = u.GPUs[g.Index]
		}
		if !g.Usable() {
			// A failed device takes no new work: it holds a whole device
			// more than what runs there, so that it stays full even in a
			// future where that is gone.
			ns.used[i].MilliGPU += 1000
			ns.used[i].MemoryMiB += g.MemoryMiB
		}
		if !slices.Contains(ns.models, g.Model) {
			ns.models = append(ns.models, g.Model)
		}
		if i == 0 {
			ns.firstDomain = g.Domain
		} else if g.Domain != ns.firstDomain {
			ns.multiDomain = true
		}
	}
	if u != nil {
		ns.cpu, ns.mem = u.MilliCPU, u.MemoryMiB
	}
	ns.summarise()
	return ns
}

// The tiers of eligTier: work over its team's quota; batch and the work
// fair-share reclaim may take now; batch alone.
const (
	tierOver = iota
	tierFair
	tierIdle
	tiers
)

// eligTier describes some of a node's running workloads: whether there
// is one, whether one is a fraction, the least and most one holds, and
// what they hold of each device (by position; nil when none).
type eligTier struct {
	any, frac bool
	min, max  int64
	use       []int64
	// minOn is, by device, the least that one of them on it holds (0:
	// none).
	minOn []int64
	// top is the most the largest four of them hold, largest first (0:
	// none), for the fewest victims that can free a given capacity.
	top [4]int64
}

// addTop counts a workload holding held among the largest.
func (t *eligTier) addTop(held int64) {
	for i := range t.top {
		if held > t.top[i] {
			copy(t.top[i+1:], t.top[i:len(t.top)-1])
			t.top[i] = held
			return
		}
	}
}

// fewest is a lower bound of how many of the tier's workloads it takes to
// hold milli together: the fewest of the largest, each beyond the fourth
// counted as the fourth.
func (t *eligTier) fewest(milli int64) int {
	n, sum := 0, int64(0)
	for n < len(t.top) && t.top[n] > 0 && sum < milli {
		sum += t.top[n]
		n++
	}
	if sum < milli && n > 0 {
		last := t.top[n-1]
		n += int((milli - sum + last - 1) / last)
	}
	return max(1, n)
}

// noteEligible counts r among the workloads a preemptor might take here.
func (ns *nodeState) noteEligible(r *runningWorkload) {
	if r.over {
		ns.tiers[tierOver].note(ns, r)
	}
	if r.class.IdleOnly {
		ns.tiers[tierIdle].note(ns, r)
	}
	if r.fair {
		ns.tiers[tierFair].note(ns, r)
	}
	if r.class.IdleOnly {
		return // counted in every tier
	}
	i := slices.Index(ns.teams, r.team)
	if i < 0 {
		ns.teams = append(ns.teams, r.team)
		ns.own = append(ns.own, nil)
		i = len(ns.teams) - 1
	}
	ns.ownTier(i, r).note(ns, r)
}

// joinTeams adds ns to the nodes of each team it runs work of (ns.teams,
// in the order noteEligible found them), noting its place there
// (ns.teamAt). Called for every node in the cycle's order once their
// eligible work is noted: noteEligible changes nothing but its own node,
// so that the nodes may be noted on several goroutines.
func (ns *nodeState) joinTeams() {
	ns.teamAt = make([]int, len(ns.teams))
	for i, ts := range ns.teams {
		ns.teamAt[i] = len(ts.nodes)
		ts.nodes = append(ts.nodes, ns)
	}
}

// ownBelow reports whether ts runs work here of a class below value
// (batch aside, which every tier counts): what only ts's own higher
// classes may take.
func (ns *nodeState) ownBelow(ts *teamState, value int) bool {
	i := slices.Index(ns.teams, ts)
	return i >= 0 && len(ns.own[i]) > 0 && ns.own[i][0].value < value
}

// classTier is a team's work of one class on a node.
type classTier struct {
	value int
	t     eligTier
}

// ownTier returns the tier of r's class among the node's work of team i.
func (ns *nodeState) ownTier(i int, r *runningWorkload) *eligTier {
	own := ns.own[i]
	j, found := slices.BinarySearchFunc(own, r.class.Value, func(c classTier, v int) int { return cmp.Compare(c.value, v) })
	if !found {
		own = slices.Insert(own, j, classTier{value: r.class.Value})
		ns.own[i] = own
	}
	return &own[j].t
}

// forgetChosen takes r, chosen as a victim (r.chosen), out of what the
// tiers say: no other preemptor may take it. The tiers r was counted in
// are made again from the workloads left, so that the least and most one
// holds, and whether one is a fraction, stay exact (taking r's share out
// alone left them as they were: still bounds, but loose ones, that let
// victim searches weigh nodes in vain). The classes the node's own tiers
// list stay (ownBelow does not change within a cycle).
func (ns *nodeState) forgetChosen(r *runningWorkload) {
	// The tiers as newCycle and promoteFair noted them.
	ns.retier(r, [tiers]bool{tierOver: r.over, tierIdle: r.class.IdleOnly, tierFair: r.fair})
	if i := slices.Index(ns.teams, r.team); i >= 0 && !r.class.IdleOnly {
		own := ns.ownTier(i, r)
		own.reset()
		for _, o := range ns.running {
			if o.eligible && !o.chosen && o.team == r.team && !o.class.IdleOnly && o.class.Value == r.class.Value {
				own.note(ns, o)
			}
		}
	}
}

// retier makes the tiers in (those r was counted in) again from the
// workloads they count now, r no longer among them.
func (ns *nodeState) retier(r *runningWorkload, in [tiers]bool) {
	ns.tierVersion++
	for t := range ns.tiers {
		if !in[t] {
			continue
		}
		ns.tiers[t].reset()
		for _, o := range ns.running {
			if o.eligible && !o.chosen && ((t == tierOver && o.over) || (t == tierIdle && o.class.IdleOnly) || (t == tierFair && o.fair)) {
				ns.tiers[t].note(ns, o)
			}
		}
	}
}

// reset empties the tier, keeping its device slices.
func (t *eligTier) reset() {
	t.any, t.frac, t.min, t.max, t.top = false, false, 0, 0, [4]int64{}
	clear(t.use)
	clear(t.minOn)
}

func (t *eligTier) note(ns *nodeState, r *runningWorkload) {
	if !t.any || r.held < t.min {
		t.min = r.held
	}
	t.max = max(t.max, r.held)
	t.addTop(r.held)
	t.any = true
	t.frac = t.frac || r.w.Request.Fractional()
	if t.use == nil {
		n := len(ns.node.GPUs)
		b := make([]int64, 2*n) // one array for both
		t.use, t.minOn = b[:n:n], b[n:]
	}
	for _, a := range r.w.Status.Placement {
		if a.Node != ns.node.Name {
			continue
		}
		for i := range ns.node.GPUs {
			g := &ns.node.GPUs[i]
			if g.Index == a.GPUIndex {
				t.use[i] += a.MilliGPU
				if t.minOn[i] == 0 || r.held < t.minOn[i] {
					t.minOn[i] = r.held
				}
			}
		}
	}
}

func (ns *nodeState) clone() *nodeState {
	c := &nodeState{}
	ns.cloneInto(c)
	return c
}

// cloneInto makes dst a clone of ns, reusing dst's device slice.
func (ns *nodeState) cloneInto(dst *nodeState) {
	used := dst.used
	*dst = *ns
	dst.used = append(used[:0], ns.used...)
	dst.reservedFor = nil
	dst.resv = nil
	dst.placed = nil
	dst.future = nil
	dst.stages = nil
	dst.frag = nil
	dst.tiers = [tiers]eligTier{}
	dst.teams, dst.own, dst.teamAt = nil, nil, nil
}

// heldForOther reports whether the node is held for a workload other than
// id (whether or not it is held for id too: a holder's own placement must
// still leave the others what their future promises them).
func (ns *nodeState) heldForOther(id core.WorkloadID) bool {
	// The holders are distinct (hold): of two or more, one is another.
	switch len(ns.reservedFor) {
	case 0:
		return false
	case 1:
		return ns.reservedFor[0] != id
	}
	return true
}

func (ns *nodeState) hold(id core.WorkloadID) {
	if !slices.Contains(ns.reservedFor, id) {
		ns.reservedFor = append(ns.reservedFor, id)
		ns.holdVersion++
	}
}

func (ns *nodeState) summarise() {
	ns.freeWhole, ns.maxFree = 0, 0
	for _, u := range ns.used {
		if u.MilliGPU == 0 && u.MemoryMiB == 0 {
			ns.freeWhole++
		}
		ns.maxFree = max(ns.maxFree, 1000-u.MilliGPU)
	}
}

// add records the part of a placement that is on this node (sign +1), or
// removes it (-1): its shares of devices, and host CPU and memory once per
// replica placed here.
func (ns *nodeState) add(req core.Request, as []core.Assignment, sign int64) {
	// The hot path of the cycle: no allocation. Replicas on this node are
	// counted with a bit set (a map only for gangs above 64 replicas).
	var seen uint64
	var more map[int]bool
	replicas := int64(0)
	for _, a := range as {
		if a.Node != ns.node.Name {
			continue
		}
		switch {
		case a.Replica < 64 && seen&(1<<a.Replica) == 0:
			seen |= 1 << a.Replica
			replicas++
		case a.Replica >= 64 && !more[a.Replica]:
			if more == nil {
				more = map[int]bool{}
			}
			more[a.Replica] = true
			replicas++
		}
		for i := range ns.node.GPUs {
			g := &ns.node.GPUs[i]
			if g.Index == a.GPUIndex {
				ns.used[i].MilliGPU += sign * a.MilliGPU
				ns.used[i].MemoryMiB += sign * a.MemoryMiB
			}
		}
	}
	ns.cpu += sign * req.MilliCPU * replicas
	ns.mem += sign * req.MemoryMiB * replicas
	ns.version++
	ns.summarise()
}

// commit records a real placement (or its undo): on the node as it is now,
// and on its future and each of its stages.
func (ns *nodeState) commit(req core.Request, as []core.Assignment, sign int64) {
	ns.add(req, as, sign)
	if ns.future != nil {
		ns.future.add(req, as, sign)
	}
	for _, st := range ns.stages {
		st.add(req, as, sign)
	}
}

// fitsAs reports whether the given assignments of req fit on ns. It does
// not allocate (replicas are counted as add counts them).
func fitsAs(ns *nodeState, req core.Request, as []core.Assignment) bool {
	var seen uint64
	var more map[int]bool
	replicas := 0
	for _, a := range as {
		if a.Node != ns.node.Name {
			continue
		}
		switch {
		case a.Replica >= 0 && a.Replica < 64:
			if seen&(1<<a.Replica) == 0 {
				seen |= 1 << a.Replica
				replicas++
			}
		case !more[a.Replica]:
			if more == nil {
				more = map[int]bool{}
			}
			more[a.Replica] = true
			replicas++
		}
		i := slices.IndexFunc(ns.node.GPUs, func(g core.GPU) bool { return g.Index == a.GPUIndex })
		if i < 0 || ns.used[i].MilliGPU+a.MilliGPU > 1000 || ns.used[i].MemoryMiB+a.MemoryMiB > ns.node.GPUs[i].MemoryMiB {
			return false
		}
	}
	n := ns.node
	return (n.MilliCPU == 0 || ns.cpu+req.MilliCPU*int64(replicas) <= n.MilliCPU) &&
		(n.MemoryMiB == 0 || ns.mem+req.MemoryMiB*int64(replicas) <= n.MemoryMiB)
}

// choice is a way to place a request on a node: for a fraction, the device
// (position in node.GPUs); lower score is better.
type choice struct {
	ns    *nodeState
	gpu   int
	score float64
	as    []core.Assignment // the devices, when chosen apart from the scorer (futureChoice)
}

// Reasons a node is not used for a request, as counted in explanations.
const (
	whyUnschedulable = "not schedulable"
	whyModel         = "no GPU of the requested model"
	whyCPU           = "not enough CPU"
	whyMemory        = "not enough host memory"
	whyWhole         = "not enough free whole GPUs"
	whyShare         = "no GPU with enough free share"
	whyReserved      = "reserved for another workload"
	whyStarving      = "reserved for a workload that has waited too long"
	whyLimit         = "its team's limit leaves less than it takes there"
	whyNoGPU         = "no GPUs"
	whySelector      = "labels do not match the node selector"
	whyResidency     = "outside its residency"
	whyBurst         = "in a burst pool (a last resort)"
	whyCluster       = "in another cluster than the gang's other replicas"
)

// onNode finds where req fits on one node, scored best-fit; reason is
// non-empty when it does not fit. It does not look at reservations.
func onNode(ns *nodeState, req core.Request) (choice, string) {
	return onNodeWith(ns, req, bestFit{})
}

// onNodeWith finds the best place for req on one node by the scorer's
// measure, without allocating. Whole GPUs: nodes where the devices can come
// from one NVLink domain always win over the others, then the scorer
// decides. A fraction: the device with the best score.
func onNodeWith(ns *nodeState, req core.Request, sc scorer) (choice, string) {
	if why := misfit(ns, req); why != "" {
		return choice{}, why
	}
	if want := req.WholeGPUs(); want > 0 {
		free := ns.freeOf(req)
		if free < want {
			return choice{}, whyWhole
		}
		return choice{ns: ns, gpu: -1, score: float64(ns.domainsNeeded(req, want)-1)*domainPenalty + sc.score(ns, req, -1)}, ""
	}
	if req.MilliGPU == 0 && req.GPUMemoryMiB == 0 {
		return choice{ns: ns, gpu: -1, score: sc.score(ns, req, -1)}, ""
	}
	best := choice{ns: ns, gpu: -1}
	var tried [8]int64 // free shares already scored: equal devices score alike
	nTried := 0
	for i := range ns.node.GPUs {
		g := &ns.node.GPUs[i]
		if !allows(&req, g) {
			continue
		}
		milli, mem, ok := req.ShareOn(*g)
		if !ok {
			continue
		}
		u := ns.used[i]
		if u.MilliGPU+milli > 1000 || u.MemoryMiB+mem > g.MemoryMiB {
			continue
		}
		if g.MemoryMiB == 0 && nTried < len(tried) {
			if slices.Contains(tried[:nTried], u.MilliGPU) {
				continue
			}
			tried[nTried] = u.MilliGPU
			nTried++
		}
		if s := sc.score(ns, req, i); best.gpu < 0 || s < best.score {
			best.gpu, best.score = i, s
		}
	}
	if best.gpu < 0 {
		return choice{}, whyShare
	}
	return best, ""
}

// fitsSomewhere reports whether onNode finds a place for req on ns (its
// reason is ""), without scoring the places.
func fitsSomewhere(ns *nodeState, req core.Request) bool {
	if misfit(ns, req) != "" {
		return false
	}
	if want := req.WholeGPUs(); want > 0 {
		return ns.freeOf(req) >= want
	}
	if req.MilliGPU == 0 && req.GPUMemoryMiB == 0 {
		return true
	}
	for i := range ns.node.GPUs {
		g := &ns.node.GPUs[i]
		if !allows(&req, g) {
			continue
		}
		milli, mem, ok := req.ShareOn(*g)
		if u := ns.used[i]; ok && u.MilliGPU+milli <= 1000 && u.MemoryMiB+mem <= g.MemoryMiB {
			return true
		}
	}
	return false
}

// domainPenalty outweighs any scorer's measure: spanning NVLink domains is
// worse than any packing gain.
const domainPenalty = 1e12

// misfit says why req cannot go on the node at all, before devices are
// looked at one by one; "" when it may.
func misfit(ns *nodeState, req core.Request) string {
	n := ns.node
	gpus := req.MilliGPU > 0 || req.GPUMemoryMiB > 0 || len(req.GPUModels) > 0
	switch {
	case !n.Schedulable:
		return whyUnschedulable
	case len(n.GPUs) == 0 && gpus:
		return whyNoGPU
	case len(req.NodeSelector) > 0 && !n.Matches(req.NodeSelector):
		return whySelector
	case !resides(n, req):
		return whyResidency
	case gpus && !slices.ContainsFunc(ns.models, req.ModelAllowed):
		return whyModel
	case n.MilliCPU > 0 && ns.cpu+req.MilliCPU > n.MilliCPU:
		return whyCPU
	case n.MemoryMiB > 0 && ns.mem+req.MemoryMiB > n.MemoryMiB:
		return whyMemory
	case req.WholeGPUs() > 0 && ns.freeWhole < req.WholeGPUs():
		return whyWhole
	case req.MilliGPU > 0 && req.MilliGPU < 1000 && ns.maxFree < req.MilliGPU:
		return whyShare
	}
	return ""
}

// freeOf counts the wholly free devices of a model the request accepts.
func (ns *nodeState) freeOf(req core.Request) int {
	if len(req.GPUModels) == 0 {
		return ns.freeWhole
	}
	free := 0
	for i := range ns.node.GPUs {
		g := &ns.node.GPUs[i]
		if u := ns.used[i]; allows(&req, g) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
			free++
		}
	}
	return free
}

// assignments builds the devices of a chosen placement.
func assignments(c choice, req core.Request) []core.Assignment {
	if c.as != nil {
		return slices.Clone(c.as)
	}
	n := c.ns.node
	if want := req.WholeGPUs(); want > 0 {
		as := make([]core.Assignment, 0, want)
		for _, d := range c.ns.domainOrder(req, want) {
			for i := range n.GPUs {
				g := &n.GPUs[i]
				if u := c.ns.used[i]; len(as) < want && g.Domain == d && allows(&req, g) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
					as = append(as, core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB})
				}
			}
		}
		return as
	}
	if c.gpu < 0 {
		return nil // no GPUs asked for
	}
	g := n.GPUs[c.gpu]
	milli, mem, _ := req.ShareOn(g)
	return []core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}}
}

// runningWorkload is a running workload with what preemption needs to know
// of it, looked up once per cycle.
type runningWorkload struct {
	w     *core.Workload
	class core.PriorityClass
	known bool // its class exists
	team  *teamState
	held  int64
	// start is when it started (startOf), for the orders that compare it.
	start int64
	// gang is true for a workload of several replicas.
	gang bool
	// covered is true when it runs within its team's guarantee, by
	// classify's order; over when reclaim may take it (reclaimable).
	covered, over bool
	// bucket is the guarantee of its team it counts against (nil for
	// batch).
	bucket *quotaBucket
	// chosen is true once it is a victim in this cycle.
	chosen bool
	// eligible is false for workloads that can never be victims: unknown
	// or non-preemptible class, or already stopping.
	eligible bool
	// fair is set once fair-share reclaim may take it (batch always):
	// over its team's quota, run MinRuntime, and its team at or above its
	// fair share without it (usage only grows within a cycle, so it stays
	// set); counted in tierFair.
	fair bool
}

// freeByDomain counts the free devices the request accepts, per NVLink
// domain.
func (ns *nodeState) freeByDomain(req core.Request) map[int]int {
	free := map[int]int{}
	for i := range ns.node.GPUs {
		g := &ns.node.GPUs[i]
		if u := ns.used[i]; allows(&req, g) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
			free[g.Domain]++
		}
	}
	return free
}

// domainOrder says which domains to take want free devices from: the one
// domain with the fewest free devices that has enough (keeping larger free
// domains whole); otherwise the domains with the most free devices first,
// so that the fewest domains are spanned. Ties go to the lower domain.
func (ns *nodeState) domainOrder(req core.Request, want int) []int {
	if !ns.multiDomain {
		return []int{ns.firstDomain}
	}
	free := ns.freeByDomain(req)
	ds := make([]int, 0, len(free))
	for d := range free {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	best := -1
	for _, d := range ds {
		if free[d] >= want && (best < 0 || free[d] < free[best]) {
			best = d
		}
	}
	if best >= 0 {
		return []int{best}
	}
	slices.SortStableFunc(ds, func(a, b int) int { return free[b] - free[a] })
	return ds
}

// domainsNeeded is how many domains a placement of want devices spans.
func (ns *nodeState) domainsNeeded(req core.Request, want int) int {
	if !ns.multiDomain {
		return 1
	}
	free := ns.freeByDomain(req)
	n := 0
	for _, d := range ns.domainOrder(req, want) {
		if want <= 0 {
			break
		}
		want -= free[d]
		n++
	}
	return n
}

// shareMilli is the share of g that req takes (core.Request.ShareOn's
// milli-GPU, and whether it fits there at all), answered without the call
// (which copies the request and the device) nor reading the device where
// req asks for its share in milli-GPU, as ShareOn's first two cases do.
func shareMilli(req *core.Request, g *core.GPU) (int64, bool) {
	if req.MilliGPU > 0 {
		return min(req.MilliGPU, 1000), true
	}
	milli, _, ok := req.ShareOn(*g)
	return milli, ok
}

// allows is req.ModelAllowed(g.Model), answered without the call (which
// copies the request) nor reading the device where req names no model, as
// most do: the loops over a node's devices ask it of every device.
func allows(req *core.Request, g *core.GPU) bool {
	return len(req.GPUModels) == 0 || req.ModelAllowed(g.Model)
}
