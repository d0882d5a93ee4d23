package sched

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched/fairshare"
)

// Options tune the policy. The zero value is not useful; start from
// DefaultOptions.
type Options struct {
	// StarvationAfter is how long a workload may wait for capacity before
	// the scheduler reserves a node for it, so that smaller workloads behind
	// it (backfill) cannot keep it waiting for ever. 0 disables reservations.
	StarvationAfter time.Duration
	// FairShareReclaim lets a team below its fair share preempt over-quota
	// work of teams above theirs.
	FairShareReclaim bool
	// MinRuntime protects a workload from fair-share reclaim until it has run
	// this long, and a workload within its team's guarantee from reclaim of
	// a guarantee (reclaim of a guarantee is not delayed: work over quota
	// is taken at once), and keeps a workload the scheduler stopped from
	// starting again on borrowed capacity for this long (RecentlyPreempted).
	MinRuntime time.Duration
	// Packing names the policy that chooses among the places where a
	// workload fits (see Policies); "" is PackGPUFleet. An unknown name
	// falls back to PackGPUFleet (the server never sets it; the simulator
	// checks the names it is given).
	Packing string
	// Burst says when a node of a burst pool takes a workload (burst.go);
	// the zero value lets no class burst.
	Burst BurstPolicy
}

// DefaultOptions: reserve after 2 minutes, fair-share reclaim on after 5
// minutes of runtime, production and training burst after 2 minutes
// (DefaultBurstPolicy).
func DefaultOptions() Options {
	return Options{StarvationAfter: 2 * time.Minute, FairShareReclaim: true, MinRuntime: 5 * time.Minute, Burst: DefaultBurstPolicy()}
}

// Schedule runs one cycle with DefaultOptions.
func Schedule(snap *core.Snapshot, now time.Time) core.Plan {
	return DefaultOptions().Schedule(snap, now)
}

// Schedule decides, for one frozen snapshot, which pending workloads start
// and where, which running ones are preempted for them, and why every other
// pending workload waits. The snapshot is not modified. Steps:
//
//  1. build this cycle's view of every node and every team: what each
//     device holds, each team's usage, pending demand and fair share;
//  2. classify running workloads as within or over their team's quota;
//  3. order pending workloads: priority class, then the team furthest below
//     its fair share (recomputed after each placement), then submission,
//     those within their team's guarantee before those that would borrow;
//  4. for each, check that it could ever run, its team's limit and its
//     class's quota rule, then place it where the packing policy prefers
//     among the places a hold or a reservation leaves it, or else look for
//     the cheapest set of victims it may preempt (doc.go, eviction rules),
//     or else explain why it waits, reserving a node for it if it has
//     waited longer than StarvationAfter;
//  5. return the plan, with every team's share.
func (o Options) Schedule(snap *core.Snapshot, now time.Time) core.Plan {
	c := newCycle(o, snap, now)
	c.decideInOrder(c.decide)
	c.plan.Shares = c.shares()
	c.bufs = nil // the pool's now: a use after this panics, never races
	return c.plan
}

// decideInOrder decides every pending workload with decide, in the
// cycle's order.
func (c *cycle) decideInOrder(decide func(*pendingWork)) {
	// Workloads holding a node from an earlier cycle go first: the
	// capacity was promised to them, and deciding them first frees at once
	// what they no longer need. A preemptor whose victims are gone, that
	// the scheduler itself stopped less than MinRuntime ago and that would
	// now borrow (its team's higher classes, placed before it, took its
	// guarantee) gives its hold back and is decided afresh in its turn,
	// after the work within guarantees: started now, it could be where
	// another team's guaranteed work, not decided yet, would reclaim it
	// in the next cycle (RecentlyPreempted).
	for _, p := range c.first {
		if c.borrowsAgain(p) {
			if pic, ok := c.pictured[p.id]; ok {
				c.unpicture(p.w, pic)
			}
			c.release(p.id, nil)
			continue
		}
		decide(p)
		p.decided = true
	}
	// Then the workloads that run within their team's guarantee, and
	// only then the ones that would borrow, in the order they came: work
	// placed on borrowed capacity is never placed where guaranteed work
	// of this cycle would reclaim it in the next. Of those, a reserved
	// workload whose reservation carried over goes first
	// (reservedBorrower).
	borrowing := c.bufs.borrowing // room for all: most, in a long queue
	var reserved *pendingWork
	for p := c.next(); p != nil; p = c.next() {
		switch {
		case p.decided:
		case p == c.reservedBorrower && !c.guaranteedNow(p):
			reserved = p
		case !c.guaranteedNow(p):
			borrowing = append(borrowing, p)
		default:
			decide(p)
			if n := len(c.plan.Unplaced); n > 0 && c.plan.Unplaced[n-1].Workload == p.id {
				c.guaranteedWaiting[p.ts]++
			}
		}
	}
	if reserved != nil {
		decide(reserved)
	}
	for _, p := range borrowing {
		decide(p)
	}
	c.bufs.give(borrowing)
}

// decisionKey is what the decision of a plain workload (cycle.plain)
// depends on besides its team's usage: its team, class and shape. Nodes
// only fill within a cycle, so a shape that fitted nowhere, or found no
// victims, for one such workload does not for the next (noFit,
// noVictims); its quota rules read its team's usage; its message, the
// same, and whether other teams hold capacity (which, once true, stays).
type decisionKey struct {
	ts    *teamState
	class *core.PriorityClass // in cycle.classes
	shape int32               // in cycle.shapes
}

// cachedDecision is the last decision made for a decisionKey, with what
// its team held then.
type cachedDecision struct {
	reason, message string
	usage           int64
	others          bool
	set             bool // in a team's table (teamState.decided): one is there
}

// decisionTableAt is the most classes times shapes for which each team
// keeps its decisions in a table (teamState.decided, by class and shape
// number) rather than in the cycle's map: a table read costs no hashing,
// and is small where the shapes are few.
const decisionTableAt = 256

// decisionOf returns the decision remembered for k, if any.
func (c *cycle) decisionOf(k decisionKey) (cachedDecision, bool) {
	if c.decisionTable {
		if t := k.ts.decided; t != nil {
			d := t[c.decisionSlot(k)]
			return d, d.set
		}
		return cachedDecision{}, false
	}
	d, ok := c.decided[k]
	return d, ok
}

// rememberDecision remembers d for k.
func (c *cycle) rememberDecision(k decisionKey, d cachedDecision) {
	if !c.decisionTable {
		c.decided[k] = d
		return
	}
	if k.ts.decided == nil {
		k.ts.decided = make([]cachedDecision, len(c.classes)*len(c.shapes))
	}
	d.set = true
	k.ts.decided[c.decisionSlot(k)] = d
}

// decisionSlot is k's place in its team's table: by class (its place in
// cycle.classes), then shape.
func (c *cycle) decisionSlot(k decisionKey) int {
	i := 0
	for &c.classes[i] != k.class {
		i++
	}
	return i*len(c.shapes) + int(k.shape)
}

// plain reports whether w's decision depends only on its decisionKey and
// its team's usage: it holds no node, has no victims stopping or picture
// in a node's future, was not preempted lately, is no array task, may not
// be reserved a node against starvation, asks for no region (the message
// names regions with room), and the cluster has no burst pool (whether it
// may burst depends on how long it waited).
func (c *cycle) plain(w *core.Workload) bool {
	if !c.plainStatic(w) || w == c.starver {
		return false
	}
	// Nodes are held, and pictures made, at the start of a cycle for the
	// nominated workloads only (a workload's own decision holds the rest).
	if w.Status.Nominated == "" {
		return true
	}
	if len(c.holders[w.ID]) > 0 {
		return false
	}
	_, pictured := c.pictured[w.ID]
	return !pictured
}

// plainStatic is what plain asks of w that cannot change within the
// cycle (pendingWork.plainBase keeps it, for a workload not nominated).
func (c *cycle) plainStatic(w *core.Workload) bool {
	return !c.burst.any && w.Status.PreemptedAt == nil && w.Array == nil && len(w.Request.Regions) == 0 &&
		(len(c.terminating) == 0 || len(c.terminating[w.ID]) == 0)
}

// othersHold reports whether a team other than ts holds capacity. Usage
// only grows within a cycle: two teams that hold some keep answering.
func (c *cycle) othersHold(ts *teamState) bool {
	if len(c.holding) < 2 {
		c.holding = c.holding[:0]
		for _, o := range c.teams {
			if o.usage > 0 && len(c.holding) < 2 {
				c.holding = append(c.holding, o)
			}
		}
	}
	for _, o := range c.holding {
		if o != ts {
			return true
		}
	}
	return false
}

// othersWait reports whether work of a team other than ts, decided within
// its guarantee in this cycle, was left waiting.
func (c *cycle) othersWait(ts *teamState) bool {
	for t, n := range c.guaranteedWaiting {
		if n > 0 && t != ts {
			return true
		}
	}
	return false
}

// borrowsAgain reports whether p, holding a node as a preemptor whose
// victims are gone, was stopped by the scheduler less than MinRuntime ago
// and would now borrow.
func (c *cycle) borrowsAgain(p *pendingWork) bool {
	return p.class != nil && !p.class.IdleOnly && p.w.Status.Reason == ReasonPreempting && c.recentlyStopped(p.w) &&
		len(c.liveVictimsOf(p)) == 0 && !c.guaranteedNow(p)
}

// recentlyStopped reports whether the scheduler stopped w less than
// MinRuntime ago.
func (c *cycle) recentlyStopped(w *core.Workload) bool {
	at := w.Status.PreemptedAt
	return at != nil && c.now.Sub(*at) < c.opts.MinRuntime
}

// guaranteedNow is guaranteed for a pending workload of the cycle.
func (c *cycle) guaranteedNow(p *pendingWork) bool {
	if p.class == nil || p.class.IdleOnly {
		return false
	}
	in, _, _, _ := c.withinGuaranteeOf(p)
	return in
}

// guaranteed reports whether w would run within its team's guarantee now.
func (c *cycle) guaranteed(w *core.Workload) bool {
	class, ok := c.classOf(w)
	if !ok || class.IdleOnly {
		return false
	}
	in, _, _, _ := c.withinGuarantee(w, c.team(w.Team), class, c.askMilli(w))
	return in
}

// cycle is the scratch state of one Schedule call.
type cycle struct {
	bufs    *pendingBuffers // arrays by pending workload (readPending)
	opts    Options
	now     time.Time
	classes []core.PriorityClass
	nodes   []*nodeState // by name
	byName  map[core.NodeName]*nodeState
	teams   map[core.TeamName]*teamState
	// queues holds pending workloads by class value (descending), then by
	// team; next pops them in scheduling order.
	levels []*level
	// terminating counts, per preemptor, its victims still stopping.
	terminating map[core.WorkloadID][]*core.Workload
	// noFit remembers request shapes that fitted nowhere this cycle;
	// usage only grows within a cycle, so they fit nowhere later either.
	noFit map[fitKey]string
	// noFitResv remembers, for workloads that would borrow, the shapes
	// that fitted nowhere only because the starvation reservation refused
	// them (backfill): its refusals only grow within a cycle for them (what
	// it holds grows; its binding against them does not depend on usage),
	// so the scan of every node that explains each is not made again.
	noFitResv map[resvFitKey]string
	// noVictims remembers (team, class, shape, and whether within quota
	// and may burst) for which no victim set was found.
	noVictims map[victimKey]bool
	maxGPUMem int64
	// starver is the workload a node may be reserved for against
	// starvation in this cycle, if any.
	starver *core.Workload
	// first are the workloads holding a node from an earlier cycle, in the
	// order they are decided, before all others.
	first []*pendingWork
	// holders are the nominated workloads some nodes are held for, with
	// the nodes (hold: the others' held nodes are never looked up).
	holders map[core.WorkloadID][]*nodeState
	// never remembers, by request shape (its number), why no node could
	// hold it even empty ("" when some could).
	never map[int32]string
	plan  core.Plan
	// budgetSpent names the teams whose hard budget is spent, with the
	// message their waiting work shows (core.Snapshot.BudgetExceeded).
	budgetSpent map[core.TeamName]string
	reserved    bool // a starvation reservation was made this cycle
	// resvOf is the workload a node is reserved for now, if any (there
	// is one at a time), and resvAt that node.
	resvOf core.WorkloadID
	resvAt *nodeState
	// reservedBorrower is the workload whose reservation carried over from
	// the cycle before, when it would borrow: decided first of those
	// that would.
	reservedBorrower *pendingWork
	// arrays counts, by job array, its tasks running or placed in this
	// cycle, for the arrays' caps; arrayWanted its pending tasks counted
	// in its team's demand (array.go).
	arrays, arrayWanted map[core.WorkloadID]int
	// pictured are the preemptors placed in a node's future at the start
	// of the cycle, with where; a preemptor's own picture is taken out
	// when it is decided again.
	pictured map[core.WorkloadID]picture
	// inQuota and budget describe the workload being placed: whether it
	// runs within its team's guarantee, and the most milli-GPU its
	// placement may take (its team's limit, and for a class that may not
	// borrow its guarantee, less what the team holds; -1: no bound).
	inQuota bool
	budget  int64
	// soft is set when a placement failed on a node for a reason that
	// depends on the workload, not only its shape (a reservation, the
	// budget): such a failure is not remembered in noFit.
	soft bool
	// budgetHit is set when a place was refused for the budget alone.
	budgetHit bool
	// guaranteedWaiting counts, per team, the workloads decided within its
	// guarantee and left waiting in this cycle.
	guaranteedWaiting map[*teamState]int
	// kinds are the distinct device kinds (model and memory), for askMilli.
	kinds []core.GPU
	// kept are the replicas of the workload being placed that joined a
	// reservation's picture, so that a gang that does not fit undoes them.
	kept []keptReplica
	// scorer is the packing policy; its weights are set once a cycle, so
	// that a node's score for a request shape changes only when the node
	// does: memo keeps them, per shape, by node position.
	scorer scorer
	memo   map[memoShape]*memoEntry
	// changed lists every node changed (cycle.touch: a placement or its
	// undo, a hold or its release, a preemption), in order: the shape and
	// victim indexes catch up from it, and the scan memo stamps by its
	// length.
	changed []int32 // by position
	// burst: whether any node is in a burst pool, and whether the pass
	// under way places on burst nodes only.
	burst burstState
	// scratch is what victimSet works in, reused.
	scratch victimScratch
	// usageGen counts changes to the teams' usage (holdOn).
	usageGen uint64
	// holding caches up to two teams that hold capacity (othersHold).
	holding []*teamState
	// decided remembers the last decision of each decisionKey; uncacheable
	// is set while a decision is made that the next one alike might not
	// share.
	// decisionTable: the decisions are kept in the teams' tables, not in
	// decided (decisionTableAt).
	decided       map[decisionKey]cachedDecision
	decisionTable bool
	uncacheable   bool
	// scans remembers the explanations of placements that found nothing
	// (placeOne).
	scans map[scanKey]scanMemo
	// clusters are the distinct clusters of the nodes, by name; a gang
	// being placed in one of them names it in gangCluster.
	clusters    []string
	gangCluster *string
	// shapes are the pending workloads' shapes, numbered in the order
	// first seen (shapeNumbers.number).
	shapeNumbers
	// victimIdx holds the victim search's index of each preemptor shape
	// (victimindex.go); orderNotes and teamNotes are the buffers its
	// builds on several goroutines write in, one build at a time.
	victimIdx  map[shape]*victimIndex
	orderNotes []orderNote
	teamNotes  []teamNote
}

// scored is a node's remembered score for a request shape, valid while the
// node's version is version-1 (0: none).
type scored struct {
	version uint64
	gpu     int
	score   float64
	why     string
	// On a node held for preemptors: the choice that also fits its future
	// and stages (futureChoice), and whether there is one, valid while
	// the node, its future and its stages are as heldAt says.
	heldAt futureVersion
	heldCh choice
	heldOK bool
}

// futureVersion identifies the state of a node, its future and its stages:
// each only changes through add, which counts, and stages are only
// appended, so a change to any of them changes it. Zero: none.
type futureVersion struct {
	node, future, stages, holds uint64
	n                           int
}

func (ns *nodeState) futureVersion(c *cycle) futureVersion {
	v := futureVersion{node: ns.version + 1, future: ns.futureState(c).version, n: len(ns.stages), holds: ns.holdVersion}
	for _, st := range ns.stages {
		v.stages += st.version
	}
	return v
}

// memoShape is what onNodeWith reads of a request.
type memoShape struct {
	milli, gpuMem, cpu, mem   int64
	models, selector, regions string
}

// memoFor returns the remembered scores for req's shape, and the shape's
// index (none for the random policy, whose scores are not functions of
// the node: nothing is remembered).
func (c *cycle) memoFor(req core.Request) ([]scored, *shapeIndex) {
	if _, random := c.scorer.(*randomFit); random {
		return make([]scored, len(c.nodes)), nil
	}
	k := memoShape{milli: req.MilliGPU, gpuMem: req.GPUMemoryMiB, cpu: req.MilliCPU, mem: req.MemoryMiB, models: strings.Join(req.GPUModels, "\x00"), regions: strings.Join(req.Regions, "\x00")}
	if len(req.NodeSelector) > 0 {
		keys := slices.Sorted(maps.Keys(req.NodeSelector))
		for _, key := range keys {
			k.selector += key + "=" + req.NodeSelector[key] + "\x00"
		}
	}
	m, ok := c.memo[k]
	if !ok {
		m = &memoEntry{scores: c.newScores(len(c.nodes))}
		c.memo[k] = m
	}
	if m.index == nil {
		m.index = newShapeIndex(c, req, m.scores)
	}
	return m.scores, m.index
}

// memoEntry is what a cycle remembers of a request shape.
type memoEntry struct {
	scores []scored // by node position
	index  *shapeIndex
}

type level struct {
	value int
	ord   int // its place among the levels as they were found (teamState.queues)
	teams []*teamQueue
	// best is the team next chose last, when the usages were at gen.
	best *teamQueue
	gen  uint64
}

type teamQueue struct {
	team *teamState
	ws   []*pendingWork // by submission
	n    int            // its size, while the queues are made
}

// pendingWork is a pending workload with what its decision reads of it
// that does not change within a cycle, found once when the cycle starts
// rather than at every step that reads it (side by side, not spread over
// the snapshot): its team, class, ask (askMilli),
// shape (cycle.shapes), which guarantee it is judged against, and
// plainBase, a sufficient condition for plain but for the starving
// workload (a nominated one is checked in full: plainOf). It fills
// one cache line (64 bytes), read for every workload decided.
type pendingWork struct {
	w     *core.Workload
	id    core.WorkloadID
	ts    *teamState
	class *core.PriorityClass // nil: not defined (classOf)
	ask   int64
	seq   int64
	shape int32
	// totalGuarantee: it is judged against its team's total guarantee
	// (no model or pool guarantee covers it: withinGuarantee).
	totalGuarantee bool
	plainBase      bool
	nominated      bool // it holds a node from an earlier cycle
	decided        bool // among the first, decided already
}

// value is the workload's class value (0 for a class not defined, as
// cycle.value).
func (p *pendingWork) value() int {
	if p.class == nil {
		return 0
	}
	return p.class.Value
}

// plainOf is plain for a pending workload of the cycle.
func (c *cycle) plainOf(p *pendingWork) bool {
	if !p.plainBase {
		return c.plain(p.w)
	}
	return p.w != c.starver
}

// withinGuaranteeOf is withinGuarantee for a pending workload of the
// cycle, its class defined.
func (c *cycle) withinGuaranteeOf(p *pendingWork) (ok bool, held, guaranteed int64, scope string) {
	if !p.totalGuarantee {
		return c.withinGuarantee(p.w, p.ts, *p.class, p.ask)
	}
	held, guaranteed = p.ts.usageAtOrAbove(p.class.Value), p.ts.team.Guaranteed
	return held+p.ask <= guaranteed, held, guaranteed, ""
}

// shapeNumbers numbers shapes in the order they are first seen.
type shapeNumbers struct {
	shapes []shape
	byKey  map[shape]int32
	// byNumber: most shapes name no model, selector or residency: they
	// are found by their numbers alone (a key with no strings to hash);
	// the first few of them (plainAt) by a scan of plain, which costs
	// less than the hash, with their numbers in plainIDs.
	byNumber map[[5]int64]int32
	plain    [][5]int64
	plainIDs []int32
}

// plainAt is how many shapes shapeNumbers finds by a scan.
const plainAt = 16

// number returns the number of a shape in t.shapes, adding it there when
// it is new.
func (t *shapeNumbers) number(k shape) int32 {
	if k.models == "" && k.selector == "" && k.regions == "" {
		n := [5]int64{k.milli, k.gpuMem, k.cpu, k.mem, int64(k.replicas)}
		for i := range t.plain {
			if t.plain[i] == n {
				return t.plainIDs[i]
			}
		}
		id, ok := t.byNumber[n]
		if !ok {
			id = t.add(k)
			t.byNumber[n] = id
			if len(t.plain) < plainAt {
				t.plain, t.plainIDs = append(t.plain, n), append(t.plainIDs, id)
			}
		}
		return id
	}
	id, ok := t.byKey[k]
	if !ok {
		id = t.add(k)
		t.byKey[k] = id
	}
	return id
}

func (t *shapeNumbers) add(k shape) int32 {
	t.shapes = append(t.shapes, k)
	return int32(len(t.shapes) - 1)
}

func newCycle(o Options, snap *core.Snapshot, now time.Time) *cycle {
	c := &cycle{
		opts: o, now: now, classes: snap.Classes,
		byName: map[core.NodeName]*nodeState{}, teams: map[core.TeamName]*teamState{},
		terminating: map[core.WorkloadID][]*core.Workload{},
		noFit:       map[fitKey]string{}, noFitResv: map[resvFitKey]string{}, noVictims: map[victimKey]bool{}, holders: map[core.WorkloadID][]*nodeState{}, never: map[int32]string{},
		pictured: map[core.WorkloadID]picture{}, guaranteedWaiting: map[*teamState]int{}, victimIdx: map[shape]*victimIndex{}, decided: map[decisionKey]cachedDecision{}, scans: map[scanKey]scanMemo{},
		budgetSpent: snap.BudgetExceeded,
	}
	// Most of a long queue waits: room for every decision at once.
	c.plan.Unplaced = make([]core.Decision, 0, len(snap.Pending))
	if c.classes == nil {
		c.classes = core.DefaultPriorityClasses()
	}
	c.bufs = takePendingBuffers(len(snap.Pending))
	c.nodes = make([]*nodeState, len(snap.Nodes))
	states := c.bufs.nodeStates(len(snap.Nodes))
	inParts(len(snap.Nodes), parallelNodesAt, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			c.nodes[i] = newNodeStateIn(states[i], snap.Nodes[i], snap.Usage[snap.Nodes[i].Name])
		}
	})
	for i, n := range snap.Nodes {
		ns := c.nodes[i]
		c.burst.any = c.burst.any || n.Burst()
		c.byName[n.Name] = ns
		for gi := range n.GPUs {
			g := &n.GPUs[gi]
			c.maxGPUMem = max(c.maxGPUMem, g.MemoryMiB)
			if n.Schedulable && !slices.ContainsFunc(c.kinds, func(k core.GPU) bool { return k.Model == g.Model && k.MemoryMiB == g.MemoryMiB }) {
				c.kinds = append(c.kinds, core.GPU{Model: g.Model, MemoryMiB: g.MemoryMiB})
			}
		}
	}
	slices.SortFunc(c.nodes, func(a, b *nodeState) int { return cmp.Compare(a.node.Name, b.node.Name) })
	for _, ns := range c.nodes {
		if !slices.Contains(c.clusters, ns.node.Cluster) {
			c.clusters = append(c.clusters, ns.node.Cluster)
		}
	}
	slices.Sort(c.clusters)
	for i, ns := range c.nodes {
		ns.pos = i
	}
	for _, t := range snap.Teams {
		c.teams[t.Name] = &teamState{team: t}
	}
	// The mix the packing policy weighs placements against: what runs and
	// what waits (counted in the passes below, running work first).
	mix := NewMix(o.Packing != PackFGD)
	for _, n := range snap.Nodes {
		mix.addHost(n)
	}
	// 1. usage of running workloads (their records in one array).
	rws := make([]runningWorkload, len(snap.Running))
	for k, w := range snap.Running {
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
			if ns := c.byName[a.Node]; ns != nil {
				ns.running = append(ns.running, r)
				if w.Status.StopRequested != "" {
					ns.freeing = true
					ns.stoppingMilli += r.held
				}
			}
		}
		if w.Status.StopRequested != "" && w.Status.PreemptedBy != "" {
			c.terminating[w.Status.PreemptedBy] = append(c.terminating[w.Status.PreemptedBy], w)
		}
	}
	c.arrays = runningArrays(snap.Running)
	// 2. within or over quota.
	for _, ts := range c.teams {
		c.classify(ts)
	}
	// 3. pending demand and queues, from one reading of each pending
	// workload (pendingWork: what their decisions read of them; on a
	// long queue read on several goroutines: readPending).
	pws, queueOf := c.readPending(snap.Pending, mix)
	c.decisionTable = len(c.classes)*len(c.shapes) <= decisionTableAt
	mix.reweigh()
	sc, err := newScorer(o.Packing, mix, 1)
	if err != nil {
		sc, _ = newScorer(PackGPUFleet, mix, 1)
	}
	setNodes(sc, c.nodes)
	if pr, ok := sc.(preparer); ok {
		pr.prepare() // the weights hold for the whole cycle
	}
	c.scorer = sc
	c.memo = map[memoShape]*memoEntry{}
	ws := c.bufs.ws[:len(pws)]
	for _, l := range c.levels {
		for _, q := range l.teams {
			q.ws, ws = ws[:0:q.n], ws[q.n:]
		}
	}
	for k, q := range queueOf {
		q.ws = append(q.ws, &pws[k])
	}
	slices.SortFunc(c.levels, func(a, b *level) int { return cmp.Compare(b.value, a.value) })
	var nominated []*pendingWork
	for _, l := range c.levels {
		slices.SortFunc(l.teams, func(a, b *teamQueue) int { return cmp.Compare(a.team.team.Name, b.team.team.Name) })
		for _, q := range l.teams {
			bySubmission := func(a, b *pendingWork) int {
				if a.seq != b.seq {
					return cmp.Compare(a.seq, b.seq)
				}
				return cmp.Compare(a.id, b.id)
			}
			// Often in order already (the snapshot's).
			if !slices.IsSortedFunc(q.ws, bySubmission) {
				slices.SortStableFunc(q.ws, bySubmission)
			}
		}
	}
	for i := range pws { // in the snapshot's order
		if pws[i].nominated {
			nominated = append(nominated, &pws[i])
		}
	}
	// 4. fair shares of the schedulable capacity.
	var capacity int64
	for _, ns := range c.nodes {
		if ns.node.Schedulable {
			for gi := range ns.node.GPUs {
				g := &ns.node.GPUs[gi]
				if g.Usable() {
					capacity += 1000
				}
			}
		}
	}
	fts := make([]fairshare.Team, 0, len(c.teams))
	for _, ts := range c.teams {
		fts = append(fts, fairshare.Team{Name: string(ts.team.Name), Guaranteed: ts.team.Guaranteed, Limit: ts.team.Limit,
			Weight: ts.team.Weight, Demand: ts.usage + ts.demand})
	}
	shares := fairshare.Shares(capacity, fts)
	for _, ts := range c.teams {
		ts.share = shares[string(ts.team.Name)]
	}
	// What preemptors could take, by tier, for the victim search.
	c.fairTiers()
	inParts(len(c.nodes), parallelNodesAt, func(lo, hi int) {
		for _, ns := range c.nodes[lo:hi] {
			for _, r := range ns.running {
				if r.eligible {
					ns.noteEligible(r)
				}
			}
		}
	})
	for _, ns := range c.nodes {
		ns.joinTeams()
	}
	for _, ts := range c.teams {
		ts.lowest, ts.in = make([]int, len(ts.nodes)), make([]int, len(ts.nodes))
	}
	for _, ns := range c.nodes {
		for i, ts := range ns.teams {
			ts.lowest[ns.teamAt[i]] = ns.own[i][0].value
			ts.in[ns.teamAt[i]] = i
		}
	}
	// 5. Holds carried over from earlier cycles: a node nominated to a
	// pending workload (a preemptor, or one that starved) stays held for
	// it, so that the capacity its victims free, or its node's draining,
	// goes to it and not to whoever comes first in this cycle's order.
	// By class, submission and ID (stable: then in the snapshot's order).
	slices.SortStableFunc(nominated, func(a, b *pendingWork) int {
		return cmp.Or(cmp.Compare(b.value(), a.value()), cmp.Compare(a.seq, b.seq), cmp.Compare(a.id, b.id))
	})
	// First the one starvation reservation (the longest waiting workload of
	// the highest class keeps its node), then the preemptors: those waiting
	// on the starving node keep their claim too, but no new preemptor will
	// join them there.
	// (The workload that may hold a node against starvation, c.starver,
	// was chosen with the queues.)
	for _, p := range nominated {
		w := p.w
		ns := c.byName[w.Status.Nominated]
		if ns == nil || c.reserved || w != c.starver || w.Status.Reason == ReasonPreempting || !c.mayUse(ns, w) {
			continue
		}
		c.hold(ns, w)
		c.reserveOn(ns, w)
		c.reserved = true
		// A reserved workload that would borrow is decided after the work
		// within its teams' guarantees, and first of the rest: before
		// any workload its reservation could refuse, so that one refused
		// is never left waiting by a reservation given back later in the
		// cycle (its workload at its team's limit, say).
		if ns.resv.inQuota {
			c.first = append(c.first, p)
		} else {
			c.reservedBorrower = p
		}
	}
	for _, p := range nominated {
		w := p.w
		ns := c.byName[w.Status.Nominated]
		if ns == nil || w.Status.Reason != ReasonPreempting || !c.admissibleOf(p) || !c.mayUse(ns, w) {
			continue
		}
		c.first = append(c.first, p)
		c.hold(ns, w)
		f := ns.futureState(c)
		if ch, why := onNode(f, w.Request); why == "" {
			as := assignments(ch, w.Request)
			f.add(w.Request, as, +1)
			ns.pictures++
			c.pictured[w.ID] = picture{ns, as}
		}
	}
	return c
}

// unpicture takes w's picture out of its node's future.
func (c *cycle) unpicture(w *core.Workload, pic picture) {
	// Pictured before any stage was taken, so in every one of them.
	pic.ns.future.add(w.Request, pic.as, -1)
	for _, st := range pic.ns.stages {
		st.add(w.Request, pic.as, -1)
	}
	pic.ns.pictures--
	delete(c.pictured, w.ID)
	c.touch(pic.ns)
}

// keptReplica is a replica placed next to what a reservation holds.
type keptReplica struct {
	r  *reservation
	as []core.Assignment
}

// picture is a preemptor placed in a node's future.
type picture struct {
	ns *nodeState
	as []core.Assignment
}

// admissibleOf reports whether p passes its class and quota rules now:
// only such a workload keeps a node held for it from an earlier cycle.
func (c *cycle) admissibleOf(p *pendingWork) bool {
	if p.class == nil || p.class.IdleOnly {
		return false
	}
	if len(c.budgetSpent) > 0 {
		if _, spent := c.budgetSpent[p.w.Team]; spent && p.class.Preemptible {
			return false
		}
	}
	if !p.ts.team.LimitAllows(p.ts.usage + p.ask) {
		return false
	}
	in, _, _, _ := c.withinGuaranteeOf(p)
	return p.class.MayBorrow || in
}

// futureState returns the node as it will be once the stops under way have
// happened (and, as preemptions are planned, with their preemptors placed).
func (ns *nodeState) futureState(c *cycle) *nodeState {
	if ns.future == nil {
		f := ns.clone()
		for _, r := range ns.running {
			if r.w.Status.StopRequested != "" {
				f.add(r.w.Request, r.w.Status.Placement, -1)
				ns.freeing = true
			}
		}
		ns.future = f
	}
	return ns.future
}

// team returns the state of a team, creating one without quota for a team
// the snapshot does not list.
func (c *cycle) team(name core.TeamName) *teamState {
	ts := c.teams[name]
	if ts == nil {
		ts = &teamState{team: core.NewTeam(name, time.Time{})}
		c.teams[name] = ts
	}
	return ts
}

// next pops the next pending workload: the highest class first; within a
// class, the team furthest below its fair share (usage/share, recomputed
// as placements are made), then the team with the larger share, then by
// team name; within a team, the earliest submitted.
func (c *cycle) next() *pendingWork {
	for len(c.levels) > 0 {
		l := c.levels[0]
		// The team chosen last stays the one to choose while no team's
		// usage changed and it has work left.
		if b := l.best; b != nil && l.gen == c.usageGen && len(b.ws) > 0 {
			p := b.ws[0]
			b.ws = b.ws[1:]
			return p
		}
		var best *teamQueue
		for _, q := range l.teams {
			if len(q.ws) == 0 {
				continue
			}
			if best == nil {
				best = q
				continue
			}
			// Furthest below its fair share first; at a tie, the team
			// entitled to more.
			if d := fairshare.CompareDeficit(q.team.usage, q.team.share, best.team.usage, best.team.share); d < 0 || (d == 0 && q.team.share > best.team.share) {
				best = q
			}
		}
		if best == nil {
			c.levels = c.levels[1:]
			continue
		}
		l.best, l.gen = best, c.usageGen
		p := best.ws[0]
		best.ws = best.ws[1:]
		return p
	}
	return nil
}

// heldMilli is what a running workload holds.
func heldMilli(w *core.Workload) int64 {
	var m int64
	for _, a := range w.Status.Placement {
		m += a.MilliGPU
	}
	return m
}

// askMilli is what a pending workload asks for, in milli-GPU: the least it
// can be charged where it lands. A count or a fraction is charged as asked;
// a request by memory takes, on each device, the share of the device that
// memory is, so it is counted at its smallest share among the devices of
// the models it accepts (the ledger then records the share it takes where
// it lands, and the placement is bounded by what the team may still take:
// see decide's budget).
func (c *cycle) askMilli(w *core.Workload) int64 {
	return c.perReplica(w.Request) * int64(w.Request.Count())
}

// perReplica is askMilli for one replica.
func (c *cycle) perReplica(r core.Request) int64 {
	if r.MilliGPU > 0 {
		return r.MilliGPU
	}
	per := int64(-1)
	for _, g := range c.kinds {
		if milli, _, ok := r.ShareOn(g); ok && allows(&r, &g) && (per < 0 || milli < per) {
			per = milli
		}
	}
	switch {
	case per >= 0:
		return per
	case c.maxGPUMem > 0:
		return min(1000, (r.GPUMemoryMiB*1000+c.maxGPUMem-1)/c.maxGPUMem)
	}
	return 1000
}

// shape is a request's shape; what a cycle remembers by shape (never,
// noFit, noVictims) it keys by the shape's number (shapeNumbers). It is
// built without formatting: a request
// with no model list, selector or residency allocates nothing.
type shape struct {
	milli, gpuMem, cpu, mem   int64
	replicas                  int
	models, selector, regions string
}

func shapeKey(r core.Request) shape {
	k := shape{milli: r.MilliGPU, gpuMem: r.GPUMemoryMiB, cpu: r.MilliCPU, mem: r.MemoryMiB, replicas: r.Replicas}
	if len(r.GPUModels) > 0 {
		k.models = "\x01" + strings.Join(r.GPUModels, "\x00")
	}
	if len(r.Regions) > 0 {
		k.regions = "\x01" + strings.Join(r.Regions, "\x00")
	}
	if len(r.NodeSelector) > 0 {
		for _, key := range slices.Sorted(maps.Keys(r.NodeSelector)) {
			k.selector += key + "=" + r.NodeSelector[key] + "\x00"
		}
	}
	return k
}

// fitKey is noFit's key: a shape (its number), and whether the workload
// may burst (it then tries more nodes than one of its shape that may
// not).
type fitKey struct {
	shape int32
	burst bool
}

// resvFitKey is noFitResv's key: a placement's shape and pass, its max
// runtime (a reservation's backfill reads it), the workload the one
// starvation reservation is for, and whether the reservation binds the
// placement (binds: always for a workload that would borrow; for one
// within its team's guarantee, while the reserved workload is within its
// own, which, its team's usage only growing, once false stays so).
type resvFitKey struct {
	fit        fitKey
	maxRuntime time.Duration
	resv       core.WorkloadID
	binds      bool
}

// resvFitKey is w's key in noFitResv, w within its team's guarantee or
// not (inQuota), while a reservation lasts.
func (c *cycle) resvFitKey(fk fitKey, w *core.Workload, inQuota bool) resvFitKey {
	ns := c.resvAt
	return resvFitKey{fit: fk, maxRuntime: w.MaxRuntime, resv: c.resvOf, binds: c.binds(ns, w, inQuota)}
}

// victimKey is noVictims's key: the team, the class (one of the cycle's),
// the shape's number, whether within quota and whether it may burst. It
// holds no string, so that it hashes at once.
type victimKey struct {
	team           *teamState
	class          *core.PriorityClass
	shape          int32
	inQuota, burst bool
}

func (c *cycle) unplaced(w *core.Workload, reason, msg string, nominated core.NodeName) {
	c.plan.Unplaced = append(c.plan.Unplaced, core.Decision{Workload: w.ID, Reason: reason, Message: msg, Nominated: nominated})
}

// decide places one workload, preempts for it, or explains why it waits.
// Nodes held for it from earlier cycles that its decision does not keep are
// given back, so that the rest of the cycle may use them.
//
// Most workloads of a long queue are plain and decided as the last one of
// their team, class and shape was: that decision is reused here, before
// decideAll (whose frame is large, with its deferred work) is entered. For
// a plain workload of a defined class, with no team's budget spent, what
// decideAll checks before the reuse holds nothing against it (it holds no
// node, is no array task, has no victims stopping and is pictured
// nowhere), so the reuse is the same.
func (c *cycle) decide(p *pendingWork) {
	if p.plainBase && p.class != nil && len(c.budgetSpent) == 0 && p.w != c.starver {
		ts := p.ts
		if d, ok := c.decisionOf(decisionKey{ts, p.class, p.shape}); ok && d.usage == ts.usage && d.others == c.othersHold(ts) {
			c.plan.Unplaced = append(c.plan.Unplaced, core.Decision{Workload: p.id, Reason: d.reason, Message: d.message})
			return
		}
	}
	c.decideAll(p)
}

// decideAll is decide in full.
func (c *cycle) decideAll(p *pendingWork) {
	w := p.w
	plain := c.plainOf(p)
	// Nodes are held for a workload before its decision only from an
	// earlier cycle, through its nomination (newCycle). (Its record says
	// so: a workload decided as one a moment ago is decided without
	// reading the workload itself.)
	if p.nominated && len(c.holders[p.id]) > 0 {
		defer func() {
			var keep *nodeState
			if n := len(c.plan.Unplaced); n > 0 && c.plan.Unplaced[n-1].Workload == w.ID {
				keep = c.byName[c.plan.Unplaced[n-1].Nominated]
			}
			c.release(w.ID, keep)
		}()
	}
	if p.class == nil {
		c.unplaced(w, ReasonUnknownClass, fmt.Sprintf("priority class %q is not defined", w.Priority), "")
		return
	}
	class := *p.class
	// (A plain workload is no array task, has no victims stopping and
	// was pictured in no node's future.)
	if !p.plainBase && c.arrayFull(w) {
		return
	}
	ts, ask := p.ts, p.ask

	// A team whose hard budget is spent starts no more work that could be
	// preempted; production still runs.
	if len(c.budgetSpent) > 0 {
		if msg, spent := c.budgetSpent[w.Team]; spent && class.Preemptible {
			c.unplaced(w, ReasonBudgetExceeded, msg, "")
			return
		}
	}

	// A preemptor whose victims are still stopping waits for them; its node
	// is held for it (see newCycle). One that its quota rules no longer
	// admit (its team took the room meanwhile) holds nothing: it is
	// decided afresh, and says which rule keeps it waiting.
	if vs := c.liveVictimsOf(p); len(vs) > 0 && c.admissibleOf(p) {
		node := vs[0].Status.Placement[0].Node
		if w.Status.Nominated != "" {
			node = w.Status.Nominated
		}
		c.unplaced(w, ReasonPreempting, fmt.Sprintf("waiting for %d preempted %s to stop on %s", len(vs), plural(len(vs), "workload", "workloads"), node), node)
		return
	}
	// Otherwise its picture in its node's future is taken out: what it is
	// decided now is recorded anew (a placement, or a new preemption).
	// (Only the nominated are pictured: newCycle.)
	if p.nominated {
		if pic, ok := c.pictured[w.ID]; ok {
			c.unpicture(w, pic)
		}
	}

	// A workload decided as one of its team, class and shape was a moment
	// ago, with its team holding what it held then, is decided alike
	// (decisionKey).
	if plain {
		dk := decisionKey{ts, p.class, p.shape}
		if d, ok := c.decisionOf(dk); ok && d.usage == ts.usage && d.others == c.othersHold(ts) {
			c.plan.Unplaced = append(c.plan.Unplaced, core.Decision{Workload: p.id, Reason: d.reason, Message: d.message})
			return
		}
		n, placed, preempted := len(c.plan.Unplaced), len(c.plan.Placements), len(c.plan.Preemptions)
		c.uncacheable = false
		defer func() {
			if c.uncacheable || len(c.plan.Placements) != placed || len(c.plan.Preemptions) != preempted || len(c.plan.Unplaced) != n+1 {
				return
			}
			if d := c.plan.Unplaced[n]; d.Nominated == "" && d.Reason != ReasonPreempting {
				c.rememberDecision(dk, cachedDecision{reason: d.Reason, message: d.Message, usage: ts.usage, others: c.othersHold(ts)})
			}
		}()
	}
	// A request no node could hold even empty says so first: no quota
	// and no preemption would help it.
	never, known := c.never[p.shape]
	if !known {
		never = c.neverMessage(w.Request)
		c.never[p.shape] = never
	}
	if never != "" {
		c.unplaced(w, ReasonUnschedulable, never, "")
		return
	}

	// Quota rules.
	if !ts.team.LimitAllows(ts.usage + ask) {
		c.unplaced(w, ReasonQuotaLimit, fmt.Sprintf("team %s at its limit (%s/%s GPUs; this workload needs %s)", ts.team.Name, gpus(ts.usage), gpus(ts.team.Limit), gpus(ask)), "")
		return
	}
	// Within quota: what the team holds in this class and above, plus this
	// workload, stays within its guarantee (lower classes of the team can be
	// preempted for it).
	within, held, guaranteed, scope := c.withinGuaranteeOf(p)
	inQuota := !class.IdleOnly && within
	if !class.MayBorrow && !inQuota {
		c.unplaced(w, ReasonOverQuota, fmt.Sprintf("%s runs only within the team's guarantee: team %s holds %s of %s guaranteed %sGPUs in %s and above, and this workload needs %s",
			class.Name, ts.team.Name, gpus(held), gpus(guaranteed), scope, class.Name, gpus(ask)), "")
		return
	}

	// A workload the scheduler stopped less than MinRuntime ago starts
	// again only within its team's guarantee while another team's work
	// within its guarantee waits (it would reclaim it at once): a decision
	// holds for MinRuntime. Batch is the exception: it lives on idle
	// capacity.
	if at := w.Status.PreemptedAt; c.recentlyStopped(w) && !inQuota && !class.IdleOnly && c.othersWait(ts) {
		c.unplaced(w, ReasonRecentlyPreempted, fmt.Sprintf("stopped for another workload at %s: it runs again within team %s's guarantee at once, or on borrowed capacity from %s",
			at.UTC().Format(time.RFC3339), ts.team.Name, at.Add(c.opts.MinRuntime).UTC().Format(time.RFC3339)), "")
		return
	}

	// Place on free capacity, charging no more than the team's limit (and,
	// for a class that may not borrow, its guarantee) leaves: a request
	// by memory is charged the share it takes where it lands. A shape that
	// fitted nowhere for a workload that holds no node fits nowhere for
	// another such workload, unless a reservation or the budget refused
	// it; one that holds a node always tries.
	c.inQuota, c.budget = inQuota, -1
	if ts.team.Limit >= 0 {
		c.budget = max(0, ts.team.Limit-ts.usage)
	}
	if !class.MayBorrow {
		room := max(0, guaranteed-held)
		if c.budget < 0 || room < c.budget {
			c.budget = room
		}
	}
	holder := len(c.heldBefore(w)) > 0
	// A workload that may burst tries more nodes than one of its shape
	// that may not: their failures are remembered apart.
	burst := c.burst.any && c.mayBurst(w)
	fk := fitKey{p.shape, burst}
	noFit, failed := c.noFit[fk]
	// One that the starvation reservation refused (softly: another
	// workload may fit where it did not) fails alike for another of its
	// shape and max runtime that the reservation binds alike, while it
	// lasts (resvFitKey).
	var rk resvFitKey
	if !failed && !holder && c.resvOf != "" {
		rk = c.resvFitKey(fk, w, inQuota)
		if why, ok := c.noFitResv[rk]; ok {
			noFit, failed = why, true
			c.uncacheable = true
		}
	}
	if !failed || holder {
		c.soft, c.budgetHit = false, false
		as, why := c.place(w)
		if as != nil {
			c.plan.Placements = append(c.plan.Placements, core.Placement{Workload: w.ID, Assignments: as})
			c.arrayStarted(w)
			c.holdOn(ts, class, as, heldOf(as))
			c.promoteFair(ts)
			ts.pending -= ask
			var end time.Time
			if w.MaxRuntime > 0 {
				end = c.now.Add(w.MaxRuntime)
			}
			for _, n := range core.Nodes(as) {
				on, _ := core.OnNode(as, n)
				ns := c.byName[n]
				ns.placed = append(ns.placed, item{req: w.Request, as: on, started: c.now, end: end})
			}
			return
		}
		noFit = why
		switch {
		case !holder && !c.soft:
			c.noFit[fk] = why
		case !holder && !c.budgetHit && c.resvOf != "" && c.resvOf != w.ID:
			c.noFitResv[c.resvFitKey(fk, w, inQuota)] = why
			c.uncacheable = true
		default:
			c.uncacheable = true // the next one may fit
		}
		// Where it fits, what it would take there is more than its team
		// may still take: that is the limit (or, for a class that may not
		// borrow, the guarantee) speaking, not a lack of room.
		if c.budgetHit {
			reason, bound := ReasonQuotaLimit, fmt.Sprintf("team %s's limit leaves %s GPUs", ts.team.Name, gpus(max(0, ts.team.Limit-ts.usage)))
			if !class.MayBorrow && (ts.team.Limit < 0 || guaranteed-held < ts.team.Limit-ts.usage) {
				reason, bound = ReasonOverQuota, fmt.Sprintf("%s runs only within the team's guarantee, and team %s has %s GPUs of it left", class.Name, ts.team.Name, gpus(max(0, guaranteed-held)))
			}
			c.unplaced(w, reason, fmt.Sprintf("%s, less than it takes where it fits: %s", bound, noFit), "")
			return
		}
	}

	// Preempt, if its class and quota allow it. Gangs do not preempt in
	// this version: their victims would have to be found on several nodes
	// at once.
	if !class.IdleOnly && w.Request.Count() == 1 {
		vkey := victimKey{ts, p.class, p.shape, inQuota, burst}
		if !c.noVictims[vkey] {
			if node, vs, maxShare := c.findVictims(w, class, ts, ask, inQuota); node != nil {
				c.preempt(w, node, vs, maxShare)
				return
			}
			c.noVictims[vkey] = true
		}
	}

	// Wait, and reserve a node if it has waited too long (or keep the one
	// reserved for it before).
	msg := noFit
	// Say what residency and bursting do for it.
	if c.burst.any && !burst {
		msg += c.burstNote(w, "")
	}
	if r := c.residencyNote(w); r != "" {
		msg = r + "; " + msg
	}
	// Say why no preemption helps: what makes the capacity out of reach.
	switch {
	case class.IdleOnly || w.Request.Count() > 1 || !c.othersHold(ts):
	case inQuota:
		msg += "; team " + string(ts.team.Name) + " is within its guarantee, but what holds the capacity cannot be preempted for it (within quota, or a class that is never preempted)"
	case ts.usage+ask > ts.share:
		msg += "; team " + string(ts.team.Name) + " holds " + gpus(ts.usage) + " GPUs and its fair share is " + gpus(ts.share) + ", so it cannot reclaim more"
	case !c.opts.FairShareReclaim:
		msg += "; team " + string(ts.team.Name) + " is below its fair share, but fair-share reclaim is off"
	default:
		msg += "; team " + string(ts.team.Name) + " is below its fair share, but what holds the capacity is within its teams' quotas, has run less than " + c.opts.MinRuntime.String() + ", or is never preempted"
	}
	var nominated core.NodeName
	if w == c.starver {
		ns := c.heldFor(w.ID)
		if ns == nil && !c.reserved {
			if ns = c.reserve(w); ns != nil {
				c.reserved = true
			}
		}
		if ns != nil {
			nominated = ns.node.Name
			// No running clock in the message: it is rewritten (and
			// recorded) only when something changes.
			msg += ns.resv.waitMessage(ns)
		}
	}
	reason := ReasonUnschedulable
	if class.IdleOnly {
		reason = ReasonIdleOnly
		msg = class.Name + " runs only on idle capacity: " + msg
	}
	c.unplaced(w, reason, msg, nominated)
}

// preempt plans the preemption of victims vs on node for w (which may take
// at most maxShare of a device there, see reclaimOn): the victims are
// chosen, the node's future pictures w in their room, and w waits for
// them, nominated to the node.
func (c *cycle) preempt(w *core.Workload, node *nodeState, vs []candidate, maxShare int64) {
	msgs := preemptionMessages{preemptor: w}
	for _, v := range vs {
		c.chose(&v)
		for i, a := range v.victim.Status.Placement {
			if placedBefore(v.victim.Status.Placement, i) {
				continue // core.Nodes: each node once, as first named
			}
			if ns := c.byName[a.Node]; ns != nil {
				ns.forgetChosen(v.runningWorkload)
				c.touch(ns)
			}
		}
		c.plan.Preemptions = append(c.plan.Preemptions, core.Preemption{Victim: v.victim.ID, Attempt: v.victim.Status.Attempts,
			Preemptor: w.ID, Reason: v.reason(), Message: msgs.of(v)})
	}
	// The node's future: the victims gone, this workload in. Where earlier
	// preemptors are placed in it, it is kept as a stage first: what they
	// count on must stay theirs.
	f := node.futureState(c)
	if node.pictures > 0 {
		node.stages = append(node.stages, c.stage(f))
	}
	for _, v := range vs {
		f.add(v.victim.Request, v.victim.Status.Placement, -1)
	}
	if ch, fits := fitsWithin(f, w.Request, maxShare); fits {
		f.add(w.Request, assignments(ch, w.Request), +1)
		node.pictures++
	}
	c.hold(node, w)
	node.freeing = true
	c.touch(node)
	n := len(vs)
	if n == 0 {
		n = c.stopping(node)
	}
	c.unplaced(w, ReasonPreempting, "waiting for "+strconv.Itoa(n)+" preempted "+plural(n, "workload", "workloads")+" to stop on "+string(node.node.Name), node.node.Name)
}

// stopping counts the workloads stopping, or chosen to stop, on a node.
func (c *cycle) stopping(ns *nodeState) int {
	n := 0
	for _, r := range ns.running {
		if r.chosen || r.w.Status.StopRequested != "" {
			n++
		}
	}
	return n
}

// placedBefore reports whether an assignment before as[i] is on its node:
// a loop over as that skips those visits the nodes of core.Nodes(as), in
// its order, without making the list.
func placedBefore(as []core.Assignment, i int) bool {
	for _, a := range as[:i] {
		if a.Node == as[i].Node {
			return true
		}
	}
	return false
}

// heldBefore returns the nodes held for w while it is placed, before its
// own decision holds any: only a nominated workload holds nodes then
// (newCycle), so the others skip the lookup.
func (c *cycle) heldBefore(w *core.Workload) []*nodeState {
	if w.Status.Nominated == "" {
		return nil
	}
	return c.holders[w.ID]
}

// hold keeps ns for w. Only a nominated workload's held nodes are looked
// up again (heldBefore, plain, and release when its decision is made), so
// only those are listed in holders: a cycle holds nodes for thousands of
// preemptors, each decided once.
func (c *cycle) hold(ns *nodeState, w *core.Workload) {
	ns.hold(w.ID)
	c.touch(ns)
	if w.Status.Nominated != "" && !slices.Contains(c.holders[w.ID], ns) {
		c.holders[w.ID] = append(c.holders[w.ID], ns)
	}
}

// release gives back the nodes held for id except keep.
func (c *cycle) release(id core.WorkloadID, keep *nodeState) {
	var kept []*nodeState
	for _, ns := range c.holders[id] {
		if ns == keep {
			kept = append(kept, ns)
			continue
		}
		ns.reservedFor = slices.DeleteFunc(ns.reservedFor, func(x core.WorkloadID) bool { return x == id })
		if ns.resv != nil && ns.resv.w.ID == id {
			ns.resv = nil
			c.resvOf, c.resvAt = "", nil
		}
		ns.holdVersion++
		c.touch(ns)
	}
	c.holders[id] = kept
}

// heldFor returns the node held for id by a starvation reservation, if any.
func (c *cycle) heldFor(id core.WorkloadID) *nodeState {
	for _, ns := range c.nodes {
		if ns.resv != nil && ns.resv.w.ID == id {
			return ns
		}
	}
	return nil
}

// chargeOf is what placing req as ch takes, in milli-GPU.
func chargeOf(ch choice, req core.Request) int64 {
	if want := req.WholeGPUs(); want > 0 {
		return int64(want) * 1000
	}
	return share(ch.ns, req, ch.gpu)
}

func heldOf(as []core.Assignment) int64 {
	var m int64
	for _, a := range as {
		m += a.MilliGPU
	}
	return m
}

// liveVictimsOf is liveVictims for a pending workload of the cycle: a
// plain one has none.
func (c *cycle) liveVictimsOf(p *pendingWork) []*core.Workload {
	if p.plainBase {
		return nil
	}
	return c.liveVictims(p.w)
}

// liveVictims lists the running workloads still stopping for w.
func (c *cycle) liveVictims(w *core.Workload) []*core.Workload {
	var out []*core.Workload
	for _, v := range c.terminating[w.ID] {
		if len(v.Status.Placement) > 0 {
			out = append(out, v)
		}
	}
	return out
}

// place finds the best free place for w on nodes that are not reserved for
// another workload, records it, and returns its devices; or explains why
// there is none.
func (c *cycle) place(w *core.Workload) ([]core.Assignment, string) {
	as, why := c.placeIn(w)
	if as != nil || !c.burst.any || !c.mayBurst(w) {
		return as, why
	}
	// Burst nodes are the last resort: tried, alone, only when nothing
	// else has room (a gang is not split between them and the others).
	c.burst.pass = true
	as, tried := c.placeIn(w)
	c.burst.pass = false
	if as != nil {
		return as, ""
	}
	return nil, why + c.burstNote(w, tried)
}

// placeIn is place on the nodes of the pass under way: every node but the
// burst ones, or the burst ones only.
func (c *cycle) placeIn(w *core.Workload) ([]core.Assignment, string) {
	if w.Request.Count() == 1 {
		return c.placeOne(w, 0)
	}
	// A gang runs within one cluster (its replicas talk to each other):
	// where the nodes span several, each is tried in turn, by name, and
	// the first that holds every replica wins.
	if len(c.clusters) < 2 {
		return c.placeGang(w)
	}
	var whys []string
	for _, cl := range c.clusters {
		c.gangCluster = &cl
		as, why := c.placeGang(w)
		c.gangCluster = nil
		if as != nil {
			return as, ""
		}
		name := cl
		if name == "" {
			name = "(none)"
		}
		whys = append(whys, "cluster "+name+": "+why)
	}
	return nil, strings.Join(whys, "; ")
}

// placeGang places the replicas of a gang one by one, each where it fits
// best given the replicas already placed, and undoes them all if one does
// not fit (all or nothing).
func (c *cycle) placeGang(w *core.Workload) ([]core.Assignment, string) {
	var all []core.Assignment
	budget, kept := c.budget, len(c.kept)
	for r := range w.Request.Count() {
		as, why := c.placeOne(w, r)
		if as == nil {
			c.budget = budget
			for _, k := range c.kept[kept:] {
				k.r.kept.add(w.Request, k.as, -1)
			}
			c.kept = c.kept[:kept]
			for _, ns := range c.nodes {
				if on, _ := core.OnNode(all, ns.node.Name); len(on) > 0 {
					c.commit(ns, w.Request, all, -1)
				}
			}
			return nil, fmt.Sprintf("gang of %d: replica %d does not fit: %s", w.Request.Count(), r+1, why)
		}
		all = append(all, as...)
	}
	return all, ""
}

// placeOne places one replica of w: on the node where the packing policy
// scores it best (ties to the first in name order), among those its
// holds, reservations and budget leave it. A workload of one replica,
// outside the burst pass, is placed through the shape's index (index.go),
// which visits the nodes best score first and stops once no node left can
// win; the scan of every node remains for the rest, and for the
// explanation when nothing fits.
func (c *cycle) placeOne(w *core.Workload, replica int) ([]core.Assignment, string) {
	req := w.Request
	var best choice
	bestKeep := false
	memo, idx := c.memoFor(req)
	found := false
	// When the index finds no place, the scan below only explains why:
	// the same explanation holds for the next workload that the nodes
	// would refuse alike, while no node changed (scanKey).
	var sk scanKey
	memoScan := false
	if idx != nil && !c.burst.pass && req.Count() == 1 {
		best, bestKeep, found = idx.search(c, w, memo)
		if !found && !idx.broken && len(c.heldBefore(w)) == 0 && !c.reservedFor(w) {
			sk, memoScan = scanKey{shapeKey(req), c.inQuota, w.MaxRuntime, c.budget}, true
			if m, ok := c.scans[sk]; ok && m.stamp == len(c.changed) {
				c.soft, c.budgetHit = c.soft || m.soft, c.budgetHit || m.budgetHit
				return nil, m.why
			}
		}
	}
	if !found {
		soft, budgetHit := c.soft, c.budgetHit
		c.soft, c.budgetHit = false, false
		defer func() { c.soft, c.budgetHit = c.soft || soft, c.budgetHit || budgetHit }()
		var why tally
		considered := len(c.nodes)
		for _, ns := range c.nodes {
			if c.burst.any && ns.node.Burst() != c.burst.pass {
				if c.burst.pass {
					considered--
				} else {
					why.add(whyBurst)
				}
				continue
			}
			if c.gangCluster != nil && ns.node.Cluster != *c.gangCluster {
				why.add(whyCluster)
				continue
			}
			ch, keep, reason := c.fitOn(ns, w, req, &memo[ns.pos])
			switch reason {
			case "":
			case whyWhole, whyShare:
				why.add(reason)
				why.near(ns, req)
				continue
			case whyStarving:
				why.add(reason)
				c.soft = true
				continue
			case whyLimit:
				why.add(reason)
				c.soft, c.budgetHit = true, true
				continue
			default:
				why.add(reason)
				continue
			}
			// Among burst nodes, the cheapest pool first.
			d := 0
			if c.burst.pass && best.ns != nil {
				d = c.cheaper(ch.ns, best.ns)
			}
			if best.ns == nil || d < 0 || (d == 0 && ch.score < best.score) {
				best, bestKeep = ch, keep // nodes are in name order, so ties go to the first
			}
		}
		if best.ns == nil {
			msg := why.message(considered, req)
			if memoScan {
				c.scans[sk] = scanMemo{stamp: len(c.changed), why: msg, soft: c.soft, budgetHit: c.budgetHit}
			}
			return nil, msg
		}
	}
	as := assignments(best, req)
	for i := range as {
		as[i].Replica = replica
	}
	c.commit(best.ns, req, as, +1)
	if bestKeep {
		best.ns.resv.kept.add(req, as, +1)
		c.kept = append(c.kept, keptReplica{best.ns.resv, as})
	}
	if c.budget >= 0 {
		c.budget -= heldOf(as)
	}
	return as, ""
}

// touch notes that ns changed, for the shape and victim indexes, and for
// the victim orders of the teams that run work there.
func (c *cycle) touch(ns *nodeState) {
	c.changed = append(c.changed, int32(ns.pos))
	for i, ts := range ns.teams {
		ts.changed = append(ts.changed, int32(ns.teamAt[i]))
	}
}

// scanKey is what a placement's explanation depends on besides the nodes
// (for a workload that holds no node and is reserved none): its shape,
// whether it runs within its team's guarantee and its max runtime (a
// reservation's backfill reads them), and what its team may still take.
type scanKey struct {
	shape      shape
	inQuota    bool
	maxRuntime time.Duration
	budget     int64
}

// scanMemo is an explanation made while the nodes were at stamp (the
// length of cycle.changed), with the soft reasons it met.
type scanMemo struct {
	stamp           int
	why             string
	soft, budgetHit bool
}

// reservedFor reports whether a node is reserved for w.
func (c *cycle) reservedFor(w *core.Workload) bool {
	return c.resvOf == w.ID && w.ID != ""
}

// commit is nodeState.commit on a node of the cycle, noted for the shape
// indexes.
func (c *cycle) commit(ns *nodeState, req core.Request, as []core.Assignment, sign int64) {
	ns.commit(req, as, sign)
	c.touch(ns)
}

// fitOn says whether w (one replica, req) may be placed on ns now, and how
// (keep: next to what the node's reservation holds); reason says why not.
// m is the node's remembered score for req's shape.
func (c *cycle) fitOn(ns *nodeState, w *core.Workload, req core.Request, m *scored) (choice, bool, string) {
	var ch choice
	var reason string
	if m.version == ns.version+1 {
		ch, reason = choice{ns: ns, gpu: m.gpu, score: m.score}, m.why
	} else {
		ch, reason = onNodeWith(ns, req, c.scorer)
		*m = scored{version: ns.version + 1, gpu: ch.gpu, score: ch.score, why: reason}
	}
	if reason != "" {
		return choice{}, false, reason
	}
	base := ch
	// A starvation reservation leaves the node to others where what
	// it holds still fits next to them, or where they will be gone
	// before its workload can start (backfill).
	keep := false
	switch {
	case c.binds(ns, w, c.inQuota):
		var ok bool
		if ch, keep, ok = c.backfillOn(ns, w, req, ch); !ok {
			return choice{}, false, whyStarving
		}
	case ns.resv != nil && ns.resv.w.ID != w.ID:
		keep = true // within its guarantee: it stays, and the reservation knows
	}
	// A node held for preemptors may still take what they will not
	// need: the placement must also fit the node's future, where they
	// are already placed. What it finds depends only on the node, its
	// future and stages, and the choice made now: it is remembered with
	// the score.
	if ns.heldForOther(w.ID) {
		fv := ns.futureVersion(c)
		same := ch.as == nil && ch.gpu == base.gpu && ch.score == base.score
		ok := true
		if same && m.heldAt == fv {
			ch, ok = m.heldCh, m.heldOK
		} else {
			if !ns.fitsFutures(c, req, ch) {
				ch, ok = c.futureChoice(ns, req, ch)
			}
			if same {
				m.heldAt, m.heldCh, m.heldOK = fv, ch, ok
			}
		}
		if !ok {
			return choice{}, false, whyReserved
		}
	}
	// What it takes there must stay within its team's budget.
	if c.budget >= 0 && chargeOf(ch, req) > c.budget {
		return choice{}, false, whyLimit
	}
	return ch, keep, ""
}

// futureChoice finds devices for req on ns that are free now and in the
// node's future and each of its stages (the scorer's choice may be devices
// pictured for the preemptors the node is held for): the best-scoring
// device for a share, the first free ones for whole GPUs.
func (c *cycle) futureChoice(ns *nodeState, req core.Request, ch choice) (choice, bool) {
	ns.futureState(c)
	if want := req.WholeGPUs(); want > 0 {
		var as []core.Assignment
		for i := range ns.node.GPUs {
			g := &ns.node.GPUs[i]
			if len(as) < want && allows(&req, g) && ns.freeIn(i) {
				as = append(as, core.Assignment{Node: ns.node.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB})
			}
		}
		if len(as) < want {
			return choice{}, false
		}
		alt := ch
		alt.as = as
		if !ns.fitsFutures(c, req, alt) {
			return choice{}, false
		}
		return alt, true
	}
	if ch.gpu < 0 {
		return choice{}, false
	}
	best, found := choice{}, false
	for i := range ns.node.GPUs {
		g := &ns.node.GPUs[i]
		milli, mem, ok := req.ShareOn(*g)
		if !ok || !allows(&req, g) || ns.used[i].MilliGPU+milli > 1000 || ns.used[i].MemoryMiB+mem > g.MemoryMiB {
			continue
		}
		alt := choice{ns: ns, gpu: i}
		if !ns.fitsFutures(c, req, alt) {
			continue
		}
		if alt.score = c.scorer.score(ns, req, i); !found || alt.score < best.score {
			best, found = alt, true
		}
	}
	return best, found
}

// freeIn reports whether device i is free now, in the future and in every
// stage.
func (ns *nodeState) freeIn(i int) bool {
	free := func(u core.GPUUse) bool { return u.MilliGPU == 0 && u.MemoryMiB == 0 }
	if !free(ns.used[i]) || !free(ns.future.used[i]) {
		return false
	}
	for _, st := range ns.stages {
		if !free(st.used[i]) {
			return false
		}
	}
	return true
}

// fitsFutures reports whether a choice made on the node now fits its future
// and every stage of it.
func (ns *nodeState) fitsFutures(c *cycle, req core.Request, ch choice) bool {
	if !fitsChoice(ns.futureState(c), req, ch) {
		return false
	}
	for _, st := range ns.stages {
		if !fitsChoice(st, req, ch) {
			return false
		}
	}
	return true
}

// fitsChoice is fitsAs for a choice made on another state of the same node
// (its future), without building assignments for a share.
func fitsChoice(f *nodeState, req core.Request, ch choice) bool {
	if want := req.WholeGPUs(); want > 0 && ch.as == nil && !ch.ns.multiDomain {
		// The devices assignments would choose on the node now (one
		// domain: the first free ones it accepts), checked without
		// building them.
		n, taken := ch.ns.node, 0
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if u := ch.ns.used[i]; taken < want && g.Domain == ch.ns.firstDomain && allows(&req, g) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
				taken++
				j := i
				if f.node.GPUs[i].Index != g.Index || slices.IndexFunc(f.node.GPUs, func(x core.GPU) bool { return x.Index == g.Index }) != i {
					return fitsAs(f, req, assignments(ch, req)) // devices not in the same places: the general check
				}
				if f.used[j].MilliGPU+1000 > 1000 || f.used[j].MemoryMiB+g.MemoryMiB > g.MemoryMiB {
					return false
				}
			}
		}
		if taken == 0 {
			return fitsAs(f, req, nil)
		}
		fn := f.node
		return (fn.MilliCPU == 0 || f.cpu+req.MilliCPU <= fn.MilliCPU) && (fn.MemoryMiB == 0 || f.mem+req.MemoryMiB <= fn.MemoryMiB)
	}
	if ch.as != nil || req.WholeGPUs() > 0 || ch.gpu < 0 {
		return fitsAs(f, req, assignments(ch, req)) // the devices chosen on the node now
	}
	g := f.node.GPUs[ch.gpu]
	milli, mem, _ := req.ShareOn(g)
	u, n := f.used[ch.gpu], f.node
	return u.MilliGPU+milli <= 1000 && u.MemoryMiB+mem <= g.MemoryMiB &&
		(n.MilliCPU == 0 || f.cpu+req.MilliCPU <= n.MilliCPU) && (n.MemoryMiB == 0 || f.mem+req.MemoryMiB <= n.MemoryMiB)
}

// reserve holds for w alone the node where it waits for the least to end
// (reserveCost), and returns it.
func (c *cycle) reserve(w *core.Workload) *nodeState {
	type weighed struct {
		ns    *nodeState
		bound victimCost
	}
	var nodes []weighed
	for _, ns := range c.nodes {
		if ns.resv != nil || !ns.node.Schedulable || !modelOK(ns, w.Request) || !c.mayUse(ns, w) || !fitsEmpty(ns, w.Request) {
			continue
		}
		nodes = append(nodes, weighed{ns, drainBound(ns.futureState(c), drainRequest(ns, w.Request))})
	}
	slices.SortStableFunc(nodes, func(a, b weighed) int { return a.bound.compare(b.bound) })
	var best *nodeState
	var bestCost victimCost
	var bestFree int64
	var cands []candidate
	for _, n := range nodes {
		if best != nil && n.bound.compare(bestCost) > 0 {
			break // no node left can wait for less
		}
		var k victimCost
		k, cands = c.drainCost(n.ns, w.Request, cands)
		free := n.ns.maxFree
		if w.Request.WholeGPUs() > 0 {
			free = int64(n.ns.freeOf(w.Request))
		}
		if best == nil || cmp.Or(k.compare(bestCost), cmp.Compare(bestFree, free), cmp.Compare(len(n.ns.running), len(best.running)), cmp.Compare(n.ns.pos, best.pos)) < 0 {
			best, bestCost, bestFree = n.ns, k, free
		}
	}
	if best != nil {
		c.hold(best, w)
		c.reserveOn(best, w)
	}
	return best
}

// drainCost is what a starving request waits for to end on ns, by the
// order of the eviction rules (victimCost): the cheapest set of the
// workloads running there (stops under way and victims chosen done) whose
// end leaves it room, as victimSet finds it among them all, the ones no
// preemptor may take included (a reservation stops nothing: it waits).
// For a gang of whole GPUs, room for as many replicas as the node could
// hold (drainRequest); for a gang of fractions, room for one. A node with
// no such set costs more than any that has one.
func (c *cycle) drainCost(ns *nodeState, req core.Request, cands []candidate) (victimCost, []candidate) {
	f := ns.futureState(c)
	dr := drainRequest(ns, req)
	if fitsWithinAt(f, dr, -1) {
		return victimCost{}, cands
	}
	cands = cands[:0]
	for _, r := range ns.running {
		if !r.chosen && r.w.Status.StopRequested == "" {
			cands = append(cands, candidate{r, r.w, ruleWait, false})
		}
	}
	sortVictims(cands)
	set := victimSet(f, dr, cands, -1, &c.scratch)
	if set == nil {
		return victimCost{gang: true, whole: true, milli: math.MaxInt64, n: math.MaxInt32}, cands
	}
	return costOf(dr, set), cands
}

// drainRequest is what a starving request needs room for on ns: one
// replica, or, for a gang of whole GPUs, as many replicas as the node's
// devices of the models it accepts hold, as one request.
func drainRequest(ns *nodeState, req core.Request) core.Request {
	one := req
	one.Replicas = 0
	k := req.WholeGPUs()
	if req.Count() == 1 || k == 0 {
		return one
	}
	n := 0
	for i := range ns.node.GPUs {
		if allows(&req, &ns.node.GPUs[i]) {
			n++
		}
	}
	wants := int64(max(1, min(req.Count(), n/k)))
	one.MilliGPU, one.MilliCPU, one.MemoryMiB = req.MilliGPU*wants, req.MilliCPU*wants, req.MemoryMiB*wants
	return one
}

// drainBound is a lower bound of drainCost on a node's future f: for
// whole GPUs, what the least used devices it must clear hold; for a
// share, the least any device holds beyond the room it needs.
func drainBound(f *nodeState, req core.Request) victimCost {
	var need int64
	switch k := req.WholeGPUs(); {
	case k > 0:
		var held [16]int64
		used := held[:0]
		for i := range f.node.GPUs {
			if allows(&req, &f.node.GPUs[i]) {
				used = append(used, f.used[i].MilliGPU)
			}
		}
		slices.Sort(used)
		for _, m := range used[:min(k, len(used))] {
			need += m
		}
	case req.Fractional():
		need = -1
		for i := range f.node.GPUs {
			g := &f.node.GPUs[i]
			milli, ok := shareMilli(&req, g)
			if !ok || !allows(&req, g) {
				continue
			}
			if over := max(0, f.used[i].MilliGPU+milli-1000); need < 0 || over < need {
				need = over
			}
		}
		need = max(0, need)
	}
	if need == 0 {
		return victimCost{}
	}
	return victimCost{milli: need, n: 1}
}

// fitsEmpty reports whether req would fit on the node if it were empty.
func fitsEmpty(ns *nodeState, req core.Request) bool {
	empty := newNodeState(ns.node, nil)
	_, why := onNode(empty, req)
	return why == ""
}

// shares reports every team's standing, sorted by team.
func (c *cycle) shares() []core.TeamShare {
	out := make([]core.TeamShare, 0, len(c.teams))
	for _, ts := range c.teams {
		out = append(out, core.TeamShare{Team: ts.team.Name, Usage: ts.usage, Pending: max(0, ts.pending), FairShare: ts.share})
	}
	slices.SortFunc(out, func(a, b core.TeamShare) int { return cmp.Compare(a.Team, b.Team) })
	return out
}

// classIndex is where w's class is in c.classes (the first of its name, as
// core.Class finds it), or -1; a workload that names none has its kind's
// default.
func (c *cycle) classIndex(w *core.Workload) int {
	name := w.Priority
	if name == "" {
		name = core.DefaultPriority(w.Kind)
	}
	for i := range c.classes {
		if c.classes[i].Name == name {
			return i
		}
	}
	return -1
}

// classOf returns a workload's priority class (see classIndex).
func (c *cycle) classOf(w *core.Workload) (core.PriorityClass, bool) {
	i := c.classIndex(w)
	if i < 0 {
		return core.PriorityClass{}, false
	}
	return c.classes[i], true
}

// neverMessage says why no schedulable node could hold req even empty
// (core.Feasible, its replicas across nodes), or "" when one could.
// Nodes that could hold req, any more nodes could too: where the first
// schedulable node alone could (as on a fleet of one kind of node), the
// fleet is not weighed node by node.
func (c *cycle) neverMessage(req core.Request) string {
	if len(c.nodes) == 0 {
		return "no nodes are registered"
	}
	var nodes []*core.Node
	for _, ns := range c.nodes {
		if ns.node.Schedulable {
			if len(nodes) == 0 && core.Feasible([]*core.Node{ns.node}, req) == nil {
				return ""
			}
			nodes = append(nodes, ns.node)
		}
	}
	if len(nodes) == 0 {
		// Not never: nodes cordoned, draining or being qualified come
		// back. The placement says why it waits.
		return ""
	}
	if err := core.Feasible(nodes, req); err != nil {
		return "can never run as asked: " + err.Error()
	}
	return ""
}
