package sim

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// boundNode is a schedulable node of gpus devices of model, with CPU and
// memory (0: no limit).
func boundNode(name string, gpus int, model string, cpu, mem int64) core.Node {
	n := core.Node{Name: core.NodeName(name), Schedulable: true, MilliCPU: cpu, MemoryMiB: mem}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("%s-%d", name, i), Model: model})
	}
	return n
}

func boundPod(milli, cpu int64, models ...string) trace.Pod {
	return trace.Pod{Request: core.Request{MilliGPU: milli, MilliCPU: cpu, GPUModels: models}}
}

// TestBoundHandComputed: the relaxation's optimum on cases worked by hand.
func TestBoundHandComputed(t *testing.T) {
	tests := []struct {
		name  string
		nodes []core.Node
		pods  []trace.Pod
		want  int64
	}{
		// Two 0.81 and two 0.47 on two devices: 1.75 at best (0.81 alone,
		// the 0.47s together). The share alone would allow 2; with u_0.2
		// (x81 + 0.47·x47 ≤ 2) the optimum is x47 = 2, x81 = 1.06:
		// 0.8586 + 0.94 = 1.7986, rounded up.
		{"shares that cannot pair", []core.Node{boundNode("n", 2, "H100", 0, 0)},
			[]trace.Pod{boundPod(810, 0), boundPod(810, 0), boundPod(470, 0), boundPod(470, 0)}, 1799},
		// One device, 4 cores; two halves of 3 cores each: CPU for 4/3 of
		// them, 0.667 of a GPU.
		{"CPU bounds", []core.Node{boundNode("n", 1, "H100", 4000, 0)},
			[]trace.Pod{boundPod(500, 3000), boundPod(500, 3000)}, 667},
		// A pod for a model the fleet lacks places nothing.
		{"model", []core.Node{boundNode("n", 2, "H100", 0, 0)},
			[]trace.Pod{boundPod(1000, 0, "A100"), boundPod(500, 0)}, 500},
		// Three GPUs asked of two: the capacity.
		{"capacity", []core.Node{boundNode("n", 2, "H100", 0, 0)},
			[]trace.Pod{boundPod(1000, 0), boundPod(1000, 0), boundPod(1000, 0)}, 2000},
		// Four GPUs on nodes of two: none fits.
		{"too big for any node", []core.Node{boundNode("a", 2, "H100", 0, 0), boundNode("b", 2, "H100", 0, 0)},
			[]trace.Pod{boundPod(4000, 0)}, 0},
		// CPU-only pods take no GPU share and are left out.
		{"no GPUs asked", []core.Node{boundNode("n", 1, "H100", 1000, 0)},
			[]trace.Pod{boundPod(0, 1000), boundPod(1000, 1000)}, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Bound(tt.nodes, tt.pods)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("bound (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBoundAboveEveryPolicy: on random fleets and pod sequences, the bound
// at each reported level is at least the allocation of every policy there,
// and at most the demand arrived and the capacity.
func TestBoundAboveEveryPolicy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		models := []string{"G1", "G2"}
		var nodes []core.Node
		for i := range rapid.IntRange(1, 6).Draw(t, "nodes") {
			nodes = append(nodes, boundNode(fmt.Sprintf("n%d", i), rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus"),
				rapid.SampledFrom(models).Draw(t, "model"), rapid.Int64Range(1, 8).Draw(t, "cores")*8000, 0))
		}
		var pods []trace.Pod
		for range rapid.IntRange(1, 60).Draw(t, "pods") {
			p := boundPod(rapid.SampledFrom([]int64{0, 100, 250, 470, 500, 650, 810, 1000, 2000, 4000, 8000}).Draw(t, "milli"),
				rapid.SampledFrom([]int64{0, 1000, 4000, 12000}).Draw(t, "cpu"))
			if rapid.IntRange(0, 4).Draw(t, "constrained") == 0 {
				p.Request.GPUModels = []string{rapid.SampledFrom(models).Draw(t, "podModel")}
			}
			pods = append(pods, p)
		}
		seq := FileOrder(pods, 10, capacityOf(nodes))
		report := []float64{0.5, 0.8, 1, 1.2}
		bounds, err := LevelBounds(nodes, seq, report)
		if err != nil {
			t.Fatal(err)
		}
		for _, policy := range Policies() {
			run, err := Packing(PackingConfig{Nodes: nodes, Pods: seq, Policy: policy, Seed: 1, Order: OrderFile, Inflate: 10, Report: report, Bounds: bounds})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range run.Points {
				if p.Bound == nil || *p.Bound+1e-9 < p.Allocation || *p.Bound > min(p.ArrivedExact, 1)+1e-9 {
					t.Fatalf("%s at %g arrived: allocation %g, bound %v (arrived %g), bounds %v", policy, report[i], p.Allocation, p.Bound, p.ArrivedExact, bounds)
				}
			}
		}
	})
}
