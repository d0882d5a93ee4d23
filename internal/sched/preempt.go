package sched

import (
	"cmp"
	"math/bits"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// teamState is one team as this cycle sees it.
type teamState struct {
	team    core.Team
	usage   int64 // milli-GPU held by running workloads, plus placements made this cycle
	pending int64 // milli-GPU asked by pending workloads not yet placed
	demand  int64 // the part of pending that could be admitted (for fair shares)
	// decided is the team's table of decisions (decisionMemo.table), by
	// class and shape; nil until one is remembered.
	decided []cachedDecision
	share   int64 // fair share
	// unfair lists, smallest first, the team's running workloads over its
	// quota that fair-share reclaim may take once its usage grows
	// (promoteFair); fairs, largest first, those it may take now, batch
	// aside, that victims taken from the team may make it no longer may
	// (demoteFair).
	unfair  []*runningWorkload
	fairs   []*runningWorkload
	running []*runningWorkload
	// nodes lists the nodes where the team runs preemptible work (not
	// stopping, not batch), in name order; changed, by place in nodes,
	// those of them changed in this cycle, in order (cycle.touch); in, by
	// place in nodes, the team's place in the node's teams (ns.teams).
	nodes   []*nodeState
	changed []int32
	in      []int
	// queues are the team's queues of pending work, by level (level.ord).
	queues []*teamQueue
	// lowest is, by place in nodes, the lowest class value of the team's
	// work there (the classes a node's own work has are known once the
	// cycle starts: ownBelow's answer never changes within it).
	lowest []int
	// byClass is usage by class value (idle-only classes excluded), a few
	// pairs: it is read for every workload decided.
	byClass []classUsage
	// byModel is usage by model guarantee and class value (idle-only
	// classes excluded), for teams with GuaranteedByModel.
	byModel map[string]map[int]int64
	// byPool is the same by pool guarantee, for teams with
	// GuaranteedByPool (work a model guarantee covers excluded).
	byPool map[string]map[int]int64
	// buckets are the team's guarantees with the running work each
	// covers, for reclaim (quotaBucket); reclaimed is what the victims
	// chosen from the team in this cycle hold. pend, pendFair and marked
	// are victimScratch.admits's.
	buckets   []*quotaBucket
	reclaimed int64
	pend      int64
	pendFair  bool
	marked    bool
}

// classify marks which running workloads of a team are within its
// guarantee: taken by class (highest first), then start time (earliest
// first), then submission (the order a cycle decides a team's work in, so
// that of the workloads one cycle started, the ones it placed within the
// guarantee stay within it in the next), the workloads that fit in the
// guarantee are within quota and the rest are over it. Idle-only classes
// are always over quota.
func (c *cycle) classify(ts *teamState) {
	rs := slices.Clone(ts.running)
	slices.SortFunc(rs, func(a, b *runningWorkload) int {
		// Each key only where the ones before tie (cmp.Or would read
		// them all).
		if d := cmp.Compare(b.class.Value, a.class.Value); d != 0 {
			return d
		}
		if d := cmp.Compare(a.start, b.start); d != 0 {
			return d
		}
		if d := cmp.Compare(a.w.Seq, b.w.Seq); d != 0 {
			return d
		}
		return cmp.Compare(a.w.ID, b.w.ID)
	})
	var used int64
	usedByModel := map[string]int64{}
	usedByPool := map[string]int64{}
	for _, r := range rs {
		// Work on devices a model guarantee covers counts against it;
		// other work on nodes of a pool a pool guarantee covers against
		// that; the rest against the team's total guarantee.
		if key, ok := c.deviceKey(ts, r.w.Status.Placement); ok {
			if r.class.IdleOnly || usedByModel[key]+r.held > ts.team.GuaranteedByModel[key] {
				r.over = true
				continue
			}
			usedByModel[key] += r.held
			r.covered = true
			continue
		}
		if key, ok := c.nodePoolKey(ts, r.w.Status.Placement); ok {
			if r.class.IdleOnly || usedByPool[key]+r.held > ts.team.GuaranteedByPool[key] {
				r.over = true
				continue
			}
			usedByPool[key] += r.held
			r.covered = true
			continue
		}
		if r.class.IdleOnly || used+r.held > ts.team.Guaranteed {
			r.over = true
			continue
		}
		used += r.held
		r.covered = true
	}
	for _, r := range ts.running {
		r.bucket = c.bucketFor(ts, r)
	}
	c.reclaimable(ts)
}

// deviceKey returns the team's model guarantee covering the devices of a
// placement (judged by its first device).
func (c *cycle) deviceKey(ts *teamState, as []core.Assignment) (string, bool) {
	if len(ts.team.GuaranteedByModel) == 0 || len(as) == 0 {
		return "", false
	}
	ns := c.fleet.byName[as[0].Node]
	if ns == nil {
		return "", false
	}
	for gi := range ns.node.GPUs {
		g := &ns.node.GPUs[gi]
		if g.Index == as[0].GPUIndex {
			return ts.team.DeviceKey(g.Model)
		}
	}
	return "", false
}

// nodePoolKey returns the team's pool guarantee covering the node of a
// placement (judged by its first assignment).
func (c *cycle) nodePoolKey(ts *teamState, as []core.Assignment) (string, bool) {
	if len(ts.team.GuaranteedByPool) == 0 || len(as) == 0 {
		return "", false
	}
	ns := c.fleet.byName[as[0].Node]
	if ns == nil {
		return "", false
	}
	return ts.team.NodePoolKey(ns.node.Pool)
}

// usageOfPoolAtOrAbove is usageAtOrAbove for one pool guarantee.
func (ts *teamState) usageOfPoolAtOrAbove(key string, value int) int64 {
	return atOrAbove(ts.byPool[key], value)
}

// usageOfModelAtOrAbove is usageAtOrAbove for one model guarantee.
func (ts *teamState) usageOfModelAtOrAbove(key string, value int) int64 {
	return atOrAbove(ts.byModel[key], value)
}

// atOrAbove sums the usage of byClass (by class value) at value and above.
func atOrAbove(byClass map[int]int64, value int) int64 {
	var u int64
	for v, m := range byClass {
		if v >= value {
			u += m
		}
	}
	return u
}

// holdOn records a placement's usage, by model guarantee, else by pool
// guarantee, too.
func (c *cycle) holdOn(ts *teamState, cl core.PriorityClass, as []core.Assignment, milli int64) {
	ts.hold(cl, milli)
	c.teams.usageGen++
	if cl.IdleOnly {
		return
	}
	if key, ok := c.deviceKey(ts, as); ok {
		ts.byModel = addUsage(ts.byModel, key, cl.Value, milli)
	} else if key, ok := c.nodePoolKey(ts, as); ok {
		ts.byPool = addUsage(ts.byPool, key, cl.Value, milli)
	}
}

func addUsage(m map[string]map[int]int64, key string, value int, milli int64) map[string]map[int]int64 {
	if m == nil {
		m = map[string]map[int]int64{}
	}
	if m[key] == nil {
		m[key] = map[int]int64{}
	}
	m[key][value] += milli
	return m
}

// withinGuarantee reports whether w (of class cl, asking ask) keeps its
// team within its guarantee: the guarantee of the one model it asks for,
// when the team has one, else that of the pool its node selector binds it
// to, when the team has one, else the total; counting the team's work of
// its class and above (its lower classes can be preempted for it).
func (c *cycle) withinGuarantee(w *core.Workload, ts *teamState, cl core.PriorityClass, ask int64) (ok bool, held, guaranteed int64, scope string) {
	if key, found := ts.team.ModelKey(w.Request.GPUModels); found {
		held, guaranteed = ts.usageOfModelAtOrAbove(key, cl.Value), ts.team.GuaranteedByModel[key]
		return held+ask <= guaranteed, held, guaranteed, key + " "
	}
	if key, found := ts.team.PoolKey(&w.Request); found {
		held, guaranteed = ts.usageOfPoolAtOrAbove(key, cl.Value), ts.team.GuaranteedByPool[key]
		return held+ask <= guaranteed, held, guaranteed, key + " "
	}
	held, guaranteed = ts.usageAtOrAbove(cl.Value), ts.team.Guaranteed
	return held+ask <= guaranteed, held, guaranteed, ""
}

// usageAtOrAbove is what the team holds in classes at least as important as
// value: what a workload of that class competes with inside its team.
func (ts *teamState) usageAtOrAbove(value int) int64 {
	var u int64
	for _, c := range ts.byClass {
		if c.value >= value {
			u += c.milli
		}
	}
	return u
}

// classUsage is what a team holds in one class.
type classUsage struct {
	value int
	milli int64
}

func (ts *teamState) hold(cl core.PriorityClass, milli int64) {
	ts.usage += milli
	if !cl.IdleOnly {
		i := slices.IndexFunc(ts.byClass, func(c classUsage) bool { return c.value == cl.Value })
		if i < 0 {
			ts.byClass = append(ts.byClass, classUsage{value: cl.Value})
			i = len(ts.byClass) - 1
		}
		ts.byClass[i].milli += milli
	}
}

// candidate is a running workload that a preemptor may stop, and by which
// rule.
type candidate struct {
	*runningWorkload
	victim   *core.Workload
	rule     rule
	sameTeam bool
}

// rule is why a victim may be preempted.
type rule int8

const (
	ruleOwnTeam rule = iota // a higher class of its own team
	ruleIdleOnly
	ruleGuarantee // its team is over quota; the preemptor's team reclaims its guarantee
	ruleFairShare // its team is above its fair share; the preemptor's below
	ruleWait      // a starvation reservation waits for it to end (never stopped)
)

// reason is Preempted within a team, Reclaimed across teams (quota, fair
// share, or idle capacity that batch had borrowed).
func (v candidate) reason() string {
	if v.rule == ruleOwnTeam || (v.rule == ruleIdleOnly && v.sameTeam) {
		return "Preempted"
	}
	return "Reclaimed"
}

// message is the victim's preemption message; mention is
// core.Mention(preemptor), made once for all of a preemptor's victims.
// (Built in one buffer of its size: one is made for every victim, and
// consecutive victims of a preemptor alike in what the words depend on
// share it: preemptionMessages.)
func (v candidate) message(preemptor *core.Workload, mention string) string {
	var a, b, c string
	switch v.rule {
	case ruleOwnTeam:
		a, b, c = "a ", preemptor.Priority, " workload of its own team needs the capacity"
	case ruleIdleOnly:
		b, c = v.class.Name, " runs only on idle capacity"
	case ruleGuarantee:
		a, b, c = "team ", string(v.victim.Team), " runs over its quota, and the preempting team reclaims its guarantee"
	case ruleFairShare:
		a, b, c = "team ", string(v.victim.Team), " is above its fair share, and the preempting team below"
	}
	// The preemptor and its team are named only in its mention, which the
	// API server takes out for readers outside that team (core.Redact).
	verb := "reclaimed"
	if v.reason() == "Preempted" {
		verb = "preempted"
	}
	var sb strings.Builder
	sb.Grow(len(verb) + len(" by ") + len(mention) + len(": ") + len(a) + len(b) + len(c))
	sb.WriteString(verb)
	sb.WriteString(" by ")
	sb.WriteString(mention)
	sb.WriteString(": ")
	sb.WriteString(a)
	sb.WriteString(b)
	sb.WriteString(c)
	return sb.String()
}

// preemptionMessages makes the messages of one preemptor's victims: the
// preemptor's mention once, and the last message made again only when a
// victim differs from the one before in team, class, rule or whether it is
// of the preemptor's team (the words depend on nothing else).
type preemptionMessages struct {
	preemptor *core.Workload
	mention   string
	last      struct {
		team     core.TeamName
		class    string
		rule     rule
		sameTeam bool
		msg      string
	}
}

func (m *preemptionMessages) of(v candidate) string {
	if m.mention == "" {
		m.mention = core.Mention(m.preemptor)
	}
	l := &m.last
	if l.msg == "" || l.team != v.victim.Team || l.class != v.class.Name || l.rule != v.rule || l.sameTeam != v.sameTeam {
		l.team, l.class, l.rule, l.sameTeam = v.victim.Team, v.class.Name, v.rule, v.sameTeam
		l.msg = v.message(m.preemptor, m.mention)
	}
	return l.msg
}

// victimsFor lists the running workloads on ns that w (of class cl and team
// ts, asking ask milli-GPU) may preempt, in victim order, under the rules:
//
//  1. within its own team, workloads of a lower class (Preempted);
//  2. idle-only (batch) workloads of any team (Preempted in its own team,
//     Reclaimed in another);
//  3. when the team stays within its guarantee, other teams' over-quota
//     workloads (Reclaimed);
//  4. with fair-share reclaim on, when the team stays within its fair
//     share, over-quota workloads of teams above theirs that have run at
//     least MinRuntime and whose team stays at or above its fair share
//     without them (Reclaimed).
//
// Never a class that is not preemptible, never a victim already chosen in
// this cycle or already stopping; a gang only when gangs is set (sawGang
// reports one left out). Unsorted; see sortVictims.
func (c *cycle) victimsFor(w *core.Workload, cl core.PriorityClass, ts *teamState, ask int64, inQuota bool, ns *nodeState, gangs bool, out []candidate) (_ []candidate, sawGang bool) {
	out = out[:0]
	fairShareOK := c.opts.FairShareReclaim && ts.usage+ask <= ts.share
	for _, r := range ns.running {
		if !r.eligible || r.chosen {
			continue
		}
		n := len(out)
		v := r.w
		vt := r.team
		switch {
		case vt == ts && r.class.Value < cl.Value:
			out = append(out, candidate{r, v, ruleOwnTeam, true})
		case r.class.IdleOnly:
			out = append(out, candidate{r, v, ruleIdleOnly, vt == ts})
		case vt != ts && r.over && inQuota:
			out = append(out, candidate{r, v, ruleGuarantee, false})
		case vt != ts && fairShareOK && r.over && vt.usage-vt.reclaimed-r.held >= vt.share &&
			v.Status.StartedAt != nil && c.now.Sub(*v.Status.StartedAt) >= c.opts.MinRuntime:
			out = append(out, candidate{r, v, ruleFairShare, false})
		}
		if !gangs && len(out) > n && r.gang {
			out, sawGang = out[:n], true
		}
	}
	return out, sawGang
}

// sortVictims puts candidates in victim order.
func sortVictims(cs []candidate) {
	slices.SortFunc(cs, func(a, b candidate) int {
		if d := cmp.Compare(b.team.usage-b.team.share, a.team.usage-a.team.share); d != 0 {
			return d
		}
		if d := cmp.Compare(a.class.Value, b.class.Value); d != 0 {
			return d
		}
		if d := cmp.Compare(b.start, a.start); d != 0 {
			return d
		}
		return cmp.Compare(a.victim.ID, b.victim.ID)
	})
}

// freeMilli is the milli-GPU free on a node's devices.
func (ns *nodeState) freeMilli() int64 {
	var f int64
	for _, u := range ns.used {
		f += 1000 - u.MilliGPU
	}
	return f
}

// startOf is when w started, in Unix nanoseconds (0: not started).
func startOf(w *core.Workload) int64 {
	if w.Status.StartedAt != nil {
		return w.Status.StartedAt.UnixNano()
	}
	return 0
}

// findVictims looks for the victims whose removal lets w fit at the least
// cost, by the eviction rules (docs/SCHEDULING.md): on one node; no gang while a set
// without one suffices on some node; then the least GPU capacity evicted
// (a victim's whole holding counts, all its replicas); for a fraction, a
// set of fractional victims before any other; then the fewest victims,
// the smallest node, the name. Within a node, victimSet finds the set.
// maxShare bounds the share of the device w may take on the node found (-1:
// any), as reclaimOn says.
func (c *cycle) findVictims(w *core.Workload, cl core.PriorityClass, ts *teamState, ask int64, inQuota bool) (_ *nodeState, _ []candidate, maxShare int64) {
	node, set, maxShare, gangs := c.findVictimsOf(w, cl, ts, ask, inQuota, false)
	if node == nil && gangs {
		node, set, maxShare, _ = c.findVictimsOf(w, cl, ts, ask, inQuota, true)
	}
	return node, set, maxShare
}

// reclaimOn says what w (one replica, asking ask milli-GPU: its smallest
// share on any device it accepts) may preempt for on ns. A request by
// memory is charged the share of the device it lands on, which differs
// from model to model, so the rules are judged with the least it would
// take on ns (askOn, and inQuotaOn: whether that stays within its team's
// guarantee), and victims may free room for it only on a device where
// what it takes keeps every rule that allowed them (maxShare, -1 for any
// device): its team's limit and, for a class that may not borrow, its
// guarantee, as the placement will check; the guarantee when it reclaims
// one, its fair share when it reclaims that. ok is false when no device of
// ns would take it within what its team may still take: room freed there
// could never be its own, and its victims would only start again.
func (c *cycle) reclaimOn(ns *nodeState, w *core.Workload, cl core.PriorityClass, ts *teamState, ask int64, inQuota bool) (askOn int64, inQuotaOn bool, maxShare int64, ok bool) {
	r := w.Request
	if r.MilliGPU > 0 || r.GPUMemoryMiB == 0 {
		return ask, inQuota, -1, true
	}
	bound := func(b, x int64) int64 {
		if b < 0 || x < b {
			return max(0, x)
		}
		return b
	}
	maxShare = -1
	if ts.team.Limit >= 0 {
		maxShare = bound(maxShare, ts.team.Limit-ts.usage)
	}
	_, held, guaranteed, _ := c.withinGuarantee(w, ts, cl, 0)
	if !cl.MayBorrow {
		maxShare = bound(maxShare, guaranteed-held)
	}
	askOn = -1
	for gi := range ns.node.GPUs {
		g := &ns.node.GPUs[gi]
		if m, fits := shareMilli(&r, g); fits && allows(&r, g) && (maxShare < 0 || m <= maxShare) && (askOn < 0 || m < askOn) {
			askOn = m
		}
	}
	if askOn < 0 {
		return 0, false, 0, false
	}
	inQuotaOn = inQuota && held+askOn <= guaranteed
	if inQuotaOn {
		maxShare = bound(maxShare, guaranteed-held)
	}
	if c.opts.FairShareReclaim && ts.usage+askOn <= ts.share {
		maxShare = bound(maxShare, ts.share-ts.usage)
	}
	return askOn, inQuotaOn, maxShare, true
}

// fitsWithin is onNode for a request that may take at most maxShare of a
// device (-1: any): the fitting device left with the least free share.
func fitsWithin(f *nodeState, req core.Request, maxShare int64) (choice, bool) {
	if maxShare < 0 || !req.Fractional() {
		ch, why := onNode(f, req)
		return ch, why == ""
	}
	best, found := choice{}, false
	var bestLeft int64
	for i := range f.node.GPUs {
		g := &f.node.GPUs[i]
		milli, ok := shareMilli(&req, g)
		if !ok || !allows(&req, g) || milli > maxShare {
			continue
		}
		ch := choice{ns: f, gpu: i}
		if left := 1000 - f.used[i].MilliGPU - milli; fitsChoice(f, req, ch) && (!found || left < bestLeft) {
			best, found, bestLeft = ch, true, left
		}
	}
	return best, found
}

// fitsWithinAt is fitsWithin's verdict alone, without scoring the places:
// what victim searches ask, many times a node.
func fitsWithinAt(f *nodeState, req core.Request, maxShare int64) bool {
	if maxShare >= 0 && req.Fractional() {
		_, ok := fitsWithin(f, req, maxShare)
		return ok
	}
	return fitsSomewhere(f, req)
}

// victimCost orders victim sets: lower is better. (16 bytes: the victim
// index's entries hold one.)
type victimCost struct {
	milli       int64
	n           int32
	gang, whole bool // it evicts a gang; a fraction evicts more than fractions
}

// compare stops at the first difference (victim searches and their
// indexes compare costs many times a search): false before true.
func (a victimCost) compare(b victimCost) int {
	switch {
	case a.gang != b.gang:
		return boolCompare(a.gang, b.gang)
	case a.whole != b.whole:
		return boolCompare(a.whole, b.whole)
	case a.milli != b.milli:
		return cmp.Compare(a.milli, b.milli)
	}
	return cmp.Compare(a.n, b.n)
}

// boolCompare orders false before true.
func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// add counts victim v, for a preemptor asking req, in k.
func (k *victimCost) add(req core.Request, v candidate) {
	k.milli += v.held
	k.gang = k.gang || v.victim.Request.Count() > 1
	k.whole = k.whole || (req.Fractional() && !v.victim.Request.Fractional())
	k.n++
}

func costOf(req core.Request, set []candidate) victimCost {
	var k victimCost
	for _, v := range set {
		k.add(req, v)
	}
	return k
}

// findVictimsOf is findVictims with gangs allowed as victims or not;
// sawGang reports whether a gang was left out on a node weighed.
//
// It weighs the nodes through the shape's victim index (victimindex.go):
// first, for a workload within its guarantee or its fair share, the nodes
// where stops already under way will leave it room (the first in name
// order that its rules allow, with no victim of its own); then the nodes
// by the bound on what their cheapest set costs, until no node left can
// beat the best set found, so that the set chosen is the cheapest of the
// whole cluster (then the smallest node, then the name).
func (c *cycle) findVictimsOf(w *core.Workload, cl core.PriorityClass, ts *teamState, ask int64, inQuota, gangs bool) (_ *nodeState, _ []candidate, bestMax int64, sawGang bool) {
	x := c.victimIndexFor(w.Request)
	// usable reports whether w may preempt on ns at all, with what
	// reclaimOn says of it there.
	usable := func(ns *nodeState) (askOn int64, inQuotaOn bool, maxShare int64, ok bool) {
		if c.binds(ns, w, inQuota) || !c.mayUse(ns, w) {
			return 0, false, 0, false
		}
		return c.reclaimOn(ns, w, cl, ts, ask, inQuota)
	}
	// A workload within its guarantee or its fair share may also wait
	// for capacity that stops already under way will free, without a
	// victim of its own (askOn is never below ask: none can when this
	// does not hold).
	if inQuota || ts.usage+ask <= ts.share {
		var found *nodeState
		x.walk([]*entryHeap{x.order(c, orderFreeing)}, func(int, victimEntry) bool { return false }, func(victimEntry) bool { return false }, func(e victimEntry) bool {
			ns := c.fleet.nodes[e.pos]
			askOn, inQuotaOn, maxShare, ok := usable(ns)
			if ok && (inQuotaOn || ts.usage+askOn <= ts.share) && ns.freeing && fitsWithinAt(ns.futureState(c), w.Request, maxShare) {
				found, bestMax = ns, maxShare
				return false
			}
			return true
		})
		if found != nil {
			return found, []candidate{}, bestMax, false
		}
	}

	var bestNode *nodeState
	var best []candidate
	var bestCost victimCost
	var cands []candidate
	// No node left can beat the best set found.
	beaten := func(e victimEntry) bool {
		return bestNode != nil && compareEntry(bestCost, len(bestNode.node.GPUs), bestNode.pos, e) <= 0
	}
	// The nodes where ts runs nothing of a lower class (batch aside), by
	// the bound of its tier; those where it does, by the bound that
	// counts that work too.
	tier := tierIdle
	switch {
	case inQuota:
		tier = tierOver
	case c.opts.FairShareReclaim && ts.usage+ask <= ts.share:
		tier = tierFair
	}
	qs := []*entryHeap{x.order(c, tier), x.team(c, ts, tier, cl.Value)}
	skip := func(q int, e victimEntry) bool { return q == 0 && c.fleet.nodes[e.pos].ownBelow(ts, cl.Value) }
	x.walk(qs, skip, beaten, func(e victimEntry) bool {
		ns := c.fleet.nodes[e.pos]
		askOn, inQuotaOn, maxShare, ok := usable(ns)
		if !ok {
			return true
		}
		var gangLeft bool
		cands, gangLeft = c.victimsFor(w, cl, ts, askOn, inQuotaOn, ns, gangs, cands)
		sawGang = sawGang || gangLeft
		if len(cands) == 0 {
			return true
		}
		// Even every candidate and every stop under way gone would not leave
		// room enough: skip (an upper bound, so no future is built).
		room := ns.freeMilli() + ns.stoppingMilli
		for _, v := range cands {
			room += v.held
		}
		if room < w.Request.TotalMilliGPU() {
			return true
		}
		sortVictims(cands)
		set := victimSet(ns.futureState(c), w.Request, cands, maxShare, &c.victims.scratch)
		if set == nil {
			return true
		}
		k := costOf(w.Request, set)
		if bestNode == nil || cmp.Or(k.compare(bestCost), cmp.Compare(len(ns.node.GPUs), len(bestNode.node.GPUs)), cmp.Compare(ns.node.Name, bestNode.node.Name)) < 0 {
			bestNode, best, bestCost, bestMax = ns, set, k, maxShare
		}
		return true
	})
	return bestNode, best, bestMax, sawGang
}

// maxExactVictims bounds the occupants of one device among which the
// cheapest sufficient set for a share is found exactly (2^n subsets);
// beyond it they are taken cheapest first.
const maxExactVictims = 6

// maxExactDevices bounds the devices of one node among which the cheapest
// set to clear for whole GPUs is found exactly (2^n sets); beyond it they
// are cleared cheapest first.
const maxExactDevices = 10

// victimSet finds, on a node's future, the cheapest set of candidates (in
// victim order) whose removal lets req fit, or nil. Whole GPUs: the set
// of devices whose occupants cost least to evict (the capacity they hold,
// then how many they are), exactly among up to maxExactDevices devices that
// can be cleared; beyond that, devices are freed one at a time, each time
// the one whose remaining occupants cost least.
// A share of a device: on each device, the cheapest set of its occupants
// that leaves room (exactly, among up to maxExactVictims of them; else
// fractional first, smallest first), and the device whose set costs least
// wins. Either way, victims not needed are then
// dropped, largest first. Requests without GPUs take candidates in victim
// order. The request may take at most maxShare of a device (-1: any; see
// reclaimOn).
func victimSet(future *nodeState, req core.Request, cands []candidate, maxShare int64, sc *victimScratch) []candidate {
	future.cloneInto(&sc.ns)
	sc.prepare(cands)
	v := &victimSearch{sc: sc, node: &sc.ns, req: req, cands: cands, maxShare: maxShare, set: sc.set[:0], idx: sc.idx[:0]}
	ok := true
	switch {
	case req.WholeGPUs() > 0:
		ok = v.fits() || v.clearDevices()
	case req.Fractional():
		v.shareDevice()
	}
	if !ok {
		sc.set, sc.idx = v.set, v.idx
		return nil
	}
	// What remains (host CPU or memory, a request without GPUs): victim
	// order.
	for j := range cands {
		if v.fits() {
			break
		}
		if sc.one[0] = j; !sc.taken[j] && v.admits(sc.one[:]) {
			v.take(j)
		}
	}
	sc.set, sc.idx = v.set, v.idx
	if !v.fits() {
		return nil
	}
	return v.dropUnneeded()
}

// victimSearch is one victimSet call: the node's future as victims are
// taken from it (node, sc.ns), the candidates, and the set taken so far
// (set, and idx: the candidates' positions).
type victimSearch struct {
	sc       *victimScratch
	node     *nodeState
	req      core.Request
	cands    []candidate
	maxShare int64
	set      []candidate
	idx      []int
}

// take takes candidate j.
func (v *victimSearch) take(j int) {
	v.sc.taken[j] = true
	v.set = append(v.set, v.cands[j])
	v.idx = append(v.idx, j)
	v.node.add(v.cands[j].victim.Request, v.cands[j].victim.Status.Placement, -1)
}

// admits reports whether the candidates js may be taken with those taken
// already (victimScratch.admits).
func (v *victimSearch) admits(js []int) bool {
	sc := v.sc
	if sc.all {
		return true
	}
	sc.tmp = append(append(sc.tmp[:0], v.idx...), js...)
	return sc.admits(v.cands, sc.tmp)
}

// fits reports whether the request fits the node as it is now.
func (v *victimSearch) fits() bool { return fitsWithinAt(v.node, v.req, v.maxShare) }

// freed is what candidate j holds on the device at position i of the node.
func (v *victimSearch) freed(j, i int) (core.GPUUse, bool) {
	k := j*len(v.node.node.GPUs) + i
	return v.sc.freed[k], v.sc.on[k]
}

// clearDevices takes, for whole GPUs, the occupants of the devices whose
// clearing costs least: exactly among up to maxExactDevices devices that
// can be cleared, one device at a time beyond. It reports whether it found
// enough.
func (v *victimSearch) clearDevices() bool {
	sc, node, req := v.sc, v.node, v.req
	// The devices that can be cleared: every occupant a candidate.
	// The occupants of devs[b] are occ[ends[b-1]:ends[b]].
	devs, occ, ends := sc.devs[:0], sc.occ[:0], sc.ends[:0]
	for i := range node.node.GPUs {
		g := &node.node.GPUs[i]
		u := node.used[i]
		if !allows(&req, g) || (u.MilliGPU == 0 && u.MemoryMiB == 0) {
			continue
		}
		start := len(occ)
		var sum core.GPUUse
		for j := range v.cands {
			if f, ok := v.freed(j, i); ok {
				occ = append(occ, j)
				sum.MilliGPU += f.MilliGPU
				sum.MemoryMiB += f.MemoryMiB
			}
		}
		if len(occ) > start && sum.MilliGPU >= u.MilliGPU && sum.MemoryMiB >= u.MemoryMiB {
			devs, ends = append(devs, i), append(ends, len(occ))
		} else {
			occ = occ[:start]
		}
	}
	sc.devs, sc.occ, sc.ends = devs, occ, ends
	if len(devs) <= maxExactDevices {
		return v.clearExactly(devs, occ, ends)
	}
	return v.clearOneByOne()
}

// clearExactly takes the cheapest set of the devices devs (whose
// occupants are occ, devs[b]'s ending at ends[b]) to clear: a sufficient
// set that frees no device in vain is all the occupants of some set of
// devices (2^n sets of devices).
func (v *victimSearch) clearExactly(devs, occ, ends []int) bool {
	sc, node, req, cands := v.sc, v.node, v.req, v.cands
	occupants := func(b int) []int {
		if b == 0 {
			return occ[:ends[0]]
		}
		return occ[ends[b-1]:ends[b]]
	}
	best, found := sc.best[:0], false
	var bestCost victimCost
	mark := resize(sc.mark, len(cands))
	clear(mark)
	sc.mark = mark
	// A set that clears fewer devices than are missing cannot fit.
	free := 0
	for i := range node.node.GPUs {
		g := &node.node.GPUs[i]
		if u := node.used[i]; allows(&req, g) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
			free++
		}
	}
	missing := req.WholeGPUs() - free
	vs := sc.vs[:0]
	for mask := 1; mask < 1<<len(devs); mask++ {
		if bits.OnesCount(uint(mask)) < missing {
			continue
		}
		vs = vs[:0]
		var k victimCost
		for b := range devs {
			if mask&(1<<b) == 0 {
				continue
			}
			for _, j := range occupants(b) {
				if mark[j] != mask {
					mark[j] = mask
					vs = append(vs, j)
					k.add(req, cands[j])
				}
			}
		}
		// Ties go to the set first in victim order.
		slices.Sort(vs)
		if found {
			if d := k.compare(bestCost); d > 0 || (d == 0 && slices.Compare(vs, best) >= 0) {
				continue
			}
		}
		if !v.admits(vs) {
			continue
		}
		for _, j := range vs {
			node.add(cands[j].victim.Request, cands[j].victim.Status.Placement, -1)
		}
		ok := v.fits()
		for _, j := range vs {
			node.add(cands[j].victim.Request, cands[j].victim.Status.Placement, +1)
		}
		if ok {
			best, bestCost, found = append(best[:0], vs...), k, true
		}
	}
	sc.best, sc.vs = best, vs
	if !found {
		return false
	}
	for _, j := range best {
		v.take(j)
	}
	return true
}

// clearOneByOne frees devices one at a time, each time the one whose
// remaining occupants cost least to evict, until the request fits.
func (v *victimSearch) clearOneByOne() bool {
	sc, node, req, cands := v.sc, v.node, v.req, v.cands
	vs := sc.vs[:0]
	defer func() { sc.vs = vs }()
	for !v.fits() {
		bestDev, bestCost := -1, victimCost{}
		var bestVs []int
		for i := range node.node.GPUs {
			g := &node.node.GPUs[i]
			u := node.used[i]
			if !allows(&req, g) || (u.MilliGPU == 0 && u.MemoryMiB == 0) {
				continue
			}
			vs = vs[:0]
			var k victimCost
			var sum core.GPUUse
			for j := range cands {
				if f, on := v.freed(j, i); on && !sc.taken[j] {
					vs = append(vs, j)
					sum.MilliGPU += f.MilliGPU
					sum.MemoryMiB += f.MemoryMiB
					k.add(req, cands[j])
				}
			}
			if len(vs) == 0 || sum.MilliGPU < u.MilliGPU || sum.MemoryMiB < u.MemoryMiB || !v.admits(vs) {
				continue // something that is not a candidate stays on it, or reclaim may not take them all
			}
			// Ties go to the device whose first victim comes first in
			// victim order.
			if bestDev < 0 || cmp.Or(k.compare(bestCost), cmp.Compare(vs[0], bestVs[0])) < 0 {
				bestDev, bestCost, bestVs = i, k, append(bestVs[:0], vs...)
			}
		}
		if bestDev < 0 {
			return false
		}
		for _, j := range bestVs {
			v.take(j)
		}
	}
	return true
}

// shareDevice takes, for a share of a device, the cheapest set of the
// occupants of one device that leaves it room: on each device the
// cheapest sufficient set (exactly among up to maxExactVictims occupants;
// else fractional first, smallest first), and the device whose set costs
// least wins. It takes nothing where no device has such a set.
func (v *victimSearch) shareDevice() {
	sc, node, req, cands := v.sc, v.node, v.req, v.cands
	bestVs, have := sc.bestVs[:0], false
	var bestCost victimCost
	set, vs := sc.fset[:0], sc.vs[:0]
	for i := range node.node.GPUs {
		g := &node.node.GPUs[i]
		milli, mem, ok := req.ShareOn(*g)
		if !ok || !allows(&req, g) || (v.maxShare >= 0 && milli > v.maxShare) {
			continue
		}
		vs = vs[:0]
		for j := range cands {
			if _, on := v.freed(j, i); on {
				vs = append(vs, j)
			}
		}
		// Cheapest first: fractions, then the smallest, then victim
		// order.
		slices.SortStableFunc(vs, func(a, b int) int {
			var ka, kb victimCost
			ka.add(req, cands[a])
			kb.add(req, cands[b])
			return ka.compare(kb)
		})
		room := func(u core.GPUUse) bool { return u.MilliGPU+milli <= 1000 && u.MemoryMiB+mem <= g.MemoryMiB }
		var k victimCost
		if set, k, ok = v.shareSet(i, vs, set[:0], room); !ok {
			continue
		}
		if !have || cmp.Or(k.compare(bestCost), cmp.Compare(slices.Min(set), slices.Min(bestVs))) < 0 {
			bestVs, bestCost, have = append(bestVs[:0], set...), k, true
		}
	}
	sc.bestVs, sc.fset, sc.vs = bestVs, set, vs
	for _, j := range bestVs {
		v.take(j)
	}
}

// shareSet is the cheapest set of the occupants vs of device i (cheapest
// first) whose removal leaves room, in set, and what it costs; false when
// none does.
func (v *victimSearch) shareSet(i int, vs, set []int, room func(core.GPUUse) bool) ([]int, victimCost, bool) {
	sc, req, cands := v.sc, v.req, v.cands
	u0 := v.node.used[i]
	var k victimCost
	if len(vs) <= maxExactVictims {
		// Few occupants: the cheapest sufficient subset, exactly.
		found := false
		for mask := 1; mask < 1<<len(vs); mask++ {
			u := u0
			var km victimCost
			for b, j := range vs {
				if mask&(1<<b) != 0 {
					f, _ := v.freed(j, i)
					u.MilliGPU -= f.MilliGPU
					u.MemoryMiB -= f.MemoryMiB
					km.add(req, cands[j])
				}
			}
			if !room(u) || (found && km.compare(k) >= 0) {
				continue
			}
			pick := sc.fpick[:0]
			for b, j := range vs {
				if mask&(1<<b) != 0 {
					pick = append(pick, j)
				}
			}
			sc.fpick = pick
			if v.admits(pick) {
				found, k, set = true, km, append(set[:0], pick...)
			}
		}
		return set, k, found
	}
	u := u0
	for _, j := range vs {
		if room(u) {
			break
		}
		if !v.admits(append(set, j)) {
			continue
		}
		f, _ := v.freed(j, i)
		u.MilliGPU -= f.MilliGPU
		u.MemoryMiB -= f.MemoryMiB
		k.add(req, cands[j])
		set = append(set, j)
	}
	return set, k, room(u) && len(set) > 0
}

// dropUnneeded drops the victims of the set that are not needed, largest
// first (then first chosen), and returns what remains (nil when none is
// needed: the request fits without victims).
func (v *victimSearch) dropUnneeded() []candidate {
	sc, set := v.sc, v.set
	order := append(sc.order[:0], set...)
	sc.order = order
	slices.SortStableFunc(order, func(a, b candidate) int { return cmp.Compare(b.held, a.held) })
	for _, c := range order {
		if len(set) == 1 {
			break
		}
		v.node.add(c.victim.Request, c.victim.Status.Placement, +1)
		if v.fits() {
			set = slices.DeleteFunc(set, func(x candidate) bool { return x.victim == c.victim })
			continue
		}
		v.node.add(c.victim.Request, c.victim.Status.Placement, -1)
	}
	if len(set) == 0 {
		return nil // it fits without victims: no set
	}
	return slices.Clone(set) // set is scratch's
}

// victimScratch is what victimSet works in, kept from one call to the next
// so that a victim search allocates only the set it returns.
type victimScratch struct {
	ns nodeState // the node's future, as victims are taken from it
	// freed and on, by candidate and device position (j*devices+i): what
	// candidate j holds on the device, and whether it holds anything.
	freed []core.GPUUse
	on    []bool
	taken []bool
	mark  []int
	set   []candidate
	order []candidate
	// vs, devs, occ, ends, best, bestVs, fset, idx and tmp are
	// victimSet's lists of candidate and device positions.
	vs, devs, occ, ends, best, bestVs, fset, fpick, idx, tmp []int
	// all is set when every candidate may be taken together (admits):
	// then so may any of them.
	all bool
	// buckets, teams and one are admits's.
	buckets []*quotaBucket
	teams   []*teamState
	one     [1]int
}

// prepare sizes the scratch for cands on the node sc.ns, and tabulates
// what each candidate holds on each device.
func (sc *victimScratch) prepare(cands []candidate) {
	n := len(sc.ns.node.GPUs)
	sc.taken = resize(sc.taken, len(cands))
	clear(sc.taken)
	sc.freed = resize(sc.freed, len(cands)*n)
	clear(sc.freed)
	sc.on = resize(sc.on, len(cands)*n)
	clear(sc.on)
	sc.all = true
	for j := range cands {
		if cands[j].reclaims() {
			sc.idx = resize(sc.idx, len(cands))
			for k := range sc.idx {
				sc.idx[k] = k
			}
			sc.all = sc.admits(cands, sc.idx)
			break
		}
	}
	name := sc.ns.node.Name
	for j, v := range cands {
		for _, a := range v.victim.Status.Placement {
			if a.Node != name {
				continue
			}
			for i := range sc.ns.node.GPUs {
				g := &sc.ns.node.GPUs[i]
				if g.Index == a.GPUIndex {
					k := j*n + i
					sc.freed[k].MilliGPU += a.MilliGPU
					sc.freed[k].MemoryMiB += a.MemoryMiB
					sc.on[k] = true
				}
			}
		}
	}
}
