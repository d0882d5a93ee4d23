package core

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// GPUUse is what is allocated on one device.
type GPUUse struct {
	MilliGPU  int64 `json:"milliGPU"`
	MemoryMiB int64 `json:"memoryMiB"`
}

// NodeUsage is what is allocated on one node: per device (by GPU index) and
// host CPU and memory.
type NodeUsage struct {
	GPUs      map[int]GPUUse `json:"gpus"`
	MilliCPU  int64          `json:"milliCPU"`
	MemoryMiB int64          `json:"memoryMiB"`
}

// Add records what a workload holds on one node: its assignments on that
// node, and its host CPU and memory once for every replica placed there.
func (u *NodeUsage) Add(node NodeName, req Request, as []Assignment) {
	if u.GPUs == nil {
		u.GPUs = map[int]GPUUse{}
	}
	// As OnNode counts, without its allocations: a snapshot adds every
	// running workload, every cycle.
	replicas := 0
	for i, a := range as {
		if a.Node != node {
			continue
		}
		g := u.GPUs[a.GPUIndex]
		g.MilliGPU += a.MilliGPU
		g.MemoryMiB += a.MemoryMiB
		u.GPUs[a.GPUIndex] = g
		if !sameReplicaBefore(as, i) {
			replicas++
		}
	}
	u.MilliCPU += req.MilliCPU * int64(replicas)
	u.MemoryMiB += req.MemoryMiB * int64(replicas)
}

// OnNode returns the assignments on node and how many replicas they belong
// to.
func OnNode(as []Assignment, node NodeName) (on []Assignment, replicas int) {
	seen := map[int]bool{}
	for _, a := range as {
		if a.Node != node {
			continue
		}
		on = append(on, a)
		if !seen[a.Replica] {
			seen[a.Replica] = true
			replicas++
		}
	}
	return on, replicas
}

// FirstOnNode reports whether as[i] is the first assignment of as on its
// node: ranging over as and keeping those, a caller visits the nodes of
// Nodes(as), in its order, without a slice made for them. A placement
// lists a node's devices together, so the one before answers most calls.
func FirstOnNode(as []Assignment, i int) bool {
	if i > 0 && as[i-1].Node == as[i].Node {
		return false
	}
	return !slices.ContainsFunc(as[:i], func(b Assignment) bool { return b.Node == as[i].Node })
}

// sameReplicaBefore reports whether an assignment before as[i] is of the
// same replica on the same node (as FirstOnNode, the one before first).
func sameReplicaBefore(as []Assignment, i int) bool {
	same := func(b Assignment) bool { return b.Node == as[i].Node && b.Replica == as[i].Replica }
	return i > 0 && same(as[i-1]) || slices.ContainsFunc(as[:i], same)
}

// Nodes lists the distinct nodes of a placement, in order of appearance.
func Nodes(as []Assignment) []NodeName {
	var out []NodeName
	for _, a := range as {
		if !slices.Contains(out, a.Node) {
			out = append(out, a.Node)
		}
	}
	return out
}

// Clone returns a deep copy.
func (u *NodeUsage) Clone() *NodeUsage {
	c := *u
	c.GPUs = make(map[int]GPUUse, len(u.GPUs))
	for k, v := range u.GPUs {
		c.GPUs[k] = v
	}
	return &c
}

// ShareOn converts a request for one device into the milli-GPU and memory it
// takes on g. A whole-GPU request takes all of the device. A fraction takes
// that fraction of the device's memory; a memory request takes the matching
// fraction of the device, rounded up. ok is false when the request cannot fit
// on g even when g is free.
func (r Request) ShareOn(g GPU) (milli, memMiB int64, ok bool) {
	switch {
	case r.MilliGPU >= 1000:
		return 1000, g.MemoryMiB, true
	case r.MilliGPU > 0:
		// g.MemoryMiB * r.MilliGPU / 1000, split so that it cannot overflow.
		return r.MilliGPU, g.MemoryMiB/1000*r.MilliGPU + g.MemoryMiB%1000*r.MilliGPU/1000, true
	case r.GPUMemoryMiB > 0 && g.MemoryMiB > 0 && r.GPUMemoryMiB <= g.MemoryMiB:
		// ⌈r.GPUMemoryMiB * 1000 / g.MemoryMiB⌉ in 128 bits; the quotient
		// is at most 1000, so Div64 cannot overflow.
		hi, lo := bits.Mul64(uint64(r.GPUMemoryMiB), 1000)
		m, rem := bits.Div64(hi, lo, uint64(g.MemoryMiB))
		if rem != 0 {
			m++
		}
		return int64(m), r.GPUMemoryMiB, true
	}
	return 0, 0, false
}

// ModelAllowed reports whether the request accepts a device of this model.
// An empty list accepts every model; a listed name matches when it equals the
// model or is contained in it, case-insensitively ("H100" accepts
// "NVIDIA H100 80GB HBM3").
func (r Request) ModelAllowed(model string) bool {
	if len(r.GPUModels) == 0 {
		return true
	}
	for _, m := range r.GPUModels {
		if containsFold(model, m) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	return sub != "" && strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// FitError says why a set of assignments does not fit on a node.
type FitError struct {
	Node     NodeName
	GPUIndex int // -1 when the problem is not one device
	Problem  string
}

func (e *FitError) Error() string {
	if e.GPUIndex >= 0 {
		return fmt.Sprintf("node %s gpu %d: %s", e.Node, e.GPUIndex, e.Problem)
	}
	return fmt.Sprintf("node %s: %s", e.Node, e.Problem)
}

// Fits checks that a workload's request, placed as the given assignments
// on this node (one or more replicas of it), fits next to what used already
// holds. It is the one fit check: the scheduler calls it to choose, and the
// store calls it again when the placement is committed. It checks that
//
//  1. every assignment names this node and an existing device (UUID too);
//  2. each replica has exactly one device for a fractional request, or that
//     many distinct devices, each taken whole, for a whole-GPU request;
//  3. each device's model is allowed by the request;
//  4. on every device Σ milli-GPU ≤ 1000 and Σ memory ≤ the device's memory;
//  5. the node's host CPU and memory, where the node declares them, suffice
//     for every replica placed there;
//  6. the node is schedulable, matches the request's node selector and is
//     in one of its regions (residency), when it names any.
func Fits(node *Node, used *NodeUsage, req Request, as []Assignment) error {
	fail := func(gpu int, format string, args ...any) error {
		return &FitError{Node: node.Name, GPUIndex: gpu, Problem: fmt.Sprintf(format, args...)}
	}
	if !node.Schedulable {
		return fail(-1, "node is not schedulable")
	}
	if !node.Matches(req.NodeSelector) {
		return fail(-1, "node labels do not match the node selector")
	}
	if len(req.Regions) > 0 && !slices.Contains(req.Regions, node.Region) {
		return fail(-1, "node region %q is outside the residency %v", node.Region, req.Regions)
	}
	byReplica := map[int][]Assignment{}
	var order []int
	for _, a := range as {
		if _, ok := byReplica[a.Replica]; !ok {
			order = append(order, a.Replica)
		}
		byReplica[a.Replica] = append(byReplica[a.Replica], a)
	}
	if len(as) == 0 {
		switch {
		case req.Fractional():
			return fail(-1, "a fractional request takes exactly one device, not 0")
		case req.WholeGPUs() > 0:
			return fail(-1, "request for %d GPUs placed on 0 devices", req.WholeGPUs())
		}
	}
	for _, r := range order {
		ras := byReplica[r]
		switch {
		case r < 0 || r >= req.Count():
			return fail(-1, "replica %d of a workload with %d", r, req.Count())
		case req.Fractional():
			if len(ras) != 1 {
				return fail(-1, "a fractional request takes exactly one device, not %d", len(ras))
			}
		case req.WholeGPUs() > 0:
			if len(ras) != req.WholeGPUs() {
				return fail(-1, "request for %d GPUs placed on %d devices", req.WholeGPUs(), len(ras))
			}
		default:
			return fail(-1, "request without GPUs placed on devices")
		}
		seen := map[int]bool{}
		for _, a := range ras {
			if seen[a.GPUIndex] {
				return fail(a.GPUIndex, "device assigned twice")
			}
			seen[a.GPUIndex] = true
		}
	}
	added := map[int]GPUUse{}
	for _, a := range as {
		if a.Node != node.Name {
			return fail(a.GPUIndex, "assignment names node %s", a.Node)
		}
		i := slices.IndexFunc(node.GPUs, func(g GPU) bool { return g.Index == a.GPUIndex })
		if i < 0 {
			return fail(a.GPUIndex, "no such device")
		}
		g := node.GPUs[i]
		if a.GPUUUID != g.UUID {
			return fail(a.GPUIndex, "device UUID is %s, not %s", g.UUID, a.GPUUUID)
		}
		if !g.Usable() {
			return fail(a.GPUIndex, "device is %s", g.Health)
		}
		if !req.ModelAllowed(g.Model) {
			return fail(a.GPUIndex, "model %s is not among %v", g.Model, req.GPUModels)
		}
		milli, mem, ok := req.ShareOn(g)
		if !ok || a.MilliGPU != milli || a.MemoryMiB != mem {
			return fail(a.GPUIndex, "assignment (%d milli-GPU, %d MiB) does not match the request (%d milli-GPU, %d MiB)", a.MilliGPU, a.MemoryMiB, milli, mem)
		}
		var u GPUUse
		if used != nil {
			u = used.GPUs[a.GPUIndex]
		}
		prev := added[a.GPUIndex]
		if u.MilliGPU+prev.MilliGPU+a.MilliGPU > 1000 {
			return fail(a.GPUIndex, "%d milli-GPU free, %d asked", 1000-u.MilliGPU-prev.MilliGPU, a.MilliGPU)
		}
		if u.MemoryMiB+prev.MemoryMiB+a.MemoryMiB > g.MemoryMiB {
			return fail(a.GPUIndex, "%d MiB of GPU memory free, %d asked", g.MemoryMiB-u.MemoryMiB-prev.MemoryMiB, a.MemoryMiB)
		}
		added[a.GPUIndex] = GPUUse{MilliGPU: prev.MilliGPU + a.MilliGPU, MemoryMiB: prev.MemoryMiB + a.MemoryMiB}
	}
	replicas := int64(max(1, len(order)))
	var cpu, mem int64
	if used != nil {
		cpu, mem = used.MilliCPU, used.MemoryMiB
	}
	if node.MilliCPU > 0 && cpu+req.MilliCPU*replicas > node.MilliCPU {
		return fail(-1, "%d milli-CPU free, %d asked", node.MilliCPU-cpu, req.MilliCPU*replicas)
	}
	if node.MemoryMiB > 0 && mem+req.MemoryMiB*replicas > node.MemoryMiB {
		return fail(-1, "%d MiB of host memory free, %d asked", node.MemoryMiB-mem, req.MemoryMiB*replicas)
	}
	return nil
}
