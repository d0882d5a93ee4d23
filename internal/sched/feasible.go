package sched

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Infeasible says why no node of a fleet could ever hold a request, even
// empty: the request field at fault (as the API names it) and the biggest
// value that could fit.
type Infeasible struct {
	Field   string
	Problem string
}

func (e *Infeasible) Error() string { return e.Problem }

// Feasible reports whether some node, empty, could hold req, whatever
// runs now; cordoned nodes count (a cordon is lifted), and an empty fleet
// holds everything (its nodes have not registered yet). Otherwise it
// returns an *Infeasible naming the first field, in the order node
// selector, GPU models, GPUs, GPU memory, CPU, host memory, replicas, that
// no node can meet, with the biggest that fits.
func Feasible(nodes []*core.Node, req core.Request) error {
	if len(nodes) == 0 {
		return nil
	}
	bad := func(field, format string, args ...any) error {
		return &Infeasible{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	var ns []*nodeState
	for _, n := range nodes {
		if n.Matches(req.NodeSelector) {
			u := *n
			u.Schedulable = true
			ns = append(ns, newNodeState(&u, nil))
		}
	}
	if len(ns) == 0 {
		keys := slices.Sorted(maps.Keys(req.NodeSelector))
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + req.NodeSelector[k]
		}
		return bad("nodeSelector", "no node has the labels %s", strings.Join(pairs, ", "))
	}
	asksGPU := req.MilliGPU > 0 || req.GPUMemoryMiB > 0 || len(req.GPUModels) > 0
	if asksGPU {
		var models []string
		var of []*nodeState
		for _, s := range ns {
			models = append(models, s.models...)
			if slices.ContainsFunc(s.models, req.ModelAllowed) {
				of = append(of, s)
			}
		}
		if len(of) == 0 {
			slices.Sort(models)
			return bad("resources.gpuModels", "no node has a GPU of model %s (the fleet has %s)",
				strings.Join(req.GPUModels, " or "), strings.Join(slices.Compact(models), ", "))
		}
		ns = of
	}
	// The most of each dimension one node could give one replica.
	var most, mem, cpu, host int64
	cpuBound, hostBound := true, true
	for _, s := range ns {
		var n, m int64
		for _, g := range s.node.GPUs {
			if req.ModelAllowed(g.Model) {
				n++
				m = max(m, g.MemoryMiB)
			}
		}
		most, mem = max(most, n), max(mem, m)
		if s.node.MilliCPU == 0 {
			cpuBound = false
		}
		if s.node.MemoryMiB == 0 {
			hostBound = false
		}
		cpu, host = max(cpu, s.node.MilliCPU), max(host, s.node.MemoryMiB)
	}
	model := ""
	if len(req.GPUModels) > 0 {
		model = strings.Join(req.GPUModels, " or ") + " "
	}
	switch {
	case req.WholeGPUs() > 0 && int64(req.WholeGPUs()) > most:
		return bad("resources.gpus", "%d %sGPUs on one node: the biggest node has %d", req.WholeGPUs(), model, most)
	case req.MilliGPU == 0 && req.GPUMemoryMiB > mem:
		return bad("resources.gpuMemoryMiB", "%d MiB on one %sGPU: the biggest has %d MiB", req.GPUMemoryMiB, model, mem)
	case cpuBound && req.MilliCPU > cpu:
		return bad("resources.cpu", "%s CPUs on one node: the biggest node has %s", gpus(req.MilliCPU), gpus(cpu))
	case hostBound && req.MemoryMiB > host:
		return bad("resources.memoryMiB", "%d MiB of memory on one node: the biggest node has %d MiB", req.MemoryMiB, host)
	}
	// Replicas may span nodes: count how many each node could hold.
	fit, whole := 0, false
	for _, s := range ns {
		k := replicasFit(s, req, req.Count())
		fit += k
		whole = whole || k > 0
	}
	switch {
	case !whole:
		return bad("resources", "no node could hold one replica even empty (GPUs, CPU and memory together)")
	case fit < req.Count():
		return bad("replicas", "%d replicas: the fleet could hold at most %d, even empty", req.Count(), fit)
	}
	return nil
}
