package sched_test

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// A device that is Failed or being qualified takes no new work, even where
// preempting what runs there would free it; the node's others serve.
func TestUnusableDevicesTakeNoWork(t *testing.T) {
	n := node("n1").gpus(4, "H100").obj()
	n.GPUs[1].Health = core.GPUFailed
	n.GPUs[2].Health = core.GPUValidating
	c := cluster{
		nodes: []*core.Node{n},
		teams: []core.Team{team("a").guaranteed(4000).obj(), team("b").obj()},
		running: []*core.Workload{
			job("b1").team("b").class("training").gpus(1000).created(t0).runs(n, 1, minute(30)).obj(),
		},
		pending: []*core.Workload{
			job("a1").team("a").class("training").gpus(1000).created(t0).obj(),
			job("a2").team("a").class("training").gpus(1000).created(t0).obj(),
			job("a3").team("a").class("training").gpus(1000).created(t0).obj(),
		},
	}
	placed, victims, _ := outcome(sched.Schedule(c.snapshot(), t0))
	for _, p := range placed {
		if strings.Contains(p, "n1:1") || strings.Contains(p, "n1:2") {
			t.Errorf("placed on an unusable device: %s", p)
		}
	}
	if len(placed) != 2 || len(victims) != 0 {
		t.Errorf("placed %v, victims %v: want GPUs 0 and 3 used, nobody preempted for a failed device", placed, victims)
	}
}
