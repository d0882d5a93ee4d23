package sched

import (
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// nodeState is one node as this cycle sees it.
type nodeState struct {
	node   *core.Node
	used   []core.GPUUse // by position in node.GPUs
	cpu    int64
	mem    int64
	models []string // distinct device models
	// Summaries, kept current by add and remove: devices with nothing
	// allocated, and the largest free share of any device.
	freeWhole int
	maxFree   int64
	// reservedFor is set when the node is held for a workload (a starving
	// one, or a preemptor waiting for its victims); workloads after it in
	// this cycle's order do not use the node.
	reservedFor core.WorkloadID
	// running lists the workloads running here, for preemption.
	running []*runningWorkload
}

func newNodeState(n *core.Node, u *core.NodeUsage) *nodeState {
	ns := &nodeState{node: n, used: make([]core.GPUUse, len(n.GPUs))}
	for i, g := range n.GPUs {
		if u != nil {
			ns.used[i] = u.GPUs[g.Index]
		}
		if !slices.Contains(ns.models, g.Model) {
			ns.models = append(ns.models, g.Model)
		}
	}
	if u != nil {
		ns.cpu, ns.mem = u.MilliCPU, u.MemoryMiB
	}
	ns.summarise()
	return ns
}

func (ns *nodeState) clone() *nodeState {
	c := *ns
	c.used = slices.Clone(ns.used)
	return &c
}

func (ns *nodeState) summarise() {
	ns.freeWhole, ns.maxFree = 0, 0
	for _, u := range ns.used {
		if u.MilliGPU == 0 && u.MemoryMiB == 0 {
			ns.freeWhole++
		}
		ns.maxFree = max(ns.maxFree, 1000-u.MilliGPU)
	}
}

// add records the part of a placement that is on this node (sign +1), or
// removes it (-1): its shares of devices, and host CPU and memory once per
// replica placed here.
func (ns *nodeState) add(req core.Request, as []core.Assignment, sign int64) {
	on, replicas := core.OnNode(as, ns.node.Name)
	for _, a := range on {
		for i, g := range ns.node.GPUs {
			if g.Index == a.GPUIndex {
				ns.used[i].MilliGPU += sign * a.MilliGPU
				ns.used[i].MemoryMiB += sign * a.MemoryMiB
			}
		}
	}
	ns.cpu += sign * req.MilliCPU * int64(replicas)
	ns.mem += sign * req.MemoryMiB * int64(replicas)
	ns.summarise()
}

// choice is a way to place a request on a node: for a fraction, the device
// (position in node.GPUs); lower score is better.
type choice struct {
	ns    *nodeState
	gpu   int
	score int64
}

// Reasons a node is not used for a request, as counted in explanations.
const (
	whyUnschedulable = "not schedulable"
	whyModel         = "no GPU of the requested model"
	whyCPU           = "not enough CPU"
	whyMemory        = "not enough host memory"
	whyWhole         = "not enough free whole GPUs"
	whyShare         = "no GPU with enough free share"
	whyReserved      = "reserved for another workload"
	whyNoGPU         = "no GPUs"
	whySelector      = "labels do not match the node selector"
)

// onNode scores req on one node without allocating; reason is non-empty
// when it does not fit. It does not look at reservations.
func onNode(ns *nodeState, req core.Request) (choice, string) {
	n := ns.node
	switch {
	case !n.Schedulable:
		return choice{}, whyUnschedulable
	case len(n.GPUs) == 0:
		return choice{}, whyNoGPU
	case len(req.NodeSelector) > 0 && !n.Matches(req.NodeSelector):
		return choice{}, whySelector
	case !slices.ContainsFunc(ns.models, req.ModelAllowed):
		return choice{}, whyModel
	case n.MilliCPU > 0 && ns.cpu+req.MilliCPU > n.MilliCPU:
		return choice{}, whyCPU
	case n.MemoryMiB > 0 && ns.mem+req.MemoryMiB > n.MemoryMiB:
		return choice{}, whyMemory
	}
	if want := req.WholeGPUs(); want > 0 {
		if ns.freeWhole < want { // fewer free devices of any model
			return choice{}, whyWhole
		}
		free := ns.freeOf(req)
		if free < want {
			return choice{}, whyWhole
		}
		return choice{ns: ns, score: int64(free - want)}, ""
	}
	if req.MilliGPU > 0 && ns.maxFree < req.MilliGPU {
		return choice{}, whyShare
	}
	best := choice{ns: ns, gpu: -1}
	for i, g := range n.GPUs {
		if !req.ModelAllowed(g.Model) {
			continue
		}
		milli, mem, ok := req.ShareOn(g)
		if !ok {
			continue
		}
		u := ns.used[i]
		if u.MilliGPU+milli > 1000 || u.MemoryMiB+mem > g.MemoryMiB {
			continue
		}
		if left := 1000 - u.MilliGPU - milli; best.gpu < 0 || left < best.score {
			best.gpu, best.score = i, left
		}
	}
	if best.gpu < 0 {
		return choice{}, whyShare
	}
	return best, ""
}

// freeOf counts the wholly free devices of a model the request accepts.
func (ns *nodeState) freeOf(req core.Request) int {
	free := 0
	for i, g := range ns.node.GPUs {
		if u := ns.used[i]; req.ModelAllowed(g.Model) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
			free++
		}
	}
	return free
}

// assignments builds the devices of a chosen placement.
func assignments(c choice, req core.Request) []core.Assignment {
	n := c.ns.node
	if want := req.WholeGPUs(); want > 0 {
		as := make([]core.Assignment, 0, want)
		for i, g := range n.GPUs {
			if u := c.ns.used[i]; len(as) < want && req.ModelAllowed(g.Model) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
				as = append(as, core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB})
			}
		}
		return as
	}
	g := n.GPUs[c.gpu]
	milli, mem, _ := req.ShareOn(g)
	return []core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}}
}

// runningWorkload is a running workload with what preemption needs to know
// of it, looked up once per cycle.
type runningWorkload struct {
	w     *core.Workload
	class core.PriorityClass
	known bool // its class exists
	team  *teamState
	held  int64
	// over is true when it runs beyond its team's guarantee.
	over bool
	// chosen is true once it is a victim in this cycle.
	chosen bool
}
