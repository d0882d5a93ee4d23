package sched_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// A gang runs within one cluster: its replicas never span two, even where
// the best place of each would; where no one cluster holds them all it
// waits and says so, cluster by cluster.
func TestGangStaysInOneCluster(t *testing.T) {
	in := func(cluster string, n *core.Node) *core.Node { n.Cluster = cluster; return n }
	a1 := in("a", node("a1").gpus(4, "H100").obj())
	b1 := in("b", node("b1").gpus(4, "H100").obj())
	b2 := in("b", node("b2").gpus(4, "H100").obj())
	c := cluster{
		nodes: []*core.Node{a1, b1, b2},
		teams: []core.Team{team("t").guaranteed(12000).obj()},
		// Two GPUs of each node run already: a1 is first by name, and
		// every node has room for one replica of two GPUs.
		running: []*core.Workload{
			job("ra").team("t").class("training").gpus(2000).created(t0).runs(a1, 0, minute(1)).obj(),
			job("rb1").team("t").class("training").gpus(2000).created(t0).runs(b1, 0, minute(1)).obj(),
			job("rb2").team("t").class("training").gpus(2000).created(t0).runs(b2, 0, minute(1)).obj(),
		},
		pending: []*core.Workload{
			job("g2").team("t").class("training").gpus(2000).replicas(2).created(t0).obj(),
		},
	}
	plan := sched.DefaultOptions().Schedule(c.snapshot(), t0)
	placed, _, waiting := outcome(plan)
	if diff := cmp.Diff([]string{"g2 on b1:2,3+b2:2,3"}, placed); diff != "" {
		t.Errorf("placements (-want +got):\n%s\nwaiting: %v", diff, waiting)
	}

	// Three replicas fit in no one cluster, though the fleet has room.
	c.pending = []*core.Workload{job("g3").team("t").class("training").gpus(2000).replicas(3).created(t0).obj()}
	plan = sched.DefaultOptions().Schedule(c.snapshot(), t0)
	if len(plan.Placements) != 0 {
		t.Fatalf("placed %+v, want the gang of 3 waiting", plan.Placements)
	}
	if len(plan.Unplaced) != 1 {
		t.Fatalf("decisions %+v", plan.Unplaced)
	}
	d := plan.Unplaced[0]
	for _, want := range []string{"cluster a: gang of 3: replica 2 does not fit", "cluster b: gang of 3: replica 3 does not fit", "in another cluster than the gang's other replicas"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q: want it to contain %q", d.Message, want)
		}
	}

	// One cluster (or none named): as ever, the gang may use every node.
	for _, n := range []*core.Node{a1, b1, b2} {
		n.Cluster = ""
	}
	plan = sched.DefaultOptions().Schedule(c.snapshot(), t0)
	if placed, _, _ := outcome(plan); len(placed) != 1 {
		t.Errorf("without clusters: placed %v, want the gang of 3 across the three nodes", placed)
	}
}
