package sim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// Policies lists the packing policies, the production one
// (PolicyGPUFleet) first: the scheduler's (sched.Policies), except that
// its best fit and FGD are named bestfit-gpu and fgd-online, each after
// the authors' definition that takes its name (PolicyBestFit, PolicyFGD).
func Policies() []string {
	var out []string
	for _, p := range sched.Policies() {
		switch p {
		case sched.PackBestFit:
			out = append(out, PolicyBestFit, PolicyBestFitGPU)
		case sched.PackFGD:
			out = append(out, PolicyFGD, PolicyFGDOnline)
		default:
			out = append(out, p)
		}
	}
	return out
}

// The orders a run's pods arrive in (PackingConfig.Order).
const (
	// OrderShuffle shuffles the pods with the seed and appends copies up to
	// the inflation: the FGD paper's experiment.
	OrderShuffle = "shuffle"
	// OrderFile places the pods in the trace's order, each once: a sequence
	// another simulator produced is replayed exactly. The inflation only
	// bounds the run; the seed then drives only the random policy.
	OrderFile = "file"
	// OrderAuthors is the sequence the FGD authors' simulator
	// (hkust-adsl/kubernetes-scheduler-simulator, behind the paper's
	// published figures) places for the same pods, seed and inflation:
	// their shuffle and their copies, drawn as they draw them
	// (AuthorsOrder).
	OrderAuthors = "authors"
)

// Orders lists the orders, the default first.
func Orders() []string { return []string{OrderShuffle, OrderFile, OrderAuthors} }

// newPlacer returns what a run places with, and whether each pod is to be
// shown to it as it arrives (the online mix). pods are the trace's pods,
// before any shuffle or copy: the mix of PolicyFGD.
func newPlacer(nodes []core.Node, policy string, seed int64, pods []trace.Pod) (placer, bool, error) {
	switch policy {
	case PolicyBestFit:
		return newAuthorsBestFit(nodes), false, nil
	case PolicyBestFitGPU:
		p, err := sched.NewPacker(nodes, sched.PackBestFit, uint64(seed))
		return p, true, err
	case PolicyFGD:
		p, err := sched.NewPacker(nodes, sched.PackFGD, uint64(seed))
		if err != nil {
			return nil, false, err
		}
		for _, req := range spread(pods) {
			p.Observe(req)
		}
		return p, false, nil
	case PolicyFGDOnline:
		p, err := sched.NewPacker(nodes, sched.PackFGD, uint64(seed))
		return p, true, err
	}
	if !slices.Contains(Policies(), policy) && policy != "" {
		return nil, false, fmt.Errorf("unknown packing policy %q (want one of %s)", policy, strings.Join(Policies(), ", "))
	}
	p, err := sched.NewPacker(nodes, policy, uint64(seed))
	return p, true, err
}

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
	// Order is how the pods arrive: OrderShuffle (the default, "" too),
	// OrderFile or OrderAuthors. Under OrderAuthors, bestfit also breaks
	// its ties as the authors' simulator does (authorsNodeNames).
	Order string
	// Inflate is the arrived demand to reach, as a multiple of the GPU
	// capacity, by appending copies of pods drawn at random (1.3 in the
	// paper). Below 1 the shuffled trace is cut there instead. Under
	// OrderFile it only cuts: the run ends with the pod whose arrival
	// reaches it, or with the last pod. Under OrderAuthors copies are
	// appended, or pods removed, by the authors' rule (AuthorsOrder): the
	// sequence ends near it, a little below or, by a multi-GPU copy's
	// last devices, above.
	Inflate float64
	// Report are the arrived-demand levels to report (fractions of
	// capacity); DefaultReport when nil.
	Report []float64
	// Progress, when set, is called now and then with the pods placed so
	// far and the total.
	Progress func(done, total int)
	// Placed, when set, is called after each pod of the run's sequence,
	// in order, with the index in Nodes of the node it went on (-1 and
	// false when it found none).
	Placed func(pod trace.Pod, node int, ok bool)
	// Bounds, when set, are the run's sequence's upper bounds at the
	// Report levels (LevelBounds), copied into its points: they depend on
	// the sequence alone, so a sweep finds them once for all policies.
	Bounds []float64
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
	// Bound is an upper bound on the Allocation any policy, online or not,
	// could reach with the pods arrived (Bound): how far from the limit the
	// run is. Only in the reported points, when the run was given its
	// sequence's bounds (null otherwise).
	Bound *float64 `json:"bound"`
	// AuthorsAllocation is the allocation as the FGD authors publish it
	// for this level (authorsFigures): the mean, over the pods whose
	// arrival brings the arrived demand to the level (rounded to a whole
	// percent), of the allocation after each. Only in the reported
	// points at whole percents (null otherwise). On their sequence
	// (OrderAuthors) bestfit's equals their published BestFit's.
	AuthorsAllocation *float64 `json:"authorsAllocation"`
}

// PackingRun is the outcome of one run.
type PackingRun struct {
	Policy  string  `json:"policy"`
	Seed    int64   `json:"seed"`
	Order   string  `json:"order"`
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

// spread returns the GPU requests of pods (those the mix counts) in an
// order where every prefix holds each shape in close to its share of the
// whole: the k-th of a shape counted c times sorts at (k+½)/c. The
// scheduler's mix reweighs its shapes when its count doubles, so the
// weights it ends with are those of a prefix of at least half the pods;
// spread makes that prefix's shares the trace's within one pod per shape.
func spread(pods []trace.Pod) []core.Request {
	type keyed struct {
		at  float64
		pos int
		req core.Request
	}
	shape := func(r core.Request) string {
		return fmt.Sprint(r.MilliGPU, r.MilliCPU, r.MemoryMiB, r.GPUModels)
	}
	count := map[string]int{}
	for _, p := range pods {
		if p.Request.MilliGPU > 0 {
			count[shape(p.Request)]++
		}
	}
	seen := map[string]int{}
	var out []keyed
	for i, p := range pods {
		if p.Request.MilliGPU <= 0 {
			continue
		}
		k := shape(p.Request)
		out = append(out, keyed{(float64(seen[k]) + 0.5) / float64(count[k]), i, p.Request})
		seen[k]++
	}
	slices.SortStableFunc(out, func(a, b keyed) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.pos, b.pos)
	})
	reqs := make([]core.Request, len(out))
	for i, k := range out {
		reqs[i] = k.req
	}
	return reqs
}

// Sequence returns the pods of a run in the order they arrive (order:
// OrderShuffle, "" too, OrderFile or OrderAuthors; see PackingConfig).
func Sequence(pods []trace.Pod, order string, seed int64, inflate float64, capacity int64) ([]trace.Pod, error) {
	switch order {
	case "", OrderShuffle:
		return Workload(pods, seed, inflate, capacity), nil
	case OrderFile:
		return FileOrder(pods, inflate, capacity), nil
	case OrderAuthors:
		return AuthorsOrder(pods, seed, inflate, capacity)
	}
	return nil, fmt.Errorf("order %q: want one of %s", order, strings.Join(Orders(), ", "))
}

// FileOrder returns the pods in their order, each once, cut after the pod
// whose arrival brings their summed GPU demand to inflate × capacity
// (milli-GPU); all of them when they never reach it.
func FileOrder(pods []trace.Pod, inflate float64, capacity int64) []trace.Pod {
	target := int64(inflate * float64(capacity))
	var sum int64
	for i, p := range pods {
		sum += p.GPUs()
		if sum >= target {
			return slices.Clone(pods[:i+1])
		}
	}
	return slices.Clone(pods)
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
	p, observe, err := newPlacer(nodes, cfg.Policy, cfg.Seed, cfg.Pods)
	if err != nil {
		return PackingRun{}, err
	}
	var seq []trace.Pod
	if cfg.Order == OrderAuthors {
		// Their node names too, for bestfit's ties.
		var names []string
		seq, names, err = authorsRun(nodes, cfg.Pods, cfg.Seed, cfg.Inflate, capacity)
		if b, ok := p.(*authorsBestFit); ok {
			b.tie = names
		}
	} else {
		seq, err = Sequence(cfg.Pods, cfg.Order, cfg.Seed, cfg.Inflate, capacity)
	}
	if err != nil {
		return PackingRun{}, err
	}
	if cfg.Order == "" {
		cfg.Order = OrderShuffle
	}
	run := PackingRun{Policy: cfg.Policy, Seed: cfg.Seed, Order: cfg.Order, Pods: len(seq), CapacityGPUs: gpus}
	if run.Policy == "" {
		run.Policy = sched.PackGPUFleet
	}
	var arrived, placed, reserved int64
	figures := make(authorsFigures, 0, len(seq))
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
		if observe {
			p.(*sched.Packer).Observe(pod.Request)
		}
		node, as, ok := p.Place(pod.Request)
		if cfg.Placed != nil {
			cfg.Placed(pod, node, ok)
		}
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
		figures = figures.Add(arrived, placed, gpus)
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
			if nextReport < len(cfg.Bounds) {
				b := cfg.Bounds[nextReport]
				pt.Bound = &b
			}
			run.Points = append(run.Points, pt)
			nextReport++
		}
	}
	if b, ok := p.(*authorsBestFit); ok && b.err != nil {
		return PackingRun{}, b.err
	}
	for i, pt := range run.Points {
		if v, ok := figures.At(pt.Arrived); ok {
			run.Points[i].AuthorsAllocation = &v
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
func stranded(p placer, later, all []trace.Pod) int64 {
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
