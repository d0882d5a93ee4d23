package sched_test

import (
	stdcmp "cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// TestReclaimTakesTheSmallestSufficientSet: team r (guarantee 1) runs a
// 3-GPU gang on GPUs 1-3 and four quarters on GPU 0 of one 4-GPU node;
// team v (guarantee 1) submits a quarter. Team r runs 3 GPUs beyond its
// guarantee whichever of its workloads the guarantee is said to cover, so
// one quarter is reclaimed and the gang keeps running, whichever started
// first.
func TestReclaimTakesTheSmallestSufficientSet(t *testing.T) {
	n := node("n1").gpus(4, h100).obj()
	now := t0.Add(time.Hour)
	teams := []core.Team{team("r").guaranteed(1000).obj(), team("v").guaranteed(1000).obj()}
	for _, gangFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("gang started first %t", gangFirst), func(t *testing.T) {
			gangAt, quarterAt := minute(1), minute(2)
			if !gangFirst {
				gangAt, quarterAt = minute(5), minute(1)
			}
			running := []*core.Workload{job("gang").team("r").class("training").gpus(1000).replicas(3).created(t0).runs(n, 1, gangAt).obj()}
			for i := range 4 {
				running = append(running, job(fmt.Sprintf("q%d", i)).team("r").class("training").gpus(250).created(t0).runs(n, 0, quarterAt.Add(time.Duration(i)*time.Second)).obj())
			}
			c := cluster{nodes: []*core.Node{n}, teams: teams, running: running,
				pending: []*core.Workload{job("nb").team("v").class("development").gpus(250).created(now).obj()}}
			plan := sched.DefaultOptions().Schedule(c.snapshot(), now)
			_, victims, waiting := outcome(plan)
			if len(victims) != 1 || !strings.HasPrefix(victims[0], "q") || !strings.HasSuffix(victims[0], " Reclaimed for nb") {
				t.Errorf("victims %v, want one quarter reclaimed for nb", victims)
			}
			if diff := cmp.Diff(sched.ReasonPreempting, waiting["nb"]); diff != "" {
				t.Errorf("nb waits (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReclaimKeepsTheGuarantee: reclaim takes from a team only what it
// runs beyond its guarantee. Team r (guarantee 1) runs one GPU within it
// and a quarter beyond; a GPU for team v reclaims nothing, where taking
// r's GPU would leave it a quarter. A quarter for v takes r's quarter.
func TestReclaimKeepsTheGuarantee(t *testing.T) {
	n := node("n1").gpus(2, h100).obj()
	now := t0.Add(time.Hour)
	running := []*core.Workload{
		job("one").team("r").class("training").gpus(1000).created(t0).runs(n, 0, minute(1)).obj(),
		job("quarter").team("r").class("training").gpus(250).created(t0).runs(n, 1, minute(2)).obj(),
		job("rest").team("o").class("production").gpus(750).created(t0).runs(n, 1, minute(2)).obj(),
	}
	teams := []core.Team{team("r").guaranteed(1000).obj(), team("v").guaranteed(1000).obj(), team("o").guaranteed(1000).obj()}
	for _, tt := range []struct {
		ask  int64
		want []string
	}{{1000, nil}, {250, []string{"quarter Reclaimed for p"}}} {
		c := cluster{nodes: []*core.Node{n}, teams: teams, running: running,
			pending: []*core.Workload{job("p").team("v").class("training").gpus(tt.ask).created(now).obj()}}
		_, victims, _ := outcome(sched.DefaultOptions().Schedule(c.snapshot(), now))
		if diff := cmp.Diff(tt.want, victims); diff != "" {
			t.Errorf("ask %d: victims (-want +got):\n%s", tt.ask, diff)
		}
	}
}

// TestVictimSetsSmallestOverRandomFleets checks, over random fleets, that
// every preemptor's victims are the smallest sufficient set among the
// workloads of equal standing: its own team's lower classes, batch, and,
// where it reclaims a guarantee, other teams' work that reclaim may take
// (rcAdmits). On every node where no other preemption or stop is under
// way, no set of them that reclaim admits, with the victims other
// preemptors chose, costs less and lets the preemptor fit, in the order
// of the eviction rules (docs/SCHEDULING.md): no gang, then (for a fraction) only
// fractions, then the least capacity, then the fewest victims. So no
// chosen set has a strict subset, or a set without a gang, that would
// also suffice. It also checks that the victims reclaimed from a team
// keep the rule of reclaim (rcAdmits), and that fair-share reclaim leaves
// a team at or above its fair share; and that a starvation reservation
// holds the node where its workload waits for the least to end, in the
// same order (checkReservation).
func TestVictimSetsSmallestOverRandomFleets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap := rcDrawFleet(t)
		opts := sched.Options{FairShareReclaim: rapid.Bool().Draw(t, "fairShareReclaim"),
			MinRuntime:      rapid.SampledFrom([]time.Duration{5 * time.Minute, 0}).Draw(t, "minRuntime"),
			StarvationAfter: rapid.SampledFrom([]time.Duration{0, 2 * time.Minute}).Draw(t, "starvationAfter")}
		plan := opts.Schedule(snap, invNow)
		rc := newRCCycle(opts, snap, plan)
		rc.checkRules(t)
		rc.checkSmallest(t)
		rc.checkReservation(t)
		if tf, ok := any(t).(interface{ Failed() bool }); ok && tf.Failed() {
			t.Logf("cluster:\n%s\nplan:\n%s", invDescribe(opts, snap, invNow), invDescribePlan(plan))
		}
	})
}

// rcDrawFleet draws a fleet where reclaim has choices: 1–4 nodes of 4 or
// 8 H100s, mostly full; 2–4 teams with guarantees, running work of three classes
// (batch among them) in fractions, whole GPUs and gangs (whose replicas
// may span nodes), some of it stopping, started 1–60 minutes ago; a team
// tv that runs nothing; and 1–4 pending workloads (half of them tv's)
// asking a fraction or whole GPUs, submitted 0–10 minutes ago.
func rcDrawFleet(t *rapid.T) *core.Snapshot {
	snap := &core.Snapshot{}
	var capacity int64
	for i := range rapid.IntRange(1, 4).Draw(t, "nodes") {
		n := node(fmt.Sprintf("n%d", i)).gpus(rapid.SampledFrom([]int{4, 8}).Draw(t, "gpus"), h100).obj()
		snap.Nodes = append(snap.Nodes, n)
		capacity += int64(len(n.GPUs)) * 1000
	}
	var teams []core.TeamName
	for i := range rapid.IntRange(2, 4).Draw(t, "teams") {
		name := core.TeamName(fmt.Sprintf("t%d", i))
		g := rapid.Int64Range(0, capacity/1000/2).Draw(t, "guaranteed") * 500
		snap.Teams = append(snap.Teams, team(name).guaranteed(g).obj())
		teams = append(teams, name)
	}
	usage := invUsage(snap.Nodes, nil)
	for i := range rapid.IntRange(int(capacity/1000), int(capacity/250)).Draw(t, "running") {
		w := job(fmt.Sprintf("r%02d", i)).team(rapid.SampledFrom(teams).Draw(t, "team")).
			class(rapid.SampledFrom([]string{"training", "development", "batch"}).Draw(t, "class")).
			gpus(rapid.SampledFrom([]int64{250, 500, 1000, 2000}).Draw(t, "size")).obj()
		w.Request.Replicas = rapid.SampledFrom([]int{1, 1, 1, 2, 3}).Draw(t, "replicas")
		one := w.Request
		one.Replicas = 1
		var as []core.Assignment
		placed := map[core.NodeName]*core.NodeUsage{}
		for r := range w.Request.Count() {
			var got []core.Assignment
			for _, n := range snap.Nodes {
				u := placed[n.Name]
				if u == nil {
					u = usage[n.Name].Clone()
					placed[n.Name] = u
				}
				if got = invFitOn(n, u, one); got != nil {
					for k := range got {
						got[k].Replica = r
					}
					u.Add(n.Name, one, got)
					break
				}
			}
			if got == nil {
				as = nil
				break
			}
			as = append(as, got...)
		}
		if as == nil {
			continue
		}
		w.Seq = int64(i + 1)
		w.Status.Phase, w.Status.Placement, w.Status.Attempts = core.Running, as, 1
		started := invNow.Add(-time.Duration(rapid.IntRange(1, 60).Draw(t, "ranMinutes")) * time.Minute)
		w.CreatedAt, w.Status.StartedAt = started.Add(-time.Minute), &started
		if rapid.IntRange(0, 9).Draw(t, "stopping") == 0 {
			w.Status.StopRequested = "Reclaimed"
		}
		invAdd(usage, w.Request, as)
		snap.Running = append(snap.Running, w)
	}
	snap.Usage = usage
	// A team that runs nothing yet, whose work reclaims its guarantee.
	snap.Teams = append(snap.Teams, team("tv").guaranteed(rapid.Int64Range(1, 8).Draw(t, "guaranteedTV")*500).obj())
	for i := range rapid.IntRange(1, 4).Draw(t, "pending") {
		w := job(fmt.Sprintf("p%d", i)).team(rapid.SampledFrom(append([]core.TeamName{"tv", "tv"}, teams...)).Draw(t, "team")).
			class(rapid.SampledFrom([]string{"training", "development", "production"}).Draw(t, "class")).
			gpus(rapid.SampledFrom([]int64{250, 500, 1000, 2000, 4000}).Draw(t, "size")).
			created(invNow.Add(-time.Duration(rapid.IntRange(0, 10).Draw(t, "waitedMinutes")) * time.Minute)).obj()
		w.Seq = int64(100 + i)
		snap.Pending = append(snap.Pending, w)
	}
	return snap
}

// rcCycle is one cycle's fleet and plan, as the checks read them.
type rcCycle struct {
	opts    sched.Options
	snap    *core.Snapshot
	plan    core.Plan
	inv     *invCycle
	victims map[core.WorkloadID][]*core.Workload // by preemptor
	chosen  map[core.WorkloadID]core.WorkloadID  // victim: its preemptor
	rule    map[core.WorkloadID]string           // victim: "own", "batch", "guarantee" or "fair"
	covered map[core.WorkloadID]bool             // within its team's guarantee, by classify's order
}

func newRCCycle(opts sched.Options, snap *core.Snapshot, plan core.Plan) *rcCycle {
	rc := &rcCycle{opts: opts, snap: snap, plan: plan, inv: newInvCycle(opts, snap, invNow, plan),
		victims: map[core.WorkloadID][]*core.Workload{}, chosen: map[core.WorkloadID]core.WorkloadID{},
		rule: map[core.WorkloadID]string{}, covered: map[core.WorkloadID]bool{}}
	for _, pr := range plan.Preemptions {
		v := rc.inv.running[pr.Victim]
		rc.victims[pr.Preemptor] = append(rc.victims[pr.Preemptor], v)
		rc.chosen[v.ID] = pr.Preemptor
		switch {
		case pr.Reason == "Preempted" && !rc.inv.class(v).IdleOnly:
			rc.rule[v.ID] = "own"
		case rc.inv.class(v).IdleOnly:
			rc.rule[v.ID] = "batch"
		case strings.Contains(pr.Message, "fair share"):
			rc.rule[v.ID] = "fair"
		default:
			rc.rule[v.ID] = "guarantee"
		}
	}
	// Within the guarantee: by class (highest first), start, submission
	// and ID, what fits in it.
	byTeam := map[core.TeamName][]*core.Workload{}
	for _, w := range snap.Running {
		byTeam[w.Team] = append(byTeam[w.Team], w)
	}
	for name, ws := range byTeam {
		slices.SortFunc(ws, func(a, b *core.Workload) int {
			return stdcmp.Or(stdcmp.Compare(rc.inv.class(b).Value, rc.inv.class(a).Value), a.Status.StartedAt.Compare(*b.Status.StartedAt),
				stdcmp.Compare(a.Seq, b.Seq), stdcmp.Compare(a.ID, b.ID))
		})
		var used int64
		for _, w := range ws {
			if !rc.inv.class(w).IdleOnly && used+invHeld(w) <= rc.inv.team(name).Guaranteed {
				used += invHeld(w)
				rc.covered[w.ID] = true
			}
		}
	}
	return rc
}

// rcAdmits reports whether the reclaimed victims of team tm may be taken
// together with gone (every victim of tm that another team's preemptor
// takes, reclaimed or not, these included): for each reclaimed victim of class c, counting what tm runs
// (not stopping, batch aside) at c and above once gone is gone, one over
// quota would not be within the guarantee if submitted again (what is
// left, plus it, exceeds the guarantee), and one within quota has run
// MinRuntime and leaves at least the guarantee.
func (rc *rcCycle) rcAdmits(tm core.TeamName, reclaimed, gone []*core.Workload) bool {
	g := rc.inv.team(tm).Guaranteed
	for _, v := range reclaimed {
		cv := rc.inv.class(v).Value
		var left int64
		for _, w := range rc.snap.Running {
			if cl := rc.inv.class(w); w.Team == tm && !cl.IdleOnly && cl.Value >= cv && w.Status.StopRequested == "" && !slices.Contains(gone, w) {
				left += invHeld(w)
			}
		}
		if rc.covered[v.ID] {
			if invNow.Sub(*v.Status.StartedAt) < rc.opts.MinRuntime || left < g {
				return false
			}
		} else if left+invHeld(v) <= g {
			return false
		}
	}
	return true
}

// checkRules: the victims reclaimed from each team keep the rule of
// reclaim; fair-share reclaim leaves a team at or above its fair share,
// counting every victim other teams took from it up to then (in the
// plan's order, which is the order of decisions).
func (rc *rcCycle) checkRules(t *rapid.T) {
	gone := map[core.TeamName][]*core.Workload{}
	reclaimed := map[core.TeamName][]*core.Workload{}
	var m map[core.TeamName]int64
	for i, pr := range rc.plan.Preemptions {
		if i == 0 || rc.plan.Preemptions[i-1].Preemptor != pr.Preemptor {
			m = map[core.TeamName]int64{} // a preemptor's set, team by team
		}
		v := rc.inv.running[pr.Victim]
		if v.Team == rc.inv.pending[pr.Preemptor].Team {
			continue // its own team's work, which its own replaces
		}
		gone[v.Team] = append(gone[v.Team], v)
		if r := rc.rule[v.ID]; r == "guarantee" || r == "fair" {
			reclaimed[v.Team] = append(reclaimed[v.Team], v)
		}
		m[v.Team] += invHeld(v)
		last := i+1 == len(rc.plan.Preemptions) || rc.plan.Preemptions[i+1].Preemptor != pr.Preemptor
		if !last {
			continue
		}
		for tm := range m {
			fair := slices.ContainsFunc(rc.victims[pr.Preemptor], func(v *core.Workload) bool { return v.Team == tm && rc.rule[v.ID] == "fair" })
			var sum int64
			for _, g := range gone[tm] {
				sum += invHeld(g)
			}
			if sh := rc.inv.shares[tm]; fair && sh.Usage-sum < sh.FairShare {
				t.Errorf("fair-share reclaim for %s takes team %s to %d without %s, below its fair share %d", pr.Preemptor, tm, sh.Usage-sum, rcIDs(gone[tm]), sh.FairShare)
			}
		}
	}
	for tm, vs := range reclaimed {
		if !rc.rcAdmits(tm, vs, gone[tm]) {
			t.Errorf("team %s (guarantee %d) loses %s to reclaim, more than the rule allows", tm, rc.inv.team(tm).Guaranteed, rcIDs(gone[tm]))
		}
	}
}

func rcIDs(ws []*core.Workload) []core.WorkloadID {
	ids := make([]core.WorkloadID, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	slices.Sort(ids)
	return ids
}

// rcCost is a victim set's cost in the order of the eviction rules.
type rcCost struct {
	gang, whole bool
	milli       int64
	n           int
}

func rcCostOf(req core.Request, vs []*core.Workload) rcCost {
	var k rcCost
	for _, v := range vs {
		k.gang = k.gang || v.Request.Count() > 1
		k.whole = k.whole || (req.Fractional() && !v.Request.Fractional())
		k.milli += invHeld(v)
		k.n++
	}
	return k
}

func (a rcCost) less(b rcCost) bool {
	key := func(k rcCost) []int64 { return []int64{rcBool(k.gang), rcBool(k.whole), k.milli, int64(k.n)} }
	return slices.Compare(key(a), key(b)) < 0
}

func rcBool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// checkSmallest: no preemptor had a cheaper sufficient set of equal
// standing on a node where nothing else was under way.
func (rc *rcCycle) checkSmallest(t *rapid.T) {
	// Nodes where something besides one preemptor's own victims is
	// under way: a stop, another preemptor's victims, or a starvation
	// reservation (which may hold against the preemptor).
	busy := map[core.NodeName]int{}
	for _, d := range rc.plan.Unplaced {
		if d.Nominated != "" && d.Reason != sched.ReasonPreempting {
			busy[d.Nominated] += 2
		}
	}
	for _, w := range rc.snap.Running {
		if w.Status.StopRequested != "" {
			for _, n := range core.Nodes(w.Status.Placement) {
				busy[n] += 2
			}
		}
	}
	for _, vs := range rc.victims {
		seen := map[core.NodeName]bool{}
		for _, v := range vs {
			for _, n := range core.Nodes(v.Status.Placement) {
				if !seen[n] {
					seen[n] = true
					busy[n]++
				}
			}
		}
	}
	for id, vs := range rc.victims {
		w := rc.inv.pending[id]
		if w == nil || w.Request.Count() > 1 || slices.ContainsFunc(vs, func(v *core.Workload) bool { return rc.rule[v.ID] == "fair" }) {
			continue
		}
		reclaims := slices.ContainsFunc(vs, func(v *core.Workload) bool { return rc.rule[v.ID] == "guarantee" })
		home := rc.inv.decision[id].Nominated
		if busy[home] > 1 {
			continue
		}
		cost := rcCostOf(w.Request, vs)
		for _, n := range rc.snap.Nodes {
			if (n.Name == home && busy[n.Name] > 1) || (n.Name != home && busy[n.Name] > 0) {
				continue
			}
			rc.cheaperOn(t, w, vs, cost, n, reclaims)
		}
	}
}

// cheaperOn reports a set on n, of workloads of equal standing with w's
// victims, cheaper than theirs, that reclaim admits and that lets w fit.
func (rc *rcCycle) cheaperOn(t *rapid.T, w *core.Workload, vs []*core.Workload, cost rcCost, n *core.Node, reclaims bool) {
	wc := rc.inv.class(w)
	var pool []*core.Workload
	for _, r := range rc.snap.Running {
		cl := rc.inv.class(r)
		if r.Status.StopRequested != "" || !cl.Preemptible || !slices.Contains(core.Nodes(r.Status.Placement), n.Name) {
			continue
		}
		if p, ok := rc.chosen[r.ID]; ok && p != w.ID {
			continue
		}
		own := r.Team == w.Team && cl.Value < wc.Value
		if own || cl.IdleOnly || (reclaims && r.Team != w.Team) {
			pool = append(pool, r)
		}
	}
	if len(pool) > 12 {
		return
	}
	// The victims of other preemptors of other teams, by team.
	others := map[core.TeamName][]*core.Workload{}
	for v, p := range rc.chosen {
		if r := rc.inv.running[v]; p != w.ID && rc.inv.pending[p].Team != r.Team {
			others[r.Team] = append(others[r.Team], r)
		}
	}
	for mask := 1; mask < 1<<len(pool); mask++ {
		var set []*core.Workload
		for i, r := range pool {
			if mask&(1<<i) != 0 {
				set = append(set, r)
			}
		}
		k := rcCostOf(w.Request, set)
		if !k.less(cost) {
			continue
		}
		u := rc.inv.after[n.Name].Clone()
		for _, r := range set {
			u.Add(n.Name, core.Request{MilliCPU: -r.Request.MilliCPU, MemoryMiB: -r.Request.MemoryMiB}, invNegate(r.Status.Placement))
		}
		if invFitOn(n, u, w.Request) == nil || !rc.admitsSet(w, set, others) {
			continue
		}
		t.Errorf("%s (team %s, %s, %d milli-GPU) evicts %s (%+v), where %s on %s (%+v) would do", w.ID, w.Team, wc.Name, w.Request.MilliGPU,
			rcIDs(vs), cost, rcIDs(set), n.Name, k)
		return
	}
}

// admitsSet reports whether reclaim may take set for w, with the victims
// others chose (rcAdmits, for each team w would reclaim from).
func (rc *rcCycle) admitsSet(w *core.Workload, set []*core.Workload, others map[core.TeamName][]*core.Workload) bool {
	byTeam := map[core.TeamName][]*core.Workload{}
	for _, r := range set {
		if r.Team != w.Team && !rc.inv.class(r).IdleOnly {
			byTeam[r.Team] = append(byTeam[r.Team], r)
		}
	}
	for tm, rs := range byTeam {
		gone := append(slices.Clone(others[tm]), set...)
		var reclaimed []*core.Workload
		for _, o := range others[tm] {
			if r := rc.rule[o.ID]; r == "guarantee" || r == "fair" {
				reclaimed = append(reclaimed, o)
			}
		}
		if !rc.rcAdmits(tm, append(reclaimed, rs...), gone) {
			return false
		}
	}
	return true
}

// TestReservationWaitsForTheSmallestSet: a starving workload is reserved
// the node where it waits for the least to end, by the order of the
// eviction rules: node b, where a half GPU ending leaves it room, rather
// than node a, where a 4-GPU gang must end (though a runs fewer
// workloads and neither has a free device).
func TestReservationWaitsForTheSmallestSet(t *testing.T) {
	a, b := node("a").gpus(4, h100).obj(), node("b").gpus(4, h100).obj()
	now := t0.Add(time.Hour)
	running := []*core.Workload{job("gang").team("x").class("training").gpus(1000).replicas(4).created(t0).runs(a, 0, minute(1)).obj()}
	for i := range 3 {
		running = append(running, job(fmt.Sprintf("one%d", i)).team("x").class("training").gpus(1000).created(t0).runs(b, i, minute(2)).obj())
	}
	running = append(running, job("half").team("x").class("training").gpus(500).created(t0).runs(b, 3, minute(3)).obj())
	c := cluster{nodes: []*core.Node{a, b}, teams: []core.Team{team("x").obj(), team("y").obj()}, running: running,
		pending: []*core.Workload{job("w").team("y").class("training").gpus(1000).created(now.Add(-10 * time.Minute)).obj()}}
	plan := sched.Options{StarvationAfter: 2 * time.Minute}.Schedule(c.snapshot(), now)
	if len(plan.Unplaced) != 1 || plan.Unplaced[0].Nominated != "b" {
		t.Errorf("w's decision %+v, want it reserved node b", plan.Unplaced)
	}
}

// checkReservation: a starving workload's reserved node is one where the
// cheapest set of running workloads whose end leaves it room costs no
// more, in the order of the eviction rules, than on any other node it
// could use. Checked where the cycle preempted nothing and nothing was
// held before it: the reserved node is judged without this cycle's
// placements (what it held when reserved, or less), the others with them
// (what they held then, or more).
func (rc *rcCycle) checkReservation(t *rapid.T) {
	if len(rc.plan.Preemptions) > 0 {
		return
	}
	held := map[core.NodeName]bool{} // for a preemptor waiting for stops under way
	for _, d := range rc.plan.Unplaced {
		if d.Reason == sched.ReasonPreempting {
			held[d.Nominated] = true
		}
	}
	for _, d := range rc.plan.Unplaced {
		w := rc.inv.pending[d.Workload]
		if d.Nominated == "" || d.Reason == sched.ReasonPreempting || held[d.Nominated] || w.Request.Count() > 1 {
			continue
		}
		base := invUsage(rc.snap.Nodes, nil)
		for _, r := range rc.snap.Running {
			if r.Status.StopRequested == "" {
				invAdd(base, r.Request, r.Status.Placement)
			}
		}
		after := invUsage(rc.snap.Nodes, nil)
		for _, n := range rc.snap.Nodes {
			after[n.Name] = base[n.Name].Clone()
		}
		for _, p := range rc.plan.Placements {
			invAdd(after, rc.inv.pending[p.Workload].Request, p.Assignments)
		}
		mine, ok := rc.drainCost(rc.inv.nodes[d.Nominated], base[d.Nominated], w.Request)
		if !ok {
			t.Errorf("%s is reserved %s, where nothing ending leaves it room", w.ID, d.Nominated)
			continue
		}
		for _, n := range rc.snap.Nodes {
			if held[n.Name] {
				continue
			}
			if k, ok := rc.drainCost(n, after[n.Name], w.Request); ok && k.less(mine) {
				t.Errorf("%s is reserved %s, where it waits for %+v to end, where on %s %+v would do", w.ID, d.Nominated, mine, n.Name, k)
			}
		}
	}
}

// drainCost is the cheapest set of the workloads running on n (not
// stopping) whose end leaves req room next to u, with false where none
// does or they are too many to weigh.
func (rc *rcCycle) drainCost(n *core.Node, u *core.NodeUsage, req core.Request) (rcCost, bool) {
	var pool []*core.Workload
	for _, r := range rc.snap.Running {
		if r.Status.StopRequested == "" && slices.Contains(core.Nodes(r.Status.Placement), n.Name) {
			pool = append(pool, r)
		}
	}
	if invFitOn(n, u, req) != nil {
		return rcCost{}, true
	}
	if len(pool) > 12 {
		return rcCost{}, false
	}
	var best rcCost
	found := false
	for mask := 1; mask < 1<<len(pool); mask++ {
		var set []*core.Workload
		v := u.Clone()
		for i, r := range pool {
			if mask&(1<<i) != 0 {
				set = append(set, r)
				v.Add(n.Name, core.Request{MilliCPU: -r.Request.MilliCPU, MemoryMiB: -r.Request.MemoryMiB}, invNegate(r.Status.Placement))
			}
		}
		if k := rcCostOf(req, set); (!found || k.less(best)) && invFitOn(n, v, req) != nil {
			best, found = k, true
		}
	}
	return best, found
}

// TestReclaimedPreemptorDoesNotBorrowBeforeGuaranteedWork: team a's r,
// reclaimed two minutes ago, preempted in turn and holds node n, its
// victims gone; a's production h, holding node m, is decided first and
// takes a's guarantee, so r would now borrow. Team b's g waits within its
// guarantee and fits only on n. r gives n back to g rather than starting
// there, to be reclaimed by g in the next cycle.
func TestReclaimedPreemptorDoesNotBorrowBeforeGuaranteedWork(t *testing.T) {
	n, m := node("n").gpus(1, h100).obj(), node("m").gpus(1, h100).obj()
	now := t0.Add(time.Hour)
	r := job("r").team("a").class("training").gpus(1000).created(t0).preempted(now.Add(-2*time.Minute)).waiting(sched.ReasonPreempting, "n").obj()
	h := job("h").team("a").class("production").gpus(1000).created(t0).waiting(sched.ReasonPreempting, "m").obj()
	g := job("g").team("b").class("training").gpus(1000).created(now.Add(-time.Minute)).obj()
	c := cluster{nodes: []*core.Node{n, m}, teams: []core.Team{team("a").guaranteed(1000).obj(), team("b").guaranteed(1000).obj()},
		pending: []*core.Workload{r, h, g}}
	placed, victims, waiting := outcome(sched.DefaultOptions().Schedule(c.snapshot(), now))
	if diff := cmp.Diff([]string{"g on n:0", "h on m:0"}, placed); diff != "" {
		t.Errorf("placed (-want +got):\n%s", diff)
	}
	if _, ok := waiting["r"]; len(victims) != 0 || !ok {
		t.Errorf("victims %v, r waits: %t; want none, and r waiting", victims, ok)
	}
}

// TestReservationGivenBackLeavesNoOneWaiting: node n is reserved, from the
// cycle before, for team b's r, which would borrow. Decided in its turn,
// after b's y (same team, higher class) took b to its limit, r would give
// the reservation back after it had refused team c's x, left waiting with
// n free. r is decided first of the work that would borrow: it starts,
// and no one waits while capacity it fits is free (invariant 10).
func TestReservationGivenBackLeavesNoOneWaiting(t *testing.T) {
	n, m := node("n").gpus(1, h100).obj(), node("m").gpus(1, h100).obj()
	now := t0.Add(time.Hour)
	c := cluster{nodes: []*core.Node{n, m}, teams: []core.Team{team("b").limit(1000).obj(), team("c").obj()},
		pending: []*core.Workload{
			job("r").team("b").class("development").gpus(1000).created(t0).waiting(sched.ReasonUnschedulable, "n").obj(),
			job("y").team("b").class("training").gpus(1000).created(now).obj(),
			job("x").team("c").class("training").gpus(500).created(now).obj(),
		}}
	opts := sched.DefaultOptions()
	snap := c.snapshot()
	plan := opts.Schedule(snap, now)
	invCheckNoIdleFit(t, newInvCycle(opts, snap, now, plan))
	if placed, _, _ := outcome(plan); !slices.ContainsFunc(placed, func(p string) bool { return strings.HasPrefix(p, "r on ") }) {
		t.Errorf("placed %v, want r among them", placed)
	}
}
