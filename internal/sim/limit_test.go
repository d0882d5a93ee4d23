package sim

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestHolesBesideBigFractions pins down why no policy that places every
// pod that fits can leave less than about 0.7 of the unallocated share
// FGD's authors published on the gpushare workloads (docs/SIMULATOR.md,
// "How far gpufleet is from FGD"): at 100% arrived demand, the 0.19 of a
// GPU left beside each placed 0.81 share (a third of those workloads'
// fractional pods), which only the rare pods of 0.19 or less can use, is
// by itself about 0.7 of FGD's unallocated share, whatever the policy:
// each places every 0.81 that arrives while some device has 0.81 free.
func TestHolesBesideBigFractions(t *testing.T) {
	_, published := authorsPublished(t)
	const workload, seed = "gpushare100", 42
	nodes, pods := readTrace(t, filepath.Join(sharedTrace, "openb_node_list_gpu_node.csv"), filepath.Join(sharedTrace, "openb_pod_list_"+workload+".csv"))
	var capacity int64
	for _, n := range nodes {
		capacity += int64(len(n.GPUs)) * 1000
	}
	seq, err := AuthorsOrder(pods, seed, 1.3, capacity)
	if err != nil {
		t.Fatal(err)
	}
	fgdUnallocated := 100 - published[fmt.Sprintf("%s,%d", workload, seed)]["fgd_100"]
	for _, policy := range []string{PolicyGPUFleet, PolicyFGD, "firstfit"} {
		p, observe, err := newPlacer(nodes, policy, seed, pods)
		if err != nil {
			t.Fatal(err)
		}
		var arrived, failed int64
		for _, pod := range seq {
			if arrived >= capacity {
				break
			}
			arrived += pod.GPUs()
			if observe {
				p.(interface{ Observe(core.Request) }).Observe(pod.Request)
			}
			if _, _, ok := p.Place(pod.Request); !ok {
				failed += pod.GPUs()
			}
		}
		var free, beside int64
		for i := range p.Len() {
			for _, u := range p.Node(i).Used {
				free += 1000 - u.MilliGPU
				if u.MilliGPU == 810 {
					beside += 1000 - u.MilliGPU
				}
			}
		}
		// At 100% arrived the free capacity is what failed, less the
		// overshoot of the last pod.
		if pct(free, capacity) < pct(failed, capacity)-0.05 {
			t.Errorf("%s: free %.2f%% < failed %.2f%%", policy, pct(free, capacity), pct(failed, capacity))
		}
		holes := pct(beside, capacity)
		if share := holes / fgdUnallocated; share < 0.67 || share > 0.75 {
			t.Errorf("%s: the holes beside 0.81 shares are %.2f%% of the capacity, %.2f of FGD's unallocated %.2f%%; want 0.67–0.75", policy, holes, share, fgdUnallocated)
		}
	}
}

func pct(v, capacity int64) float64 { return 100 * float64(v) / float64(capacity) }
