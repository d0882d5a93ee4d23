package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched/fairshare"
)

// cycle is the scratch state of one Schedule call: the snapshot read into
// small parts, each a type that says what it holds and the rule that
// keeps it true while the cycle's decisions change the cluster it
// pictures. Decisions only add: a placement or a hold fills a node, a
// team's usage only grows, and the plan is only appended to; the caches
// below rely on that.
type cycle struct {
	opts    Options
	now     time.Time
	classes []core.PriorityClass
	// bufs are the cycle's arrays by pending workload, node and shape,
	// taken from the pool when the cycle starts and given back by
	// Schedule (pendingBuffers).
	bufs *pendingBuffers
	// plan is what the cycle decided so far.
	plan core.Plan

	fleet     fleet
	teams     teamLedger
	order     pendingOrder
	holds     holdBook
	starving  starvation
	attempt   placementAttempt
	refusals  refusalMemo
	decisions decisionMemo
	victims   victimMemo
	scores    scoreMemo
	arrays    arrayCounts
	burst     burstState
	// changed lists every node changed (cycle.touch: a placement or its
	// undo, a hold or its release, a preemption), by position, in order.
	// It is the change log the caches by node catch up from: the shape
	// and victim indexes read it from where they stopped, and the
	// explanations of refusalMemo.scans hold while its length is the one
	// they were made at.
	changed []int32
	// shapes are the pending workloads' shapes, numbered in the order
	// first seen (shapeNumbers.number).
	shapeNumbers
}

// fleet is the cycle's nodes: their states in name order (a state's pos
// is its place there), by name, the distinct clusters by name (a gang is
// placed within one), the distinct device kinds of schedulable nodes
// (model and memory, for askMilli) and the largest device memory.
//
// Rule: made once when the cycle starts and never changed after. Which
// nodes, clusters and kinds there are does not change within a cycle;
// what each node holds does, in its nodeState, and every such change is
// noted in cycle.changed (cycle.touch).
type fleet struct {
	nodes     []*nodeState
	byName    map[core.NodeName]*nodeState
	clusters  []string
	kinds     []core.GPU
	maxGPUMem int64
}

// teamLedger is every team's state (teamState: usage, pending demand,
// fair share, guarantees), by name, with what the cycle's decisions read
// of them all.
//
// Rule: a team's usage only grows within a cycle (holdOn, for running
// work and each placement; preempting a victim frees nothing before the
// victim stops), and usageGen counts every growth, so that what depends
// on usage can tell whether it changed. holding caches up to two teams
// that hold capacity: once two do, the answer of othersHold never changes;
// while fewer do, it is looked for again. waiting only counts up.
// budgetSpent is the snapshot's and never changes.
type teamLedger struct {
	byName   map[core.TeamName]*teamState
	usageGen uint64
	holding  []*teamState
	// waiting counts, per team, the workloads decided within its
	// guarantee and left waiting in this cycle.
	waiting map[*teamState]int
	// budgetSpent names the teams whose hard budget is spent, with the
	// message their waiting work shows (core.Snapshot.BudgetExceeded).
	budgetSpent map[core.TeamName]string
}

// team returns the state of a team, creating one without quota for a team
// the snapshot does not list.
func (c *cycle) team(name core.TeamName) *teamState {
	ts := c.teams.byName[name]
	if ts == nil {
		ts = &teamState{team: core.NewTeam(name, time.Time{})}
		c.teams.byName[name] = ts
	}
	return ts
}

// othersHold reports whether a team other than ts holds capacity.
func (l *teamLedger) othersHold(ts *teamState) bool {
	if len(l.holding) < 2 {
		l.holding = l.holding[:0]
		for _, o := range l.byName {
			if o.usage > 0 && len(l.holding) < 2 {
				l.holding = append(l.holding, o)
			}
		}
	}
	for _, o := range l.holding {
		if o != ts {
			return true
		}
	}
	return false
}

// othersWait reports whether work of a team other than ts, decided within
// its guarantee in this cycle, was left waiting.
func (l *teamLedger) othersWait(ts *teamState) bool {
	for t, n := range l.waiting {
		if n > 0 && t != ts {
			return true
		}
	}
	return false
}

// holdBook is what earlier cycles left under way that this one keeps: the
// nodes held for nominated workloads, the preemptors pictured in a node's
// future, and the victims still stopping for each preemptor.
//
// Rule: nodes lists a workload's held nodes only when it is nominated
// (only those are looked up again: heldBefore, plain, release); a hold is
// added by cycle.hold and taken out by cycle.release, when the workload's
// decision is made (keeping the node the decision nominates it to, if
// any) or when it gives its hold back unused (borrowsAgain).
// pictured is made when the cycle starts, and a preemptor's own entry is
// taken out (cycle.unpicture) when it is decided again. terminating is
// the snapshot's and never changes.
type holdBook struct {
	nodes map[core.WorkloadID][]*nodeState
	// pictured are the preemptors placed in a node's future at the start
	// of the cycle, with where.
	pictured map[core.WorkloadID]picture
	// terminating lists, per preemptor, its victims still stopping.
	terminating map[core.WorkloadID][]*core.Workload
}

// starvation is the cycle's one starvation reservation: the workload a
// node may be reserved for against starvation (w, chosen when the pending
// workloads are read), whether a reservation was made in this cycle
// (made), and the workload a node is reserved for now with that node (of,
// at).
//
// Rule: at most one node is reserved at a time. of and at are set
// together by reserveOn and cleared together by release when the
// reservation is given back; made, once set, stays set, so that no second
// reservation is made in the cycle.
type starvation struct {
	w    *core.Workload
	made bool
	of   core.WorkloadID
	at   *nodeState
}

// placementAttempt describes the workload being placed, for the steps of
// its placement (place, placeGang, placeOne, fitOn): whether it runs
// within its team's guarantee, the most milli-GPU its placement may still
// take (its team's limit, and for a class that may not borrow its
// guarantee, less what the team holds; -1: no bound), why nodes refused
// it, the replicas it placed next to a reservation, and the cluster a gang
// is being placed in (nil: any).
//
// Rule: start sets inQuota and budget before each placement; budget falls
// as replicas are placed and is put back when a gang is undone, with kept
// cut back to where it was. soft is set when a node refused it for a
// reason that depends on the workload, not only its shape (a reservation,
// the budget), budgetHit when one refused it for the budget alone: both
// are cleared before each placement and only set during it, so that such
// a refusal is not remembered as one that holds for the shape
// (refusalMemo.noFit).
type placementAttempt struct {
	inQuota         bool
	budget          int64
	soft, budgetHit bool
	kept            []keptReplica
	gangCluster     *string
}

// start readies the attempt for p, of standing q.
func (a *placementAttempt) start(p *pendingWork, q quotaStanding) {
	ts := p.ts
	a.inQuota, a.budget = q.inQuota, -1
	if ts.team.Limit >= 0 {
		a.budget = max(0, ts.team.Limit-ts.usage)
	}
	if !p.class.MayBorrow {
		room := max(0, q.guaranteed-q.held)
		if a.budget < 0 || room < a.budget {
			a.budget = room
		}
	}
}

// newCycle reads a snapshot into a cycle:
//
//  1. every node's state and every team's;
//  2. the usage of running workloads, within or over their team's quota;
//  3. one record of each pending workload, their queues and the packing
//     policy's weights;
//  4. the fair shares of the schedulable capacity, and what preemptors
//     could take where;
//  5. the holds carried over from earlier cycles.
func newCycle(o Options, snap *core.Snapshot, now time.Time) *cycle {
	c := &cycle{
		opts: o, now: now, classes: snap.Classes,
		teams: teamLedger{byName: map[core.TeamName]*teamState{}, waiting: map[*teamState]int{}, budgetSpent: snap.BudgetExceeded},
		holds: holdBook{nodes: map[core.WorkloadID][]*nodeState{}, pictured: map[core.WorkloadID]picture{},
			terminating: map[core.WorkloadID][]*core.Workload{}},
		refusals:  refusalMemo{never: map[int32]string{}, noFit: map[fitKey]string{}, noFitResv: map[resvFitKey]string{}, scans: map[scanKey]scanMemo{}},
		decisions: decisionMemo{byKey: map[decisionKey]cachedDecision{}},
		victims:   victimMemo{none: map[victimKey]bool{}, index: map[shape]*victimIndex{}},
	}
	// Most of a long queue waits: room for every decision at once.
	c.plan.Unplaced = make([]core.Decision, 0, len(snap.Pending))
	if c.classes == nil {
		c.classes = core.DefaultPriorityClasses()
	}
	c.bufs = takePendingBuffers(len(snap.Pending))
	c.readNodes(snap)
	for _, t := range snap.Teams {
		c.teams.byName[t.Name] = &teamState{team: t}
	}
	// The mix the packing policy weighs placements against: what runs and
	// what waits (counted in the passes below, running work first).
	mix := NewMix(o.Packing != PackFGD)
	for _, n := range snap.Nodes {
		mix.addHost(n)
	}
	c.readRunning(snap.Running, mix)
	for _, ts := range c.teams.byName {
		c.classify(ts)
	}
	// Pending demand and queues, from one reading of each pending
	// workload (pendingWork: what their decisions read of them; on a
	// long queue read on several goroutines: readPending).
	pws, queueOf := c.readPending(snap.Pending, mix)
	c.decisions.size(c.classes, len(c.shapes))
	c.scores = newScoreMemo(o.Packing, mix, c.fleet.nodes)
	c.order.fill(c.bufs.ws[:len(pws)], pws, queueOf)
	c.fairShares()
	c.notePreemptible()
	c.carryHolds(pws)
	return c
}

// readNodes makes the fleet: a state for every node, in name order.
func (c *cycle) readNodes(snap *core.Snapshot) {
	f := &c.fleet
	f.nodes, f.byName = make([]*nodeState, len(snap.Nodes)), make(map[core.NodeName]*nodeState, len(snap.Nodes))
	states := c.bufs.nodeStates(len(snap.Nodes))
	inParts(len(snap.Nodes), parallelNodesAt, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			f.nodes[i] = newNodeStateIn(states[i], snap.Nodes[i], snap.Usage[snap.Nodes[i].Name])
		}
	})
	for i, n := range snap.Nodes {
		c.burst.any = c.burst.any || n.Burst()
		f.byName[n.Name] = f.nodes[i]
		for gi := range n.GPUs {
			g := &n.GPUs[gi]
			f.maxGPUMem = max(f.maxGPUMem, g.MemoryMiB)
			if n.Schedulable && !slices.ContainsFunc(f.kinds, func(k core.GPU) bool { return k.Model == g.Model && k.MemoryMiB == g.MemoryMiB }) {
				f.kinds = append(f.kinds, core.GPU{Model: g.Model, MemoryMiB: g.MemoryMiB})
			}
		}
	}
	slices.SortFunc(f.nodes, func(a, b *nodeState) int { return cmp.Compare(a.node.Name, b.node.Name) })
	for _, ns := range f.nodes {
		if !slices.Contains(f.clusters, ns.node.Cluster) {
			f.clusters = append(f.clusters, ns.node.Cluster)
		}
	}
	slices.Sort(f.clusters)
	for i, ns := range f.nodes {
		ns.pos = i
	}
}

// readRunning counts the running workloads in their teams' usage, on their
// nodes, in the packing mix, in their victims' stops under way and in
// their job arrays' caps (their records in one array).
func (c *cycle) readRunning(running []*core.Workload, mix *Mix) {
	rws := make([]runningWorkload, len(running))
	for k, w := range running {
		mix.Add(w.Request, float64(w.Request.Count()))
		ts := c.team(w.Team)
		cl, known := c.classOf(w)
		r := &rws[k]
		*r = runningWorkload{w: w, class: cl, known: known, team: ts, held: heldMilli(w), start: startOf(w), gang: w.Request.Count() > 1,
			eligible: known && cl.Preemptible && w.Status.StopRequested == ""}
		c.holdOn(ts, cl, w.Status.Placement, r.held)
		ts.running = append(ts.running, r)
		for i, a := range w.Status.Placement {
			if placedBefore(w.Status.Placement, i) {
				continue // core.Nodes: each node once, as first named
			}
			if ns := c.fleet.byName[a.Node]; ns != nil {
				ns.running = append(ns.running, r)
				if w.Status.StopRequested != "" {
					ns.freeing = true
					ns.stoppingMilli += r.held
				}
			}
		}
		if w.Status.StopRequested != "" && w.Status.PreemptedBy != "" {
			c.holds.terminating[w.Status.PreemptedBy] = append(c.holds.terminating[w.Status.PreemptedBy], w)
		}
	}
	c.arrays.running = runningArrays(running)
}

// fairShares gives every team its fair share of the schedulable capacity.
func (c *cycle) fairShares() {
	var capacity int64
	for _, ns := range c.fleet.nodes {
		if ns.node.Schedulable {
			for gi := range ns.node.GPUs {
				if ns.node.GPUs[gi].Usable() {
					capacity += 1000
				}
			}
		}
	}
	fts := make([]fairshare.Team, 0, len(c.teams.byName))
	for _, ts := range c.teams.byName {
		fts = append(fts, fairshare.Team{Name: string(ts.team.Name), Guaranteed: ts.team.Guaranteed, Limit: ts.team.Limit,
			Weight: ts.team.Weight, Demand: ts.usage + ts.demand})
	}
	shares := fairshare.Shares(capacity, fts)
	for _, ts := range c.teams.byName {
		ts.share = shares[string(ts.team.Name)]
	}
}

// notePreemptible describes, on every node, what preemptors could take
// there, by tier and by team, for the victim search.
func (c *cycle) notePreemptible() {
	c.fairTiers()
	inParts(len(c.fleet.nodes), parallelNodesAt, func(lo, hi int) {
		for _, ns := range c.fleet.nodes[lo:hi] {
			for _, r := range ns.running {
				if r.eligible {
					ns.noteEligible(r)
				}
			}
		}
	})
	for _, ns := range c.fleet.nodes {
		ns.joinTeams()
	}
	for _, ts := range c.teams.byName {
		ts.lowest, ts.in = make([]int, len(ts.nodes)), make([]int, len(ts.nodes))
	}
	for _, ns := range c.fleet.nodes {
		for i, ts := range ns.teams {
			ts.lowest[ns.teamAt[i]] = ns.own[i][0].value
			ts.in[ns.teamAt[i]] = i
		}
	}
}

// carryHolds keeps the holds carried over from earlier cycles: a node
// nominated to a pending workload (a preemptor, or one that starved)
// stays held for it, so that the capacity its victims free, or its node's
// draining, goes to it and not to whoever comes first in this cycle's
// order. The nominated are taken by class, submission and ID (stable:
// then in the snapshot's order). First the one starvation reservation
// (the longest waiting workload of the highest class keeps its node),
// then the preemptors: those waiting on the starving node keep their
// claim too, but no new preemptor will join them there.
func (c *cycle) carryHolds(pws []pendingWork) {
	var nominated []*pendingWork
	for i := range pws { // in the snapshot's order
		if pws[i].nominated {
			nominated = append(nominated, &pws[i])
		}
	}
	slices.SortStableFunc(nominated, func(a, b *pendingWork) int {
		return cmp.Or(cmp.Compare(b.value(), a.value()), cmp.Compare(a.seq, b.seq), cmp.Compare(a.id, b.id))
	})
	for _, p := range nominated {
		w := p.w
		ns := c.fleet.byName[w.Status.Nominated]
		if ns == nil || c.starving.made || w != c.starving.w || w.Status.Reason == ReasonPreempting || !c.mayUse(ns, w) {
			continue
		}
		c.hold(ns, w)
		c.reserveOn(ns, w)
		c.starving.made = true
		// A reserved workload that would borrow is decided after the work
		// within its teams' guarantees, and first of the rest: before
		// any workload its reservation could refuse, so that one refused
		// is never left waiting by a reservation given back later in the
		// cycle (its workload at its team's limit, say).
		if ns.resv.inQuota {
			c.order.first = append(c.order.first, p)
		} else {
			c.order.reservedBorrower = p
		}
	}
	for _, p := range nominated {
		w := p.w
		ns := c.fleet.byName[w.Status.Nominated]
		if ns == nil || w.Status.Reason != ReasonPreempting || !c.admissibleOf(p) || !c.mayUse(ns, w) {
			continue
		}
		c.order.first = append(c.order.first, p)
		c.hold(ns, w)
		f := ns.futureState(c)
		if ch, why := onNode(f, w.Request); why == "" {
			as := assignments(ch, w.Request)
			f.add(w.Request, as, +1)
			ns.pictures++
			c.holds.pictured[w.ID] = picture{ns, as}
		}
	}
}
