package sched

// Agreement tests of the victim index (victimindex.go) and the parked nodes
// of the placement index (index.go): on random clusters, driven through a
// cycle decision by decision as Schedule drives it, the victim search
// through the index must find what a search of every node finds (the
// cheapest set of the whole cluster, then the smaller node, then the
// name), and a placement through the index what the scan of every node
// finds. Names start with "vr" so that they cannot clash with the other
// internal test files of the package.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

var vrNow = time.Date(2025, 3, 4, 5, 6, 0, 0, time.UTC)

var vrMiB = map[string]int64{"H100": 81920, "A10": 24576}

func vrNode(name string, gpus int, model string, cpu int64) *core.Node {
	n := &core.Node{Name: core.NodeName(name), Schedulable: true, MilliCPU: cpu}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: model, MemoryMiB: vrMiB[model]})
	}
	return n
}

func vrTeam(name string, guaranteed, limit int64) core.Team {
	t := core.NewTeam(core.TeamName(name), vrNow.Add(-time.Hour))
	t.Guaranteed, t.Limit = guaranteed, limit
	return t
}

func vrJob(id, team, class string, req core.Request) *core.Workload {
	return &core.Workload{ID: core.WorkloadID(id), Spec: core.Spec{Name: id, Team: core.TeamName(team), Kind: core.KindJob, Priority: class, Request: req, Command: []string{"train"}},
		Status: core.Status{Phase: core.Pending}}
}

// vrRun marks w running on n, on the devices given (a share of the
// first for a fraction), started minutes ago.
func vrRun(w *core.Workload, n *core.Node, minutes int, devs ...int) *core.Workload {
	started := vrNow.Add(-time.Duration(minutes) * time.Minute)
	w.Status.Phase, w.Status.Attempts, w.Status.StartedAt = core.Running, 1, &started
	w.CreatedAt = started.Add(-time.Minute)
	for _, d := range devs {
		g := n.GPUs[d]
		milli, mem, _ := w.Request.ShareOn(g)
		w.Status.Placement = append(w.Status.Placement, core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem})
	}
	return w
}

func vrUsage(nodes []*core.Node, running []*core.Workload) map[core.NodeName]*core.NodeUsage {
	u := map[core.NodeName]*core.NodeUsage{}
	for _, n := range nodes {
		u[n.Name] = &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
	}
	for _, w := range running {
		for _, n := range core.Nodes(w.Status.Placement) {
			u[n].Add(n, w.Request, w.Status.Placement)
		}
	}
	return u
}

// TestVictimIndexFreesHostCPU: the cheapest set frees host CPU on a node
// whose devices already have room for the preemptor's share, while the
// only device with takeable work there would cost more to clear.
func TestVictimIndexFreesHostCPU(t *testing.T) {
	n1 := vrNode("n1", 3, "H100", 8000) // device 0 free, but 2 CPUs free
	n2 := vrNode("n2", 1, "H100", 0)
	running := []*core.Workload{
		vrRun(vrJob("a", "b", "training", core.Request{MilliGPU: 600, MilliCPU: 1000}), n1, 60, 1),
		vrRun(vrJob("b", "b", "training", core.Request{MilliGPU: 100, MilliCPU: 4000}), n1, 60, 2),
		vrRun(vrJob("c", "c", "production", core.Request{MilliGPU: 900, MilliCPU: 1000}), n1, 60, 2),
		vrRun(vrJob("d", "b", "training", core.Request{MilliGPU: 500}), n2, 60, 0),
		vrRun(vrJob("e", "c", "production", core.Request{MilliGPU: 500}), n2, 60, 0),
	}
	p := vrJob("p", "a", "training", core.Request{MilliGPU: 500, MilliCPU: 4000})
	p.CreatedAt = vrNow
	snap := &core.Snapshot{Nodes: []*core.Node{n1, n2}, Running: running, Pending: []*core.Workload{p},
		Teams: []core.Team{vrTeam("a", 4000, -1), vrTeam("b", 0, -1), vrTeam("c", 2000, -1)}}
	snap.Usage = vrUsage(snap.Nodes, snap.Running)
	plan := DefaultOptions().Schedule(snap, vrNow)
	var victims []string
	for _, pr := range plan.Preemptions {
		victims = append(victims, string(pr.Victim))
	}
	// b (100 milli-GPU, its 4 CPUs let p onto n1's free device 0) is the
	// cheapest set of the cluster; d (500) on n2 costs five times as much.
	if !slices.Equal(victims, []string{"b"}) {
		t.Errorf("victims %v, want [b]: the cheapest set of the cluster is b on n1 (100 milli-GPU), not d on n2 (500)", victims)
	}
}

// ---------------------------------------------------------------------------
// Random clusters.

// vrDraw draws a cluster: 1–10 nodes of 1–8 devices, some with a host CPU
// bound; 1–4 teams over and under quota; running work of every class, of
// shares, whole devices, memory and gangs across nodes, some stopping for
// a pending preemptor nominated to their node; pending work of every
// shape, with or without host CPU.
func vrDraw(t *rapid.T, hostCPU bool) (Options, *core.Snapshot) {
	opts := DefaultOptions()
	opts.FairShareReclaim = !rapid.Bool().Draw(t, "fairShareReclaimOff")
	opts.MinRuntime = rapid.SampledFrom([]time.Duration{5 * time.Minute, 0, time.Hour}).Draw(t, "minRuntime")
	opts.StarvationAfter = rapid.SampledFrom([]time.Duration{0, 10 * time.Minute}).Draw(t, "starvationAfter")
	snap := &core.Snapshot{}
	var capacity int64
	for i := range rapid.IntRange(1, 10).Draw(t, "nodes") {
		var cpu int64
		if hostCPU && rapid.Bool().Draw(t, "cpuBound") {
			cpu = rapid.SampledFrom([]int64{4000, 8000, 16000}).Draw(t, "cpu")
		}
		n := vrNode(fmt.Sprintf("n%02d", i), rapid.IntRange(1, 8).Draw(t, "gpus"), rapid.SampledFrom([]string{"H100", "A10"}).Draw(t, "model"), cpu)
		snap.Nodes = append(snap.Nodes, n)
		capacity += int64(len(n.GPUs)) * 1000
	}
	var teams []string
	for i := range rapid.IntRange(1, 4).Draw(t, "teams") {
		name := fmt.Sprintf("t%d", i)
		g := rapid.Int64Range(0, capacity/500).Draw(t, "guaranteed") * 250
		limit := int64(-1)
		if rapid.IntRange(0, 3).Draw(t, "limited") == 0 {
			limit = g + rapid.Int64Range(0, capacity/250).Draw(t, "borrow")*250
		}
		tm := vrTeam(name, g, limit)
		tm.Weight = rapid.Int64Range(1, 3).Draw(t, "weight")
		snap.Teams = append(snap.Teams, tm)
		teams = append(teams, name)
	}
	classes := []string{"production", "training", "development", "batch"}
	usage := vrUsage(snap.Nodes, nil)
	held := map[string]int64{}
	drawReq := func(label string) core.Request {
		var r core.Request
		switch rapid.IntRange(0, 4).Draw(t, label+"Shape") {
		case 0, 1:
			r.MilliGPU = rapid.SampledFrom([]int64{100, 250, 300, 500, 600, 750}).Draw(t, label+"Share")
		case 2:
			r.MilliGPU = rapid.SampledFrom([]int64{1000, 2000, 3000, 4000}).Draw(t, label+"Whole")
		case 3:
			r.GPUMemoryMiB = rapid.SampledFrom([]int64{8192, 20480, 40960}).Draw(t, label+"GPUMemory")
		case 4:
			r.MilliGPU = rapid.SampledFrom([]int64{250, 1000}).Draw(t, label+"ModelShare")
			r.GPUModels = []string{rapid.SampledFrom([]string{"H100", "A10"}).Draw(t, label+"Model")}
		}
		if hostCPU && rapid.Bool().Draw(t, label+"UsesCPU") {
			r.MilliCPU = rapid.SampledFrom([]int64{500, 1000, 2000, 4000}).Draw(t, label+"CPU")
		}
		return r
	}
	// place finds devices for one replica of r on n, first fit.
	place := func(n *core.Node, r core.Request, replica int) []core.Assignment {
		u := usage[n.Name]
		if n.MilliCPU > 0 && u.MilliCPU+r.MilliCPU > n.MilliCPU {
			return nil
		}
		var as []core.Assignment
		if k := r.WholeGPUs(); k > 0 {
			for _, g := range n.GPUs {
				if gu := u.GPUs[g.Index]; len(as) < k && gu.MilliGPU == 0 && gu.MemoryMiB == 0 && r.ModelAllowed(g.Model) {
					as = append(as, core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB, Replica: replica})
				}
			}
			if len(as) < k {
				return nil
			}
			return as
		}
		for _, g := range n.GPUs {
			milli, mem, ok := r.ShareOn(g)
			if gu := u.GPUs[g.Index]; ok && r.ModelAllowed(g.Model) && gu.MilliGPU+milli <= 1000 && gu.MemoryMiB+mem <= g.MemoryMiB {
				return []core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem, Replica: replica}}
			}
		}
		return nil
	}
	id := 0
	var stoppable []*core.Workload
	for range rapid.IntRange(0, 40).Draw(t, "running") {
		r := drawReq("running")
		replicas := 1
		if rapid.IntRange(0, 4).Draw(t, "gang") == 0 {
			replicas = 2
			r.Replicas = 2
		}
		tn := rapid.SampledFrom(teams).Draw(t, "team")
		class := rapid.SampledFrom(classes).Draw(t, "class")
		w := vrJob(fmt.Sprintf("r%02d", id), tn, class, r)
		var as []core.Assignment
		placed := 0
		start := rapid.IntRange(0, len(snap.Nodes)-1).Draw(t, "node")
		for rep := range replicas {
			var got []core.Assignment
			for k := range snap.Nodes {
				n := snap.Nodes[(start+k+rep)%len(snap.Nodes)]
				if got = place(n, r, rep); got != nil {
					usage[n.Name].Add(n.Name, core.Request{MilliCPU: r.MilliCPU}, got)
					break
				}
			}
			if got == nil {
				break
			}
			as = append(as, got...)
			placed++
		}
		if placed < replicas {
			// Undo the replicas placed: the gang does not fit.
			for _, a := range as {
				gu := usage[a.Node].GPUs[a.GPUIndex]
				gu.MilliGPU -= a.MilliGPU
				gu.MemoryMiB -= a.MemoryMiB
				usage[a.Node].GPUs[a.GPUIndex] = gu
			}
			for _, n := range core.Nodes(as) {
				_, reps := core.OnNode(as, n)
				usage[n].MilliCPU -= r.MilliCPU * int64(reps)
			}
			continue
		}
		var h int64
		for _, a := range as {
			h += a.MilliGPU
		}
		tm := snap.Teams[slices.Index(teams, tn)]
		if class == "production" && held[tn]+h > tm.Guaranteed {
			class = "training"
			w.Priority = class
		}
		held[tn] += h
		id++
		w.Seq = int64(id)
		started := vrNow.Add(-time.Duration(rapid.IntRange(0, 90).Draw(t, "ranMinutes")) * time.Minute)
		w.CreatedAt = started.Add(-time.Minute)
		w.Status.Phase, w.Status.Attempts, w.Status.StartedAt, w.Status.Placement = core.Running, 1, &started, as
		snap.Running = append(snap.Running, w)
		if replicas == 1 && class != "production" {
			stoppable = append(stoppable, w)
		}
	}
	snap.Usage = usage
	for i := range rapid.IntRange(0, 25).Draw(t, "pending") {
		r := drawReq("pending")
		if rapid.IntRange(0, 9).Draw(t, "pendingGang") == 0 {
			r.Replicas = 2
		}
		w := vrJob(fmt.Sprintf("p%02d", i), rapid.SampledFrom(teams).Draw(t, "team"), rapid.SampledFrom(classes).Draw(t, "class"), r)
		w.CreatedAt = vrNow.Add(-time.Duration(rapid.IntRange(0, 30).Draw(t, "waitedMinutes")) * time.Minute)
		w.Seq = int64(1000 + i)
		// A preemptor of an earlier cycle: its victim stops on its node,
		// or has stopped (it is decided afresh, its hold given back unless
		// it keeps the node); or a workload nominated to a node for
		// starving.
		switch rapid.IntRange(0, 7).Draw(t, "nominated") {
		case 0:
			if r.Replicas == 0 && len(stoppable) > 0 {
				v := rapid.SampledFrom(stoppable).Draw(t, "stopping")
				if v.Status.StopRequested == "" {
					v.Status.StopRequested, v.Status.PreemptedBy = "preempted", w.ID
					w.Status.Reason, w.Status.Nominated = ReasonPreempting, v.Status.Placement[0].Node
				}
			}
		case 1:
			w.Status.Reason, w.Status.Nominated = ReasonPreempting, rapid.SampledFrom(snap.Nodes).Draw(t, "heldNode").Name
		case 2:
			w.Status.Reason, w.Status.Nominated = ReasonUnschedulable, rapid.SampledFrom(snap.Nodes).Draw(t, "reservedNode").Name
		}
		snap.Pending = append(snap.Pending, w)
	}
	return opts, snap
}

func vrDescribe(opts Options, s *core.Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "options: FairShareReclaim %t, MinRuntime %s, StarvationAfter %s\n", opts.FairShareReclaim, opts.MinRuntime, opts.StarvationAfter)
	for _, tm := range s.Teams {
		fmt.Fprintf(&b, "team %s: guaranteed %d, limit %d, weight %d\n", tm.Name, tm.Guaranteed, tm.Limit, tm.Weight)
	}
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, "node %s: %d %s, cpu %d\n", n.Name, len(n.GPUs), n.GPUs[0].Model, n.MilliCPU)
	}
	for _, w := range s.Running {
		var where []string
		for _, a := range w.Status.Placement {
			where = append(where, fmt.Sprintf("%s/%d:%d", a.Node, a.GPUIndex, a.MilliGPU))
		}
		fmt.Fprintf(&b, "running %s: team %s, %s, %+v, on %s, ran %s, stop %q\n", w.ID, w.Team, w.Priority, vrReq(w.Request), strings.Join(where, " "), vrNow.Sub(*w.Status.StartedAt), w.Status.StopRequested)
	}
	for _, w := range s.Pending {
		fmt.Fprintf(&b, "pending %s: team %s, %s, %+v, nominated %q\n", w.ID, w.Team, w.Priority, vrReq(w.Request), w.Status.Nominated)
	}
	return b.String()
}

func vrReq(r core.Request) string {
	return fmt.Sprintf("milli %d mem %d models %v cpu %d replicas %d", r.MilliGPU, r.GPUMemoryMiB, r.GPUModels, r.MilliCPU, r.Replicas)
}

// ---------------------------------------------------------------------------
// The search of every node.

// vrFindVictimsOf is findVictimsOf without the index: every node weighed,
// by the same rules, in name order.
func vrFindVictimsOf(c *cycle, w *core.Workload, cl core.PriorityClass, ts *teamState, ask int64, inQuota, gangs bool) (_ *nodeState, _ []candidate, bestMax int64, sawGang bool) {
	usable := func(ns *nodeState) (int64, bool, int64, bool) {
		if !ns.node.Schedulable || !modelOK(ns, w.Request) || !ns.node.Matches(w.Request.NodeSelector) || c.binds(ns, w, inQuota) || !c.mayUse(ns, w) {
			return 0, false, 0, false
		}
		return c.reclaimOn(ns, w, cl, ts, ask, inQuota)
	}
	if inQuota || ts.usage+ask <= ts.share {
		for _, ns := range c.fleet.nodes {
			askOn, inQuotaOn, maxShare, ok := usable(ns)
			if !ok {
				continue
			}
			f := ns.futureState(c)
			if (inQuotaOn || ts.usage+askOn <= ts.share) && ns.freeing && fitsWithinAt(f, w.Request, maxShare) {
				return ns, []candidate{}, maxShare, false
			}
		}
	}
	var bestNode *nodeState
	var best []candidate
	var bestCost victimCost
	for _, ns := range c.fleet.nodes {
		askOn, inQuotaOn, maxShare, ok := usable(ns)
		if !ok {
			continue
		}
		cands, gangLeft := c.victimsFor(w, cl, ts, askOn, inQuotaOn, ns, gangs, nil)
		sawGang = sawGang || gangLeft
		if len(cands) == 0 {
			continue
		}
		room := ns.freeMilli() + ns.stoppingMilli
		for _, v := range cands {
			room += v.held
		}
		if room < w.Request.TotalMilliGPU() {
			continue
		}
		sortVictims(cands)
		set := victimSet(ns.futureState(c), w.Request, cands, maxShare, &c.victims.scratch)
		if set == nil {
			continue
		}
		k := costOf(w.Request, set)
		if bestNode == nil || k.compare(bestCost) < 0 || (k.compare(bestCost) == 0 && len(ns.node.GPUs) < len(bestNode.node.GPUs)) {
			bestNode, best, bestCost, bestMax = ns, set, k, maxShare
		}
	}
	return bestNode, best, bestMax, sawGang
}

func vrFindVictims(c *cycle, w *core.Workload, cl core.PriorityClass, ts *teamState, ask int64, inQuota bool) (*nodeState, []candidate, int64) {
	node, set, maxShare, gangs := vrFindVictimsOf(c, w, cl, ts, ask, inQuota, false)
	if node == nil && gangs {
		node, set, maxShare, _ = vrFindVictimsOf(c, w, cl, ts, ask, inQuota, true)
	}
	return node, set, maxShare
}

func vrSay(ns *nodeState, set []candidate, req core.Request) string {
	if ns == nil {
		return "none"
	}
	var ids []string
	for _, v := range set {
		ids = append(ids, string(v.victim.ID))
	}
	return fmt.Sprintf("%s %v cost %+v", ns.node.Name, ids, costOf(req, set))
}

// vrCheckVictims compares, for w as a preemptor in the cycle's present
// state (within its guarantee or not), the index's search with the
// search of every node.
func vrCheckVictims(t *rapid.T, c *cycle, w *core.Workload) {
	cl, ok := c.classOf(w)
	if !ok || cl.IdleOnly || w.Request.Count() != 1 {
		return
	}
	ts := c.team(w.Team)
	ask := c.askMilli(w)
	within, _, _, _ := c.withinGuarantee(w, ts, cl, ask)
	for _, inQuota := range []bool{within, !within} {
		n1, s1, m1 := c.findVictims(w, cl, ts, ask, inQuota)
		n2, s2, m2 := vrFindVictims(c, w, cl, ts, ask, inQuota)
		if got, want := vrSay(n1, s1, w.Request), vrSay(n2, s2, w.Request); got != want || m1 != m2 {
			t.Fatalf("%s (team %s, %s, inQuota %t, usage %d, share %d): the victim index finds %s (maxShare %d), every node weighed: %s (maxShare %d)",
				w.ID, ts.team.Name, cl.Name, inQuota, ts.usage, ts.share, got, m1, want, m2)
		}
	}
}

// vrCheckPlacement compares, for one replica of w, the placement index's
// search (parked nodes and all) with the scan of every node, with the
// quota state decide would set.
func vrCheckPlacement(t *rapid.T, c *cycle, w *core.Workload) {
	cl, ok := c.classOf(w)
	if !ok || w.Request.Count() != 1 {
		return
	}
	ts := c.team(w.Team)
	ask := c.askMilli(w)
	within, held, guaranteed, _ := c.withinGuarantee(w, ts, cl, ask)
	c.attempt.start(&pendingWork{ts: ts, class: &cl}, quotaStanding{inQuota: !cl.IdleOnly && within, held: held, guaranteed: guaranteed})
	memo, idx := c.memoFor(w.Request)
	if idx == nil {
		return
	}
	b1, k1, found := idx.search(c, w, memo)
	var b2 choice
	var k2 bool
	for _, ns := range c.fleet.nodes {
		if c.burst.any && ns.node.Burst() {
			continue
		}
		ch, keep, reason := c.fitOn(ns, w, w.Request, &memo[ns.pos])
		if reason == "" && (b2.ns == nil || ch.score < b2.score) {
			b2, k2 = ch, keep
		}
	}
	say := func(ch choice, keep bool) string {
		if ch.ns == nil {
			return "none"
		}
		return fmt.Sprintf("%s %v keep %t", ch.ns.node.Name, assignments(ch, w.Request), keep)
	}
	if !found {
		return // the scan decides
	}
	if got, want := say(b1, k1), say(b2, k2); got != want {
		t.Fatalf("%s: the placement index finds %s, the scan of every node %s", w.ID, got, want)
	}
}

// vrDrive runs one cycle as Schedule does, checking before each decision.
func vrDrive(t *rapid.T, opts Options, snap *core.Snapshot) core.Plan {
	c := newCycle(opts, snap, vrNow)
	step := func(p *pendingWork) {
		vrCheckVictims(t, c, p.w)
		vrCheckPlacement(t, c, p.w)
		c.decide(p)
	}
	c.decideInOrder(step)
	c.plan.Shares = c.shares()
	return c.plan
}

func vrPlanText(p core.Plan) string {
	var b strings.Builder
	for _, pl := range p.Placements {
		fmt.Fprintf(&b, "place %s %v\n", pl.Workload, pl.Assignments)
	}
	for _, pr := range p.Preemptions {
		fmt.Fprintf(&b, "preempt %s for %s\n", pr.Victim, pr.Preemptor)
	}
	for _, d := range p.Unplaced {
		fmt.Fprintf(&b, "wait %s %s %q %s\n", d.Workload, d.Reason, d.Nominated, d.Message)
	}
	return b.String()
}

func vrProperty(hostCPU bool) func(*rapid.T) {
	return func(t *rapid.T) {
		opts, snap := vrDraw(t, hostCPU)
		t.Logf("cluster:\n%s", vrDescribe(opts, snap))
		driven := vrDrive(t, opts, snap)
		// The checks' searches change nothing a decision sees: the plan
		// is Schedule's.
		if got, want := vrPlanText(driven), vrPlanText(opts.Schedule(snap, vrNow)); got != want {
			t.Fatalf("the plan with the checks' searches:\n%s\ndiffers from Schedule's:\n%s", got, want)
		}
	}
}

// TestVictimIndexAgreesWithFullSearch: on random clusters, before every
// decision of a cycle, the victim index finds the set a search of every
// node finds, and the placement index the node the scan finds; without
// host CPU bounds.
func TestVictimIndexAgreesWithFullSearch(t *testing.T) {
	rapid.Check(t, vrProperty(false))
}

// TestVictimIndexAgreesWithFullSearchHostCPU is the same with host CPU bounds on
// nodes and requests.
func TestVictimIndexAgreesWithFullSearchHostCPU(t *testing.T) {
	rapid.Check(t, vrProperty(true))
}

// TestVictimIndexFindsWorkPromotedToFair: work that fair-share reclaim may take
// only once its team's usage grew in this cycle (promoteFair) is found by
// a victim index made before it grew. Team c, below its fair share,
// reclaims team d's batch on n4 (its search makes the index of the shape;
// team a's work is not yet above a's share without it); team a then
// places 2 GPUs on n3 (where the CPU the 500s ask is not), which puts it
// 500 above its fair share of 2000 without either workload on n1; and
// team b, below its share, reclaims one of them.
func TestVictimIndexFindsWorkPromotedToFair(t *testing.T) {
	n1 := vrNode("n1", 1, "H100", 0)
	n2 := vrNode("n2", 1, "H100", 0)
	n3 := vrNode("n3", 2, "H100", 2000)
	n4 := vrNode("n4", 1, "H100", 4000)
	running := []*core.Workload{
		vrRun(vrJob("a1", "a", "training", core.Request{MilliGPU: 500}), n1, 60, 0),
		vrRun(vrJob("a2", "a", "training", core.Request{MilliGPU: 500}), n1, 50, 0),
		vrRun(vrJob("b1", "b", "training", core.Request{MilliGPU: 1000}), n2, 60, 0),
		vrRun(vrJob("d1", "d", "batch", core.Request{MilliGPU: 1000}), n4, 60, 0),
	}
	pc := vrJob("pc", "c", "training", core.Request{MilliGPU: 500, MilliCPU: 4000})
	pa := vrJob("pa", "a", "training", core.Request{MilliGPU: 2000})
	pb := vrJob("pb", "b", "training", core.Request{MilliGPU: 500, MilliCPU: 4000})
	pc.Seq, pa.Seq, pb.Seq = 1, 2, 3
	snap := &core.Snapshot{Nodes: []*core.Node{n1, n2, n3, n4}, Running: running, Pending: []*core.Workload{pc, pa, pb},
		Teams: []core.Team{vrTeam("a", 0, -1), vrTeam("b", 0, -1), vrTeam("c", 0, -1), vrTeam("d", 0, -1)}}
	snap.Usage = vrUsage(snap.Nodes, snap.Running)
	plan := DefaultOptions().Schedule(snap, vrNow)
	t.Logf("plan:\n%s", vrPlanText(plan))
	if len(plan.Placements) != 1 || plan.Placements[0].Workload != "pa" {
		t.Fatalf("placements %+v, want pa's alone (on n3)", plan.Placements)
	}
	by := map[core.WorkloadID]core.WorkloadID{}
	for _, pr := range plan.Preemptions {
		by[pr.Preemptor] = pr.Victim
	}
	if v := by["pb"]; len(plan.Preemptions) != 2 || by["pc"] != "d1" || (v != "a1" && v != "a2") {
		t.Errorf("preemptions %+v, want d1 reclaimed for pc and a1 or a2 for pb (team a at 3000 after pa, its fair share 2000)", plan.Preemptions)
	}
}
