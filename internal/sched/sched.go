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
//     the cheapest set of victims it may preempt (docs/SCHEDULING.md, eviction rules),
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
	for _, p := range c.order.first {
		if c.borrowsAgain(p) {
			c.unpictureOf(p.w)
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
	// (pendingOrder.reservedBorrower).
	borrowing := c.bufs.borrowing // room for all: most, in a long queue
	var reserved *pendingWork
	for p := c.order.next(c.teams.usageGen); p != nil; p = c.order.next(c.teams.usageGen) {
		switch {
		case p.decided:
		case p == c.order.reservedBorrower && !c.guaranteedNow(p):
			reserved = p
		case !c.guaranteedNow(p):
			borrowing = append(borrowing, p)
		default:
			decide(p)
			if n := len(c.plan.Unplaced); n > 0 && c.plan.Unplaced[n-1].Workload == p.id {
				c.teams.waiting[p.ts]++
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

// plain reports whether w's decision depends only on its decisionKey and
// its team's usage: it holds no node, has no victims stopping or picture
// in a node's future, was not preempted lately, is no array task, may not
// be reserved a node against starvation, asks for no region (the message
// names regions with room), and the cluster has no burst pool (whether it
// may burst depends on how long it waited).
func (c *cycle) plain(w *core.Workload) bool {
	if !c.plainStatic(w) || w == c.starving.w {
		return false
	}
	// Nodes are held, and pictures made, at the start of a cycle for the
	// nominated workloads only (a workload's own decision holds the rest).
	if w.Status.Nominated == "" {
		return true
	}
	if len(c.holds.nodes[w.ID]) > 0 {
		return false
	}
	_, pictured := c.holds.pictured[w.ID]
	return !pictured
}

// plainStatic is what plain asks of w that cannot change within the
// cycle (pendingWork.plainBase keeps it, for a workload not nominated).
func (c *cycle) plainStatic(w *core.Workload) bool {
	return !c.burst.any && w.Status.PreemptedAt == nil && w.Array == nil && len(w.Request.Regions) == 0 &&
		(len(c.holds.terminating) == 0 || len(c.holds.terminating[w.ID]) == 0)
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

// value is the workload's class value (0 for a class not defined).
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
	return p.w != c.starving.w
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

// unpictureOf takes w's picture out of its node's future, if it has one.
func (c *cycle) unpictureOf(w *core.Workload) {
	if pic, ok := c.holds.pictured[w.ID]; ok {
		c.unpicture(w, pic)
	}
}

// unpicture takes w's picture out of its node's future.
func (c *cycle) unpicture(w *core.Workload, pic picture) {
	// Pictured before any stage was taken, so in every one of them.
	pic.ns.future.add(w.Request, pic.as, -1)
	for _, st := range pic.ns.stages {
		st.add(w.Request, pic.as, -1)
	}
	pic.ns.pictures--
	delete(c.holds.pictured, w.ID)
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
	if len(c.teams.budgetSpent) > 0 {
		if _, spent := c.teams.budgetSpent[p.w.Team]; spent && p.class.Preemptible {
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
	for _, g := range c.fleet.kinds {
		if milli, _, ok := r.ShareOn(g); ok && allows(&r, &g) && (per < 0 || milli < per) {
			per = milli
		}
	}
	switch {
	case per >= 0:
		return per
	case c.fleet.maxGPUMem > 0:
		return min(1000, (r.GPUMemoryMiB*1000+c.fleet.maxGPUMem-1)/c.fleet.maxGPUMem)
	}
	return 1000
}

// shape is a request's shape; what a cycle remembers by shape
// (refusalMemo, victimMemo.none) it keys by the shape's number
// (shapeNumbers). It is built without formatting: a request with no model
// list, selector or residency allocates nothing.
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

func (c *cycle) unplaced(w *core.Workload, reason, msg string, nominated core.NodeName) {
	c.plan.Unplaced = append(c.plan.Unplaced, core.Decision{Workload: w.ID, Reason: reason, Message: msg, Nominated: nominated})
}

// decide places one workload, preempts for it, or explains why it waits.
// Nodes held for it from earlier cycles that its decision does not keep are
// given back, so that the rest of the cycle may use them.
//
// Most workloads of a long queue are plain and decided as the last one of
// their team, class and shape was: that decision is reused here, before
// decideAll (whose frame is larger, with its deferred work) is entered.
// For a plain workload of a defined class, with no team's budget spent,
// what decideAll checks before the reuse holds nothing against it (it
// holds no node, is no array task, has no victims stopping and is
// pictured nowhere), so the reuse is the same.
func (c *cycle) decide(p *pendingWork) {
	if p.plainBase && p.class != nil && len(c.teams.budgetSpent) == 0 && p.w != c.starving.w && c.reuseDecision(p) {
		return
	}
	c.decideAll(p)
}

// decideAll is decide in full: what keeps p waiting without a search,
// then its quota rules, then a place on free capacity, then victims to
// preempt, or else a wait (perhaps on a node reserved against
// starvation). Each step that decides p records its decision in the plan.
func (c *cycle) decideAll(p *pendingWork) {
	plain := c.plainOf(p) // before its picture is taken out
	// Nodes are held for a workload before its decision only from an
	// earlier cycle, through its nomination (carryHolds). (Its record says
	// so: a workload decided as one a moment ago is decided without
	// reading the workload itself.)
	if p.nominated && len(c.holds.nodes[p.id]) > 0 {
		defer c.releaseUnkept(p.id)
	}
	if c.waitsUnsearched(p) {
		return
	}
	// Otherwise its picture in its node's future is taken out: what it is
	// decided now is recorded anew (a placement, or a new preemption).
	// (Only the nominated are pictured: carryHolds.)
	if p.nominated {
		c.unpictureOf(p.w)
	}
	// A workload decided as one of its team, class and shape was a moment
	// ago, with its team holding what it held then, is decided alike
	// (decisionMemo); otherwise its decision is remembered for the next.
	if plain {
		if c.reuseDecision(p) {
			return
		}
		c.decisions.uncacheable = false
		defer c.rememberAlone(p, c.planMark())
	}
	q, ok := c.admit(p)
	if !ok {
		return
	}
	noFit, burst, decided := c.placeFree(p, q)
	if decided || c.preemptFor(p, q, burst) {
		return
	}
	c.wait(p, q, noFit, burst)
}

// releaseUnkept gives back the nodes held for id but the one its decision,
// just made, is nominated to.
func (c *cycle) releaseUnkept(id core.WorkloadID) {
	var keep *nodeState
	if n := len(c.plan.Unplaced); n > 0 && c.plan.Unplaced[n-1].Workload == id {
		keep = c.fleet.byName[c.plan.Unplaced[n-1].Nominated]
	}
	c.release(id, keep)
}

// reuseDecision decides p as the decision remembered for its key, if that
// still holds (its team holds what it held then, and other teams hold
// capacity as they did), and reports whether it did.
func (c *cycle) reuseDecision(p *pendingWork) bool {
	ts := p.ts
	if d, ok := c.decisions.of(decisionKey{ts, p.class, p.shape}); ok && d.usage == ts.usage && d.others == c.teams.othersHold(ts) {
		c.plan.Unplaced = append(c.plan.Unplaced, core.Decision{Workload: p.id, Reason: d.reason, Message: d.message})
		return true
	}
	return false
}

// planMark is how many decisions of each kind a plan holds.
type planMark struct{ unplaced, placed, preempted int }

func (c *cycle) planMark() planMark {
	return planMark{len(c.plan.Unplaced), len(c.plan.Placements), len(c.plan.Preemptions)}
}

// rememberAlone remembers the decision of plain workload p, made since the
// plan was at m, for the next workload of its key: only where p waits,
// nominated nowhere, having placed and preempted nothing, and nothing in
// its decision was uncacheable.
func (c *cycle) rememberAlone(p *pendingWork, m planMark) {
	if c.decisions.uncacheable || len(c.plan.Placements) != m.placed || len(c.plan.Preemptions) != m.preempted || len(c.plan.Unplaced) != m.unplaced+1 {
		return
	}
	if d := c.plan.Unplaced[m.unplaced]; d.Nominated == "" && d.Reason != ReasonPreempting {
		ts := p.ts
		c.decisions.remember(decisionKey{ts, p.class, p.shape}, cachedDecision{reason: d.Reason, message: d.Message, usage: ts.usage, others: c.teams.othersHold(ts)})
	}
}

// waitsUnsearched decides p where no search could change its decision:
// its class is not defined, its job array is at its cap, its team's hard
// budget is spent (no more work that could be preempted starts;
// production still runs), or it is a preemptor whose victims are still
// stopping. It reports whether it did.
func (c *cycle) waitsUnsearched(p *pendingWork) bool {
	w := p.w
	if p.class == nil {
		c.unplaced(w, ReasonUnknownClass, fmt.Sprintf("priority class %q is not defined", w.Priority), "")
		return true
	}
	// (A plain workload is no array task, has no victims stopping and
	// was pictured in no node's future.)
	if !p.plainBase && c.arrayFull(w) {
		return true
	}
	if len(c.teams.budgetSpent) > 0 {
		if msg, spent := c.teams.budgetSpent[w.Team]; spent && p.class.Preemptible {
			c.unplaced(w, ReasonBudgetExceeded, msg, "")
			return true
		}
	}
	// A preemptor whose victims are still stopping waits for them; its
	// node is held for it (carryHolds). One that its quota rules no
	// longer admit (its team took the room meanwhile) holds nothing: it is
	// decided afresh, and says which rule keeps it waiting.
	if vs := c.liveVictimsOf(p); len(vs) > 0 && c.admissibleOf(p) {
		node := vs[0].Status.Placement[0].Node
		if w.Status.Nominated != "" {
			node = w.Status.Nominated
		}
		c.unplaced(w, ReasonPreempting, fmt.Sprintf("waiting for %d preempted %s to stop on %s", len(vs), plural(len(vs), "workload", "workloads"), node), node)
		return true
	}
	return false
}

// quotaStanding is where a workload stands against its team's guarantee
// (withinGuaranteeOf): whether it runs within it (never for an idle-only
// class), what the team holds in its class and above, the guarantee, and
// the guarantee's scope as a message names it.
type quotaStanding struct {
	inQuota          bool
	held, guaranteed int64
	scope            string
}

// admit checks what no place could change: that some node could ever
// hold p, its team's limit, its class's quota rule, and, for a workload
// the scheduler stopped lately, that it may start again now. Where one
// fails it records why p waits and reports false.
func (c *cycle) admit(p *pendingWork) (quotaStanding, bool) {
	w, ts, ask, class := p.w, p.ts, p.ask, p.class
	// A request no node could hold even empty says so first: no quota
	// and no preemption would help it.
	never, known := c.refusals.never[p.shape]
	if !known {
		never = c.neverMessage(w.Request)
		c.refusals.never[p.shape] = never
	}
	if never != "" {
		c.unplaced(w, ReasonUnschedulable, never, "")
		return quotaStanding{}, false
	}
	if !ts.team.LimitAllows(ts.usage + ask) {
		c.unplaced(w, ReasonQuotaLimit, fmt.Sprintf("team %s at its limit (%s/%s GPUs; this workload needs %s)", ts.team.Name, gpus(ts.usage), gpus(ts.team.Limit), gpus(ask)), "")
		return quotaStanding{}, false
	}
	// Within quota: what the team holds in this class and above, plus this
	// workload, stays within its guarantee (lower classes of the team can be
	// preempted for it).
	within, held, guaranteed, scope := c.withinGuaranteeOf(p)
	q := quotaStanding{inQuota: !class.IdleOnly && within, held: held, guaranteed: guaranteed, scope: scope}
	if !class.MayBorrow && !q.inQuota {
		c.unplaced(w, ReasonOverQuota, fmt.Sprintf("%s runs only within the team's guarantee: team %s holds %s of %s guaranteed %sGPUs in %s and above, and this workload needs %s",
			class.Name, ts.team.Name, gpus(held), gpus(guaranteed), scope, class.Name, gpus(ask)), "")
		return q, false
	}
	// A workload the scheduler stopped less than MinRuntime ago starts
	// again only within its team's guarantee while another team's work
	// within its guarantee waits (it would reclaim it at once): a decision
	// holds for MinRuntime. Batch is the exception: it lives on idle
	// capacity.
	if at := w.Status.PreemptedAt; c.recentlyStopped(w) && !q.inQuota && !class.IdleOnly && c.teams.othersWait(ts) {
		c.unplaced(w, ReasonRecentlyPreempted, fmt.Sprintf("stopped for another workload at %s: it runs again within team %s's guarantee at once, or on borrowed capacity from %s",
			at.UTC().Format(time.RFC3339), ts.team.Name, at.Add(c.opts.MinRuntime).UTC().Format(time.RFC3339)), "")
		return q, false
	}
	return q, true
}

// placeFree places p on free capacity, charging no more than its team's
// limit (and, for a class that may not borrow, its guarantee) leaves: a
// request by memory is charged the share it takes where it lands. A shape
// that fitted nowhere for a workload that holds no node fits nowhere for
// another such workload, unless a reservation or the budget refused it;
// one that holds a node always tries. It reports why p found no place,
// whether p may burst, and whether p is decided: placed, or refused by
// its budget alone.
func (c *cycle) placeFree(p *pendingWork, q quotaStanding) (noFit string, burst, decided bool) {
	w := p.w
	c.attempt.start(p, q)
	holder := len(c.heldBefore(w)) > 0
	// A workload that may burst tries more nodes than one of its shape
	// that may not: their failures are remembered apart.
	burst = c.burst.any && c.mayBurst(w)
	fk := fitKey{p.shape, burst}
	noFit, failed := c.refusals.noFit[fk]
	// One that the starvation reservation refused (softly: another
	// workload may fit where it did not) fails alike for another of its
	// shape and max runtime that the reservation binds alike, while it
	// lasts (resvFitKey).
	if !failed && !holder && c.starving.of != "" {
		if why, ok := c.refusals.noFitResv[c.resvFitKey(fk, w, q.inQuota)]; ok {
			noFit, failed = why, true
			c.decisions.uncacheable = true
		}
	}
	if failed && !holder {
		return noFit, burst, false
	}
	c.attempt.soft, c.attempt.budgetHit = false, false
	as, why := c.place(w)
	if as != nil {
		c.placed(p, as)
		return "", burst, true
	}
	switch {
	case !holder && !c.attempt.soft:
		c.refusals.noFit[fk] = why
	case !holder && !c.attempt.budgetHit && c.starving.of != "" && c.starving.of != w.ID:
		c.refusals.noFitResv[c.resvFitKey(fk, w, q.inQuota)] = why
		c.decisions.uncacheable = true
	default:
		c.decisions.uncacheable = true // the next one may fit
	}
	if c.attempt.budgetHit {
		c.refuseForBudget(p, q, why)
		return why, burst, true
	}
	return why, burst, false
}

// placed records p's placement as: in the plan, its array's count, its
// team's usage and its nodes' placements (for a reservation).
func (c *cycle) placed(p *pendingWork, as []core.Assignment) {
	w, ts := p.w, p.ts
	c.plan.Placements = append(c.plan.Placements, core.Placement{Workload: w.ID, Assignments: as})
	c.arrayStarted(w)
	c.holdOn(ts, *p.class, as, heldOf(as))
	c.promoteFair(ts)
	ts.pending -= p.ask
	var end time.Time
	if w.MaxRuntime > 0 {
		end = c.now.Add(w.MaxRuntime)
	}
	for _, n := range core.Nodes(as) {
		on, _ := core.OnNode(as, n)
		ns := c.fleet.byName[n]
		ns.placed = append(ns.placed, item{req: w.Request, as: on, started: c.now, end: end})
	}
}

// refuseForBudget records why p waits when, where it fits, what it would
// take there is more than its team may still take: that is the limit (or,
// for a class that may not borrow, the guarantee) speaking, not a lack of
// room.
func (c *cycle) refuseForBudget(p *pendingWork, q quotaStanding, noFit string) {
	ts, class := p.ts, p.class
	reason, bound := ReasonQuotaLimit, fmt.Sprintf("team %s's limit leaves %s GPUs", ts.team.Name, gpus(max(0, ts.team.Limit-ts.usage)))
	if !class.MayBorrow && (ts.team.Limit < 0 || q.guaranteed-q.held < ts.team.Limit-ts.usage) {
		reason, bound = ReasonOverQuota, fmt.Sprintf("%s runs only within the team's guarantee, and team %s has %s GPUs of it left", class.Name, ts.team.Name, gpus(max(0, q.guaranteed-q.held)))
	}
	c.unplaced(p.w, reason, fmt.Sprintf("%s, less than it takes where it fits: %s", bound, noFit), "")
}

// preemptFor plans a preemption for p, if its class and quota allow one
// and some victims make room, and reports whether it did. Gangs do not
// preempt: their victims would have to be found on several nodes at
// once.
func (c *cycle) preemptFor(p *pendingWork, q quotaStanding, burst bool) bool {
	if p.class.IdleOnly || p.w.Request.Count() != 1 {
		return false
	}
	vkey := victimKey{p.ts, p.class, p.shape, q.inQuota, burst}
	if c.victims.none[vkey] {
		return false
	}
	if node, vs, maxShare := c.findVictims(p.w, *p.class, p.ts, p.ask, q.inQuota); node != nil {
		c.preempt(p.w, node, vs, maxShare)
		return true
	}
	c.victims.none[vkey] = true
	return false
}

// wait records why p waits (noFit: why it found no place), and reserves a
// node for it if it is the workload that may hold one against starvation
// (or keeps the one reserved for it before).
func (c *cycle) wait(p *pendingWork, q quotaStanding, noFit string, burst bool) {
	w, class := p.w, p.class
	msg := noFit
	// Say what residency and bursting do for it.
	if c.burst.any && !burst {
		msg += c.burstNote(w, "")
	}
	if r := c.residencyNote(w); r != "" {
		msg = r + "; " + msg
	}
	msg = c.noteUnreachable(msg, p, q)
	var nominated core.NodeName
	if w == c.starving.w {
		ns := c.heldFor(w.ID)
		if ns == nil && !c.starving.made {
			if ns = c.reserve(w); ns != nil {
				c.starving.made = true
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

// noteUnreachable adds to msg why no preemption helps p: what makes the
// capacity out of reach (nothing where preemption is not for it, or no
// other team holds capacity).
func (c *cycle) noteUnreachable(msg string, p *pendingWork, q quotaStanding) string {
	ts := p.ts
	switch {
	case p.class.IdleOnly || p.w.Request.Count() > 1 || !c.teams.othersHold(ts):
		return msg
	case q.inQuota:
		return msg + "; team " + string(ts.team.Name) + " is within its guarantee, but what holds the capacity cannot be preempted for it (within quota, or a class that is never preempted)"
	case ts.usage+p.ask > ts.share:
		return msg + "; team " + string(ts.team.Name) + " holds " + gpus(ts.usage) + " GPUs and its fair share is " + gpus(ts.share) + ", so it cannot reclaim more"
	case !c.opts.FairShareReclaim:
		return msg + "; team " + string(ts.team.Name) + " is below its fair share, but fair-share reclaim is off"
	}
	return msg + "; team " + string(ts.team.Name) + " is below its fair share, but what holds the capacity is within its teams' quotas, has run less than " + c.opts.MinRuntime.String() + ", or is never preempted"
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
			if ns := c.fleet.byName[a.Node]; ns != nil {
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
// (carryHolds), so the others skip the lookup.
func (c *cycle) heldBefore(w *core.Workload) []*nodeState {
	if w.Status.Nominated == "" {
		return nil
	}
	return c.holds.nodes[w.ID]
}

// hold keeps ns for w. Only a nominated workload's held nodes are looked
// up again (heldBefore, plain, and release when its decision is made), so
// only those are listed in holdBook.nodes: a cycle holds nodes for thousands of
// preemptors, each decided once.
func (c *cycle) hold(ns *nodeState, w *core.Workload) {
	ns.hold(w.ID)
	c.touch(ns)
	if w.Status.Nominated != "" && !slices.Contains(c.holds.nodes[w.ID], ns) {
		c.holds.nodes[w.ID] = append(c.holds.nodes[w.ID], ns)
	}
}

// release gives back the nodes held for id except keep.
func (c *cycle) release(id core.WorkloadID, keep *nodeState) {
	var kept []*nodeState
	for _, ns := range c.holds.nodes[id] {
		if ns == keep {
			kept = append(kept, ns)
			continue
		}
		ns.reservedFor = slices.DeleteFunc(ns.reservedFor, func(x core.WorkloadID) bool { return x == id })
		if ns.resv != nil && ns.resv.w.ID == id {
			ns.resv = nil
			c.starving.of, c.starving.at = "", nil
		}
		ns.holdVersion++
		c.touch(ns)
	}
	c.holds.nodes[id] = kept
}

// heldFor returns the node held for id by a starvation reservation, if any.
func (c *cycle) heldFor(id core.WorkloadID) *nodeState {
	for _, ns := range c.fleet.nodes {
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
	for _, v := range c.holds.terminating[w.ID] {
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
	if len(c.fleet.clusters) < 2 {
		return c.placeGang(w)
	}
	var whys []string
	for _, cl := range c.fleet.clusters {
		c.attempt.gangCluster = &cl
		as, why := c.placeGang(w)
		c.attempt.gangCluster = nil
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
	budget, kept := c.attempt.budget, len(c.attempt.kept)
	for r := range w.Request.Count() {
		as, why := c.placeOne(w, r)
		if as == nil {
			c.attempt.budget = budget
			for _, k := range c.attempt.kept[kept:] {
				k.r.kept.add(w.Request, k.as, -1)
			}
			c.attempt.kept = c.attempt.kept[:kept]
			for _, ns := range c.fleet.nodes {
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
			sk, memoScan = scanKey{shapeKey(req), c.attempt.inQuota, w.MaxRuntime, c.attempt.budget}, true
			if m, ok := c.refusals.scans[sk]; ok && m.stamp == len(c.changed) {
				c.attempt.soft, c.attempt.budgetHit = c.attempt.soft || m.soft, c.attempt.budgetHit || m.budgetHit
				return nil, m.why
			}
		}
	}
	if !found {
		soft, budgetHit := c.attempt.soft, c.attempt.budgetHit
		c.attempt.soft, c.attempt.budgetHit = false, false
		defer func() { c.attempt.soft, c.attempt.budgetHit = c.attempt.soft || soft, c.attempt.budgetHit || budgetHit }()
		var why tally
		considered := len(c.fleet.nodes)
		for _, ns := range c.fleet.nodes {
			if c.burst.any && ns.node.Burst() != c.burst.pass {
				if c.burst.pass {
					considered--
				} else {
					why.add(whyBurst)
				}
				continue
			}
			if c.attempt.gangCluster != nil && ns.node.Cluster != *c.attempt.gangCluster {
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
				c.attempt.soft = true
				continue
			case whyLimit:
				why.add(reason)
				c.attempt.soft, c.attempt.budgetHit = true, true
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
				c.refusals.scans[sk] = scanMemo{stamp: len(c.changed), why: msg, soft: c.attempt.soft, budgetHit: c.attempt.budgetHit}
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
		c.attempt.kept = append(c.attempt.kept, keptReplica{best.ns.resv, as})
	}
	if c.attempt.budget >= 0 {
		c.attempt.budget -= heldOf(as)
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

// reservedFor reports whether a node is reserved for w.
func (c *cycle) reservedFor(w *core.Workload) bool {
	return c.starving.of == w.ID && w.ID != ""
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
		ch, reason = onNodeWith(ns, req, c.scores.scorer)
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
	case c.binds(ns, w, c.attempt.inQuota):
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
	if c.attempt.budget >= 0 && chargeOf(ch, req) > c.attempt.budget {
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
		if alt.score = c.scores.scorer.score(ns, req, i); !found || alt.score < best.score {
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
	for _, ns := range c.fleet.nodes {
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
	set := victimSet(f, dr, cands, -1, &c.victims.scratch)
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
	out := make([]core.TeamShare, 0, len(c.teams.byName))
	for _, ts := range c.teams.byName {
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
	// A search, not a map: there are a few classes and most names differ
	// in length; a map by name measured no cheaper (docs/PERFORMANCE.md).
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
	if len(c.fleet.nodes) == 0 {
		return "no nodes are registered"
	}
	var nodes []*core.Node
	for _, ns := range c.fleet.nodes {
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
