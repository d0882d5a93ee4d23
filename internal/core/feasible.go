package core

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Infeasible says why no node of a fleet could ever hold a request, even
// empty: the request field at fault, as the API names it, and the biggest
// value that could fit.
type Infeasible struct {
	Field   string
	Problem string
}

func (e *Infeasible) Error() string { return e.Problem }

// Feasible reports whether the nodes, empty, could hold req (its replicas
// may span nodes). Cordoned nodes count, since a cordon is lifted; an
// empty fleet holds everything, since its nodes have not registered yet.
// Otherwise it returns an *Infeasible naming the first field, in the order
// residency (Request.Regions: no node in any of them), node selector, GPU
// models, GPUs, GPU memory, CPU, host memory, replicas,
// that no node can meet, with the biggest that fits. It is pure: the API
// server calls it at submission, the scheduler to explain.
func Feasible(nodes []*Node, req Request) error {
	if len(nodes) == 0 {
		return nil
	}
	bad := func(field, format string, args ...any) error {
		return &Infeasible{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if len(req.Regions) > 0 {
		var in []*Node
		for _, n := range nodes {
			if inRegions(n, req.Regions) {
				in = append(in, n)
			}
		}
		if len(in) == 0 {
			return bad("residency", "%s", residencyProblem(nodes, req.Regions))
		}
		nodes = in
	}
	ns := make([]*Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Matches(req.NodeSelector) {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		field, problem := selectorProblem(nodes, req.NodeSelector)
		return bad(field, "%s", problem)
	}
	asksGPU := req.MilliGPU > 0 || req.GPUMemoryMiB > 0 || len(req.GPUModels) > 0
	if asksGPU {
		var models []string
		of := make([]*Node, 0, len(ns))
		for _, n := range ns {
			ok := false
			for _, g := range n.GPUs {
				if !slices.Contains(models, g.Model) {
					models = append(models, g.Model)
				}
				ok = ok || req.ModelAllowed(g.Model)
			}
			if ok {
				of = append(of, n)
			}
		}
		if len(of) == 0 {
			slices.Sort(models)
			have := strings.Join(slices.Compact(models), ", ")
			if have == "" {
				have = "no GPUs"
			}
			if len(req.GPUModels) == 0 {
				return bad("resources.gpus", "no node has a GPU (the fleet has %s)", have)
			}
			return bad("resources.gpuModels", "no node has a GPU of model %s (the fleet has %s)", strings.Join(req.GPUModels, " or "), have)
		}
		ns = of
	}
	// The most of each dimension one node offers.
	var most, mem, cpu, host int64
	cpuBound, hostBound := true, true
	for _, n := range ns {
		var k, m int64
		for _, g := range n.GPUs {
			if req.ModelAllowed(g.Model) {
				k++
				m = max(m, g.MemoryMiB)
			}
		}
		most, mem = max(most, k), max(mem, m)
		cpuBound, hostBound = cpuBound && n.MilliCPU > 0, hostBound && n.MemoryMiB > 0
		cpu, host = max(cpu, n.MilliCPU), max(host, n.MemoryMiB)
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
		return bad("resources.cpu", "%d milli-CPU on one node: the biggest node has %d", req.MilliCPU, cpu)
	case hostBound && req.MemoryMiB > host:
		return bad("resources.memoryMiB", "%d MiB of memory on one node: the biggest node has %d MiB", req.MemoryMiB, host)
	}
	fit := 0
	for _, n := range ns {
		if fit += replicasOn(n, req, req.Count()); fit >= req.Count() {
			break // enough: the count is all that is said
		}
	}
	switch {
	case fit == 0:
		return bad("resources", "no node could hold one replica even empty (its GPUs, CPU and memory together)")
	case fit < req.Count():
		return bad("replicas", "%d replicas: the fleet could hold at most %d, even empty", req.Count(), fit)
	}
	return nil
}

// inRegions reports whether n may hold work whose residency is regions:
// none given, or n's region is one of them.
func inRegions(n *Node, regions []string) bool {
	return len(regions) == 0 || slices.Contains(regions, n.Region)
}

// residencyProblem says that no node is in any of the regions, naming the
// regions the fleet has, e.g. "no node is in region eu-west or eu-central
// (the fleet's regions: us-east)".
func residencyProblem(nodes []*Node, regions []string) string {
	var have []string
	for _, n := range nodes {
		if n.Region != "" {
			have = append(have, n.Region)
		}
	}
	slices.Sort(have)
	have = slices.Compact(have)
	if len(have) == 0 {
		return fmt.Sprintf("no node is in region %s (no node has a region)", strings.Join(regions, " or "))
	}
	return fmt.Sprintf("no node is in region %s (the fleet's regions: %s)", strings.Join(regions, " or "), strings.Join(have, ", "))
}

// selectorProblem says why no node matches a selector: the first label,
// in key order, that no node has, as "nodeSelector.KEY", saying what the
// fleet has instead (for the pool and the region, which the CLI's --pool
// and --region set, in those words); or, when each label is on some node
// but none has them all, "nodeSelector".
func selectorProblem(nodes []*Node, sel map[string]string) (field, problem string) {
	keys := slices.Sorted(maps.Keys(sel))
	for _, k := range keys {
		var have []string
		found := false
		for _, n := range nodes {
			if v, ok := n.Label(k); ok {
				have = append(have, v)
				found = found || v == sel[k]
			}
		}
		if found {
			continue
		}
		slices.Sort(have)
		have = slices.Compact(have)
		word := map[string]string{LabelRegion: "region", LabelPool: "pool"}[k]
		switch {
		case word != "" && len(have) == 0:
			return "nodeSelector." + k, fmt.Sprintf("no node is in %s %s (no node has a %s)", word, sel[k], word)
		case word != "":
			return "nodeSelector." + k, fmt.Sprintf("no node is in %s %s (the fleet's %ss: %s)", word, sel[k], word, strings.Join(have, ", "))
		case len(have) == 0:
			return "nodeSelector." + k, fmt.Sprintf("no node has the label %s=%s (no node has a label %s)", k, sel[k], k)
		}
		return "nodeSelector." + k, fmt.Sprintf("no node has the label %s=%s (the fleet has %s=%s)", k, sel[k], k, strings.Join(have, ", "+k+"="))
	}
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + sel[k]
	}
	return "nodeSelector", fmt.Sprintf("no node has the labels %s together", strings.Join(pairs, ", "))
}

// replicasOn counts how many replicas of req an empty n holds, up to limit.
func replicasOn(n *Node, req Request, limit int) int {
	k := int64(limit)
	if req.MilliCPU > 0 && n.MilliCPU > 0 {
		k = min(k, n.MilliCPU/req.MilliCPU)
	}
	if req.MemoryMiB > 0 && n.MemoryMiB > 0 {
		k = min(k, n.MemoryMiB/req.MemoryMiB)
	}
	switch {
	case req.WholeGPUs() > 0:
		var free int64
		for _, g := range n.GPUs {
			if req.ModelAllowed(g.Model) {
				free++
			}
		}
		k = min(k, free/int64(req.WholeGPUs()))
	case req.Fractional():
		var on int64
		for _, g := range n.GPUs {
			milli, mem, ok := req.ShareOn(g)
			if !ok || !req.ModelAllowed(g.Model) || milli <= 0 {
				continue
			}
			per := 1000 / milli
			if mem > 0 {
				per = min(per, g.MemoryMiB/mem)
			}
			on += per
		}
		k = min(k, on)
	}
	return int(max(0, k))
}
