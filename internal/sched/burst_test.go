package sched_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// TestResidencyAndBurst: residency is never violated, and a burst pool
// takes a workload only as the burst policy allows.
func TestResidencyAndBurst(t *testing.T) {
	onprem := func() *core.Node { return node("o1").gpus(2, h100).in("onprem", "eu-west", core.PoolOwned).obj() }
	useast := func() *core.Node { return node("u1").gpus(2, h100).in("east", "us-east", core.PoolOwned).obj() }
	cloud := func(name, pool string) *core.Node {
		return node(name).gpus(2, h100).in(pool, "us-east", core.PoolBurst).obj()
	}
	// prod fills a node with production work of team b, within its
	// guarantee: never a victim.
	prod := func(id string, n *core.Node) *core.Workload {
		return job(id).team("b").class("production").gpus(2000).runs(n, 0, minute(-60)).obj()
	}
	// batch fills a node with batch work of team c: a victim for anyone.
	batch := func(id string, n *core.Node) *core.Workload {
		return job(id).team("c").class("batch").gpus(2000).runs(n, 0, minute(-60)).obj()
	}
	waited := func(d time.Duration) time.Time { return t0.Add(-d) }
	o, u, c1 := onprem(), useast(), cloud("c1", "cloud")
	tests := []struct {
		name    string
		nodes   []*core.Node
		running []*core.Workload
		pending []*core.Workload
		opts    func(*sched.Options)
		placed  []string
		victims []string
		// waiting: reason and a part of the message, by workload.
		waiting   map[string][2]string
		nominated map[string]core.NodeName
	}{
		{
			name:    "residency holds though its region is full and another has room",
			nodes:   []*core.Node{o, u, c1},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).regions("eu-west").created(waited(time.Hour)).obj()},
			waiting: map[string][2]string{"w": {sched.ReasonUnschedulable,
				"residency eu-west: the nodes there are full (onprem); nodes in us-east have room but are outside its residency; no node with 1 free GPU"}},
			nominated: map[string]core.NodeName{"w": "o1"}, // its starvation reservation
		},
		{
			name:    "residency whose nodes are all cordoned is never, as for any field (neverMessage)",
			nodes:   []*core.Node{node("o1").gpus(2, h100).in("onprem", "eu-west", core.PoolOwned).cordoned().obj(), u},
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).regions("eu-west").created(waited(time.Minute)).obj()},
			waiting: map[string][2]string{"w": {sched.ReasonUnschedulable,
				"can never run as asked: no node is in region eu-west (the fleet's regions: us-east)"}},
		},
		{
			name:      "residency chooses its victims only where it may run",
			nodes:     []*core.Node{o, u},
			running:   []*core.Workload{batch("c-u", u), batch("c-o", o)},
			pending:   []*core.Workload{job("w").team("a").class("training").gpus(1000).regions("eu-west").created(waited(time.Minute)).obj()},
			victims:   []string{"c-o Reclaimed for w"},
			waiting:   map[string][2]string{"w": {sched.ReasonPreempting, "on o1"}},
			nominated: map[string]core.NodeName{"w": "o1"},
		},
		{
			name:    "residency that allows the burst pool bursts there",
			nodes:   []*core.Node{o, c1},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).regions("us-east").created(waited(3 * time.Minute)).obj()},
			placed:  []string{"w on c1:0"},
		},
		{
			name:    "no burst before After",
			nodes:   []*core.Node{o, c1},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(45 * time.Second)).obj()},
			waiting: map[string][2]string{"w": {sched.ReasonUnschedulable, "; waits for capacity; may burst to pool cloud after 2m (waited 40s)"}},
		},
		{
			name:    "burst after After",
			nodes:   []*core.Node{o, c1},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(2 * time.Minute)).obj()},
			placed:  []string{"w on c1:0"},
		},
		{
			name:      "After is the policy's",
			nodes:     []*core.Node{o, c1},
			running:   []*core.Workload{prod("b1", o)},
			pending:   []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(3 * time.Minute)).obj()},
			opts:      func(o *sched.Options) { o.Burst.After = 10 * time.Minute },
			waiting:   map[string][2]string{"w": {sched.ReasonUnschedulable, "may burst to pool cloud after 10m (waited 3m)"}},
			nominated: map[string]core.NodeName{"w": "o1"}, // its starvation reservation
		},
		{
			name:    "batch may not burst",
			nodes:   []*core.Node{o, c1},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{job("w").team("a").class("batch").gpus(1000).created(waited(time.Hour)).obj()},
			waiting: map[string][2]string{"w": {sched.ReasonIdleOnly, "; class batch may not burst"}},
		},
		{
			name:    "development may not burst by default, but may when listed",
			nodes:   []*core.Node{o, c1},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{job("w").team("a").class("development").gpus(1000).created(waited(time.Hour)).obj()},
			opts:    func(o *sched.Options) { o.Burst.Classes = append(o.Burst.Classes, "development") },
			placed:  []string{"w on c1:0"},
		},
		{
			name:      "no class bursts under the zero policy",
			nodes:     []*core.Node{o, c1},
			running:   []*core.Workload{prod("b1", o)},
			pending:   []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(time.Hour)).obj()},
			opts:      func(o *sched.Options) { o.Burst = sched.BurstPolicy{} },
			waiting:   map[string][2]string{"w": {sched.ReasonUnschedulable, "class training may not burst"}},
			nominated: map[string]core.NodeName{"w": "o1"}, // its starvation reservation
		},
		{
			name:    "not while owned capacity fits",
			nodes:   []*core.Node{c1, o}, // the burst node first by name would win a tie
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(time.Hour)).obj()},
			placed:  []string{"w on o1:0"},
		},
		{
			name:  "a gang is not split between owned and burst nodes",
			nodes: []*core.Node{o, c1, cloud("c2", "cloud")},
			pending: []*core.Workload{
				job("w").team("a").class("training").gpus(2000).replicas(2).created(waited(time.Hour)).obj(),
			},
			placed: []string{"w on c1:0,1+c2:0,1"},
		},
		{
			name:    "the cheapest burst pool first, unpriced last",
			nodes:   []*core.Node{o, cloud("c-a", "a"), cloud("c-b", "b"), cloud("c-c", "c"), cloud("c-0", "zero")},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{
				job("w1").team("a").class("training").gpus(2000).created(waited(time.Hour)).obj(),
				job("w2").team("a").class("training").gpus(2000).created(waited(time.Hour)).obj(),
				job("w3").team("a").class("training").gpus(2000).created(waited(time.Hour)).obj(),
				job("w4").team("a").class("training").gpus(2000).created(waited(time.Hour)).obj(),
			},
			opts:   func(o *sched.Options) { o.Burst.Prices = map[string]int64{"a": 4, "b": 2, "c": 3} },
			placed: []string{"w1 on c-b:0,1", "w2 on c-c:0,1", "w3 on c-a:0,1", "w4 on c-0:0,1"},
		},
		{
			name:    "no preemption on a burst node for work not allowed there",
			nodes:   []*core.Node{o, c1},
			running: []*core.Workload{prod("b1", o), batch("c1w", c1)},
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(30 * time.Second)).obj()},
			waiting: map[string][2]string{"w": {sched.ReasonUnschedulable, "may burst to pool cloud after 2m (waited 30s)"}},
		},
		{
			name:      "work on a burst node is preempted like anywhere else",
			nodes:     []*core.Node{o, c1},
			running:   []*core.Workload{prod("b1", o), batch("c1w", c1)},
			pending:   []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(time.Hour)).obj()},
			victims:   []string{"c1w Reclaimed for w"},
			waiting:   map[string][2]string{"w": {sched.ReasonPreempting, "on c1"}},
			nominated: map[string]core.NodeName{"w": "c1"},
		},
		{
			name:      "a preempted workload's wait restarts",
			nodes:     []*core.Node{o, c1},
			running:   []*core.Workload{prod("b1", o)},
			pending:   []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(time.Hour)).preempted(waited(30 * time.Second)).obj()},
			waiting:   map[string][2]string{"w": {sched.ReasonUnschedulable, "may burst to pool cloud after 2m (waited 30s)"}},
			nominated: map[string]core.NodeName{"w": "o1"}, // its starvation reservation
		},
		{
			name:    "a preempted workload bursts once it has waited again",
			nodes:   []*core.Node{o, c1},
			running: []*core.Workload{prod("b1", o)},
			pending: []*core.Workload{job("w").team("a").class("training").gpus(1000).created(waited(time.Hour)).preempted(waited(5 * time.Minute)).obj()},
			placed:  []string{"w on c1:0"},
		},
		{
			name:      "a starvation reservation only where it may run",
			nodes:     []*core.Node{o, cloud("a-c1", "cloud")}, // the burst node first by name
			running:   []*core.Workload{prod("b1", o)},
			pending:   []*core.Workload{job("w").team("a").class("training").gpus(2000).created(waited(90 * time.Second)).obj()},
			opts:      func(o *sched.Options) { o.StarvationAfter = time.Minute },
			waiting:   map[string][2]string{"w": {sched.ReasonUnschedulable, "o1 is reserved for it"}},
			nominated: map[string]core.NodeName{"w": "o1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := sched.DefaultOptions()
			if tt.opts != nil {
				tt.opts(&opts)
			}
			snap := cluster{nodes: tt.nodes, teams: []core.Team{team("a").obj(), team("b").guaranteed(2000).obj(), team("c").obj()},
				running: tt.running, pending: tt.pending}.snapshot()
			plan := opts.Schedule(snap, t0)
			placed, victims, _ := outcome(plan)
			if diff := cmp.Diff(tt.placed, placed); diff != "" {
				t.Errorf("placed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.victims, victims); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			got := map[string][2]string{}
			for _, d := range plan.Unplaced {
				got[string(d.Workload)] = [2]string{d.Reason, d.Message}
				t.Logf("%s waits %s: %s", d.Workload, d.Reason, d.Message)
				if want, ok := tt.waiting[string(d.Workload)]; ok && (d.Reason != want[0] || !strings.Contains(d.Message, want[1])) {
					t.Errorf("%s waits %s: %q; want %s with %q", d.Workload, d.Reason, d.Message, want[0], want[1])
				}
				if want := tt.nominated[string(d.Workload)]; want != d.Nominated {
					t.Errorf("%s nominated to %q, want %q", d.Workload, d.Nominated, want)
				}
			}
			for id := range tt.waiting {
				if _, ok := got[id]; !ok {
					t.Errorf("%s does not wait", id)
				}
			}
			if len(got) != len(tt.waiting) {
				t.Errorf("waiting %v, want %d", got, len(tt.waiting))
			}
		})
	}
}

// TestBurstPolicyAllows: the policy's verdict on its own, as the control
// loop may ask it (an elastic pool asked for capacity only for work that
// may burst).
func TestBurstPolicyAllows(t *testing.T) {
	p := sched.DefaultBurstPolicy()
	w := job("w").created(t0).obj()
	preempted := job("p").created(t0).preempted(t0.Add(5 * time.Minute)).obj()
	tests := []struct {
		name  string
		class string
		w     *core.Workload
		now   time.Time
		want  bool
	}{
		{"training before After", "training", w, t0.Add(time.Minute), false},
		{"training at After", "training", w, t0.Add(2 * time.Minute), true},
		{"production after After", "production", w, t0.Add(time.Hour), true},
		{"batch never", "batch", w, t0.Add(time.Hour), false},
		{"the wait restarts at a preemption", "training", preempted, t0.Add(6 * time.Minute), false},
		{"and counts again from it", "training", preempted, t0.Add(7 * time.Minute), true},
		{"no submission time: no wait", "training", job("z").obj(), t0, false},
	}
	for _, tt := range tests {
		if got := p.Allows(tt.class, tt.w, tt.now); got != tt.want {
			t.Errorf("%s: Allows = %t, want %t", tt.name, got, tt.want)
		}
	}
	if (sched.BurstPolicy{}).Allows("production", w, t0.Add(time.Hour)) {
		t.Errorf("the zero policy lets production burst")
	}
}
