package sched

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Packing policies: how the scheduler chooses among the nodes and devices
// where a request fits. PackGPUFleet is the production policy; the others
// are the baselines of the packing experiment (gpufleet sim packing), kept
// in the same code path so that the comparison is fair.
const (
	PackGPUFleet    = "gpufleet"
	PackFGD         = "fgd"
	PackFirstFit    = "firstfit"
	PackBestFit     = "bestfit"
	PackRandom      = "random"
	PackDotProduct  = "dotproduct"
	PackGPUPacking  = "gpupacking"
	PackReservation = "reservation"
)

// Policies lists the packing policies, the production one first.
func Policies() []string {
	return []string{PackGPUFleet, PackFGD, PackFirstFit, PackBestFit, PackRandom, PackDotProduct, PackGPUPacking, PackReservation}
}

// scorer rates one way of placing a request on a node: on device i for a
// fraction, on free devices for whole GPUs (i = -1), or on the host alone
// for a request without GPUs (i = -1). Lower is better.
type scorer interface {
	score(ns *nodeState, req core.Request, i int) float64
}

// newScorer returns the scorer of a policy. mix is the workload the
// fragmentation policies weigh placements against; seed drives random.
func newScorer(policy string, mix *Mix, seed uint64) (scorer, error) {
	switch policy {
	case "", PackGPUFleet, PackReservation:
		return &fillScorer{fragBase: fragBase{mix: mix}}, nil
	case PackFGD:
		return &fgdScorer{fragBase: fragBase{mix: mix}}, nil
	case PackFirstFit:
		return firstFit{}, nil
	case PackBestFit:
		return nodeBestFit{}, nil
	case PackRandom:
		return &randomFit{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}, nil
	case PackDotProduct:
		return dotProduct{}, nil
	case PackGPUPacking:
		return gpuPacking{}, nil
	}
	return nil, fmt.Errorf("unknown packing policy %q (want one of %s)", policy, strings.Join(Policies(), ", "))
}

// share is what req takes of device i of ns, in milli-GPU (0 when i < 0).
func share(ns *nodeState, req core.Request, i int) int64 {
	if i < 0 {
		return 0
	}
	milli, _, _ := req.ShareOn(ns.node.GPUs[i])
	return milli
}

// bestFit is the device-level best fit the scheduler uses wherever only
// feasibility matters (victim search, futures): whole GPUs go to the node
// left with the fewest free devices, a fraction to the device left with the
// least free share.
type bestFit struct{}

func (bestFit) score(ns *nodeState, req core.Request, i int) float64 {
	if i < 0 {
		return float64(ns.freeOf(req) - req.WholeGPUs())
	}
	return float64(1000 - ns.used[i].MilliGPU - share(ns, req, i))
}

// firstFit takes the first node in name order, and its first device that
// fits.
type firstFit struct{}

func (firstFit) score(ns *nodeState, _ core.Request, i int) float64 {
	return float64(ns.pos)*64 + float64(max(i, 0))
}

// nodeBestFit takes the node left with the least free GPU share (then the
// least free CPU), and on it the device left with the least free share.
type nodeBestFit struct{}

func (nodeBestFit) score(ns *nodeState, req core.Request, i int) float64 {
	left := ns.freeMilli() - share(ns, req, i) - int64(req.WholeGPUs())*1000
	dev := int64(0)
	if i >= 0 {
		dev = 1000 - ns.used[i].MilliGPU - share(ns, req, i)
	}
	return float64(left)*1e6 + float64(dev)*1e3 + cpuLeft(ns, req)
}

// cpuLeft is the fraction of the node's CPU left after req, in [0, 1].
func cpuLeft(ns *nodeState, req core.Request) float64 {
	if ns.node.MilliCPU == 0 {
		return 0
	}
	return float64(ns.node.MilliCPU-ns.cpu-req.MilliCPU) / float64(ns.node.MilliCPU)
}

// randomFit takes a feasible node and device at random.
type randomFit struct{ r *rand.Rand }

func (s *randomFit) score(*nodeState, core.Request, int) float64 { return s.r.Float64() }

// dotProduct is Tetris's alignment score: the node whose free resources
// (CPU, memory, GPU, each as a fraction of the node's capacity) point most
// the way the request does; the device is chosen best-fit.
type dotProduct struct{}

func (dotProduct) score(ns *nodeState, req core.Request, i int) float64 {
	n := ns.node
	dot := 0.0
	if n.MilliCPU > 0 {
		dot += float64(req.MilliCPU) * float64(n.MilliCPU-ns.cpu) / float64(n.MilliCPU) / float64(n.MilliCPU)
	}
	if n.MemoryMiB > 0 {
		dot += float64(req.MemoryMiB) * float64(n.MemoryMiB-ns.mem) / float64(n.MemoryMiB) / float64(n.MemoryMiB)
	}
	if g := int64(len(n.GPUs)) * 1000; g > 0 {
		ask := share(ns, req, i) + int64(req.WholeGPUs())*1000
		dot += float64(ask) * float64(ns.freeMilli()) / float64(g) / float64(g)
	}
	dev := 0.0
	if i >= 0 {
		dev = float64(1000-ns.used[i].MilliGPU-share(ns, req, i)) / 1e6
	}
	return -dot + dev
}

// gpuPacking keeps idle devices and idle nodes idle for as long as it can:
// a fraction goes first to a device already in use (the fullest), then to
// an idle device of a node in use, then to an idle node; whole GPUs go to
// the node with the most devices in use.
type gpuPacking struct{}

func (gpuPacking) score(ns *nodeState, req core.Request, i int) float64 {
	inUse := len(ns.used) - ns.freeWhole
	if i < 0 {
		return -float64(inUse)
	}
	u := ns.used[i]
	switch {
	case u.MilliGPU > 0:
		return float64(1000 - u.MilliGPU) // 1..1000: the fullest device first
	case inUse > 0:
		return 2000 - float64(inUse)
	}
	return 3000
}

// Mix is the mix of requests a cluster sees, by shape. The fragmentation
// policies weigh a placement by what it does to the chance of each shape
// still fitting. The scheduler builds it from the running and pending
// workloads of its snapshot; the simulator from the requests seen so far.
type Mix struct {
	group bool
	hosts [][2]int64 // distinct node sizes (CPU, memory), for grouping
	types []mixType
	index map[mixKey]int
	total float64
	// active are the shapes that are weighed, the most common first, and
	// their weights; recomputed when the total doubles (epoch).
	active  []int
	weights []float64
	nextAt  float64
	epoch   int
}

type mixKey struct {
	milli    int64
	cpu, mem int64
	models   string
	fits     uint64 // grouped: the host sizes the request fits
}

type mixType struct {
	milli  int64 // per device: < 1000 for a fraction, 1000 for whole devices
	whole  int   // whole devices, 0 for a fraction
	cpu    int64
	mem    int64
	models []string
	count  float64
	// cpuMax and memMax are the most any request counted in the shape
	// asks: a grouped shape's CPU and memory.
	cpuMax, memMax int64
	// reciprocals of milli, cpu and mem, for divBy.
	invMilli, invCPU, invMem float64
}

// maxMixShapes bounds the shapes weighed: the most common ones carry the
// measure, and the cost of a score grows with their number.
const maxMixShapes = 64

// NewMix returns an empty mix. With group, requests are counted by their
// GPU shape (share or device count, and models) and the node sizes they
// fit (see SetHosts), and each shape's CPU and memory are the most any of
// its requests asks: rare big requests (8 GPUs with 64 or 88 cores) then
// weigh together, as they compete for the same nodes, while those only the
// largest nodes hold (120 cores) stay apart. (The mean would be wrong: a
// group of 16 cores with no memory and 128 GiB with no CPU averages to a
// request that fits a node neither fits.)
func NewMix(group bool) *Mix { return &Mix{index: map[mixKey]int{}, nextAt: 1, group: group} }

// SetHosts tells a grouping mix the sizes of the cluster's nodes: requests
// of one GPU shape are grouped with those that fit the same node sizes, so
// that a group's mean CPU and memory fit where its members fit.
func (m *Mix) SetHosts(nodes []core.Node) {
	for i := range nodes {
		m.addHost(&nodes[i])
	}
}

// addHost is SetHosts for one node.
func (m *Mix) addHost(n *core.Node) {
	cpu, mem := n.MilliCPU, n.MemoryMiB
	if cpu == 0 {
		cpu = 1 << 62
	}
	if mem == 0 {
		mem = 1 << 62
	}
	h := [2]int64{cpu, mem}
	if len(n.GPUs) > 0 && !slices.Contains(m.hosts, h) {
		m.hosts = append(m.hosts, h)
	}
}

// Add counts n more requests of req's shape. Requests without GPUs, and
// those given as GPU memory alone, are not counted: they leave no GPU
// fragments of their own.
func (m *Mix) Add(req core.Request, n float64) {
	m.add(req, n)
}

// add is Add, returning the place of req's shape in m.types (-1: not
// counted), for addAt.
func (m *Mix) add(req core.Request, n float64) int {
	if req.MilliGPU <= 0 || n <= 0 {
		return -1
	}
	k := mixKey{milli: req.MilliGPU, cpu: req.MilliCPU, mem: req.MemoryMiB, models: strings.Join(req.GPUModels, "|")}
	if m.group {
		k.cpu, k.mem = 0, 0
		for b, h := range m.hosts {
			if req.MilliCPU <= h[0] && req.MemoryMiB <= h[1] && b < 64 {
				k.fits |= 1 << b
			}
		}
	}
	i, ok := m.index[k]
	if !ok {
		t := mixType{milli: min(req.MilliGPU, 1000), cpu: req.MilliCPU, mem: req.MemoryMiB, models: req.GPUModels}
		if req.MilliGPU >= 1000 {
			t.whole = int(req.MilliGPU / 1000)
		}
		t.invMilli = 1 / float64(t.milli)
		t.invCPU = 1 / float64(max(t.cpu, 1))
		t.invMem = 1 / float64(max(t.mem, 1))
		i = len(m.types)
		m.index[k] = i
		m.types = append(m.types, t)
	}
	m.addAt(i, req, n)
	return i
}

// addAt is add for a request whose shape is known to be at m.types[i]
// (add returned i for a request of the same shape and count).
func (m *Mix) addAt(i int, req core.Request, n float64) {
	m.types[i].count += n
	m.types[i].cpuMax = max(m.types[i].cpuMax, req.MilliCPU)
	m.types[i].memMax = max(m.types[i].memMax, req.MemoryMiB)
	m.total += n
	if m.total >= m.nextAt {
		m.reweigh()
		m.nextAt = m.total * 2
	}
}

// reweigh picks the active shapes and their weights (their share of the
// requests counted).
func (m *Mix) reweigh() {
	m.epoch++
	if m.group {
		for i := range m.types {
			t := &m.types[i]
			t.cpu, t.mem = t.cpuMax, t.memMax

			t.invCPU = 1 / float64(max(t.cpu, 1))
			t.invMem = 1 / float64(max(t.mem, 1))
		}
	}
	order := make([]int, len(m.types))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(m.types[b].count, m.types[a].count) })
	if len(order) > maxMixShapes {
		order = order[:maxMixShapes]
	}
	var sum float64
	for _, i := range order {
		sum += m.types[i].count
	}
	m.active, m.weights = order, make([]float64, len(order))
	for j, i := range order {
		m.weights[j] = m.types[i].count / sum
	}
}
