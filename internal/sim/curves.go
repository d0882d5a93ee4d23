package sim

// CurveLine is one policy's mean curve: arrived demand against allocation,
// both in percent of the GPU capacity.
type CurveLine struct {
	Policy              string
	Arrived, Allocation []float64
}

// MeanCurves averages the Curve of each policy's runs, point by point: every
// run has a point at each 1% of arrived demand, so the i-th points match.
// A policy's line stops where its shortest curve does. Policies come in the
// order they first appear in runs; those with no curve are left out.
func MeanCurves(runs []PackingRun) []CurveLine {
	order, groups := byPolicy(runs)
	var out []CurveLine
	for _, policy := range order {
		rs := groups[policy]
		n := len(rs[0].Curve)
		for _, r := range rs[1:] {
			n = min(n, len(r.Curve))
		}
		if n == 0 {
			continue
		}
		l := CurveLine{Policy: policy, Arrived: make([]float64, n), Allocation: make([]float64, n)}
		for i := range n {
			var arrived, alloc float64
			for _, r := range rs {
				arrived += r.Curve[i].Arrived
				alloc += r.Curve[i].Allocation
			}
			l.Arrived[i] = 100 * arrived / float64(len(rs))
			l.Allocation[i] = 100 * alloc / float64(len(rs))
		}
		out = append(out, l)
	}
	return out
}
