package sim

import (
	"math"
	"slices"
)

// Stat is the mean, least and greatest of one figure over the runs of a
// policy.
type Stat struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// statOf returns the Stat of vs; the zero Stat when vs is empty.
func statOf(vs []float64) Stat {
	if len(vs) == 0 {
		return Stat{}
	}
	s := Stat{Min: math.Inf(1), Max: math.Inf(-1)}
	var sum float64
	for _, v := range vs {
		sum += v
		s.Min = min(s.Min, v)
		s.Max = max(s.Max, v)
	}
	s.Mean = sum / float64(len(vs))
	return s
}

// LevelSummary is one policy at one reported level of arrived demand,
// over the runs that reached it.
type LevelSummary struct {
	// Level is the reported level (a fraction of capacity); Arrived is the
	// demand actually arrived when it was recorded, a little above Level
	// (the pod that crossed it counts).
	Level      float64 `json:"level"`
	Runs       int     `json:"runs"`
	Arrived    Stat    `json:"arrived"`
	Allocation Stat    `json:"allocation"`
	Reserved   Stat    `json:"reserved"`
	Stranded   Stat    `json:"stranded"`
	FailedPods Stat    `json:"failedPods"`
	// Bound is over the runs' bounds (Point.Bound); nil when none has one.
	Bound *Stat `json:"bound"`
}

// PolicySummary is what the runs of one policy, one per seed, add up to.
type PolicySummary struct {
	Policy string  `json:"policy"`
	Runs   int     `json:"runs"`
	Seeds  []int64 `json:"seeds"`
	// Pods is the length of the runs' pod sequences, and Seconds how long
	// a run took.
	Pods    Stat `json:"pods"`
	Seconds Stat `json:"seconds"`
	// FirstFailureArrived is over the FailedRuns runs in which some pod
	// failed; nil when none did.
	FirstFailureArrived *Stat `json:"firstFailureArrived"`
	FailedRuns          int   `json:"failedRuns"`
	// Levels follow the runs' Points, index by index.
	Levels []LevelSummary `json:"levels"`
}

// Summarize groups runs by policy, in the order each policy first appears,
// and sums up each group. The reported points of the runs are matched by
// index: the i-th point of every run is at the i-th level of levels, which
// are DefaultReport when none are given (as Packing does with a nil
// Report). A level beyond those given is labelled with the least demand
// arrived at it.
func Summarize(runs []PackingRun, levels ...float64) []PolicySummary {
	if len(levels) == 0 {
		levels = DefaultReport
	}
	order, groups := byPolicy(runs)
	out := make([]PolicySummary, 0, len(order))
	for _, policy := range order {
		out = append(out, summarizePolicy(policy, groups[policy], levels))
	}
	return out
}

func summarizePolicy(policy string, runs []PackingRun, levels []float64) PolicySummary {
	s := PolicySummary{Policy: policy, Runs: len(runs), Seeds: []int64{}, Levels: []LevelSummary{}}
	var pods, secs, firsts []float64
	points := 0
	for _, r := range runs {
		s.Seeds = append(s.Seeds, r.Seed)
		pods = append(pods, float64(r.Pods))
		secs = append(secs, r.Seconds)
		if r.FirstFailureArrived != nil {
			firsts = append(firsts, *r.FirstFailureArrived)
		}
		points = max(points, len(r.Points))
	}
	s.Pods, s.Seconds = statOf(pods), statOf(secs)
	if len(firsts) > 0 {
		st := statOf(firsts)
		s.FirstFailureArrived, s.FailedRuns = &st, len(firsts)
	}
	for i := range points {
		var arrived, alloc, reserved, stranded, failed, bound []float64
		for _, r := range runs {
			if i >= len(r.Points) {
				continue
			}
			p := r.Points[i]
			if p.Bound != nil {
				bound = append(bound, *p.Bound)
			}
			arrived = append(arrived, p.ArrivedExact)
			alloc = append(alloc, p.Allocation)
			reserved = append(reserved, p.Reserved)
			stranded = append(stranded, p.Stranded)
			failed = append(failed, float64(p.FailedPods))
		}
		l := LevelSummary{
			Runs: len(arrived), Arrived: statOf(arrived), Allocation: statOf(alloc), Reserved: statOf(reserved),
			Stranded: statOf(stranded), FailedPods: statOf(failed),
		}
		if len(bound) > 0 {
			b := statOf(bound)
			l.Bound = &b
		}
		l.Level = l.Arrived.Min
		if i < len(levels) {
			l.Level = levels[i]
		}
		s.Levels = append(s.Levels, l)
	}
	return s
}

// Comparison is the GPU demand two policies placed at one level.
type Comparison struct {
	Level float64
	// A and B are the mean allocations of the two policies; Ratio is A/B.
	A, B  float64
	Ratio float64
}

// Compare sets the mean allocation of policy a against that of policy b at
// the highest level both have a point for: how much more GPU demand a
// serves than b. ok is false when either policy is missing from sums or b
// placed nothing there.
func Compare(sums []PolicySummary, a, b string) (c Comparison, ok bool) {
	find := func(policy string) *PolicySummary {
		i := slices.IndexFunc(sums, func(s PolicySummary) bool { return s.Policy == policy })
		if i < 0 {
			return nil
		}
		return &sums[i]
	}
	sa, sb := find(a), find(b)
	if sa == nil || sb == nil {
		return c, false
	}
	n := min(len(sa.Levels), len(sb.Levels))
	if n == 0 {
		return c, false
	}
	la, lb := sa.Levels[n-1], sb.Levels[n-1]
	if lb.Allocation.Mean <= 0 {
		return c, false
	}
	return Comparison{Level: la.Level, A: la.Allocation.Mean, B: lb.Allocation.Mean, Ratio: la.Allocation.Mean / lb.Allocation.Mean}, true
}

// byPolicy groups runs by policy, the policies in the order they first
// appear.
func byPolicy(runs []PackingRun) (order []string, groups map[string][]PackingRun) {
	groups = map[string][]PackingRun{}
	for _, r := range runs {
		if _, ok := groups[r.Policy]; !ok {
			order = append(order, r.Policy)
		}
		groups[r.Policy] = append(groups[r.Policy], r)
	}
	return order, groups
}
