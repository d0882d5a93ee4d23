package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Reasons a workload stays pending.
const (
	ReasonUnschedulable = "Unschedulable"
)

// Schedule decides which pending workloads start now and on which devices.
// The snapshot is not modified. Steps:
//
//  1. build this cycle's view of every node: what each device holds, and
//     summaries (free whole devices, largest free share) that let a full
//     node be skipped at once;
//  2. take pending workloads in submission order;
//  3. for each, try every schedulable node: whole GPUs on the node left with
//     the fewest free devices, a fraction on the device left with the least
//     free share (packing keeps whole devices free for whole requests);
//  4. record the placement (and update that node's view), or a decision
//     saying why not. A request shape that fitted nowhere is not tried again
//     in the same cycle: usage only grows within a cycle.
func Schedule(snap *core.Snapshot, now time.Time) core.Plan {
	_ = now
	nodes := make([]*nodeState, len(snap.Nodes))
	for i, n := range snap.Nodes {
		nodes[i] = newNodeState(n, snap.Usage[n.Name])
	}
	slices.SortFunc(nodes, func(a, b *nodeState) int { return cmp.Compare(a.node.Name, b.node.Name) })
	pending := slices.Clone(snap.Pending)
	slices.SortStableFunc(pending, func(a, b *core.Workload) int { return cmp.Compare(a.Seq, b.Seq) })

	var plan core.Plan
	noFit := map[string]string{}
	for _, w := range pending {
		key := shapeKey(w.Request)
		if why, ok := noFit[key]; ok {
			plan.Unplaced = append(plan.Unplaced, core.Decision{Workload: w.ID, Reason: ReasonUnschedulable, Message: why})
			continue
		}
		as, why := place(nodes, w.Request)
		if as == nil {
			noFit[key] = why
			plan.Unplaced = append(plan.Unplaced, core.Decision{Workload: w.ID, Reason: ReasonUnschedulable, Message: why})
			continue
		}
		plan.Placements = append(plan.Placements, core.Placement{Workload: w.ID, Assignments: as})
	}
	return plan
}

func shapeKey(r core.Request) string {
	return fmt.Sprintf("%d/%d/%d/%d/%q", r.MilliGPU, r.GPUMemoryMiB, r.MilliCPU, r.MemoryMiB, r.GPUModels)
}

// nodeState is one node as this cycle sees it.
type nodeState struct {
	node   *core.Node
	used   []core.GPUUse // by position in node.GPUs
	cpu    int64
	mem    int64
	models []string // distinct device models
	// Summaries, kept current by add: devices with nothing allocated, and
	// the largest free share of any device.
	freeWhole int
	maxFree   int64
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

func (ns *nodeState) summarise() {
	ns.freeWhole, ns.maxFree = 0, 0
	for _, u := range ns.used {
		if u.MilliGPU == 0 && u.MemoryMiB == 0 {
			ns.freeWhole++
		}
		ns.maxFree = max(ns.maxFree, 1000-u.MilliGPU)
	}
}

func (ns *nodeState) add(req core.Request, as []core.Assignment) {
	for _, a := range as {
		for i, g := range ns.node.GPUs {
			if g.Index == a.GPUIndex {
				ns.used[i].MilliGPU += a.MilliGPU
				ns.used[i].MemoryMiB += a.MemoryMiB
			}
		}
	}
	ns.cpu += req.MilliCPU
	ns.mem += req.MemoryMiB
	ns.summarise()
}

// choice is the best place found so far: a node and, for a fraction, the
// device (position in node.GPUs); lower score is better.
type choice struct {
	ns    *nodeState
	gpu   int
	score int64
}

// place finds the best assignment of req, records it in the chosen node's
// view, or explains why there is none. Ties go to the first node by name.
// nodes must be sorted by name.
func place(nodes []*nodeState, req core.Request) ([]core.Assignment, string) {
	var best choice
	var why tally
	for _, ns := range nodes {
		c, reason := onNode(ns, req)
		if reason != "" {
			why.add(reason)
			continue
		}
		if best.ns == nil || c.score < best.score {
			best = c
			if c.score == 0 {
				break // a perfect fit; nodes are in name order, so ties go to the first
			}
		}
	}
	if best.ns == nil {
		return nil, why.message(len(nodes), req)
	}
	as := assignments(best, req)
	best.ns.add(req, as)
	return as, ""
}

// onNode scores req on one node without allocating; reason is non-empty
// when it does not fit.
func onNode(ns *nodeState, req core.Request) (choice, string) {
	n := ns.node
	switch {
	case !n.Schedulable:
		return choice{}, "not schedulable"
	case !slices.ContainsFunc(ns.models, req.ModelAllowed):
		return choice{}, "no GPU of the requested model"
	case n.MilliCPU > 0 && ns.cpu+req.MilliCPU > n.MilliCPU:
		return choice{}, "not enough CPU"
	case n.MemoryMiB > 0 && ns.mem+req.MemoryMiB > n.MemoryMiB:
		return choice{}, "not enough host memory"
	}
	if want := req.WholeGPUs(); want > 0 {
		if ns.freeWhole < want { // fewer free devices of any model
			return choice{}, "not enough free whole GPUs"
		}
		free := 0
		for i, g := range n.GPUs {
			if u := ns.used[i]; req.ModelAllowed(g.Model) && u.MilliGPU == 0 && u.MemoryMiB == 0 {
				free++
			}
		}
		if free < want {
			return choice{}, "not enough free whole GPUs"
		}
		return choice{ns: ns, score: int64(free - want)}, ""
	}
	if req.MilliGPU > 0 && ns.maxFree < req.MilliGPU {
		return choice{}, "no GPU with enough free share"
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
		return choice{}, "no GPU with enough free share"
	}
	return best, ""
}

// assignments builds the devices of the chosen placement.
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

// tally counts why nodes were rejected, for the pending message.
type tally struct {
	counts map[string]int
	order  []string
}

func (t *tally) add(reason string) {
	if t.counts == nil {
		t.counts = map[string]int{}
	}
	if t.counts[reason] == 0 {
		t.order = append(t.order, reason)
	}
	t.counts[reason]++
}

func (t *tally) message(nodes int, req core.Request) string {
	if nodes == 0 {
		return "no nodes are registered"
	}
	parts := make([]string, 0, len(t.order))
	for _, r := range t.order {
		parts = append(parts, fmt.Sprintf("%d %s", t.counts[r], r))
	}
	return fmt.Sprintf("no node fits %s: %d nodes considered (%s)", describe(req), nodes, strings.Join(parts, ", "))
}

func describe(r core.Request) string {
	var s string
	switch {
	case r.WholeGPUs() > 0:
		s = fmt.Sprintf("%d GPUs", r.WholeGPUs())
	case r.MilliGPU > 0:
		s = fmt.Sprintf("%d milli-GPU", r.MilliGPU)
	default:
		s = fmt.Sprintf("%d MiB of GPU memory", r.GPUMemoryMiB)
	}
	if len(r.GPUModels) > 0 {
		s += " of model " + strings.Join(r.GPUModels, " or ")
	}
	return s
}
