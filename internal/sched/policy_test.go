package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// cluster describes a policy scenario as data: nodes, teams, what runs and
// what waits.
type cluster struct {
	nodes   []*core.Node
	teams   []core.Team
	running []*core.Workload
	pending []*core.Workload
}

func (c cluster) snapshot() *core.Snapshot {
	s := &core.Snapshot{Nodes: c.nodes, Teams: c.teams, Usage: map[core.NodeName]*core.NodeUsage{}}
	for i, w := range c.pending {
		w.Seq = int64(100 + i)
		s.Pending = append(s.Pending, w)
	}
	for _, w := range c.running {
		s.Running = append(s.Running, w)
		n := w.Status.Placement[0].Node
		if s.Usage[n] == nil {
			s.Usage[n] = &core.NodeUsage{}
		}
		s.Usage[n].Add(n, w.Request, w.Status.Placement)
	}
	return s
}

// outcome summarises a plan as sentences that are easy to compare.
func outcome(p core.Plan) (placed []string, victims []string, waiting map[string]string) {
	for _, pl := range p.Placements {
		placed = append(placed, fmt.Sprintf("%s on %s", pl.Workload, whereAll(pl.Assignments)))
	}
	for _, v := range p.Preemptions {
		victims = append(victims, fmt.Sprintf("%s %s for %s", v.Victim, v.Reason, v.Preemptor))
	}
	waiting = map[string]string{}
	for _, d := range p.Unplaced {
		waiting[string(d.Workload)] = d.Reason
	}
	slices.Sort(placed)
	slices.Sort(victims)
	return placed, victims, waiting
}

// whereAll is where, across nodes: "g1:0,1+g2:0".
func whereAll(as []core.Assignment) string {
	var parts []string
	for _, n := range core.Nodes(as) {
		on, _ := core.OnNode(as, n)
		parts = append(parts, where(on))
	}
	return strings.Join(parts, "+")
}

func TestPolicy(t *testing.T) {
	n4 := node("n1").gpus(4, "H100").obj()
	n8 := node("n8").gpus(8, "H100").obj()
	// nv has two NVLink domains of four GPUs.
	nv := node("nv").gpus(4, "H100").inDomain(1).gpus(4, "H100").obj()
	opts := sched.Options{StarvationAfter: 10 * time.Minute, FairShareReclaim: true, MinRuntime: 5 * time.Minute}
	now := t0.Add(time.Hour)

	cases := []struct {
		name        string
		c           cluster
		opts        *sched.Options
		wantPlaced  []string
		wantVictims []string
		wantWaiting map[string]string
		wantMessage map[string]string // substrings of the pending message
	}{{
		name: "a team below its guarantee reclaims another team's over-quota training, newest first",
		c: cluster{
			nodes: []*core.Node{n4},
			teams: []core.Team{team("a").obj(), team("b").guaranteed(2000).obj()},
			running: []*core.Workload{
				job("a1").team("a").class("training").gpus(1000).created(t0).runs(n4, 0, minute(1)).obj(), job("a2").team("a").class("training").gpus(1000).created(t0).runs(n4, 1, minute(2)).obj(),
				job("a3").team("a").class("training").gpus(1000).created(t0).runs(n4, 2, minute(3)).obj(), job("a4").team("a").class("training").gpus(1000).created(t0).runs(n4, 3, minute(4)).obj(),
			},
			pending: []*core.Workload{job("b1").team("b").class("training").gpus(2000).created(t0).obj()},
		},
		wantVictims: []string{"a3 Reclaimed for b1", "a4 Reclaimed for b1"},
		wantWaiting: map[string]string{"b1": sched.ReasonPreempting},
		wantMessage: map[string]string{"b1": "waiting for 2 preempted workloads to stop on n1"},
	}, {
		name: "production is not admitted over its team's guarantee",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("b").guaranteed(1000).obj()},
			pending: []*core.Workload{job("p").team("b").class("production").gpus(2000).created(t0).obj()},
		},
		wantWaiting: map[string]string{"p": sched.ReasonOverQuota},
		wantMessage: map[string]string{"p": "production runs only within the team's guarantee: team b holds 0 of 1 guaranteed GPUs in production and above"},
	}, {
		name: "production is never preempted, not even to give another team its guarantee",
		c: cluster{
			nodes: []*core.Node{n4},
			teams: []core.Team{team("a").guaranteed(4000).obj(), team("b").guaranteed(4000).obj()},
			running: []*core.Workload{
				job("a1").team("a").class("production").gpus(2000).created(t0).runs(n4, 0, minute(1)).obj(), job("a2").team("a").class("production").gpus(2000).created(t0).runs(n4, 2, minute(2)).obj(),
			},
			pending: []*core.Workload{job("b1").team("b").class("training").gpus(1000).created(t0).obj()},
		},
		wantWaiting: map[string]string{"b1": sched.ReasonUnschedulable},
	}, {
		name: "production preempts training of its own team",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").guaranteed(4000).obj()},
			running: []*core.Workload{job("t1").team("a").class("training").gpus(4000).created(t0).runs(n4, 0, minute(1)).obj()},
			pending: []*core.Workload{job("p").team("a").class("production").gpus(1000).created(t0).obj()},
		},
		wantVictims: []string{"t1 Preempted for p"},
		wantWaiting: map[string]string{"p": sched.ReasonPreempting},
	}, {
		name: "training does not preempt another team's training that is within its quota",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").guaranteed(4000).obj(), team("b").obj()},
			running: []*core.Workload{job("a1").team("a").class("training").gpus(4000).created(t0).runs(n4, 0, minute(1)).obj()},
			pending: []*core.Workload{job("b1").team("b").class("training").gpus(1000).created(t0).obj()},
		},
		wantWaiting: map[string]string{"b1": sched.ReasonUnschedulable},
		wantMessage: map[string]string{"b1": "team b holds 0 GPUs and its fair share is 0, so it cannot reclaim more"},
	}, {
		name: "batch runs on idle capacity and is preempted by anything",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").obj(), team("b").obj()},
			running: []*core.Workload{job("batch1").team("a").class("batch").gpus(4000).created(t0).runs(n4, 0, minute(1)).obj()},
			pending: []*core.Workload{job("b1").team("b").class("development").gpus(1000).created(t0).obj()},
		},
		wantVictims: []string{"batch1 Reclaimed for b1"}, // another team's: Reclaimed
		wantWaiting: map[string]string{"b1": sched.ReasonPreempting},
	}, {
		name: "batch never preempts and says it waits for idle capacity",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").obj(), team("b").guaranteed(4000).obj()},
			running: []*core.Workload{job("a1").team("a").class("training").gpus(4000).created(t0).runs(n4, 0, minute(1)).obj()},
			pending: []*core.Workload{job("batch1").team("b").class("batch").gpus(1000).created(t0).obj()},
		},
		wantWaiting: map[string]string{"batch1": sched.ReasonIdleOnly},
		wantMessage: map[string]string{"batch1": "batch runs only on idle capacity"},
	}, {
		name: "four quarter-GPU notebooks share one GPU",
		c: cluster{
			nodes: []*core.Node{n4},
			teams: []core.Team{team("a").obj()},
			pending: []*core.Workload{job("nb1").team("a").class("development").gpus(250).created(t0).obj(), job("nb2").team("a").class("development").gpus(250).created(t0).obj(),
				job("nb3").team("a").class("development").gpus(250).created(t0).obj(), job("nb4").team("a").class("development").gpus(250).created(t0).obj()},
		},
		wantPlaced: []string{"nb1 on n1:0@250", "nb2 on n1:0@250", "nb3 on n1:0@250", "nb4 on n1:0@250"},
	}, {
		name: "a team at its limit waits, and says so",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").limit(2000).obj()},
			running: []*core.Workload{job("a1").team("a").class("training").gpus(2000).created(t0).runs(n4, 0, minute(1)).obj()},
			pending: []*core.Workload{job("a2").team("a").class("training").gpus(1000).created(t0).obj()},
		},
		wantWaiting: map[string]string{"a2": sched.ReasonQuotaLimit},
		wantMessage: map[string]string{"a2": "team a at its limit (2/2 GPUs"},
	}, {
		name: "a reclaim takes only as many victims as it needs",
		c: cluster{
			nodes: []*core.Node{n4},
			teams: []core.Team{team("a").obj(), team("b").guaranteed(4000).obj()},
			running: []*core.Workload{
				job("a1").team("a").class("training").gpus(1000).created(t0).runs(n4, 0, minute(1)).obj(), job("a2").team("a").class("training").gpus(1000).created(t0).runs(n4, 1, minute(2)).obj(),
				job("a3").team("a").class("training").gpus(1000).created(t0).runs(n4, 2, minute(3)).obj(), job("a4").team("a").class("training").gpus(1000).created(t0).runs(n4, 3, minute(4)).obj(),
			},
			pending: []*core.Workload{job("b1").team("b").class("training").gpus(1000).created(t0).obj()},
		},
		wantVictims: []string{"a4 Reclaimed for b1"},
		wantWaiting: map[string]string{"b1": sched.ReasonPreempting},
	}, {
		name: "a team below its fair share reclaims from a team above it once the victims ran long enough",
		c: cluster{
			nodes: []*core.Node{n4},
			teams: []core.Team{team("a").obj(), team("b").obj()},
			running: []*core.Workload{
				job("a1").team("a").class("training").gpus(1000).created(t0).runs(n4, 0, minute(1)).obj(), job("a2").team("a").class("training").gpus(1000).created(t0).runs(n4, 1, minute(2)).obj(),
				job("a3").team("a").class("training").gpus(1000).created(t0).runs(n4, 2, minute(3)).obj(), job("a4").team("a").class("training").gpus(1000).created(t0).runs(n4, 3, minute(58)).obj(),
			},
			pending: []*core.Workload{job("b1").team("b").class("training").gpus(1000).created(t0).obj()},
		},
		// a4 started two minutes ago, within MinRuntime: a3 goes instead.
		wantVictims: []string{"a3 Reclaimed for b1"},
		wantWaiting: map[string]string{"b1": sched.ReasonPreempting},
	}, {
		name: "without fair-share reclaim a team over its fair share keeps what it borrowed",
		opts: &sched.Options{FairShareReclaim: false},
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").obj(), team("b").obj()},
			running: []*core.Workload{job("a1").team("a").class("training").gpus(4000).created(t0).runs(n4, 0, minute(1)).obj()},
			pending: []*core.Workload{job("b1").team("b").class("training").gpus(1000).created(t0).obj()},
		},
		wantWaiting: map[string]string{"b1": sched.ReasonUnschedulable},
		wantMessage: map[string]string{"b1": "fair-share reclaim is off"},
	}, {
		name: "a preemptor waiting for its victims does not preempt again, and another waits for the room they leave",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").obj(), team("b").guaranteed(4000).obj()},
			running: []*core.Workload{job("a1").team("a").class("training").gpus(4000).created(t0).runs(n4, 0, minute(1)).stopping("Reclaimed", "b1").obj()},
			pending: []*core.Workload{
				job("b1").team("b").class("training").gpus(1000).created(t0).waiting(sched.ReasonPreempting, "n1").obj(), // as the last cycle left it
				job("b2").team("b").class("training").gpus(1000).created(t0).obj(),
			},
		},
		// b2 waits for the same stop: the node will have room for both.
		wantWaiting: map[string]string{"b1": sched.ReasonPreempting, "b2": sched.ReasonPreempting},
		wantMessage: map[string]string{"b1": "waiting for 1 preempted workload to stop on n1", "b2": "waiting for 1 preempted workload to stop on n1"},
	}, {
		name: "an 8-GPU job that waited too long gets the node reserved; small jobs behind it wait",
		c: cluster{
			nodes:   []*core.Node{n8},
			teams:   []core.Team{team("a").obj()},
			running: []*core.Workload{job("small").team("a").class("training").gpus(1000).created(t0).runs(n8, 0, minute(1)).obj()},
			pending: []*core.Workload{
				job("big").team("a").class("training").gpus(8000).created(t0).obj(),
				job("late").team("a").class("training").gpus(1000).created(now).obj(),
			},
		},
		wantWaiting: map[string]string{"big": sched.ReasonUnschedulable, "late": sched.ReasonUnschedulable},
		wantMessage: map[string]string{"big": "n8 is reserved for it (waiting since 2026-11-30T08:00:00Z): it waits there for small to end", "late": "reserved for a workload that has waited too long"},
	}, {
		name: "a large job that fits nowhere does not block smaller ones behind it before it starves",
		c: cluster{
			nodes:   []*core.Node{n8},
			teams:   []core.Team{team("a").obj()},
			running: []*core.Workload{job("small").team("a").class("training").gpus(1000).created(t0).runs(n8, 0, minute(1)).obj()},
			pending: []*core.Workload{
				job("big").team("a").class("training").gpus(8000).created(now.Add(-time.Minute)).obj(),
				job("late").team("a").class("training").gpus(1000).created(t0).obj(),
			},
		},
		wantPlaced:  []string{"late on n8:1"},
		wantWaiting: map[string]string{"big": sched.ReasonUnschedulable},
		wantMessage: map[string]string{"big": "no node with 8 free GPUs (best: n8 with 7)"},
	}, {
		name: "between teams of one class, the team furthest below its fair share goes first",
		c: cluster{
			nodes:   []*core.Node{n4},
			teams:   []core.Team{team("a").obj(), team("b").obj()},
			running: []*core.Workload{job("a1").team("a").class("training").gpus(3000).created(t0).runs(n4, 0, minute(1)).obj()},
			pending: []*core.Workload{job("a2").team("a").class("training").gpus(1000).created(t0).obj(), job("b1").team("b").class("training").gpus(1000).created(t0).obj()},
		},
		wantPlaced:  []string{"b1 on n1:3"},
		wantWaiting: map[string]string{"a2": sched.ReasonUnschedulable},
	}, {
		name: "a node selector keeps a workload to the pool it names",
		c: cluster{
			nodes: []*core.Node{node("a").gpus(1, "H100").pool("owned").obj(), node("b").gpus(1, "H100").pool("burst").obj()},
			teams: []core.Team{team("a").obj()},
			pending: []*core.Workload{
				job("burst1").team("a").class("training").gpus(1000).selector(core.LabelPool, "burst").created(t0).obj(),
				job("burst2").team("a").class("training").gpus(1000).selector(core.LabelPool, "burst").created(t0).obj(),
			},
		},
		wantPlaced:  []string{"burst1 on b:0"},
		wantWaiting: map[string]string{"burst2": sched.ReasonUnschedulable},
		wantMessage: map[string]string{"burst2": "1 labels do not match the node selector"},
	}, {
		name: "a gang is placed all together, across nodes",
		c: cluster{
			nodes:   []*core.Node{node("g1").gpus(2, "H100").obj(), node("g2").gpus(2, "H100").obj()},
			teams:   []core.Team{team("a").obj()},
			pending: []*core.Workload{job("gang").team("a").class("training").gpus(1000).replicas(3).created(t0).obj()},
		},
		wantPlaced: []string{"gang on g1:0,1+g2:0"},
	}, {
		name: "a gang that does not fit places none of its replicas, and smaller work still runs",
		c: cluster{
			nodes:   []*core.Node{node("g1").gpus(2, "H100").obj(), node("g2").gpus(2, "H100").obj()},
			teams:   []core.Team{team("a").obj()},
			pending: []*core.Workload{job("gang").team("a").class("training").gpus(2000).replicas(3).created(now).obj(), job("one").team("a").class("training").gpus(2000).created(now).obj(), job("two").team("a").class("training").gpus(2000).created(now).obj()},
		},
		wantPlaced:  []string{"one on g1:0,1", "two on g2:0,1"},
		wantWaiting: map[string]string{"gang": sched.ReasonUnschedulable},
		wantMessage: map[string]string{"gang": "can never run as asked: 3 replicas: the fleet could hold at most 2, even empty"},
	}, {
		name: "whole GPUs come from one NVLink domain when they can",
		c: cluster{
			nodes:   []*core.Node{nv},
			teams:   []core.Team{team("a").obj()},
			running: []*core.Workload{job("r").team("a").class("training").gpus(1000).created(t0).runs(nv, 0, minute(1)).obj()},
			pending: []*core.Workload{job("four").team("a").class("training").gpus(4000).created(now).obj(), job("two").team("a").class("training").gpus(2000).created(now).obj()},
		},
		// four takes domain 1 whole (GPUs 4–7) rather than 1,2,3,4; two
		// then fits domain 0's remaining three (best fit).
		wantPlaced: []string{"four on nv:4,5,6,7", "two on nv:1,2"},
	}, {
		name: "a model guarantee reclaims devices of that model, apart from the team's other work",
		c: func() cluster {
			h, a := node("h").gpus(2, "H100").obj(), node("x").gpus(1, "A10").obj()
			return cluster{
				nodes: []*core.Node{h, a},
				teams: []core.Team{team("a").obj(), team("b").guaranteed(1000).guaranteedFor("H100", 1000).obj()},
				running: []*core.Workload{job("a1").team("a").class("training").gpus(1000).created(t0).runs(h, 0, minute(1)).obj(), job("a2").team("a").class("training").gpus(1000).created(t0).runs(h, 1, minute(2)).obj(),
					job("b-a10").team("b").class("training").gpus(1000).created(t0).runs(a, 0, minute(1)).obj()},
				pending: []*core.Workload{job("b-h100").team("b").class("training").gpus(1000).models("h100").created(now).obj()},
			}
		}(),
		// b's A10 work fills its total guarantee, yet its H100 guarantee is
		// unused: a's newest H100 workload is reclaimed.
		wantVictims: []string{"a2 Reclaimed for b-h100"},
		wantWaiting: map[string]string{"b-h100": sched.ReasonPreempting},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := opts
			if tc.opts != nil {
				o = *tc.opts
			}
			snap := tc.c.snapshot()
			plan := o.Schedule(snap, now)
			placed, victims, waiting := outcome(plan)
			if diff := cmp.Diff(tc.wantPlaced, placed); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("preemptions (-want +got):\n%s", diff)
			}
			if tc.wantWaiting == nil {
				tc.wantWaiting = map[string]string{}
			}
			if diff := cmp.Diff(tc.wantWaiting, waiting); diff != "" {
				t.Errorf("waiting reasons (-want +got):\n%s", diff)
			}
			for id, sub := range tc.wantMessage {
				for _, d := range plan.Unplaced {
					if string(d.Workload) == id && !strings.Contains(d.Message, sub) {
						t.Errorf("message for %s = %q, want it to contain %q", id, d.Message, sub)
					}
				}
			}
		})
	}
}

func TestSharesReportUsageAndDemand(t *testing.T) {
	n4 := node("n1").gpus(4, "H100").obj()
	c := cluster{
		nodes:   []*core.Node{n4},
		teams:   []core.Team{team("a").guaranteed(1000).obj(), team("b").guaranteed(1000).weight(3).obj()},
		running: []*core.Workload{job("a1").team("a").class("training").gpus(1000).created(t0).runs(n4, 0, minute(1)).obj()},
		pending: []*core.Workload{job("a2").team("a").class("training").gpus(8000).created(t0).obj(), job("b1").team("b").class("training").gpus(8000).created(t0).obj()},
	}
	plan := sched.DefaultOptions().Schedule(c.snapshot(), t0)
	want := []core.TeamShare{
		{Team: "a", Usage: 1000, Pending: 8000, FairShare: 1500},
		{Team: "b", Usage: 0, Pending: 8000, FairShare: 2500},
	}
	if diff := cmp.Diff(want, plan.Shares); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
}

// benchCluster is `nodes` nodes × 8 H100, 50 teams with guarantees summing
// to half the cluster, the cluster 3/4 full of running work of every
// class, and `pending` workloads: fractions, 1, 2, 4 and 8 GPUs. At 1,000
// nodes it is the cluster the benchmark has always measured.
func benchCluster(nodes, pending int) *core.Snapshot {
	r := rand.New(rand.NewPCG(7, 7))
	var c cluster
	width := max(4, len(fmt.Sprint(nodes-1)))
	for i := range nodes {
		c.nodes = append(c.nodes, node(fmt.Sprintf("n%0*d", width, i)).gpus(8, "H100").obj())
	}
	for i := range 50 {
		c.teams = append(c.teams, team(core.TeamName(fmt.Sprintf("t%02d", i))).guaranteed(int64(80*nodes)).weight(int64(1+i%3)).obj())
	}
	classes := []string{"production", "training", "training", "development", "batch"}
	sizes := []int64{250, 500, 1000, 1000, 2000, 4000, 8000}
	id := 0
	for _, n := range c.nodes {
		used := 0
		for used < 6 {
			k := []int{1, 2}[r.IntN(2)]
			w := job(fmt.Sprintf("r%06d", id)).team(core.TeamName(fmt.Sprintf("t%02d", r.IntN(50)))).class(classes[r.IntN(len(classes))]).gpus(int64(k) * 1000).created(t0)
			c.running = append(c.running, w.runs(n, used, minute(r.IntN(50))).obj())
			used += k
			id++
		}
	}
	for i := range pending {
		w := job(fmt.Sprintf("p%06d", i)).team(core.TeamName(fmt.Sprintf("t%02d", r.IntN(50)))).class(classes[r.IntN(len(classes))]).gpus(sizes[r.IntN(len(sizes))])
		c.pending = append(c.pending, w.created(t0.Add(time.Duration(r.IntN(3600))*time.Second)).obj())
	}
	return c.snapshot()
}

// BenchmarkCycle is one scheduling cycle of benchCluster, 50 teams: at
// 8,000 GPUs (nodes=1000/teams=50, as always measured), then by size, up
// to 12,500 nodes × 8 GPUs (100,000 GPUs) with 50,000 pending, and the
// sizes between that give the growth in nodes (pending=50000) and in
// pending (nodes=1000).
//
//	go test ./internal/sched -run '^$' -bench Cycle -benchmem
//	go test ./internal/sched -run '^$' -bench 'Cycle/nodes=12500/' -benchtime 3x
func BenchmarkCycle(b *testing.B) {
	type size struct{ nodes, pending int }
	sizes := []size{{1000, 10000}, {1000, 50000}}
	for _, n := range []int{250, 500, 1000, 2000, 4000, 12500} {
		sizes = append(sizes, size{n, 50000})
	}
	for _, p := range []int{5000, 10000, 20000} {
		sizes = append(sizes, size{1000, p})
	}
	run := func(b *testing.B, sz size) {
		snap := benchCluster(sz.nodes, sz.pending)
		now := t0.Add(2 * time.Hour)
		var plan core.Plan
		b.ReportAllocs()
		cpu := processCPU(b)
		for b.Loop() {
			plan = sched.DefaultOptions().Schedule(snap, now)
		}
		b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		b.ReportMetric(float64(len(plan.Placements)), "placed")
		b.ReportMetric(float64(len(plan.Preemptions)), "preempted")
	}
	for i, sz := range sizes {
		name := fmt.Sprintf("nodes=%d/pending=%d", sz.nodes, sz.pending)
		if i < 2 {
			name = fmt.Sprintf("nodes=%d/teams=50/pending=%d", sz.nodes, sz.pending)
		}
		b.Run(name, func(b *testing.B) { run(b, sz) })
	}
}

// BenchmarkCycleReserved is BenchmarkCycle at 1,000 nodes with a gang of
// two 8-GPU production replicas submitted before the rest: a gang does not
// preempt, so it holds the cycle's starvation reservation while the queue
// is decided. Every workload that only the reserved node could hold is
// refused there; the refusals are remembered (refusalMemo.noFitResv), so
// that not each of them scans every node to explain its own
// (docs/PERFORMANCE.md).
//
//	go test ./internal/sched -run '^$' -bench 'CycleReserved' -benchmem
func BenchmarkCycleReserved(b *testing.B) {
	for _, p := range []int{5000, 10000, 20000} {
		b.Run(fmt.Sprintf("nodes=1000/pending=%d", p), func(b *testing.B) {
			snap := benchCluster(1000, p)
			g := job("gang").team("t00").class("production").gpus(8000).replicas(2).created(t0.Add(-time.Hour)).obj()
			snap.Pending = append(snap.Pending, g)
			now := t0.Add(2 * time.Hour)
			var plan core.Plan
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				plan = sched.DefaultOptions().Schedule(snap, now)
			}
			b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			reserved := 0
			for _, d := range plan.Unplaced {
				if d.Workload == "gang" && d.Nominated != "" {
					reserved = 1
				}
			}
			b.ReportMetric(float64(len(plan.Placements)), "placed")
			b.ReportMetric(float64(reserved), "reserved")
		})
	}
}

// processCPU is the CPU time the process has used (user and system, every
// thread): a cycle's CPU, its parallel setup and the collector included,
// steadier than wall time on a machine shared with others.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestFairShareIgnoresDemandThatCannotBeAdmitted(t *testing.T) {
	n4 := node("n1").gpus(4, "H100").obj()
	c := cluster{
		nodes: []*core.Node{n4},
		teams: []core.Team{team("a").obj(), team("b").obj()},
		// b asks for production beyond its (zero) guarantee and for batch:
		// neither can claim a share; a's training can.
		pending: []*core.Workload{job("a1").team("a").class("training").gpus(4000).created(t0).obj(), job("bp").team("b").class("production").gpus(2000).created(t0).obj(), job("bb").team("b").class("batch").gpus(2000).created(t0).obj()},
	}
	plan := sched.DefaultOptions().Schedule(c.snapshot(), t0)
	want := []core.TeamShare{
		{Team: "a", Usage: 4000, Pending: 0, FairShare: 4000},
		{Team: "b", Usage: 0, Pending: 4000, FairShare: 0},
	}
	if diff := cmp.Diff(want, plan.Shares); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
}

// A preemptor whose team reached its limit while its victims stop (other
// work of the team took the room) holds nothing: it waits for its limit,
// nominated nowhere, and what its victims free goes to others.
func TestPreemptorPastItsLimitHoldsNothing(t *testing.T) {
	n := node("n1").gpus(2, h100).obj()
	m := node("n2").gpus(1, h100).obj()
	c := cluster{
		nodes: []*core.Node{n, m},
		teams: []core.Team{team("a").guaranteed(1000).limit(1000).obj(), team("b").obj()},
		running: []*core.Workload{
			job("victim").team("b").class("batch").gpus(1000).runs(n, 0, minute(-60)).stopping("Reclaimed", "p").obj(),
			job("a-run").team("a").class("training").gpus(1000).runs(m, 0, minute(-1)).obj(),
		},
		pending: []*core.Workload{job("p").team("a").class("training").gpus(1000).created(minute(-5)).waiting(sched.ReasonPreempting, "n1").obj()},
	}
	plan := sched.DefaultOptions().Schedule(c.snapshot(), t0)
	if len(plan.Unplaced) != 1 {
		t.Fatalf("unplaced %v", plan.Unplaced)
	}
	if d := plan.Unplaced[0]; d.Reason != sched.ReasonQuotaLimit || d.Nominated != "" {
		t.Errorf("p waits %s (%q), nominated %q; want QuotaLimit, nominated nowhere", d.Reason, d.Message, d.Nominated)
	}
}
