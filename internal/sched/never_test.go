package sched

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestNeverMessageAsWholeFleet: on random fleets of mixed nodes (some
// not schedulable) and random requests, neverMessage, which first asks
// whether the first schedulable node alone could hold the request, says
// what core.Feasible says of every schedulable node together.
func TestNeverMessageAsWholeFleet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		models := []string{"H100", "A100", "L4"}
		c := &cycle{}
		var schedulable []*core.Node
		for i := range rapid.IntRange(0, 6).Draw(t, "nodes") {
			n := &core.Node{
				Name:        core.NodeName(fmt.Sprintf("n%d", i)),
				Region:      rapid.SampledFrom([]string{"", "eu", "us"}).Draw(t, "region"),
				MilliCPU:    rapid.SampledFrom([]int64{0, 8000, 64000}).Draw(t, "cpu"),
				MemoryMiB:   rapid.SampledFrom([]int64{0, 65536, 524288}).Draw(t, "mem"),
				Schedulable: rapid.IntRange(0, 3).Draw(t, "schedulable") > 0,
			}
			if rapid.Bool().Draw(t, "labelled") {
				n.Labels = map[string]string{"tier": rapid.SampledFrom([]string{"a", "b"}).Draw(t, "tier")}
			}
			for g := range rapid.IntRange(0, 8).Draw(t, "gpus") {
				n.GPUs = append(n.GPUs, core.GPU{Index: g, Model: rapid.SampledFrom(models).Draw(t, "model"),
					MemoryMiB: rapid.SampledFrom([]int64{24576, 81920}).Draw(t, "gpuMem")})
			}
			c.fleet.nodes = append(c.fleet.nodes, &nodeState{node: n, pos: i})
			if n.Schedulable {
				schedulable = append(schedulable, n)
			}
		}
		req := core.Request{
			MilliGPU:  rapid.SampledFrom([]int64{0, 250, 1000, 2000, 4000, 8000, 16000}).Draw(t, "milli"),
			MilliCPU:  rapid.SampledFrom([]int64{0, 4000, 100000}).Draw(t, "reqCPU"),
			MemoryMiB: rapid.SampledFrom([]int64{0, 1024, 1 << 20}).Draw(t, "reqMem"),
			Replicas:  rapid.IntRange(0, 4).Draw(t, "replicas"),
		}
		if req.MilliGPU == 0 {
			req.GPUMemoryMiB = rapid.SampledFrom([]int64{0, 20000, 90000}).Draw(t, "reqGPUMem")
		}
		if rapid.Bool().Draw(t, "byModel") {
			req.GPUModels = []string{rapid.SampledFrom(models).Draw(t, "reqModel")}
		}
		if rapid.Bool().Draw(t, "bySelector") {
			req.NodeSelector = map[string]string{"tier": rapid.SampledFrom([]string{"a", "b"}).Draw(t, "reqTier")}
		}
		if rapid.Bool().Draw(t, "byRegion") {
			req.Regions = []string{rapid.SampledFrom([]string{"eu", "us"}).Draw(t, "reqRegion")}
		}
		want := ""
		switch {
		case len(c.fleet.nodes) == 0:
			want = "no nodes are registered"
		case len(schedulable) > 0:
			if err := core.Feasible(schedulable, req); err != nil {
				want = "can never run as asked: " + err.Error()
			}
		}
		if got := c.neverMessage(req); got != want {
			t.Fatalf("neverMessage(%+v) = %q, want %q (every schedulable node weighed)", req, got, want)
		}
	})
}
