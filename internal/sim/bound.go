package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// Bound is an upper bound on the GPU demand any policy, online or not,
// could place of pods (milli-GPU) on nodes with nothing departing: the
// optimum of a linear relaxation of the packing (packingLP), never above
// the demand itself nor the GPU capacity. The relaxation keeps, per kind
// of node (model, GPUs, CPU, memory) and summed over the nodes of that
// kind, the GPU share, the devices (a whole GPU, or a share above half,
// takes one of its own), the CPU and the memory; and per pod, only the
// kinds of node it fits on alone; and, per kind, that the pods on one
// device fit it (deviceWeight). It lets pods split across nodes and
// devices, and drops the pods without GPUs, which only take room: so it is
// at least what any placement achieves.
func Bound(nodes []core.Node, pods []trace.Pod) (int64, error) {
	var demand, capacity int64
	for _, p := range pods {
		demand += p.GPUs()
	}
	for _, n := range nodes {
		capacity += int64(len(n.GPUs)) * 1000
	}
	limit := min(demand, capacity)
	lp := packingLP(nodes, pods)
	if len(lp.c) == 0 {
		return 0, nil
	}
	opt, err := lp.solve()
	if err != nil {
		return limit, err
	}
	// The optimum is a sum of GPU shares: a float a hair above an integer
	// rounds up, never down.
	return min(limit, int64(math.Ceil(opt-1e-6))), nil
}

// LevelBounds returns, for each level of report (fractions of the
// capacity, ascending, as Packing reports them), Bound of the pods of seq
// arrived when the level is reached (the pod that crosses it counts), as
// a fraction of the capacity; levels seq never reaches are left out.
func LevelBounds(nodes []core.Node, seq []trace.Pod, report []float64) ([]float64, error) {
	capacity := int64(GPUCount(nodes)) * 1000
	if capacity == 0 {
		return nil, fmt.Errorf("the node list has no GPUs")
	}
	var out []float64
	var arrived int64
	for i, p := range seq {
		arrived += p.GPUs()
		for len(out) < len(report) && float64(arrived)/float64(capacity) >= report[len(out)] {
			b, err := Bound(nodes, seq[:i+1])
			if err != nil {
				return nil, fmt.Errorf("bound at %g arrived: %w", report[len(out)], err)
			}
			out = append(out, float64(b)/float64(capacity))
		}
	}
	return out, nil
}

// nodeKind is the nodes alike for the relaxation: their devices' models,
// device count, CPU and memory.
type nodeKind struct {
	models   string
	gpus     int
	cpu, mem int64
}

// podShape is the pods alike for the relaxation.
type podShape struct {
	milli, cpu, mem, gpuMem int64
	models                  string
}

// packingLP builds the relaxation of Bound: maximize Σ g_s·x_st over the
// pairs (shape s, kind t) where one pod of s fits an empty node of t,
// subject to Σ_t x_st ≤ count_s for each shape, and for each kind, summed
// over its nodes: Σ g_s·x_st ≤ GPU share, Σ u_ε(s)·x_st ≤ devices for
// each ε of deviceCuts (deviceWeight), Σ cpu_s·x_st ≤ CPU, Σ mem_s·x_st ≤
// memory.
func packingLP(nodes []core.Node, pods []trace.Pod) *simplexLP {
	kinds := map[nodeKind]int{}
	var order []nodeKind
	var sample []*core.Node
	for i := range nodes {
		n := &nodes[i]
		if !n.Schedulable || len(n.GPUs) == 0 {
			continue
		}
		models := make([]string, len(n.GPUs))
		for j, g := range n.GPUs {
			models[j] = g.Model
		}
		k := nodeKind{models: fmt.Sprint(models), gpus: len(n.GPUs), cpu: n.MilliCPU, mem: n.MemoryMiB}
		if _, ok := kinds[k]; !ok {
			order = append(order, k)
			sample = append(sample, n)
		}
		kinds[k]++
	}
	counts := map[podShape]int{}
	var shapes []podShape
	req := map[podShape]core.Request{}
	for _, p := range pods {
		r := p.Request
		if p.GPUs() <= 0 {
			continue
		}
		s := podShape{milli: r.TotalMilliGPU(), cpu: r.MilliCPU * int64(r.Count()), mem: r.MemoryMiB * int64(r.Count()), gpuMem: r.GPUMemoryMiB, models: fmt.Sprint(r.GPUModels)}
		if _, ok := counts[s]; !ok {
			shapes = append(shapes, s)
			req[s] = r
		}
		counts[s]++
	}
	slices.SortFunc(shapes, func(a, b podShape) int {
		return cmp.Or(cmp.Compare(a.milli, b.milli), cmp.Compare(a.cpu, b.cpu), cmp.Compare(a.mem, b.mem), cmp.Compare(a.gpuMem, b.gpuMem), cmp.Compare(a.models, b.models))
	})
	// Rows: one per shape, then per kind its GPU share, its devices once
	// for each ε of deviceCuts, its CPU and its memory.
	lp := &simplexLP{}
	for _, s := range shapes {
		lp.b = append(lp.b, float64(counts[s]))
	}
	base := len(shapes)
	perKind := 3 + len(deviceCuts)
	for _, k := range order {
		n := float64(kinds[k])
		lp.b = append(lp.b, n*float64(k.gpus)*1000)
		for range deviceCuts {
			lp.b = append(lp.b, n*float64(k.gpus))
		}
		lp.b = append(lp.b, perNode(n, k.cpu), perNode(n, k.mem))
	}
	for si, s := range shapes {
		r := req[s]
		for ti, k := range order {
			if !fitsEmptyNode(sample[ti], r) {
				continue
			}
			row := base + perKind*ti
			col := []lpEntry{{si, 1}, {row, float64(s.milli)}}
			for e, eps := range deviceCuts {
				if d := deviceWeight(r, eps); d > 0 {
					col = append(col, lpEntry{row + 1 + e, d})
				}
			}
			if k.cpu > 0 && s.cpu > 0 {
				col = append(col, lpEntry{row + 1 + len(deviceCuts), float64(s.cpu)})
			}
			if k.mem > 0 && s.mem > 0 {
				col = append(col, lpEntry{row + 2 + len(deviceCuts), float64(s.mem)})
			}
			lp.c = append(lp.c, float64(s.milli))
			lp.cols = append(lp.cols, col)
		}
	}
	return lp
}

// deviceCuts are the ε of the dual feasible functions of bin packing
// whose inequalities the relaxation adds per kind of node (deviceWeight).
var deviceCuts = []float64{0.1, 0.2, 0.3, 0.4, 0.5}

// deviceWeight is what one pod of r weighs in the devices it takes under
// the dual feasible function u_ε of bin packing: a share x of a device
// weighs 1 above 1−ε, x from ε to 1−ε, 0 below ε (ε at most ½); a whole
// GPU weighs 1. The pods on one device weigh at most 1 together (one
// share above 1−ε leaves room only for shares below ε; otherwise each
// weighs at most its share), so the pods of a kind of node weigh at most
// its devices: a pod of 0.81 and one of 0.47 cannot share a device, which
// the GPU share alone would allow.
func deviceWeight(r core.Request, eps float64) float64 {
	if w := r.WholeGPUs(); w > 0 {
		return float64(w * r.Count())
	}
	x := float64(r.MilliGPU) / 1000
	switch {
	case r.MilliGPU <= 0:
		return 0 // a share by memory: its share depends on the device
	case x > 1-eps:
		return float64(r.Count())
	case x >= eps:
		return x * float64(r.Count())
	}
	return 0
}

// perNode is n nodes' total of a resource each has per (CPU or memory),
// unbounded where the node list gives none.
func perNode(n float64, per int64) float64 {
	if per <= 0 {
		return math.Inf(1)
	}
	return n * float64(per)
}

// fitsEmptyNode reports whether one pod of req (all its replicas) fits n
// when n runs nothing: its models, shares, whole GPUs, CPU and memory.
func fitsEmptyNode(n *core.Node, r core.Request) bool {
	count := int64(r.Count())
	if (n.MilliCPU > 0 && r.MilliCPU*count > n.MilliCPU) || (n.MemoryMiB > 0 && r.MemoryMiB*count > n.MemoryMiB) {
		return false
	}
	fit := 0
	for _, g := range n.GPUs {
		if !g.Usable() || !r.ModelAllowed(g.Model) {
			continue
		}
		if w := r.WholeGPUs(); w > 0 {
			fit++
			continue
		}
		if _, _, ok := r.ShareOn(g); ok {
			fit++
		}
	}
	if w := r.WholeGPUs(); w > 0 {
		return fit >= w*r.Count()
	}
	return fit >= r.Count()
}

// lpEntry is a nonzero coefficient of a column: its row and value.
type lpEntry struct {
	row int
	v   float64
}

// simplexLP is a packing linear program: maximize c·x subject to A·x ≤ b,
// x ≥ 0, with A and b nonnegative (b may hold +Inf: no bound), A given by
// columns.
type simplexLP struct {
	c    []float64
	cols [][]lpEntry
	b    []float64
}

// solve returns the optimum, by the simplex method on a dense tableau
// starting from the slack basis (feasible, b ≥ 0): the entering column of
// greatest reduced gain, the leaving row by the least ratio, Bland's rule
// after many steps that gain nothing, so that it cannot cycle.
func (lp *simplexLP) solve() (float64, error) {
	// Rows with no bound constrain nothing: left out.
	var rows []int
	rowOf := make([]int, len(lp.b))
	for i, v := range lp.b {
		rowOf[i] = -1
		if !math.IsInf(v, 1) {
			rowOf[i] = len(rows)
			rows = append(rows, i)
		}
	}
	m, n := len(rows), len(lp.c)
	w := n + m + 1 // columns, slacks, right-hand side
	t := make([]float64, (m+1)*w)
	at := func(i, j int) *float64 { return &t[i*w+j] }
	for j, col := range lp.cols {
		for _, e := range col {
			if r := rowOf[e.row]; r >= 0 {
				*at(r, j) = e.v
			}
		}
	}
	for r, i := range rows {
		*at(r, n+r) = 1
		*at(r, w-1) = lp.b[i]
	}
	// The objective row holds the reduced gains (c − c_B B⁻¹A) and −z.
	obj := m
	for j, c := range lp.c {
		*at(obj, j) = c
	}
	basis := make([]int, m)
	for r := range basis {
		basis[r] = n + r
	}
	const eps = 1e-9
	stalled := 0
	for iter := 0; ; iter++ {
		if iter > 200000 {
			return 0, fmt.Errorf("bound: the simplex did not converge")
		}
		bland := stalled > 50
		enter, best := -1, eps
		for j := range w - 1 {
			g := *at(obj, j)
			if g <= eps {
				continue
			}
			if bland {
				enter = j
				break
			}
			if g > best {
				enter, best = j, g
			}
		}
		if enter < 0 {
			return -*at(obj, w-1), nil
		}
		leave, ratio := -1, math.Inf(1)
		for r := range m {
			a := *at(r, enter)
			if a <= eps {
				continue
			}
			q := *at(r, w-1) / a
			if q < ratio-eps || (q <= ratio+eps && leave >= 0 && basis[r] < basis[leave]) {
				leave, ratio = r, q
			}
		}
		if leave < 0 {
			return 0, fmt.Errorf("bound: the relaxation is unbounded")
		}
		if ratio <= eps {
			stalled++
		} else {
			stalled = 0
		}
		// Pivot on (leave, enter).
		prow := t[leave*w : (leave+1)*w]
		p := prow[enter]
		for j := range prow {
			prow[j] /= p
		}
		for r := range m + 1 {
			if r == leave {
				continue
			}
			row := t[r*w : (r+1)*w]
			f := row[enter]
			if f == 0 {
				continue
			}
			for j, v := range prow {
				if v != 0 {
					row[j] -= f * v
				}
			}
		}
		basis[leave] = enter
	}
}
