package sim

import (
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// The baselines as the FGD authors define them (their simulator,
// hkust-adsl/kubernetes-scheduler-simulator), and the variants of the
// scheduler's own code they replaced under these names.
const (
	// PolicyBestFit is the authors' BestFit: each feasible node scores
	// int((1 − (½·(CPU left − CPU asked)/128 cores + ½·(GPU left − GPU
	// asked)/8 GPUs)) × 100), an integer from 0 to 100, and the highest
	// wins, the smallest node name on a tie (as the Kubernetes scheduler
	// vendored in their simulator chooses; under OrderAuthors the name
	// their simulator gives the node, authorsNodeNames); a fraction goes
	// on the device with the least free share that holds it, whole GPUs
	// on the first free devices.
	PolicyBestFit = "bestfit"
	// PolicyBestFitGPU is the scheduler's best fit (sched.PackBestFit):
	// the node left with the least free GPU share, then device, then CPU.
	PolicyBestFitGPU = "bestfit-gpu"
	// PolicyFGD is the scheduler's FGD scorer (sched.PackFGD) given the mix
	// of the whole trace before the run, as the authors' FGD takes its
	// typical pods.
	PolicyFGD = "fgd"
	// PolicyFGDOnline is the same scorer learning the mix online, from the
	// pods arrived so far.
	PolicyFGDOnline = "fgd-online"
)

// Authors' BestFit normalisers: the largest node's CPU and GPUs.
const (
	bestFitMaxMilliCPU = 128000
	bestFitMaxMilliGPU = 8000
)

// placer is what a packing run places with: a sched.Packer, or the
// authors' BestFit.
type placer interface {
	Place(req core.Request) (node int, as []core.Assignment, ok bool)
	Node(i int) sched.NodeView
	Len() int
}

// authorsBestFit is the FGD authors' BestFit score plugin with their
// device choice. Feasibility is the scheduler's (host CPU and memory, GPU
// model, share and GPU memory on the device, free devices for whole GPUs);
// each placement is checked by core.Fits, the fit check the store applies
// at commit, before it is recorded, and the first that fails it stops the run.
type authorsBestFit struct {
	nodes []core.Node
	views []sched.NodeView
	err   error
	// tie, when set, are the nodes' names in the authors' run, index for
	// index with nodes (see tieName).
	tie []string
}

func newAuthorsBestFit(nodes []core.Node) *authorsBestFit {
	b := &authorsBestFit{nodes: nodes, views: make([]sched.NodeView, len(nodes))}
	for i := range nodes {
		b.views[i] = sched.NodeView{Node: &nodes[i], Used: make([]core.GPUUse, len(nodes[i].GPUs))}
	}
	return b
}

func (b *authorsBestFit) Len() int                  { return len(b.nodes) }
func (b *authorsBestFit) Node(i int) sched.NodeView { return b.views[i] }

// gpuAsk is the GPU request in milli-GPU as the authors count it: the
// share for a fraction, 1000 per device for whole GPUs.
func gpuAsk(req core.Request) int64 {
	if w := req.WholeGPUs(); w > 0 {
		return int64(w) * 1000
	}
	return max(req.MilliGPU, 0)
}

// bestFitScore is the authors' score of placing req on v (higher is
// better), before their min-max normalisation, which keeps the order.
func bestFitScore(v sched.NodeView, req core.Request) int64 {
	var gpuLeft int64
	for _, u := range v.Used {
		gpuLeft += 1000 - u.MilliGPU
	}
	cpuLeft := v.Node.MilliCPU - v.MilliCPU
	s := float64(cpuLeft-req.MilliCPU)/bestFitMaxMilliCPU*0.5 + float64(gpuLeft-gpuAsk(req))/bestFitMaxMilliGPU*0.5
	return int64((1 - s) * 100)
}

// devices returns where req would go on v, and false when it does not fit.
func devices(v sched.NodeView, req core.Request) ([]core.Assignment, bool) {
	n := v.Node
	gpus := req.MilliGPU > 0 || req.GPUMemoryMiB > 0 || len(req.GPUModels) > 0
	switch {
	case !n.Schedulable, len(n.GPUs) == 0 && gpus,
		!n.Matches(req.NodeSelector),
		n.MilliCPU > 0 && v.MilliCPU+req.MilliCPU > n.MilliCPU,
		n.MemoryMiB > 0 && v.MemoryMiB+req.MemoryMiB > n.MemoryMiB:
		return nil, false
	}
	if !gpus {
		return nil, true
	}
	assign := func(i int) core.Assignment {
		g := n.GPUs[i]
		milli, mem, _ := req.ShareOn(g)
		return core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}
	}
	if want := req.WholeGPUs(); want > 0 {
		var as []core.Assignment
		for i, g := range n.GPUs {
			if u := v.Used[i]; len(as) < want && g.Usable() && req.ModelAllowed(g.Model) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
				as = append(as, assign(i))
			}
		}
		return as, len(as) == want
	}
	best := -1
	for i, g := range n.GPUs {
		if !g.Usable() || !req.ModelAllowed(g.Model) {
			continue
		}
		milli, mem, ok := req.ShareOn(g)
		u := v.Used[i]
		if !ok || u.MilliGPU+milli > 1000 || u.MemoryMiB+mem > g.MemoryMiB {
			continue
		}
		if best < 0 || u.MilliGPU > v.Used[best].MilliGPU {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	return []core.Assignment{assign(best)}, true
}

func (b *authorsBestFit) Place(req core.Request) (int, []core.Assignment, bool) {
	if b.err != nil {
		return -1, nil, false
	}
	req.Replicas = 0
	best, bestScore := -1, int64(0)
	var bestAs []core.Assignment
	for i, v := range b.views {
		as, ok := devices(v, req)
		if !ok {
			continue
		}
		s := bestFitScore(v, req)
		if best < 0 || s > bestScore || (s == bestScore && b.tieName(i) < b.tieName(best)) {
			best, bestScore, bestAs = i, s, as
		}
	}
	if best < 0 {
		return -1, nil, false
	}
	v := &b.views[best]
	usage := core.NodeUsage{GPUs: map[int]core.GPUUse{}, MilliCPU: v.MilliCPU, MemoryMiB: v.MemoryMiB}
	for i, g := range v.Node.GPUs {
		usage.GPUs[g.Index] = v.Used[i]
	}
	if err := core.Fits(v.Node, &usage, req, bestAs); err != nil {
		b.err = fmt.Errorf("bestfit placed a pod where it does not fit: %w", err)
		return -1, nil, false
	}
	for _, a := range bestAs {
		for i, g := range v.Node.GPUs {
			if g.Index == a.GPUIndex {
				v.Used[i].MilliGPU += a.MilliGPU
				v.Used[i].MemoryMiB += a.MemoryMiB
			}
		}
	}
	v.MilliCPU += req.MilliCPU
	v.MemoryMiB += req.MemoryMiB
	return best, bestAs, true
}

// tieName is the name node i's ties are settled by: the name the
// authors' simulator gives it when the run replays their sequence
// (authorsNodeNames), its own otherwise.
func (b *authorsBestFit) tieName(i int) string {
	if b.tie != nil {
		return b.tie[i]
	}
	return string(b.nodes[i].Name)
}
