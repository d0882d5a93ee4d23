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
//  1. copy the usage so that placements made in this cycle count;
//  2. take pending workloads in submission order;
//  3. for each, try every schedulable node: whole GPUs on the node with the
//     fewest free devices that still has enough, a fraction on the device
//     with the least room left that fits it;
//  4. record the placement (and its usage), or a decision saying why not.
func Schedule(snap *core.Snapshot, now time.Time) core.Plan {
	_ = now
	usage := make(map[core.NodeName]*core.NodeUsage, len(snap.Nodes))
	for _, n := range snap.Nodes {
		if u := snap.Usage[n.Name]; u != nil {
			usage[n.Name] = u.Clone()
		} else {
			usage[n.Name] = &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
		}
	}
	pending := slices.Clone(snap.Pending)
	slices.SortStableFunc(pending, func(a, b *core.Workload) int { return cmp.Compare(a.Seq, b.Seq) })

	var plan core.Plan
	for _, w := range pending {
		as, why := place(snap.Nodes, usage, w.Request)
		if as == nil {
			plan.Unplaced = append(plan.Unplaced, core.Decision{Workload: w.ID, Reason: ReasonUnschedulable, Message: why})
			continue
		}
		usage[as[0].Node].Add(w.Request, as)
		plan.Placements = append(plan.Placements, core.Placement{Workload: w.ID, Assignments: as})
	}
	return plan
}

// candidate is one way to place a request on a node, with a score: lower is
// better.
type candidate struct {
	as    []core.Assignment
	score int64
	node  core.NodeName
}

// place finds the best assignment of req, or explains why there is none.
func place(nodes []*core.Node, usage map[core.NodeName]*core.NodeUsage, req core.Request) ([]core.Assignment, string) {
	var best *candidate
	var why tally
	for _, n := range nodes {
		if !n.Schedulable {
			why.add("not schedulable")
			continue
		}
		c, reason := onNode(n, usage[n.Name], req)
		if c == nil {
			why.add(reason)
			continue
		}
		if best == nil || c.score < best.score || (c.score == best.score && c.node < best.node) {
			best = c
		}
	}
	if best == nil {
		return nil, why.message(len(nodes), req)
	}
	return best.as, ""
}

func onNode(n *core.Node, u *core.NodeUsage, req core.Request) (*candidate, string) {
	if n.MilliCPU > 0 && u.MilliCPU+req.MilliCPU > n.MilliCPU {
		return nil, "not enough CPU"
	}
	if n.MemoryMiB > 0 && u.MemoryMiB+req.MemoryMiB > n.MemoryMiB {
		return nil, "not enough host memory"
	}
	modelOK := false
	if want := req.WholeGPUs(); want > 0 {
		var free []core.GPU
		for _, g := range n.GPUs {
			if !req.ModelAllowed(g.Model) {
				continue
			}
			modelOK = true
			if gu := u.GPUs[g.Index]; gu.MilliGPU == 0 && gu.MemoryMiB == 0 {
				free = append(free, g)
			}
		}
		if !modelOK {
			return nil, "no GPU of the requested model"
		}
		if len(free) < want {
			return nil, "not enough free whole GPUs"
		}
		as := make([]core.Assignment, want)
		for i, g := range free[:want] {
			as[i] = core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB}
		}
		// Prefer the node left with the fewest free devices (packing).
		return &candidate{as: as, score: int64(len(free) - want), node: n.Name}, ""
	}
	// A fraction: the device with the least room left after placing it.
	var best *candidate
	for _, g := range n.GPUs {
		if !req.ModelAllowed(g.Model) {
			continue
		}
		modelOK = true
		milli, mem, ok := req.ShareOn(g)
		if !ok {
			continue
		}
		gu := u.GPUs[g.Index]
		if gu.MilliGPU+milli > 1000 || gu.MemoryMiB+mem > g.MemoryMiB {
			continue
		}
		left := 1000 - gu.MilliGPU - milli
		if best == nil || int64(left) < best.score {
			best = &candidate{as: []core.Assignment{{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}}, score: left, node: n.Name}
		}
	}
	if !modelOK {
		return nil, "no GPU of the requested model"
	}
	if best == nil {
		return nil, "no GPU with enough free share"
	}
	return best, ""
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
