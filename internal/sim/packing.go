package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// Policies lists the packing policies the scheduler has, the production
// one (PolicyGPUFleet) first.
func Policies() []string { return sched.Policies() }

// The production policy and the whole-GPU reservation baseline.
const (
	PolicyGPUFleet    = sched.PackGPUFleet
	PolicyReservation = sched.PackReservation
)

// DefaultReport are the arrived-demand levels reported by default, as
// fractions of the cluster's GPU capacity.
var DefaultReport = []float64{0.8, 0.9, 1.0, 1.1, 1.2}

// PackingConfig is one packing run: the FGD paper's experiment.
type PackingConfig struct {
	Nodes  []core.Node
	Pods   []trace.Pod
	Policy string
	Seed   int64
	// Inflate is the arrived demand to reach, as a multiple of the GPU
	// capacity, by appending copies of pods drawn at random (1.3 in the
	// paper). Below 1 the shuffled trace is cut there instead.
	Inflate float64
	// Report are the arrived-demand levels to report (fractions of
	// capacity); DefaultReport when nil.
	Report []float64
	// Progress, when set, is called now and then with the pods placed so
	// far and the total.
	Progress func(done, total int)
}

// Point is the cluster at one level of arrived demand.
type Point struct {
	// Arrived is the level of arrived GPU demand, as a fraction of the
	// cluster's GPU capacity, and ArrivedExact the demand of the pods
	// arrived when the point was taken: the pod that crossed the level
	// counts, so it is a little above.
	Arrived      float64 `json:"arrived"`
	ArrivedExact float64 `json:"arrivedExact"`
	// Allocation is the GPU demand placed, as a fraction of the capacity.
	// Under the reservation baseline a fraction counts for what it asked,
	// not for the whole device it holds (see Reserved).
	Allocation float64 `json:"allocation"`
	// Reserved is the GPU capacity held, as a fraction: the same as
	// Allocation except under the reservation baseline.
	Reserved float64 `json:"reserved"`
	// Stranded is the free GPU capacity that no later pod of the run could
	// use (too small a share on its device, or on a node whose CPU, memory
	// or model no later pod fits), as a fraction of the capacity. Only in
	// the reported points.
	Stranded   float64 `json:"stranded"`
	FailedPods int     `json:"failedPods"`
}

// PackingRun is the outcome of one run.
type PackingRun struct {
	Policy  string  `json:"policy"`
	Seed    int64   `json:"seed"`
	Pods    int     `json:"pods"`
	Seconds float64 `json:"seconds"`
	// FirstFailureArrived is the arrived demand (fraction of capacity,
	// counting the failing pod) at which the first pod found no place;
	// null when none failed.
	FirstFailureArrived *float64 `json:"firstFailureArrived"`
	// Points are the reported levels; Curve has a point every 1% of
	// arrived demand, for plots.
	Points []Point `json:"points"`
	Curve  []Point `json:"curve,omitempty"`
	// Placed and Failed count pods at the end of the run.
	Placed int `json:"placed"`
	Failed int `json:"failed"`
	// CapacityGPUs is the cluster's GPU count.
	CapacityGPUs int `json:"capacityGPUs"`
}

// Workload returns the pod sequence of a run: the pods shuffled with the
// seed, then copies drawn at random with replacement appended until their
// summed GPU demand reaches inflate × capacity (milli-GPU); with inflate
// below 1, the shuffled pods cut where they reach it.
func Workload(pods []trace.Pod, seed int64, inflate float64, capacity int64) []trace.Pod {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	out := slices.Clone(pods)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	target := int64(inflate * float64(capacity))
	var sum int64
	for i, p := range out {
		sum += p.GPUs()
		if sum >= target && inflate < 1 {
			return out[:i+1]
		}
	}
	if len(pods) == 0 || !slices.ContainsFunc(pods, func(p trace.Pod) bool { return p.GPUs() > 0 }) {
		return out
	}
	for sum < target {
		p := pods[r.IntN(len(pods))]
		out = append(out, p)
		sum += p.GPUs()
	}
	return out
}

// Packing runs the experiment: the pods arrive one at a time and are
// placed by the policy, or fail; nothing departs.
func Packing(cfg PackingConfig) (PackingRun, error) {
	start := time.Now()
	if cfg.Inflate <= 0 {
		return PackingRun{}, fmt.Errorf("inflate must be positive, got %g", cfg.Inflate)
	}
	report := cfg.Report
	if report == nil {
		report = DefaultReport
	}
	var capacity int64
	gpus := 0
	for _, n := range cfg.Nodes {
		gpus += len(n.GPUs)
	}
	capacity = int64(gpus) * 1000
	if capacity == 0 {
		return PackingRun{}, fmt.Errorf("the node list has no GPUs")
	}
	nodes := slices.Clone(cfg.Nodes)
	p, err := sched.NewPacker(nodes, cfg.Policy, uint64(cfg.Seed))
	if err != nil {
		return PackingRun{}, err
	}
	seq := Workload(cfg.Pods, cfg.Seed, cfg.Inflate, capacity)
	run := PackingRun{Policy: cfg.Policy, Seed: cfg.Seed, Pods: len(seq), CapacityGPUs: gpus}
	if run.Policy == "" {
		run.Policy = sched.PackGPUFleet
	}
	var arrived, placed, reserved int64
	nextReport, nextCurve := 0, 1
	frac := func(v int64) float64 { return float64(v) / float64(capacity) }
	point := func() Point {
		return Point{ArrivedExact: frac(arrived), Allocation: frac(placed), Reserved: frac(reserved), FailedPods: run.Failed}
	}
	for i, pod := range seq {
		if cfg.Progress != nil && i%500 == 0 {
			cfg.Progress(i, len(seq))
		}
		arrived += pod.GPUs()
		p.Observe(pod.Request)
		_, as, ok := p.Place(pod.Request)
		if ok {
			run.Placed++
			placed += pod.GPUs()
			for _, a := range as {
				reserved += a.MilliGPU
			}
		} else {
			run.Failed++
			if run.FirstFailureArrived == nil {
				f := frac(arrived)
				run.FirstFailureArrived = &f
			}
		}
		for nextCurve <= 200 && frac(arrived) >= float64(nextCurve)/100 {
			pt := point()
			pt.Arrived = float64(nextCurve) / 100
			run.Curve = append(run.Curve, pt)
			nextCurve++
		}
		for nextReport < len(report) && frac(arrived) >= report[nextReport] {
			pt := point()
			pt.Arrived = report[nextReport]
			pt.Stranded = frac(stranded(p, seq[i+1:], cfg.Pods))
			run.Points = append(run.Points, pt)
			nextReport++
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(len(seq), len(seq))
	}
	run.Seconds = time.Since(start).Seconds()
	return run, nil
}

// stranded is the free GPU share (milli-GPU) that none of the later pods'
// shapes could use: on each device, free share that no shape fitting the
// node (CPU, memory, model) could take. When no pods come later, the
// shapes of the whole trace are used.
func stranded(p *sched.Packer, later, all []trace.Pod) int64 {
	if len(later) == 0 {
		later = all
	}
	type shape struct {
		milli, cpu, mem int64
		models          string
	}
	seen := map[shape]bool{}
	var shapes []core.Request
	for _, pod := range later {
		r := pod.Request
		if r.MilliGPU == 0 {
			continue
		}
		k := shape{r.MilliGPU, r.MilliCPU, r.MemoryMiB, fmt.Sprint(r.GPUModels)}
		if !seen[k] {
			seen[k] = true
			shapes = append(shapes, r)
		}
	}
	var out int64
	for i := range p.Len() {
		v := p.Node(i)
		n := v.Node
		freeWhole := 0
		var free int64
		for _, u := range v.Used {
			free += 1000 - u.MilliGPU
			if u.MilliGPU == 0 {
				freeWhole++
			}
		}
		if free == 0 {
			continue
		}
		var usable int64 // the smallest share on one device some shape could take
		usable = 1 << 62
		for _, r := range shapes {
			if (n.MilliCPU > 0 && v.MilliCPU+r.MilliCPU > n.MilliCPU) || (n.MemoryMiB > 0 && v.MemoryMiB+r.MemoryMiB > n.MemoryMiB) {
				continue
			}
			ok := false
			for _, g := range n.GPUs {
				if r.ModelAllowed(g.Model) {
					ok = true
					break
				}
			}
			if !ok {
				continue
			}
			if r.MilliGPU >= 1000 {
				if freeWhole >= int(r.MilliGPU/1000) {
					usable = min(usable, 1000)
				}
				continue
			}
			usable = min(usable, r.MilliGPU)
		}
		for _, u := range v.Used {
			if f := 1000 - u.MilliGPU; f > 0 && f < usable {
				out += f
			}
		}
	}
	return out
}
