package sched_test

// Property tests of the scheduler's safety and progress invariants (STYLE.md
// habit 11), checked against random clusters drawn with
// pgregory.net/rapid, which shrinks a failing cluster to a small one and
// prints it (see invDescribe) with the failure.
//
// Each invariant is written down once, as an invProperty (numbered as in
// the list of invProperties), and checked twice: on the plan of one cycle
// over a random cluster, and on every cycle of a simulation that applies
// the plans (placements start, victims stop a cycle or two later and are
// requeued, running work finishes, new work arrives). Progress gets tests
// of its own: a team reclaims its guarantee within one cycle (9), a large
// workload does not starve behind a stream of small ones, and the
// simulation settles once work stops arriving, and no workload is
// reclaimed twice within MinRuntime (TestNoWorkloadThrashes). Pending work
// comes in every request shape (a count, a fraction, memory, a model
// list), so that limits are checked over mixed fleets. TestInvariantChecks-
// CatchBrokenPlans shows that each check can fail. Every property runs
// under a fresh seed, and CI replays the seeds that once failed
// (testdata/failed-seeds.txt; see fixture_test.go).
//
// "Within the guarantee" counts, as the scheduler's classification does,
// the team's work in the class in question and above: the guarantee
// covers a team's most important work first, and whatever lower-class work
// that pushes beyond it runs over quota and can be reclaimed.
//
// Names here start with "inv" so that they cannot clash with the helpers of
// the other test files of the package.

import (
	stdcmp "cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

var (
	invModels = []string{h100, a10}
	invNow    = time.Date(2025, 3, 4, 5, 6, 0, 0, time.UTC)
	// invSizes are the request sizes drawn, in milli-GPU.
	invSizes   = []int64{250, 500, 1000, 2000, 4000, 8000}
	invClasses = []string{"production", "training", "development", "batch"}
)

// ---------------------------------------------------------------------------
// Drawing random clusters.

// invFitOn returns a placement of req on n next to what u holds that
// core.Fits accepts, or nil: the first device with room for a fraction,
// the first free devices for whole GPUs. Without model lists or host
// requests any free devices do, so nil means req fits nowhere on n.
func invFitOn(n *core.Node, u *core.NodeUsage, req core.Request) []core.Assignment {
	switch {
	case req.Fractional():
		for _, g := range n.GPUs {
			milli, mem, ok := req.ShareOn(g)
			if !ok {
				continue
			}
			as := []core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}}
			if core.Fits(n, u, req, as) == nil {
				return as
			}
		}
	case req.WholeGPUs() > 0:
		one := core.Request{MilliGPU: 1000, GPUModels: req.GPUModels}
		var as []core.Assignment
		for _, g := range n.GPUs {
			a := []core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB}}
			if core.Fits(n, u, one, a) == nil {
				as = append(as, a[0])
			}
		}
		if len(as) >= req.WholeGPUs() && core.Fits(n, u, req, as[:req.WholeGPUs()]) == nil {
			return as[:req.WholeGPUs()]
		}
	}
	return nil
}

// invBestFitOn is invFitOn, but a share goes to the device it leaves with
// the least free share (the first such), as the scheduler pictures a
// preemptor in a node's future.
func invBestFitOn(n *core.Node, u *core.NodeUsage, req core.Request) []core.Assignment {
	if !req.Fractional() {
		return invFitOn(n, u, req)
	}
	var best []core.Assignment
	var left int64
	for _, g := range n.GPUs {
		milli, mem, ok := req.ShareOn(g)
		if !ok {
			continue
		}
		as := []core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}}
		if core.Fits(n, u, req, as) != nil {
			continue
		}
		if l := 1000 - u.GPUs[g.Index].MilliGPU - milli; best == nil || l < left {
			best, left = as, l
		}
	}
	return best
}

// invFitting lists the sizes that fit on n next to u.
func invFitting(n *core.Node, u *core.NodeUsage, sizes []int64) []int64 {
	var out []int64
	for _, s := range sizes {
		if invFitOn(n, u, core.Request{MilliGPU: s}) != nil {
			out = append(out, s)
		}
	}
	return out
}

// invUsage is what the running workloads hold, per node; every node has an
// entry.
func invUsage(nodes []*core.Node, running []*core.Workload) map[core.NodeName]*core.NodeUsage {
	u := map[core.NodeName]*core.NodeUsage{}
	for _, n := range nodes {
		u[n.Name] = &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
	}
	for _, w := range running {
		invAdd(u, w.Request, w.Status.Placement)
	}
	return u
}

// invAdd records a placement, on every node it spans, in usage.
func invAdd(usage map[core.NodeName]*core.NodeUsage, req core.Request, as []core.Assignment) {
	for _, name := range core.Nodes(as) {
		if u := usage[name]; u != nil {
			u.Add(name, req, as)
		}
	}
}

func invHeld(w *core.Workload) int64 {
	var m int64
	for _, a := range w.Status.Placement {
		m += a.MilliGPU
	}
	return m
}

func invMilli(as []core.Assignment) int64 {
	var m int64
	for _, a := range as {
		m += a.MilliGPU
	}
	return m
}

// invDrawOptions draws a policy: the defaults, or each knob varied.
func invDrawOptions(t *rapid.T) sched.Options {
	return sched.Options{
		StarvationAfter:  rapid.SampledFrom([]time.Duration{10 * time.Minute, 0, time.Minute}).Draw(t, "starvationAfter"),
		FairShareReclaim: !rapid.Bool().Draw(t, "fairShareReclaimOff"),
		MinRuntime:       rapid.SampledFrom([]time.Duration{5 * time.Minute, 0}).Draw(t, "minRuntime"),
		// Bursting as by default, with the pools invDrawGeography draws
		// priced apart (drawn from nothing, so that the seeds of
		// testdata/failed-seeds.txt still draw the clusters they found).
		Burst: sched.BurstPolicy{After: sched.DefaultBurstPolicy().After, Classes: sched.DefaultBurstPolicy().Classes,
			Prices: map[string]int64{"cloud-a": 3, "cloud-b": 2}},
	}
}

// invDrawSnapshot draws a cluster: 1–20 nodes of 1–8 H100 or A10 GPUs;
// 1–5 teams with random guarantee, limit and weight; running workloads of
// random teams and classes that respect their team's limit (and, for
// production, its guarantee) with random start times; and 0–60 pending
// workloads of random sizes, classes, teams and submission times.
func invDrawSnapshot(t *rapid.T) *core.Snapshot {
	snap := &core.Snapshot{}
	var capacity int64
	for i := range rapid.IntRange(1, 20).Draw(t, "nodes") {
		n := node(fmt.Sprintf("n%02d", i)).gpus(rapid.IntRange(1, 8).Draw(t, "gpus"), rapid.SampledFrom(invModels).Draw(t, "model")).obj()
		snap.Nodes = append(snap.Nodes, n)
		capacity += int64(len(n.GPUs)) * 1000
	}
	var teams []core.TeamName
	for i := range rapid.IntRange(1, 5).Draw(t, "teams") {
		g := rapid.Int64Range(0, capacity/250).Draw(t, "guaranteed") * 250
		b := team(core.TeamName(fmt.Sprintf("t%d", i))).guaranteed(g)
		if rapid.Bool().Draw(t, "limited") {
			b.limit(g + rapid.Int64Range(0, capacity/250).Draw(t, "borrow")*250)
		}
		tm := b.weight(rapid.Int64Range(1, 4).Draw(t, "weight")).obj()
		snap.Teams = append(snap.Teams, tm)
		teams = append(teams, tm.Name)
	}
	team := func(name core.TeamName) core.Team {
		return snap.Teams[slices.IndexFunc(snap.Teams, func(tm core.Team) bool { return tm.Name == name })]
	}

	// Running workloads, placed first fit, node by node.
	usage := invUsage(snap.Nodes, nil)
	held := map[core.TeamName]int64{}
	id := 0
	for _, n := range snap.Nodes {
		for range rapid.IntRange(0, 2*len(n.GPUs)).Draw(t, "running") {
			fit := invFitting(n, usage[n.Name], invSizes)
			if len(fit) == 0 {
				break
			}
			size := rapid.SampledFrom(fit).Draw(t, "size")
			tn := rapid.SampledFrom(teams).Draw(t, "team")
			class := rapid.SampledFrom(invClasses).Draw(t, "class")
			tm := team(tn)
			if !tm.LimitAllows(held[tn]+size) || (class == "production" && held[tn]+size > tm.Guaranteed) {
				continue
			}
			w := job(fmt.Sprintf("r%02d", id)).team(tn).class(class).gpus(size).obj()
			id++
			w.Seq = int64(id)
			w.Status.Phase = core.Running
			w.Status.Placement = invFitOn(n, usage[n.Name], w.Request)
			started := invNow.Add(-time.Duration(rapid.IntRange(0, 120).Draw(t, "ranMinutes")) * time.Minute)
			w.CreatedAt = started.Add(-time.Minute)
			w.Status.StartedAt = &started
			w.Status.Attempts = rapid.IntRange(1, 3).Draw(t, "attempts")
			usage[n.Name].Add(n.Name, w.Request, w.Status.Placement)
			held[tn] += size
			snap.Running = append(snap.Running, w)
		}
	}
	snap.Usage = usage

	// Pending workloads, of every request shape: a count or a fraction,
	// memory on one device, a model list; Seq follows CreatedAt.
	for i := range rapid.IntRange(0, 60).Draw(t, "pending") {
		w := job(fmt.Sprintf("p%02d", i)).team(rapid.SampledFrom(teams).Draw(t, "team")).class(rapid.SampledFrom(invClasses).Draw(t, "class")).gpus(rapid.SampledFrom(invSizes).Draw(t, "size")).obj()
		switch rapid.IntRange(0, 5).Draw(t, "shape") {
		case 0: // memory on one device, of any model or of one
			w.Request.MilliGPU, w.Request.GPUMemoryMiB = 0, rapid.SampledFrom([]int64{8192, 20480, 24576, 40960, 81920}).Draw(t, "gpuMemoryMiB")
			if rapid.Bool().Draw(t, "oneModel") {
				w.Request.GPUModels = []string{rapid.SampledFrom([]string{"H100", "A10"}).Draw(t, "model")}
			}
		case 1: // a count or a fraction of one model
			w.Request.GPUModels = []string{rapid.SampledFrom([]string{"H100", "A10"}).Draw(t, "model")}
		}
		w.CreatedAt = invNow.Add(-time.Duration(rapid.IntRange(0, 60).Draw(t, "waitedMinutes")) * time.Minute)
		snap.Pending = append(snap.Pending, w)
	}
	invNumber(snap.Pending, int64(id))
	invDrawGeography(t, snap)
	return snap
}

// invRegions are the regions nodes are drawn in.
var invRegions = []string{"eu", "us"}

// invDrawGeography, in half the clusters, puts every node in a region
// (eu or us) and a pool, some of them burst pools (cloud-a, cloud-b, in
// us), and gives some pending workloads a residency (one region, both, or
// one no node has), some of them recently preempted. It draws last, so
// that the rest of a cluster is drawn as before it was added.
func invDrawGeography(t *rapid.T, snap *core.Snapshot) {
	if !rapid.Bool().Draw(t, "geography") {
		return
	}
	for _, n := range snap.Nodes {
		switch rapid.IntRange(0, 3).Draw(t, "pool") {
		case 0:
			n.Pool, n.Region, n.PoolKind = "cloud-a", "us", core.PoolBurst
		case 1:
			n.Pool, n.Region, n.PoolKind = "cloud-b", "us", core.PoolBurst
		default:
			n.Region = rapid.SampledFrom(invRegions).Draw(t, "region")
			n.Pool, n.PoolKind = "owned-"+n.Region, core.PoolOwned
		}
	}
	for _, w := range snap.Pending {
		switch rapid.IntRange(0, 5).Draw(t, "residency") {
		case 0:
			w.Request.Regions = []string{"eu"}
		case 1:
			w.Request.Regions = []string{"us"}
		case 2:
			w.Request.Regions = []string{"us", "eu"}
		case 3:
			w.Request.Regions = []string{"mars"}
		}
		if rapid.IntRange(0, 5).Draw(t, "preempted") == 0 {
			at := invNow.Add(-time.Duration(rapid.IntRange(0, 5).Draw(t, "preemptedMinutes")) * time.Minute)
			w.Status.PreemptedAt = &at
		}
	}
}

// invMayBurst reports whether the burst policy lets w onto a burst node
// now: its class listed, and waited After since the later of its
// submission and its last preemption.
func (c *invCycle) invMayBurst(w *core.Workload) bool {
	since := w.CreatedAt
	if at := w.Status.PreemptedAt; at != nil && at.After(since) {
		since = *at
	}
	waited := time.Duration(0)
	if !since.IsZero() {
		waited = c.now.Sub(since)
	}
	return slices.Contains(c.opts.Burst.Classes, c.class(w).Name) && waited >= c.opts.Burst.After
}

// invMayUse reports whether w may be placed on n: residency, and for a
// burst node the burst policy.
func (c *invCycle) invMayUse(w *core.Workload, n *core.Node) bool {
	if len(w.Request.Regions) > 0 && !slices.Contains(w.Request.Regions, n.Region) {
		return false
	}
	return !n.Burst() || c.invMayBurst(w)
}

// invNumber gives pending workloads submission numbers after first, in
// order of CreatedAt (then ID).
func invNumber(ws []*core.Workload, first int64) {
	order := slices.Clone(ws)
	slices.SortStableFunc(order, func(a, b *core.Workload) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
	for i, w := range order {
		w.Seq = first + int64(i) + 1
	}
}

// invDescribe writes a snapshot as data, for the log of a failing case.
func invDescribe(opts sched.Options, s *core.Snapshot, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "options: StarvationAfter %s, FairShareReclaim %t, MinRuntime %s; now %s\n", opts.StarvationAfter, opts.FairShareReclaim, opts.MinRuntime, now.Format(time.TimeOnly))
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, "node %s: %d × %s", n.Name, len(n.GPUs), n.GPUs[0].Model)
		if n.Pool != "" || n.Region != "" {
			fmt.Fprintf(&b, ", pool %s (%s) in %s", n.Pool, n.PoolKind, n.Region)
		}
		b.WriteString("\n")
	}
	for _, tm := range s.Teams {
		fmt.Fprintf(&b, "team %s: guaranteed %d, limit %d, weight %d\n", tm.Name, tm.Guaranteed, tm.Limit, tm.Weight)
	}
	for _, w := range s.Running {
		fmt.Fprintf(&b, "running %s: team %s, %s, %d milli-GPU on %s, started %s ago, attempts %d", w.ID, w.Team, w.Priority, w.Request.MilliGPU,
			invWhere(w.Status.Placement), now.Sub(*w.Status.StartedAt), w.Status.Attempts)
		if w.Status.StopRequested != "" {
			fmt.Fprintf(&b, ", stopping (%s for %s)", w.Status.StopRequested, w.Status.PreemptedBy)
		}
		b.WriteString("\n")
	}
	for _, w := range s.Pending {
		fmt.Fprintf(&b, "pending %s: team %s, %s, %d milli-GPU, seq %d, waited %s", w.ID, w.Team, w.Priority, w.Request.MilliGPU, w.Seq, now.Sub(w.CreatedAt))
		if w.Request.GPUMemoryMiB > 0 || len(w.Request.GPUModels) > 0 {
			fmt.Fprintf(&b, ", %d MiB of %v", w.Request.GPUMemoryMiB, w.Request.GPUModels)
		}
		if w.Status.Nominated != "" {
			fmt.Fprintf(&b, ", %s on %s", w.Status.Reason, w.Status.Nominated)
		}
		if len(w.Request.Regions) > 0 {
			fmt.Fprintf(&b, ", residency %v", w.Request.Regions)
		}
		if at := w.Status.PreemptedAt; at != nil {
			fmt.Fprintf(&b, ", preempted %s ago", now.Sub(*at))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// invDescribePlan writes a plan, for the log of a failing case.
func invDescribePlan(p core.Plan) string {
	var b strings.Builder
	for _, pl := range p.Placements {
		fmt.Fprintf(&b, "place %s on %s\n", pl.Workload, invWhere(pl.Assignments))
	}
	for _, pr := range p.Preemptions {
		fmt.Fprintf(&b, "preempt %s for %s: %s (%s)\n", pr.Victim, pr.Preemptor, pr.Reason, pr.Message)
	}
	for _, d := range p.Unplaced {
		fmt.Fprintf(&b, "wait %s: %s: %s", d.Workload, d.Reason, d.Message)
		if d.Nominated != "" {
			fmt.Fprintf(&b, " (nominated %s)", d.Nominated)
		}
		b.WriteString("\n")
	}
	for _, sh := range p.Shares {
		fmt.Fprintf(&b, "share %s: usage %d, pending %d, fair share %d\n", sh.Team, sh.Usage, sh.Pending, sh.FairShare)
	}
	return b.String()
}

// invWhere is "n1:0,1" for whole devices, "n1:2@250" for a share.
func invWhere(as []core.Assignment) string {
	if len(as) == 0 {
		return "nowhere"
	}
	idx := make([]string, len(as))
	for i, a := range as {
		idx[i] = fmt.Sprint(a.GPUIndex)
	}
	s := string(as[0].Node) + ":" + strings.Join(idx, ",")
	if len(as) == 1 && as[0].MilliGPU < 1000 {
		s += fmt.Sprintf("@%d", as[0].MilliGPU)
	}
	return s
}

// ---------------------------------------------------------------------------
// The invariants.

// invCycle is one cycle's input and plan, with what the checks derive
// from them.
type invCycle struct {
	opts sched.Options
	snap *core.Snapshot
	now  time.Time
	plan core.Plan

	nodes    map[core.NodeName]*core.Node
	pending  map[core.WorkloadID]*core.Workload
	running  map[core.WorkloadID]*core.Workload
	teams    map[core.TeamName]core.Team
	held     map[core.TeamName]int64 // by running workloads
	shares   map[core.TeamName]core.TeamShare
	decision map[core.WorkloadID]core.Decision
	placed   map[core.WorkloadID]core.Placement
	// after is each node's usage with the plan's placements added.
	after map[core.NodeName]*core.NodeUsage
}

func newInvCycle(opts sched.Options, snap *core.Snapshot, now time.Time, plan core.Plan) *invCycle {
	c := &invCycle{opts: opts, snap: snap, now: now, plan: plan,
		nodes: map[core.NodeName]*core.Node{}, pending: map[core.WorkloadID]*core.Workload{}, running: map[core.WorkloadID]*core.Workload{},
		teams: map[core.TeamName]core.Team{}, held: map[core.TeamName]int64{}, shares: map[core.TeamName]core.TeamShare{},
		decision: map[core.WorkloadID]core.Decision{}, placed: map[core.WorkloadID]core.Placement{}, after: map[core.NodeName]*core.NodeUsage{}}
	for _, n := range snap.Nodes {
		c.nodes[n.Name] = n
		if u := snap.Usage[n.Name]; u != nil {
			c.after[n.Name] = u.Clone()
		} else {
			c.after[n.Name] = &core.NodeUsage{}
		}
	}
	for _, w := range snap.Pending {
		c.pending[w.ID] = w
	}
	for _, w := range snap.Running {
		c.running[w.ID] = w
		c.held[w.Team] += invHeld(w)
	}
	for _, tm := range snap.Teams {
		c.teams[tm.Name] = tm
	}
	for _, sh := range plan.Shares {
		c.shares[sh.Team] = sh
	}
	for _, d := range plan.Unplaced {
		c.decision[d.Workload] = d
	}
	for _, p := range plan.Placements {
		c.placed[p.Workload] = p
		if w := c.pending[p.Workload]; w != nil {
			invAdd(c.after, w.Request, p.Assignments)
		}
	}
	return c
}

func (c *invCycle) team(name core.TeamName) core.Team {
	if tm, ok := c.teams[name]; ok {
		return tm
	}
	return core.NewTeam(name, time.Time{})
}

// heldAtOrAbove is what a team runs in classes of at least value, batch
// (idle-only) excluded.
func (c *invCycle) heldAtOrAbove(team core.TeamName, value int) int64 {
	var m int64
	for _, w := range c.snap.Running {
		if cl := c.class(w); w.Team == team && !cl.IdleOnly && cl.Value >= value {
			m += invHeld(w)
		}
	}
	return m
}

func (c *invCycle) class(w *core.Workload) core.PriorityClass {
	name := w.Priority
	if name == "" {
		name = core.DefaultPriority(w.Kind)
	}
	cl, _ := core.Class(c.snap.Classes, name)
	return cl
}

// invProperty is one invariant, checked on one cycle.
type invProperty struct {
	name  string
	check func(t propTB, c *invCycle)
}

var invProperties = []invProperty{
	{"1 no device over its share or memory", invCheckFit},
	{"2 victims are running, preemptible, and preempted once", invCheckVictims},
	{"3 no team above its limit", invCheckLimit},
	{"4 every victim ranks below its preemptor", invCheckRank},
	{"5 batch never preempts", invCheckBatch},
	{"6 production only within the guarantee", invCheckProduction},
	{"7a same plan with pending and running shuffled", invCheckShuffledWorkloads},
	{"7b same plan with nodes and teams shuffled", invCheckShuffledNodes},
	{"8 the snapshot is not modified", invCheckUnmodified},
	{"10 nothing waits as unschedulable while capacity it fits is free", invCheckNoIdleFit},
	{"11 each preemptor's victims are on its node and minimal", invCheckMinimalVictims},
	{"12 every pending workload is placed or explained once", invCheckDecided},
	{"13 no GPU idle while a pending workload within its guarantee fits on it", invCheckGuaranteedNotBlocked},
	{"14 evicted capacity is the least that lets the preemptor fit", invCheckEvictionBound},
	{"15 residency holds for every placement, nomination and preemption", invCheckResidency},
	{"16 no placement on a burst node the policy forbids", invCheckBurst},
}

// invCheckResidency: a workload with a residency is placed, nominated and
// preempts only on nodes in one of its regions.
func invCheckResidency(t propTB, c *invCycle) {
	t.Helper()
	outside := func(w *core.Workload, name core.NodeName) bool {
		n := c.nodes[name]
		return n != nil && len(w.Request.Regions) > 0 && !slices.Contains(w.Request.Regions, n.Region)
	}
	for _, p := range c.plan.Placements {
		w := c.pending[p.Workload]
		for _, name := range core.Nodes(p.Assignments) {
			if w != nil && outside(w, name) {
				t.Errorf("%s (residency %v) placed on %s in region %q", w.ID, w.Request.Regions, name, c.nodes[name].Region)
			}
		}
	}
	for _, d := range c.plan.Unplaced {
		if w := c.pending[d.Workload]; w != nil && d.Nominated != "" && outside(w, d.Nominated) {
			t.Errorf("%s (residency %v) nominated to %s in region %q (%s: %q)", w.ID, w.Request.Regions, d.Nominated, c.nodes[d.Nominated].Region, d.Reason, d.Message)
		}
	}
	for _, pr := range c.plan.Preemptions {
		w, v := c.pending[pr.Preemptor], c.running[pr.Victim]
		if w == nil || v == nil {
			continue
		}
		for _, name := range core.Nodes(v.Status.Placement) {
			if outside(w, name) {
				t.Errorf("%s (residency %v) preempts %s on %s in region %q", w.ID, w.Request.Regions, v.ID, name, c.nodes[name].Region)
			}
		}
	}
}

// invCheckBurst: a workload goes to a burst node (placed, nominated, or
// preempting there) only when the burst policy lets it (its class, its
// wait), and is placed there only when no node outside the burst pools
// that it may use has room for it at the end of the cycle (usage only
// grows within a cycle; nodes held for others and the one a starving
// workload may be given are left out, as in invariant 10; a request by
// memory, which its limit may refuse where it takes more, is left out).
func invCheckBurst(t propTB, c *invCycle) {
	t.Helper()
	held := map[core.NodeName]bool{}
	starving := false
	for _, d := range c.plan.Unplaced {
		if d.Nominated != "" {
			held[d.Nominated] = true
		}
		w := c.pending[d.Workload]
		if w != nil && d.Reason == sched.ReasonUnschedulable && c.opts.StarvationAfter > 0 && !w.CreatedAt.IsZero() && c.now.Sub(w.CreatedAt) >= c.opts.StarvationAfter {
			starving = true
		}
	}
	forbidden := func(w *core.Workload, name core.NodeName) bool {
		n := c.nodes[name]
		return n != nil && n.Burst() && !c.invMayBurst(w)
	}
	for _, p := range c.plan.Placements {
		w := c.pending[p.Workload]
		if w == nil {
			continue
		}
		burst := false
		for _, name := range core.Nodes(p.Assignments) {
			burst = burst || c.nodes[name].Burst()
			if forbidden(w, name) {
				t.Errorf("%s (%s, since %s) placed on burst node %s", w.ID, c.class(w).Name, w.CreatedAt.Format(time.TimeOnly), name)
			}
		}
		if !burst || w.Request.Count() > 1 || w.Request.MilliGPU == 0 {
			continue
		}
		var fits []string
		for _, n := range c.snap.Nodes {
			if !n.Burst() && !held[n.Name] && c.invMayUse(w, n) {
				if as := invFitOn(n, c.after[n.Name], w.Request); as != nil {
					fits = append(fits, invWhere(as))
				}
			}
		}
		if allowed := map[bool]int{true: 1}[starving]; len(fits) > allowed {
			t.Errorf("%s placed on burst node %s, but fits outside the burst pools on %v", w.ID, invWhere(p.Assignments), fits)
		}
	}
	for _, d := range c.plan.Unplaced {
		if w := c.pending[d.Workload]; w != nil && d.Nominated != "" && forbidden(w, d.Nominated) {
			t.Errorf("%s (%s) nominated to burst node %s (%s: %q)", w.ID, c.class(w).Name, d.Nominated, d.Reason, d.Message)
		}
	}
	for _, pr := range c.plan.Preemptions {
		w, v := c.pending[pr.Preemptor], c.running[pr.Victim]
		if w == nil || v == nil {
			continue
		}
		for _, name := range core.Nodes(v.Status.Placement) {
			if forbidden(w, name) {
				t.Errorf("%s (%s) preempts %s on burst node %s", w.ID, c.class(w).Name, v.ID, name)
			}
		}
	}
}

// invCheckFit: every placement is of a pending workload, once, and passes
// core.Fits against the snapshot's usage plus the placements before it;
// afterwards no device holds over 1000 milli-GPU or over its memory.
func invCheckFit(t propTB, c *invCycle) {
	t.Helper()
	usage := map[core.NodeName]*core.NodeUsage{}
	for name, n := range c.nodes {
		if u := c.snap.Usage[n.Name]; u != nil {
			usage[name] = u.Clone()
		} else {
			usage[name] = &core.NodeUsage{}
		}
	}
	seen := map[core.WorkloadID]bool{}
	for _, p := range c.plan.Placements {
		w := c.pending[p.Workload]
		if w == nil {
			t.Errorf("placed %s, which is not pending", p.Workload)
			continue
		}
		if seen[p.Workload] {
			t.Errorf("placed %s twice", p.Workload)
			continue
		}
		seen[p.Workload] = true
		if len(p.Assignments) == 0 {
			t.Errorf("placed %s on no device", p.Workload)
			continue
		}
		for _, name := range core.Nodes(p.Assignments) {
			n := c.nodes[name]
			if n == nil {
				t.Errorf("placed %s on unknown node %s", p.Workload, name)
				continue
			}
			on, _ := core.OnNode(p.Assignments, name)
			if err := core.Fits(n, usage[name], w.Request, on); err != nil {
				t.Errorf("placement of %s on %s does not fit: %v", p.Workload, invWhere(p.Assignments), err)
				continue
			}
			usage[name].Add(name, w.Request, on)
		}
	}
	for name, u := range usage {
		for _, g := range c.nodes[name].GPUs {
			if got := u.GPUs[g.Index]; got.MilliGPU > 1000 || got.MemoryMiB > g.MemoryMiB {
				t.Errorf("%s gpu %d holds %d milli-GPU and %d of %d MiB", name, g.Index, got.MilliGPU, got.MemoryMiB, g.MemoryMiB)
			}
		}
	}
}

// invCheckVictims: every victim is a running workload that is not already
// stopping, of a preemptible class (never production), named once, with
// its current attempt; every preemptor is pending, not placed, and waits
// with reason Preempting.
func invCheckVictims(t propTB, c *invCycle) {
	t.Helper()
	seen := map[core.WorkloadID]bool{}
	for _, pr := range c.plan.Preemptions {
		if seen[pr.Victim] {
			t.Errorf("%s is a victim twice", pr.Victim)
		}
		seen[pr.Victim] = true
		v := c.running[pr.Victim]
		if v == nil {
			t.Errorf("victim %s is not running", pr.Victim)
			continue
		}
		if v.Status.Phase != core.Running {
			t.Errorf("victim %s is %s, not Running", v.ID, v.Status.Phase)
		}
		if cl := c.class(v); !cl.Preemptible || cl.Name == "production" {
			t.Errorf("victim %s is of class %s, which is never preempted", v.ID, cl.Name)
		}
		if v.Status.StopRequested != "" {
			t.Errorf("victim %s is already stopping (%s)", v.ID, v.Status.StopRequested)
		}
		if pr.Attempt != v.Status.Attempts {
			t.Errorf("preemption of %s names attempt %d, want %d", v.ID, pr.Attempt, v.Status.Attempts)
		}
		if c.pending[pr.Preemptor] == nil {
			t.Errorf("preemptor %s of %s is not pending", pr.Preemptor, v.ID)
		}
		if _, ok := c.placed[pr.Preemptor]; ok {
			t.Errorf("preemptor %s of %s is also placed", pr.Preemptor, v.ID)
		}
		if d := c.decision[pr.Preemptor]; d.Reason != sched.ReasonPreempting {
			t.Errorf("preemptor %s of %s waits with reason %q, want %q", pr.Preemptor, v.ID, d.Reason, sched.ReasonPreempting)
		}
	}
}

// invCheckLimit: a team that is placed anything stays within its limit,
// counting what it runs and everything placed for it.
func invCheckLimit(t propTB, c *invCycle) {
	t.Helper()
	placed := map[core.TeamName]int64{}
	for _, p := range c.plan.Placements {
		if w := c.pending[p.Workload]; w != nil {
			placed[w.Team] += invMilli(p.Assignments)
		}
	}
	for name, m := range placed {
		if tm := c.team(name); m > 0 && !tm.LimitAllows(c.held[name]+m) {
			t.Errorf("team %s holds %d and is placed %d more, over its limit %d", name, c.held[name], m, tm.Limit)
		}
	}
}

// invCheckRank: each victim ranks below its preemptor.
//
//   - Preempted: a lower class of the preemptor's own team, or batch.
//   - Reclaimed: another team's victim, that team over its guarantee, and
//     the preemptor's team within its guarantee after the preemptor
//     (counting the team's work in the preemptor's class and above, as
//     invCheckProduction does), or
//     (fair-share reclaim on) within its fair share after it while the
//     victim's team stays at or above its fair share without the victim,
//     which has run at least MinRuntime.
//
// Usage grows within a cycle, so the preemptor's team's usage when it was
// decided is at least what it runs, and the victim's team's at most its
// usage at the end of the cycle: the conditions below are implied by the
// scheduler's rules, whatever the order of decisions.
func invCheckRank(t propTB, c *invCycle) {
	t.Helper()
	for _, pr := range c.plan.Preemptions {
		v, w := c.running[pr.Victim], c.pending[pr.Preemptor]
		if v == nil || w == nil {
			continue // invCheckVictims reports it
		}
		vc, wc := c.class(v), c.class(w)
		var ok bool
		switch pr.Reason {
		case "Preempted":
			// Within a team: a lower class, or batch.
			ok = v.Team == w.Team && (vc.Value < wc.Value || vc.IdleOnly)
		case "Reclaimed":
			if vc.IdleOnly && v.Team != w.Team && !wc.IdleOnly {
				ok = true // batch of another team gives back the idle capacity it borrowed
				break
			}
			vt, wt := c.team(v.Team), c.team(w.Team)
			ask := w.Request.MilliGPU
			inQuota := !wc.IdleOnly && c.heldAtOrAbove(w.Team, wc.Value)+ask <= wt.Guaranteed
			fair := c.opts.FairShareReclaim && c.held[w.Team]+ask <= c.shares[w.Team].FairShare &&
				c.shares[v.Team].Usage-invHeld(v) >= c.shares[v.Team].FairShare &&
				v.Status.StartedAt != nil && c.now.Sub(*v.Status.StartedAt) >= c.opts.MinRuntime
			ok = v.Team != w.Team && c.held[v.Team] > vt.Guaranteed && (inQuota || fair)
		}
		if !ok {
			t.Errorf("%s (team %s, %s, %d) %s by %s (team %s, %s, %d), which it does not rank below: team %s runs %d of %d guaranteed, fair share %d; team %s runs %d of %d guaranteed, fair share %d",
				v.ID, v.Team, vc.Name, invHeld(v), pr.Reason, w.ID, w.Team, wc.Name, w.Request.MilliGPU,
				v.Team, c.held[v.Team], c.team(v.Team).Guaranteed, c.shares[v.Team].FairShare,
				w.Team, c.held[w.Team], c.team(w.Team).Guaranteed, c.shares[w.Team].FairShare)
		}
	}
}

// invCheckBatch: an idle-only workload never preempts.
func invCheckBatch(t propTB, c *invCycle) {
	t.Helper()
	for _, pr := range c.plan.Preemptions {
		if w := c.pending[pr.Preemptor]; w != nil && c.class(w).IdleOnly {
			t.Errorf("%s (%s) preempts %s", w.ID, c.class(w).Name, pr.Victim)
		}
	}
}

// invCheckProduction: production (a class that may not borrow) is placed
// only while its team stays within its guarantee, counting what the team
// runs in production and above plus what was placed for it in those
// classes up to and including this placement (placements are in decision
// order). Work of lower classes does not count: the guarantee covers the
// highest classes first, so the team's training is what then runs over
// quota, and it can be reclaimed.
func invCheckProduction(t propTB, c *invCycle) {
	t.Helper()
	type key struct {
		team  core.TeamName
		value int
	}
	placed := map[key]int64{}
	for _, p := range c.plan.Placements {
		w := c.pending[p.Workload]
		if w == nil {
			continue
		}
		cl := c.class(w)
		if !cl.IdleOnly {
			placed[key{w.Team, cl.Value}] += invMilli(p.Assignments)
		}
		if cl.MayBorrow {
			continue
		}
		total := c.heldAtOrAbove(w.Team, cl.Value)
		for k, m := range placed {
			if k.team == w.Team && k.value >= cl.Value {
				total += m
			}
		}
		if g := c.team(w.Team).Guaranteed; total > g {
			t.Errorf("%s (%s) placed, taking team %s to %d in %s and above, over its guarantee %d (it runs %d in all)", w.ID, cl.Name, w.Team, total, cl.Name, g, c.held[w.Team])
		}
	}
}

// invCheckShuffledWorkloads: a deep copy with Pending and Running shuffled
// gives exactly the same plan, order included.
func invCheckShuffledWorkloads(t propTB, c *invCycle) {
	t.Helper()
	s := copySnapshot(c.snap)
	r := rand.New(rand.NewPCG(uint64(len(s.Pending)), uint64(len(s.Running))))
	r.Shuffle(len(s.Pending), func(i, j int) { s.Pending[i], s.Pending[j] = s.Pending[j], s.Pending[i] })
	r.Shuffle(len(s.Running), func(i, j int) { s.Running[i], s.Running[j] = s.Running[j], s.Running[i] })
	if diff := cmp.Diff(c.plan, c.opts.Schedule(s, c.now)); diff != "" {
		t.Errorf("plan changed with pending and running shuffled (-original +shuffled):\n%s", diff)
	}
}

// invCheckShuffledNodes: a deep copy with Nodes and Teams shuffled gives
// exactly the same plan.
func invCheckShuffledNodes(t propTB, c *invCycle) {
	t.Helper()
	s := copySnapshot(c.snap)
	r := rand.New(rand.NewPCG(uint64(len(s.Nodes)), uint64(len(s.Teams))))
	r.Shuffle(len(s.Nodes), func(i, j int) { s.Nodes[i], s.Nodes[j] = s.Nodes[j], s.Nodes[i] })
	r.Shuffle(len(s.Teams), func(i, j int) { s.Teams[i], s.Teams[j] = s.Teams[j], s.Teams[i] })
	if diff := cmp.Diff(c.plan, c.opts.Schedule(s, c.now)); diff != "" {
		t.Errorf("plan changed with nodes and teams shuffled (-original +shuffled):\n%s", diff)
	}
}

// invCheckUnmodified: scheduling leaves the snapshot as it was.
func invCheckUnmodified(t propTB, c *invCycle) {
	t.Helper()
	s := copySnapshot(c.snap)
	before := copySnapshot(s)
	c.opts.Schedule(s, c.now)
	if diff := cmp.Diff(before, s); diff != "" {
		t.Errorf("Schedule modified the snapshot (-before +after):\n%s", diff)
	}
}

// invCheckNoIdleFit: a workload left waiting as Unschedulable (or, for
// batch, waiting for idle capacity) fits on no node once the cycle's
// placements are made, apart from the nodes held for preemptors (the
// nominated ones) and, when some workload has waited StarvationAfter, the
// one node a cycle may reserve for it. Usage only grows within a cycle, so
// a workload that fits at the end fitted when its turn came.
func invCheckNoIdleFit(t propTB, c *invCycle) {
	t.Helper()
	held := map[core.NodeName]bool{}
	starving := false
	for _, d := range c.plan.Unplaced {
		if d.Nominated != "" {
			held[d.Nominated] = true
		}
		w := c.pending[d.Workload]
		if w != nil && d.Reason == sched.ReasonUnschedulable && c.opts.StarvationAfter > 0 && !w.CreatedAt.IsZero() && c.now.Sub(w.CreatedAt) >= c.opts.StarvationAfter {
			starving = true
		}
	}
	for _, d := range c.plan.Unplaced {
		w := c.pending[d.Workload]
		if w == nil || (d.Reason != sched.ReasonUnschedulable && d.Reason != sched.ReasonIdleOnly) {
			continue
		}
		var fits []string
		if w.Request.Count() > 1 {
			// A gang fits when its replicas do, across nodes it may use:
			// outside the burst pools, or (when it may burst) within them.
			for _, burst := range []bool{false, true} {
				if as := invFitGang(c, held, w, burst); as != nil {
					fits = append(fits, invWhere(as))
				}
			}
		} else {
			for _, n := range c.snap.Nodes {
				if held[n.Name] || !c.invMayUse(w, n) {
					continue
				}
				if as := invFitOn(n, c.after[n.Name], w.Request); as != nil {
					fits = append(fits, invWhere(as))
				}
			}
		}
		allowed := 0
		if starving {
			allowed = 1
		}
		if len(fits) > allowed {
			t.Errorf("%s (team %s, %s, %d milli-GPU) waits (%s: %q) but fits on %v", w.ID, w.Team, c.class(w).Name, w.Request.MilliGPU, d.Reason, d.Message, fits)
		}
	}
}

// invCheckMinimalVictims: a preemptor's victims all run on the node it is
// nominated for, and the preemptors of one node are served together:
// taking them in the plan's order against the node's future (what it will
// hold once the stops under way have happened), each fits once its victims
// and those chosen before it are gone, together with the preemptors
// already waiting for the node and those served before it (in some
// arrangement: where the scheduler pictured a waiting preemptor depends on
// what the node held when it was pictured, which this check does not
// see), and no one of its own victims could have been spared.
func invCheckMinimalVictims(t propTB, c *invCycle) {
	t.Helper()
	byPreemptor := map[core.WorkloadID][]*core.Workload{}
	var order []core.WorkloadID
	for _, pr := range c.plan.Preemptions {
		v := c.running[pr.Victim]
		if v == nil || c.pending[pr.Preemptor] == nil {
			continue
		}
		if byPreemptor[pr.Preemptor] == nil {
			order = append(order, pr.Preemptor)
		}
		byPreemptor[pr.Preemptor] = append(byPreemptor[pr.Preemptor], v)
	}
	remove := func(u *core.NodeUsage, node core.NodeName, v *core.Workload) {
		u.Add(node, core.Request{MilliCPU: -v.Request.MilliCPU, MemoryMiB: -v.Request.MemoryMiB}, invNegate(v.Status.Placement))
	}
	// A node's future: what it holds at the end of the cycle less the
	// stops under way (and, as preemptors are served, their victims), and
	// the requests pictured in it.
	type picture struct {
		base *core.NodeUsage
		reqs []core.Request
	}
	future := map[core.NodeName]*picture{}
	futureOf := func(node core.NodeName) *picture {
		if p := future[node]; p != nil {
			return p
		}
		u := c.after[node].Clone()
		for _, r := range c.snap.Running {
			if r.Status.StopRequested != "" && slices.Contains(core.Nodes(r.Status.Placement), node) {
				remove(u, node, r)
			}
		}
		p := &picture{base: u}
		waiting := slices.Clone(c.snap.Pending)
		slices.SortStableFunc(waiting, func(a, b *core.Workload) int {
			return stdcmp.Or(stdcmp.Compare(c.class(b).Value, c.class(a).Value), stdcmp.Compare(a.Seq, b.Seq), stdcmp.Compare(a.ID, b.ID))
		})
		for _, w := range waiting {
			// A preemptor that preempts again in this plan is pictured
			// where its new victims leave it room, not here as well.
			// So is one that gave its hold back in this plan (its
			// decision is no longer to wait there for its victims).
			if d := c.decision[w.ID]; w.Status.Nominated != node || w.Status.Reason != sched.ReasonPreempting || byPreemptor[w.ID] != nil ||
				d.Reason != sched.ReasonPreempting || d.Nominated != node {
				continue
			}
			if _, placed := c.placed[w.ID]; placed {
				continue
			}
			// One that does not fit even alone is not counted on (the
			// scheduler pictures it nowhere either).
			if invBestFitOn(c.nodes[node], u, w.Request) != nil {
				p.reqs = append(p.reqs, w.Request)
			}
		}
		// Those that do not fit together are pictured as many as do, in
		// order, as the scheduler pictures them one after the other.
		for len(p.reqs) > 0 && !invPackOn(c.nodes[node], p.base, p.reqs) {
			p.reqs = p.reqs[:len(p.reqs)-1]
		}
		future[node] = p
		return p
	}
	for _, id := range order {
		w, vs := c.pending[id], byPreemptor[id]
		node := c.decision[id].Nominated
		n := c.nodes[node]
		if n == nil {
			t.Errorf("preemptor %s is nominated for node %q, which does not exist", id, node)
			continue
		}
		for _, v := range vs {
			if !slices.Contains(core.Nodes(v.Status.Placement), node) {
				t.Errorf("victim %s of %s runs on %s, not on its nominated node %s", v.ID, id, invWhere(v.Status.Placement), node)
			}
		}
		firstOnNode := future[node] == nil
		p := futureOf(node)
		without := func(skip int) *core.NodeUsage {
			u := p.base.Clone()
			for i, v := range vs {
				if i != skip {
					remove(u, node, v)
				}
			}
			return u
		}
		if !invPackOn(n, without(-1), append(slices.Clone(p.reqs), w.Request)) {
			t.Errorf("preemptor %s (%d milli-GPU) does not fit on %s even with its %d victims (and those chosen before it) gone, next to the %d preemptors pictured there", id, w.Request.MilliGPU, node, len(vs), len(p.reqs))
			continue
		}
		// Minimality is checked where the node's future is only this
		// preemptor's doing; where preemptors share a node, only their
		// joint fit is checked.
		clean := firstOnNode
		if clean {
			for _, r := range c.snap.Running {
				if r.Status.StopRequested != "" && slices.Contains(core.Nodes(r.Status.Placement), node) {
					clean = false
				}
			}
			for _, p := range c.snap.Pending {
				if p.Status.Nominated == node {
					clean = false
				}
			}
		}
		if len(vs) > 1 && clean {
			for i, v := range vs {
				if as := invFitOn(n, without(i), w.Request); as != nil {
					t.Errorf("preemptor %s (%d milli-GPU) fits on %s without preempting %s (%d milli-GPU)", id, w.Request.MilliGPU, invWhere(as), v.ID, invHeld(v))
				}
			}
		}
		p.base = without(-1)
		p.reqs = append(p.reqs, w.Request)
	}
}

// invPackOn reports whether every request fits on n next to u at once, in
// some arrangement: each share on some device, each set of whole GPUs on
// some free devices (a search; the requests of one node are few).
func invPackOn(n *core.Node, u *core.NodeUsage, reqs []core.Request) bool {
	if len(reqs) == 0 {
		return true
	}
	req, rest := reqs[0], reqs[1:]
	try := func(as []core.Assignment) bool {
		if core.Fits(n, u, req, as) != nil {
			return false
		}
		next := u.Clone()
		next.Add(n.Name, req, as)
		return invPackOn(n, next, rest)
	}
	switch {
	case req.Fractional():
		// Devices alike, equally used, give the same outcome.
		type kind struct {
			use    core.GPUUse
			model  string
			mem    int64
			domain int
		}
		tried := map[kind]bool{}
		for _, g := range n.GPUs {
			milli, mem, ok := req.ShareOn(g)
			k := kind{u.GPUs[g.Index], g.Model, g.MemoryMiB, g.Domain}
			if !ok || tried[k] {
				continue
			}
			tried[k] = true
			if try([]core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}}) {
				return true
			}
		}
		return false
	case req.WholeGPUs() > 0:
		var free []core.Assignment
		for _, g := range n.GPUs {
			if use := u.GPUs[g.Index]; use.MilliGPU == 0 && use.MemoryMiB == 0 {
				free = append(free, core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB})
			}
		}
		// Free devices differ only where the node's models or domains do;
		// every subset of the wanted size is tried where they might.
		var pick func(from int, as []core.Assignment) bool
		pick = func(from int, as []core.Assignment) bool {
			if len(as) == req.WholeGPUs() {
				return try(slices.Clone(as))
			}
			for i := from; i < len(free); i++ {
				if pick(i+1, append(as, free[i])) {
					return true
				}
				if invUniform(n) {
					return false // any subset of free devices is as good as the first
				}
			}
			return false
		}
		return pick(0, nil)
	default:
		return core.Fits(n, u, req, nil) == nil && invPackOn(n, addNoGPU(n, u, req), rest)
	}
}

// addNoGPU is u with req (no GPU) added.
func addNoGPU(n *core.Node, u *core.NodeUsage, req core.Request) *core.NodeUsage {
	next := u.Clone()
	next.Add(n.Name, req, nil)
	return next
}

// invUniform reports whether every device of n is of one model, memory and
// domain, so that which free ones a request takes does not matter.
func invUniform(n *core.Node) bool {
	for _, g := range n.GPUs {
		if !invAlike(n, g) {
			return false
		}
	}
	return true
}

// invAlike reports whether g is like n's first device.
func invAlike(n *core.Node, g core.GPU) bool {
	f := n.GPUs[0]
	return g.Model == f.Model && g.MemoryMiB == f.MemoryMiB && g.Domain == f.Domain
}

// invWithinAtEnd reports whether w stays within its team's guarantee
// counting what the team holds in its class and above at the end of the
// cycle (what it runs and what was placed for it): usage only grows within
// a cycle, so such a workload was within its guarantee when decided. A
// request by memory is counted as a whole GPU, its largest share.
func (c *invCycle) invWithinAtEnd(w *core.Workload) bool { return c.invWithin(w, true) }

// invWithin is invWithinAtEnd, or with atEnd false at the start of the
// cycle: a workload not within its guarantee then is not within it at
// any time in the cycle.
func (c *invCycle) invWithin(w *core.Workload, atEnd bool) bool { return c.invWithinOn(w, atEnd, nil) }

// invWithinOn is invWithin with a request by memory charged the least
// share it takes of a device of node n (a whole GPU when n is nil): what
// the scheduler charges it where it lands.
func (c *invCycle) invWithinOn(w *core.Workload, atEnd bool, n *core.Node) bool {
	cl := c.class(w)
	if cl.IdleOnly || cl.Name == "" {
		return false
	}
	tm := c.team(w.Team)
	if len(tm.GuaranteedByModel) > 0 {
		return false
	}
	total := c.heldAtOrAbove(w.Team, cl.Value)
	for _, p := range c.plan.Placements {
		if o := c.pending[p.Workload]; atEnd && o != nil && o.Team == w.Team && !c.class(o).IdleOnly && c.class(o).Value >= cl.Value {
			total += invMilli(p.Assignments)
		}
	}
	ask := w.Request.TotalMilliGPU()
	if w.Request.MilliGPU == 0 {
		per := int64(1000)
		if n != nil {
			for _, g := range n.GPUs {
				if m, _, ok := w.Request.ShareOn(g); ok && w.Request.ModelAllowed(g.Model) && m < per {
					per = m
				}
			}
		}
		ask = per * int64(w.Request.Count())
	}
	return total+ask <= tm.Guaranteed
}

// invCheckGuaranteedNotBlocked: a workload left waiting as Unschedulable
// that its team's guarantee covers fits on no node once the cycle's
// placements are made, apart from the nodes held for preemptors and a
// starvation reservation for a workload that may be within its team's
// guarantee when it is decided (it is at the start of the cycle; a request
// by memory charged its share of the reserved node's devices): a
// reservation for work that borrows never holds capacity against a
// guarantee.
func invCheckGuaranteedNotBlocked(t propTB, c *invCycle) {
	t.Helper()
	held := map[core.NodeName]bool{}
	for _, d := range c.plan.Unplaced {
		w := c.pending[d.Workload]
		switch {
		case d.Nominated == "" || w == nil:
		case d.Reason == sched.ReasonPreempting || c.invWithinOn(w, false, c.nodes[d.Nominated]):
			held[d.Nominated] = true
		}
	}
	for _, d := range c.plan.Unplaced {
		w := c.pending[d.Workload]
		if w == nil || d.Reason != sched.ReasonUnschedulable || !c.invWithinAtEnd(w) || w.Request.Count() > 1 {
			continue
		}
		var fits []string
		for _, n := range c.snap.Nodes {
			if held[n.Name] || !c.invMayUse(w, n) {
				continue
			}
			if as := invFitOn(n, c.after[n.Name], w.Request); as != nil {
				fits = append(fits, invWhere(as))
			}
		}
		if len(fits) > 0 {
			t.Errorf("%s (team %s, %s, %d milli-GPU, within its team's guarantee) waits (%q) but fits on %v", w.ID, w.Team, c.class(w).Name, w.Request.MilliGPU, d.Message, fits)
		}
	}
}

// invCheckEvictionBound: where a preemptor's node's future is its own doing
// (as in invCheckMinimalVictims), no set of workloads it could preempt
// instead lets it fit with less capacity evicted. The sets weighed are
// made of its victims and their peers on the node: for a victim preempted
// within its team (a lower class) or as batch, the running workloads of
// the same team and class (any team's, for batch) not already stopping,
// which the same rule lets it take.
func invCheckEvictionBound(t propTB, c *invCycle) {
	t.Helper()
	byPreemptor := map[core.WorkloadID][]*core.Workload{}
	rules := map[core.WorkloadID]bool{} // every victim's rule has no condition but team and class
	for _, pr := range c.plan.Preemptions {
		v := c.running[pr.Victim]
		if v == nil {
			continue
		}
		if _, ok := rules[pr.Preemptor]; !ok {
			rules[pr.Preemptor] = true
		}
		rules[pr.Preemptor] = rules[pr.Preemptor] && (pr.Reason == "Preempted" || c.class(v).IdleOnly)
		byPreemptor[pr.Preemptor] = append(byPreemptor[pr.Preemptor], v)
	}
	for id, vs := range byPreemptor {
		w := c.pending[id]
		node := c.decision[id].Nominated
		n := c.nodes[node]
		if w == nil || n == nil || !rules[id] || w.Request.Count() > 1 {
			continue
		}
		clean := true
		for _, r := range c.snap.Running {
			if r.Status.StopRequested != "" && slices.Contains(core.Nodes(r.Status.Placement), node) {
				clean = false
			}
		}
		for _, p := range c.snap.Pending {
			if p.Status.Nominated == node || (p.ID != id && c.decision[p.ID].Nominated == node && c.decision[p.ID].Reason == sched.ReasonPreempting) {
				clean = false
			}
		}
		if !clean {
			continue
		}
		// The pool: the victims and their peers.
		var pool []*core.Workload
		for _, r := range c.snap.Running {
			if r.Status.StopRequested != "" || !slices.Contains(core.Nodes(r.Status.Placement), node) || !c.class(r).Preemptible || r.Request.Count() > 1 {
				continue
			}
			if slices.ContainsFunc(vs, func(v *core.Workload) bool {
				return v.ID == r.ID || (c.class(v).IdleOnly && c.class(r).IdleOnly) || (v.Team == r.Team && c.class(v).Name == c.class(r).Name)
			}) {
				pool = append(pool, r)
			}
		}
		if len(pool) > 12 {
			continue
		}
		var evicted int64
		for _, v := range vs {
			evicted += invHeld(v)
		}
		least, leastSet := evicted, []core.WorkloadID(nil)
		for mask := 1; mask < 1<<len(pool); mask++ {
			u := c.after[node].Clone()
			var m int64
			var set []core.WorkloadID
			for i, r := range pool {
				if mask&(1<<i) != 0 {
					u.Add(node, core.Request{MilliCPU: -r.Request.MilliCPU, MemoryMiB: -r.Request.MemoryMiB}, invNegate(r.Status.Placement))
					m += invHeld(r)
					set = append(set, r.ID)
				}
			}
			if m < least && invFitOn(n, u, w.Request) != nil {
				least, leastSet = m, set
			}
		}
		if least < evicted {
			t.Errorf("preemptor %s (%d milli-GPU) evicts %d milli-GPU on %s, where %v (%d) would do", id, w.Request.MilliGPU, evicted, node, leastSet, least)
		}
	}
}

// invFitGang places the replicas of a gang first fit on the nodes that
// are not held, after the cycle's placements; nil when one does not fit.
func invFitGang(c *invCycle, held map[core.NodeName]bool, w *core.Workload, burst bool) []core.Assignment {
	req := w.Request
	one := req
	one.Replicas = 0
	var all []core.Assignment
	usage := map[core.NodeName]*core.NodeUsage{}
	for r := range req.Count() {
		var as []core.Assignment
		for _, n := range c.snap.Nodes {
			if held[n.Name] || n.Burst() != burst || !c.invMayUse(w, n) {
				continue
			}
			if usage[n.Name] == nil {
				usage[n.Name] = c.after[n.Name].Clone()
			}
			if as = invFitOn(n, usage[n.Name], one); as != nil {
				usage[n.Name].Add(n.Name, one, as)
				break
			}
		}
		if as == nil {
			return nil
		}
		for i := range as {
			as[i].Replica = r
		}
		all = append(all, as...)
	}
	return all
}

func invNegate(as []core.Assignment) []core.Assignment {
	out := slices.Clone(as)
	for i := range out {
		out[i].MilliGPU, out[i].MemoryMiB = -out[i].MilliGPU, -out[i].MemoryMiB
	}
	return out
}

// invCheckDecided: every pending workload is placed or has exactly one
// decision, with a reason and a message; nothing else is decided.
func invCheckDecided(t propTB, c *invCycle) {
	t.Helper()
	count := map[core.WorkloadID]int{}
	for _, d := range c.plan.Unplaced {
		count[d.Workload]++
		if c.pending[d.Workload] == nil {
			t.Errorf("decision for %s, which is not pending", d.Workload)
		}
		if d.Reason == "" || d.Message == "" {
			t.Errorf("decision for %s has reason %q and message %q", d.Workload, d.Reason, d.Message)
		}
	}
	for _, p := range c.plan.Placements {
		count[p.Workload]++
	}
	for _, w := range c.snap.Pending {
		if n := count[w.ID]; n != 1 {
			t.Errorf("%s is placed or explained %d times, want once", w.ID, n)
		}
	}
}

// ---------------------------------------------------------------------------
// The tests.

// TestInvariantsOneCycle checks every invariant on the plan of one cycle
// over a random cluster.
func TestInvariantsOneCycle(t *testing.T) {
	for _, p := range invProperties {
		t.Run(p.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				opts := invDrawOptions(t)
				snap := invDrawSnapshot(t)
				t.Logf("cluster:\n%s", invDescribe(opts, snap, invNow))
				plan := opts.Schedule(snap, invNow)
				t.Logf("plan:\n%s", invDescribePlan(plan))
				p.check(t, newInvCycle(opts, snap, invNow, plan))
			})
		})
	}
}

// invSim is a cluster that plans are applied to, cycle after cycle.
type invSim struct {
	opts sched.Options
	snap *core.Snapshot
	now  time.Time
	rng  *rand.Rand
	// linger is how many more cycles a victim keeps running after the
	// cycle that preempted it.
	linger map[core.WorkloadID]int
	next   int // for new workload IDs
	seq    int64
}

// step ends the cycle before this one: victims stop and are requeued (or
// keep stopping for one more cycle), and, while active, some running
// workloads finish and new ones arrive. Then the clock moves on a minute.
func (s *invSim) step(active bool, teams []core.TeamName) {
	var running []*core.Workload
	pending := slices.Clone(s.snap.Pending)
	for _, w := range s.snap.Running {
		switch {
		case w.Status.StopRequested != "" && s.linger[w.ID] > 0:
			s.linger[w.ID]--
			running = append(running, w)
		case w.Status.StopRequested != "":
			r := w.Clone()
			r.Status = core.Status{Phase: core.Pending, Attempts: w.Status.Attempts, Preemptions: w.Status.Preemptions + 1, PreemptedAt: w.Status.PreemptedAt}
			pending = append(pending, r)
		case active && s.rng.IntN(8) == 0: // finished
		default:
			running = append(running, w)
		}
	}
	s.now = s.now.Add(time.Minute)
	if active {
		for range s.rng.IntN(4) {
			w := job(fmt.Sprintf("a%03d", s.next)).team(teams[s.rng.IntN(len(teams))]).class(invClasses[s.rng.IntN(len(invClasses))]).gpus(invSizes[s.rng.IntN(len(invSizes))]).obj()
			s.next++
			s.seq++
			w.Seq, w.CreatedAt = s.seq, s.now
			pending = append(pending, w)
		}
	}
	s.snap = &core.Snapshot{Nodes: s.snap.Nodes, Usage: invUsage(s.snap.Nodes, running), Pending: pending, Running: running, Teams: s.snap.Teams}
}

// invExplained copies the pending workloads with the plan's decisions
// recorded in their status, as the store records them.
func invExplained(pending []*core.Workload, plan core.Plan) []*core.Workload {
	decided := map[core.WorkloadID]core.Decision{}
	for _, d := range plan.Unplaced {
		decided[d.Workload] = d
	}
	out := make([]*core.Workload, 0, len(pending))
	for _, w := range pending {
		if d, ok := decided[w.ID]; ok {
			w = w.Clone()
			w.Status.Reason, w.Status.Message, w.Status.Nominated = d.Reason, d.Message, d.Nominated
		}
		out = append(out, w)
	}
	return out
}

// apply starts the plan's placements, records why the others wait, and
// asks the victims to stop.
func (s *invSim) apply(plan core.Plan, linger func() int) {
	placed := map[core.WorkloadID]core.Placement{}
	for _, p := range plan.Placements {
		placed[p.Workload] = p
	}
	victims := map[core.WorkloadID]core.Preemption{}
	for _, pr := range plan.Preemptions {
		victims[pr.Victim] = pr
	}
	var pending, running []*core.Workload
	for _, w := range invExplained(s.snap.Pending, plan) {
		p, ok := placed[w.ID]
		if !ok {
			pending = append(pending, w)
			continue
		}
		r := w.Clone()
		started := s.now
		r.Status.Phase, r.Status.Placement, r.Status.StartedAt = core.Running, slices.Clone(p.Assignments), &started
		r.Status.Reason, r.Status.Message, r.Status.Nominated = "Scheduled", "placed on "+invWhere(p.Assignments), ""
		r.Status.Attempts++
		running = append(running, r)
	}
	for _, w := range s.snap.Running {
		if pr, ok := victims[w.ID]; ok {
			w = w.Clone()
			at := s.now
			w.Status.StopRequested, w.Status.PreemptedBy, w.Status.PreemptedAt = pr.Reason, pr.Preemptor, &at
			s.linger[w.ID] = linger()
		}
		running = append(running, w)
	}
	s.snap = &core.Snapshot{Nodes: s.snap.Nodes, Usage: invUsage(s.snap.Nodes, running), Pending: pending, Running: running, Teams: s.snap.Teams}
}

func (s *invSim) stopping() bool {
	return slices.ContainsFunc(s.snap.Running, func(w *core.Workload) bool { return w.Status.StopRequested != "" })
}

// invActive and invQuiet are the cycles of a simulation: active ones, in
// which an eighth of the running work finishes and up to three workloads
// arrive, then at most invQuiet in which nothing finishes or arrives.
const (
	invActive = 10
	invQuiet  = 30
)

// invSimulate draws a cluster and runs it: invActive active cycles, then
// quiet ones until a cycle makes no placement and no preemption with
// nothing stopping. Placements start; victims stop one or two cycles
// later and are requeued. check sees every cycle and may stop the run by
// returning false. invSimulate reports whether the cluster settled.
func invSimulate(t *rapid.T, check func(cycle int, s *invSim, plan core.Plan) bool) bool {
	opts := invDrawOptions(t)
	snap := invDrawSnapshot(t)
	s := &invSim{opts: opts, snap: snap, now: invNow, linger: map[core.WorkloadID]int{},
		rng: rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1)), seq: int64(len(snap.Running) + len(snap.Pending))}
	var teams []core.TeamName
	for _, tm := range snap.Teams {
		teams = append(teams, tm.Name)
	}
	t.Logf("cluster:\n%s", invDescribe(opts, snap, invNow))
	for cycle := range invActive + invQuiet {
		active := cycle < invActive
		if cycle > 0 {
			s.step(active, teams)
		}
		plan := opts.Schedule(s.snap, s.now)
		if !check(cycle, s, plan) {
			return false
		}
		if !active && len(plan.Placements) == 0 && len(plan.Preemptions) == 0 && !s.stopping() {
			return true
		}
		s.apply(plan, func() int { return s.rng.IntN(2) })
	}
	return false
}

// TestInvariantsOverCycles checks every invariant on every cycle of a
// simulation (invSimulate).
func TestInvariantsOverCycles(t *testing.T) {
	for _, p := range invProperties {
		t.Run(p.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				invSimulate(t, func(cycle int, s *invSim, plan core.Plan) bool {
					p.check(invCycleLog{t, cycle, s, plan}, newInvCycle(s.opts, s.snap, s.now, plan))
					return !t.Failed()
				})
			})
		})
	}
}

// TestSimulationSettles: once work stops arriving and finishing, the
// scheduler stops changing the cluster: within invQuiet cycles one makes
// no placement and no preemption, with nothing left stopping. A cluster
// that never settles preempts the same work over and over.
func TestSimulationSettles(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var last []string
		settled := invSimulate(t, func(cycle int, s *invSim, plan core.Plan) bool {
			if cycle >= invActive+invQuiet-3 {
				last = append(last, fmt.Sprintf("cycle %d:\n%s\nplan:\n%s", cycle, invDescribe(s.opts, s.snap, s.now), invDescribePlan(plan)))
			}
			return true
		})
		if !settled {
			t.Fatalf("still placing or preempting %d cycles after work stopped arriving; the last cycles:\n%s", invQuiet, strings.Join(last, "\n"))
		}
	})
}

// TestNoWorkloadThrashes: over a simulation, no workload is started and
// reclaimed by another team more than once within MinRuntime by work that
// already waited for room within its guarantee when it started again: a
// decision that reclaims it is not undone and redone at once (work that
// arrives, or is admitted, later may still reclaim it: an idle GPU is not
// kept idle for what is not waiting). Batch is the
// exception by design: it runs on idle capacity only and gives it back
// whenever anything else wants it; so is a preemption within a team (its
// own higher class arriving), which no other team's decision undoes; and
// so is a reclaim on a node where work ended by itself since the victim
// started again: what the node can give changed, which no decision could
// have foreseen.
func TestNoWorkloadThrashes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		stopped := map[core.WorkloadID]time.Time{}
		// waiters are, for each workload placed, the workloads of other
		// teams left waiting for room within their guarantee in the cycle
		// that placed it.
		waiters := map[core.WorkloadID]map[core.WorkloadID]bool{}
		// neighbours are, for each workload placed, the work running on
		// its nodes in the cycle that placed it; preempted, every
		// workload the scheduler stopped (the others that leave end by
		// themselves).
		neighbours := map[core.WorkloadID][]core.WorkloadID{}
		preempted := map[core.WorkloadID]bool{}
		invSimulate(t, func(cycle int, s *invSim, plan core.Plan) bool {
			c := newInvCycle(s.opts, s.snap, s.now, plan)
			for _, p := range plan.Placements {
				w := c.pending[p.Workload]
				ws := map[core.WorkloadID]bool{}
				for _, d := range plan.Unplaced {
					if o := c.pending[d.Workload]; o != nil && w != nil && o.Team != w.Team && (d.Reason == sched.ReasonUnschedulable || d.Reason == sched.ReasonPreempting) && c.invWithin(o, false) {
						ws[o.ID] = true
					}
				}
				waiters[p.Workload] = ws
				var ns []core.WorkloadID
				for _, r := range s.snap.Running {
					for _, n := range core.Nodes(p.Assignments) {
						if slices.Contains(core.Nodes(r.Status.Placement), n) {
							ns = append(ns, r.ID)
							break
						}
					}
				}
				neighbours[p.Workload] = ns
			}
			for _, pr := range plan.Preemptions {
				preempted[pr.Victim] = true
			}
			for _, pr := range plan.Preemptions {
				v := invFind(s.snap.Running, pr.Victim)
				if v == nil || v.Priority == "batch" || pr.Reason != "Reclaimed" {
					continue
				}
				// Undone at once: its reclaimer already waited, within
				// its guarantee, when it started again, and nothing on
				// its nodes ended by itself since.
				waited := waiters[pr.Victim][pr.Preemptor]
				ended := slices.ContainsFunc(neighbours[pr.Victim], func(id core.WorkloadID) bool {
					return !preempted[id] && invFind(s.snap.Running, id) == nil
				})
				if last, ok := stopped[pr.Victim]; ok && waited && !ended && s.opts.MinRuntime > 0 && s.now.Sub(last) < s.opts.MinRuntime {
					invCycleLog{t, cycle, s, plan}.Errorf("%s stopped by the scheduler at %s and again at %s, within MinRuntime %s",
						pr.Victim, last.Format(time.TimeOnly), s.now.Format(time.TimeOnly), s.opts.MinRuntime)
					return false
				}
				stopped[pr.Victim] = s.now
			}
			return true
		})
	})
}

func invFind(ws []*core.Workload, id core.WorkloadID) *core.Workload {
	if i := slices.IndexFunc(ws, func(w *core.Workload) bool { return w.ID == id }); i >= 0 {
		return ws[i]
	}
	return nil
}

// invCycleLog logs the cycle's cluster and plan before its first error.
type invCycleLog struct {
	*rapid.T
	cycle int
	s     *invSim
	plan  core.Plan
}

func (l invCycleLog) header() {
	if !l.T.Failed() {
		l.T.Logf("cycle %d:\n%s\nplan:\n%s", l.cycle, invDescribe(l.s.opts, l.s.snap, l.s.now), invDescribePlan(l.plan))
	}
}

func (l invCycleLog) Errorf(format string, args ...any) { l.header(); l.T.Errorf(format, args...) }
func (l invCycleLog) Fatalf(format string, args ...any) { l.header(); l.T.Fatalf(format, args...) }

// invReclaim is a cluster where team a (no guarantee) fills every device
// with over-quota work and team b, guaranteed guaranteed milli-GPU, has
// pending training within its guarantee that fits the empty cluster.
type invReclaim struct {
	opts       sched.Options
	nodes      []*core.Node
	guaranteed int64
	// a is team a's running work, node by node: class and size, placed
	// first fit, started minutes ago.
	a [][]invRun
	// b is the size of each of team b's pending workloads, in submission
	// order.
	b []int64
	// requeue puts victims back in the queue when they stop, as the store
	// does; otherwise they are gone.
	requeue bool
}

type invRun struct {
	class   string
	milli   int64
	minutes int
}

// run checks that the first cycle preempts enough for all of team b: once
// the victims have stopped, the next cycle places every one of b's
// workloads.
func (sc invReclaim) run(t propTB) {
	t.Helper()
	a, b := team("a").obj(), team("b").guaranteed(sc.guaranteed).obj()
	snap := &core.Snapshot{Nodes: sc.nodes, Teams: []core.Team{a, b}}
	usage := invUsage(snap.Nodes, nil)
	for i, runs := range sc.a {
		n := snap.Nodes[i]
		for j, r := range runs {
			w := job(fmt.Sprintf("a%d-%02d", i, j)).team("a").class(r.class).gpus(r.milli).obj()
			started := invNow.Add(-time.Duration(r.minutes) * time.Minute)
			w.Seq, w.CreatedAt = int64(len(snap.Running)+1), started
			w.Status = core.Status{Phase: core.Running, Attempts: 1, StartedAt: &started, Placement: invFitOn(n, usage[n.Name], w.Request)}
			if w.Status.Placement == nil {
				t.Fatalf("bad scenario: %s (%d milli-GPU) does not fit on %s", w.ID, r.milli, n.Name)
			}
			usage[n.Name].Add(n.Name, w.Request, w.Status.Placement)
			snap.Running = append(snap.Running, w)
		}
	}
	snap.Usage = usage
	var total int64
	for i, milli := range sc.b {
		w := job(fmt.Sprintf("b%02d", i)).team("b").class("training").gpus(milli).obj()
		w.CreatedAt = invNow.Add(time.Duration(i-len(sc.b)) * time.Second)
		w.Seq = int64(len(snap.Running) + 1 + i)
		total += milli
		snap.Pending = append(snap.Pending, w)
	}
	t.Logf("cluster (b asks %d of its %d guaranteed; victims requeued: %t):\n%s", total, b.Guaranteed, sc.requeue, invDescribe(sc.opts, snap, invNow))

	plan := sc.opts.Schedule(snap, invNow)
	t.Logf("first plan:\n%s", invDescribePlan(plan))
	c := newInvCycle(sc.opts, snap, invNow, plan)
	for _, p := range invProperties {
		p.check(t, c)
	}

	// The victims stop; b's workloads must all start in the next cycle.
	victims := map[core.WorkloadID]bool{}
	for _, pr := range plan.Preemptions {
		victims[pr.Victim] = true
	}
	next := &core.Snapshot{Nodes: snap.Nodes, Teams: snap.Teams, Pending: invExplained(snap.Pending, plan)}
	for _, w := range snap.Running {
		if !victims[w.ID] {
			next.Running = append(next.Running, w)
		} else if sc.requeue {
			r := w.Clone()
			r.Status = core.Status{Phase: core.Pending, Attempts: 1, Preemptions: 1}
			next.Pending = append(next.Pending, r)
		}
	}
	next.Usage = invUsage(next.Nodes, next.Running)
	later := invNow.Add(time.Minute)
	plan2 := sc.opts.Schedule(next, later)
	t.Logf("second plan:\n%s", invDescribePlan(plan2))
	c2 := newInvCycle(sc.opts, next, later, plan2)
	for _, w := range snap.Pending {
		if _, ok := c2.placed[w.ID]; !ok {
			d := c2.decision[w.ID]
			t.Errorf("%s (%d milli-GPU of team b, %d asked within %d guaranteed) not placed the cycle after its victims stopped: %s: %s",
				w.ID, w.Request.MilliGPU, total, b.Guaranteed, d.Reason, d.Message)
		}
	}
}

// invDrawReclaim draws an invReclaim: 1–6 nodes of 1–8 GPUs, team a's
// work of random classes and sizes filling every device, and team b's
// workloads, packed first fit into an empty copy of the cluster (so that
// they fit it) while their total stays within b's guarantee.
func invDrawReclaim(t *rapid.T, requeue bool) invReclaim {
	sc := invReclaim{opts: invDrawOptions(t), requeue: requeue}
	var capacity int64
	for i := range rapid.IntRange(1, 6).Draw(t, "nodes") {
		n := node(fmt.Sprintf("n%02d", i)).gpus(rapid.IntRange(1, 8).Draw(t, "gpus"), rapid.SampledFrom(invModels).Draw(t, "model")).obj()
		sc.nodes = append(sc.nodes, n)
		capacity += int64(len(n.GPUs)) * 1000
	}
	sc.guaranteed = rapid.Int64Range(1, capacity/250).Draw(t, "guaranteed") * 250
	usage := invUsage(sc.nodes, nil)
	for _, n := range sc.nodes {
		var runs []invRun
		for {
			fit := invFitting(n, usage[n.Name], invSizes)
			if len(fit) == 0 {
				break
			}
			r := invRun{class: rapid.SampledFrom([]string{"training", "training", "development", "batch"}).Draw(t, "class"),
				milli: rapid.SampledFrom(fit).Draw(t, "size"), minutes: rapid.IntRange(0, 30).Draw(t, "ranMinutes")}
			req := core.Request{MilliGPU: r.milli}
			usage[n.Name].Add(n.Name, req, invFitOn(n, usage[n.Name], req))
			runs = append(runs, r)
		}
		sc.a = append(sc.a, runs)
	}
	shadow := invUsage(sc.nodes, nil)
	var total int64
	// Team b asks in one size. With mixed sizes the greedy scheduler can
	// fragment what it reclaims (a small workload planned onto the only
	// node a large one fits, neither preemptible by the other), which is a
	// packing limit, not a reclaim rule.
	oneSize := rapid.SampledFrom(invSizes).Draw(t, "bSize")
	for range rapid.IntRange(1, 30).Draw(t, "bWorkloads") {
		var fit []int64
		for _, size := range []int64{oneSize} {
			if total+size <= sc.guaranteed && slices.ContainsFunc(sc.nodes, func(n *core.Node) bool {
				return invFitOn(n, shadow[n.Name], core.Request{MilliGPU: size}) != nil
			}) {
				fit = append(fit, size)
			}
		}
		if len(fit) == 0 {
			break
		}
		size := rapid.SampledFrom(fit).Draw(t, "size")
		req := core.Request{MilliGPU: size}
		for _, n := range sc.nodes {
			if as := invFitOn(n, shadow[n.Name], req); as != nil {
				shadow[n.Name].Add(n.Name, req, as)
				break
			}
		}
		total += size
		sc.b = append(sc.b, size)
	}
	return sc
}

// TestReclaimWithinOneCycle: a team below its guarantee with demand that
// fits gets its guarantee back within one cycle (invReclaim.run), whether
// the victims leave for good or are requeued and compete again.
func TestReclaimWithinOneCycle(t *testing.T) {
	quarters := []invRun{{"training", 250, 10}, {"training", 250, 10}, {"training", 250, 10}, {"training", 250, 10}}
	tests := []struct {
		name string
		sc   invReclaim
	}{
		{"two quarter-GPU workloads reclaim one GPU of quarters",
			invReclaim{nodes: []*core.Node{node("n00").gpus(1, h100).obj()}, guaranteed: 500, a: [][]invRun{quarters}, b: []int64{250, 250}}},
		{"a GPU reclaimed for a quarter is not taken back by the requeued victim",
			invReclaim{nodes: []*core.Node{node("n00").gpus(1, h100).obj()}, guaranteed: 250, a: [][]invRun{{{"training", 1000, 10}}}, b: []int64{250}, requeue: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.sc.opts = sched.DefaultOptions()
			tt.sc.run(t)
		})
	}
	t.Run("random clusters, victims gone", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) { invDrawReclaim(t, false).run(t) })
	})
	t.Run("random clusters, victims requeued", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) { invDrawReclaim(t, true).run(t) })
	})
}

// invStarve is a cluster of 8-GPU H100 nodes where an 8-GPU training
// workload of bigTeam, submitted first, competes with a stream of small
// training work: the queue of small work is topped up to twice the
// cluster every cycle, and small work finishes two cycles after it
// starts. initial is the small work running at the start, placed first
// fit; started is the cycle it started in (0 or -1).
type invStarve struct {
	nodes   int
	teams   []core.TeamName
	bigTeam core.TeamName
	initial []invSmall
	// small is the next workload of the stream: its team and size.
	small func() (core.TeamName, int64)
}

type invSmall struct {
	team    core.TeamName
	milli   int64
	started int
}

// run schedules cycles a minute apart, applying each plan (victims stop
// by the next cycle and are requeued), and returns the cycle in which the
// large workload is placed, or fails if it still waits after bound cycles.
func (sc invStarve) run(t propTB, bound int) int {
	t.Helper()
	opts := sched.Options{StarvationAfter: time.Minute, FairShareReclaim: true, MinRuntime: 0}
	snap := &core.Snapshot{}
	for i := range sc.nodes {
		snap.Nodes = append(snap.Nodes, node(fmt.Sprintf("n%02d", i)).gpus(8, h100).obj())
	}
	for _, name := range sc.teams {
		snap.Teams = append(snap.Teams, team(name).obj())
	}
	id := 0
	small := func(team core.TeamName, milli int64, created time.Time) *core.Workload {
		w := job(fmt.Sprintf("s%03d", id)).team(team).class("training").gpus(milli).obj()
		id++
		w.Seq, w.CreatedAt = int64(id+1), created
		return w
	}
	startedIn := map[core.WorkloadID]int{}
	usage := invUsage(snap.Nodes, nil)
	for _, in := range sc.initial {
		w := small(in.team, in.milli, invNow) // no older than big: big is the longest waiting
		for _, n := range snap.Nodes {
			if as := invFitOn(n, usage[n.Name], w.Request); as != nil {
				started := invNow.Add(time.Duration(in.started) * time.Minute)
				w.Status = core.Status{Phase: core.Running, Attempts: 1, StartedAt: &started, Placement: as}
				usage[n.Name].Add(n.Name, w.Request, as)
				snap.Running = append(snap.Running, w)
				startedIn[w.ID] = in.started
				break
			}
		}
	}
	big := job("big").team(sc.bigTeam).class("training").gpus(8000).obj()
	big.Seq, big.CreatedAt = 1, invNow
	snap.Pending = append(snap.Pending, big)
	now := invNow
	for cycle := 0; ; cycle++ {
		var running []*core.Workload
		for _, w := range snap.Running {
			if cycle-startedIn[w.ID] < 2 {
				running = append(running, w)
			}
		}
		pending := slices.Clone(snap.Pending)
		for len(pending) < 2*8*sc.nodes {
			team, milli := sc.small()
			pending = append(pending, small(team, milli, now))
		}
		snap = &core.Snapshot{Nodes: snap.Nodes, Teams: snap.Teams, Running: running, Pending: pending, Usage: invUsage(snap.Nodes, running)}
		plan := opts.Schedule(snap, now)
		c := newInvCycle(opts, snap, now, plan)
		for _, p := range invProperties {
			p.check(t, c)
		}
		if _, ok := c.placed["big"]; ok {
			return cycle
		}
		if cycle == bound {
			t.Fatalf("big still waits after %d cycles: %s: %s\ncluster:\n%s\nplan:\n%s", cycle, c.decision["big"].Reason, c.decision["big"].Message,
				invDescribe(opts, snap, now), invDescribePlan(plan))
		}
		victims := map[core.WorkloadID]bool{}
		for _, pr := range plan.Preemptions {
			victims[pr.Victim] = true
		}
		pending, running = nil, nil
		for _, w := range snap.Running {
			if victims[w.ID] {
				r := w.Clone()
				r.Status = core.Status{Phase: core.Pending, Attempts: w.Status.Attempts, Preemptions: w.Status.Preemptions + 1}
				pending = append(pending, r)
				continue
			}
			running = append(running, w)
		}
		for _, w := range invExplained(snap.Pending, plan) {
			p, ok := c.placed[w.ID]
			if !ok {
				pending = append(pending, w)
				continue
			}
			r := w.Clone()
			started := now
			r.Status = core.Status{Phase: core.Running, Attempts: w.Status.Attempts + 1, StartedAt: &started, Placement: p.Assignments}
			running = append(running, r)
			startedIn[r.ID] = cycle
		}
		snap = &core.Snapshot{Nodes: snap.Nodes, Teams: snap.Teams, Running: running, Pending: pending}
		now = now.Add(time.Minute)
	}
}

// TestLargeWorkloadDoesNotStarve: with StarvationAfter of a minute and a
// minute per cycle, the 8-GPU workload of an invStarve cluster must start
// within a few cycles: it starves after one, and a node held for it drains
// within two more.
func TestLargeWorkloadDoesNotStarve(t *testing.T) {
	const bound = 8
	t.Run("another team with the same usage streams whole GPUs onto one node", func(t *testing.T) {
		sc := invStarve{nodes: 1, teams: []core.TeamName{"a", "b"}, bigTeam: "b",
			small: func() (core.TeamName, int64) { return "a", 1000 }}
		sc.run(t, bound)
	})
	t.Run("random clusters", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			sc := invStarve{nodes: rapid.IntRange(1, 4).Draw(t, "nodes")}
			for i := range rapid.IntRange(1, 3).Draw(t, "teams") {
				sc.teams = append(sc.teams, core.TeamName(fmt.Sprintf("t%d", i)))
			}
			sc.bigTeam = rapid.SampledFrom(sc.teams).Draw(t, "bigTeam")
			sizes := []int64{500, 1000, 2000}
			var free int64 = int64(sc.nodes) * 8000 // a full cluster, give or take fragmentation
			for free > 0 {
				in := invSmall{team: rapid.SampledFrom(sc.teams).Draw(t, "team"), milli: rapid.SampledFrom(sizes).Draw(t, "size"),
					started: -rapid.IntRange(0, 1).Draw(t, "startedCyclesAgo")}
				sc.initial = append(sc.initial, in)
				free -= in.milli
			}
			sc.small = func() (core.TeamName, int64) {
				return rapid.SampledFrom(sc.teams).Draw(t, "team"), rapid.SampledFrom(sizes).Draw(t, "size")
			}
			sc.run(t, bound)
		})
	})
}

// invRecorder is an propTB that records errors instead of failing.
type invRecorder struct{ errs []string }

func (r *invRecorder) Helper()                      {}
func (r *invRecorder) Logf(string, ...any)          {}
func (r *invRecorder) Errorf(f string, args ...any) { r.errs = append(r.errs, fmt.Sprintf(f, args...)) }
func (r *invRecorder) Fatalf(f string, args ...any) { r.Errorf(f, args...) }

// TestInvariantChecksCatchBrokenPlans shows that each check can fail: it
// hands each one a plan, made up by hand, that breaks its invariant.
func TestInvariantChecksCatchBrokenPlans(t *testing.T) {
	snap := &core.Snapshot{Nodes: []*core.Node{node("n00").gpus(2, h100).obj(), node("n01").gpus(1, h100).obj()}}
	snap.Teams = []core.Team{team("a").guaranteed(1000).limit(1200).obj(), team("b").obj()}
	n00, started := snap.Nodes[0], invNow.Add(-time.Hour)
	snap.Running = []*core.Workload{
		job("ra").team("a").class("production").gpus(500).runs(n00, 0, started).obj(),
		job("rb").team("b").class("development").gpus(250).runs(n00, 0, started).obj(),
		job("rc").team("b").class("development").gpus(250).runs(n00, 0, started).obj(),
		job("rd").team("b").class("training").gpus(1000).runs(n00, 1, started).obj(),
	}
	snap.Usage = invUsage(snap.Nodes, snap.Running)
	snap.Pending = []*core.Workload{
		job("pa").team("a").class("production").gpus(1000).seq(10).created(invNow).obj(),
		job("pb").team("b").class("batch").gpus(250).seq(11).created(invNow).obj(),
		job("pt").team("b").class("training").gpus(250).seq(12).created(invNow).obj(),
		job("px").team("b").class("training").gpus(1000).seq(13).created(invNow).obj(),
		job("pg").team("a").class("training").gpus(250).seq(14).created(invNow).obj(),
	}
	on := func(node string, gpu int, milli int64) []core.Assignment {
		g := snap.Nodes[slices.IndexFunc(snap.Nodes, func(n *core.Node) bool { return n.Name == core.NodeName(node) })].GPUs[gpu]
		return []core.Assignment{{Node: core.NodeName(node), GPUIndex: gpu, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: g.MemoryMiB * milli / 1000}}
	}
	preempting := func(id core.WorkloadID) core.Decision {
		return core.Decision{Workload: id, Reason: sched.ReasonPreempting, Message: "waiting", Nominated: "n00"}
	}
	tests := []struct {
		name  string
		check func(propTB, *invCycle)
		plan  core.Plan
	}{
		{"a fraction on a full device", invCheckFit,
			core.Plan{Placements: []core.Placement{{Workload: "pt", Assignments: on("n00", 0, 250)}}}},
		{"production preempted", invCheckVictims,
			core.Plan{Preemptions: []core.Preemption{{Victim: "ra", Attempt: 1, Preemptor: "pa", Reason: "Preempted"}}, Unplaced: []core.Decision{preempting("pa")}}},
		{"a team placed past its limit", invCheckLimit,
			core.Plan{Placements: []core.Placement{{Workload: "pa", Assignments: on("n01", 0, 1000)}}}},
		{"training preempted by training of its own team", invCheckRank,
			core.Plan{Preemptions: []core.Preemption{{Victim: "rd", Attempt: 1, Preemptor: "px", Reason: "Preempted"}}, Unplaced: []core.Decision{preempting("px")}}},
		{"batch preempts", invCheckBatch,
			core.Plan{Preemptions: []core.Preemption{{Victim: "rb", Attempt: 1, Preemptor: "pb", Reason: "Preempted"}}, Unplaced: []core.Decision{preempting("pb")}}},
		{"production placed over the guarantee", invCheckProduction,
			core.Plan{Placements: []core.Placement{{Workload: "pa", Assignments: on("n01", 0, 1000)}}}},
		{"unschedulable next to a free device", invCheckNoIdleFit,
			core.Plan{Unplaced: []core.Decision{{Workload: "px", Reason: sched.ReasonUnschedulable, Message: "no room"}}}},
		{"two victims where one frees enough", invCheckMinimalVictims,
			core.Plan{Preemptions: []core.Preemption{{Victim: "rb", Attempt: 1, Preemptor: "pt", Reason: "Preempted"}, {Victim: "rc", Attempt: 1, Preemptor: "pt", Reason: "Preempted"}},
				Unplaced: []core.Decision{preempting("pt")}}},
		{"pending workloads left unexplained", invCheckDecided, core.Plan{}},
		{"work within its guarantee left next to a free device", invCheckGuaranteedNotBlocked,
			core.Plan{Unplaced: []core.Decision{{Workload: "pg", Reason: sched.ReasonUnschedulable, Message: "no room"}}}},
		{"two victims evicted where one's capacity would do", invCheckEvictionBound,
			core.Plan{Preemptions: []core.Preemption{{Victim: "rb", Attempt: 1, Preemptor: "pt", Reason: "Preempted"}, {Victim: "rc", Attempt: 1, Preemptor: "pt", Reason: "Preempted"}},
				Unplaced: []core.Decision{preempting("pt")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r invRecorder
			tt.check(&r, newInvCycle(sched.DefaultOptions(), snap, invNow, tt.plan))
			if len(r.errs) == 0 {
				t.Errorf("the check accepted a plan that breaks its invariant")
			}
		})
	}
}

// TestGeographyChecksCatchBrokenPlans is TestInvariantChecksCatchBrokenPlans
// for residency (15) and bursting (16).
func TestGeographyChecksCatchBrokenPlans(t *testing.T) {
	snap := &core.Snapshot{Nodes: []*core.Node{
		node("eu1").gpus(2, h100).in("owned-eu", "eu", core.PoolOwned).obj(),
		node("us1").gpus(2, h100).in("cloud-a", "us", core.PoolBurst).obj(),
	}}
	snap.Teams = []core.Team{team("a").obj()}
	eu1, us1, started := snap.Nodes[0], snap.Nodes[1], invNow.Add(-time.Hour)
	snap.Running = []*core.Workload{
		job("r-eu").team("a").class("batch").gpus(1000).runs(eu1, 0, started).obj(),
		job("r-us").team("a").class("batch").gpus(1000).runs(us1, 0, started).obj(),
	}
	snap.Usage = invUsage(snap.Nodes, snap.Running)
	snap.Pending = []*core.Workload{
		job("p-eu").team("a").class("training").gpus(1000).regions("eu").seq(10).created(invNow.Add(-time.Hour)).obj(),
		job("p-new").team("a").class("training").gpus(1000).seq(11).created(invNow.Add(-time.Second)).obj(),
		job("p-batch").team("a").class("batch").gpus(1000).seq(12).created(invNow.Add(-time.Hour)).obj(),
		job("p-old").team("a").class("training").gpus(1000).seq(13).created(invNow.Add(-time.Hour)).obj(),
	}
	on := func(n *core.Node, gpu int) []core.Assignment {
		g := n.GPUs[gpu]
		return []core.Assignment{{Node: n.Name, GPUIndex: gpu, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB}}
	}
	tests := []struct {
		name  string
		check func(propTB, *invCycle)
		plan  core.Plan
	}{
		{"placed outside its residency", invCheckResidency,
			core.Plan{Placements: []core.Placement{{Workload: "p-eu", Assignments: on(us1, 1)}}}},
		{"nominated outside its residency", invCheckResidency,
			core.Plan{Unplaced: []core.Decision{{Workload: "p-eu", Reason: sched.ReasonUnschedulable, Message: "reserved", Nominated: "us1"}}}},
		{"preempting outside its residency", invCheckResidency,
			core.Plan{Preemptions: []core.Preemption{{Victim: "r-us", Attempt: 1, Preemptor: "p-eu", Reason: "Preempted"}},
				Unplaced: []core.Decision{{Workload: "p-eu", Reason: sched.ReasonPreempting, Message: "waiting", Nominated: "us1"}}}},
		{"burst before After", invCheckBurst,
			core.Plan{Placements: []core.Placement{{Workload: "p-new", Assignments: on(us1, 1)}}}},
		{"batch bursts", invCheckBurst,
			core.Plan{Placements: []core.Placement{{Workload: "p-batch", Assignments: on(us1, 1)}}}},
		{"burst while owned capacity fits", invCheckBurst,
			core.Plan{Placements: []core.Placement{{Workload: "p-old", Assignments: on(us1, 1)}}}},
		{"a burst node cleared for work not allowed there", invCheckBurst,
			core.Plan{Preemptions: []core.Preemption{{Victim: "r-us", Attempt: 1, Preemptor: "p-new", Reason: "Preempted"}},
				Unplaced: []core.Decision{{Workload: "p-new", Reason: sched.ReasonPreempting, Message: "waiting", Nominated: "us1"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r invRecorder
			tt.check(&r, newInvCycle(sched.DefaultOptions(), snap, invNow, tt.plan))
			if len(r.errs) == 0 {
				t.Errorf("the check accepted a plan that breaks its invariant")
			}
		})
	}
}
