package sim

import (
	"math"
	"strconv"
)

// authorsFigures are the rows the FGD authors' published allocation
// figures are computed from, one per pod of a run in its order, taken
// after the pod was placed or failed: their simulator logs an "[Alloc]"
// line after each (ClusterGpuFragReport), and their scripts
// (scripts/analysis.py, then experiments/analysis/merge_alloc_discrete.py,
// which writes analysis_allo_discrete.csv) turn them into one figure per
// whole percent of arrived demand:
//
//	arrive_ratio = round(arrived_gpu_milli / total_gpus / 10, 0)  # Python's round: half to even
//	alloc_ratio  = round(used_gpu_milli / total_gpus / 10, 2)     # each row, Python's round
//	figure[k]    = round(mean(alloc_ratio where arrive_ratio == k), 2)
//
// with the rows of k−1 to k+1 when no row is at k. The mean is pandas', a
// numpy pairwise sum over the rows in order divided by their count, and
// the last round numpy's (×100, round half to even, ÷100); replaying
// both keeps the figure equal to theirs to the last digit (a plain sum
// and Go's rounding put 44 of their 22,270 published BestFit figures a
// hundredth off).
type authorsFigures []authorsRow

type authorsRow struct {
	level int     // arrived demand, % of the capacity, rounded half to even
	alloc float64 // allocation, %, rounded to 0.01
}

// Add returns f with the row after a pod: arrived and placed GPU demand
// (milli-GPU) on a cluster of gpus devices.
func (f authorsFigures) Add(arrived, placed int64, gpus int) authorsFigures {
	level := math.RoundToEven(float64(arrived) / float64(gpus) / 10)
	// Python's round(x, 2) rounds x's exact binary value half to even, as
	// strconv's formatting does.
	alloc, _ := strconv.ParseFloat(strconv.FormatFloat(float64(placed)/float64(gpus)/10, 'f', 2, 64), 64)
	return append(f, authorsRow{int(level), alloc})
}

// At returns their figure at level (a fraction of the capacity) as a
// fraction, and false when level is not a whole percent or no row is
// near it.
func (f authorsFigures) At(level float64) (float64, bool) {
	pct := math.Round(level * 100)
	if math.Abs(level*100-pct) > 1e-9 {
		return 0, false
	}
	k := int(pct)
	var vals []float64
	for _, r := range f {
		if r.level == k {
			vals = append(vals, r.alloc)
		}
	}
	if len(vals) == 0 {
		for _, r := range f {
			if r.level >= k-1 && r.level <= k+1 {
				vals = append(vals, r.alloc)
			}
		}
	}
	if len(vals) == 0 {
		return 0, false
	}
	mean := pairwiseSum(vals) / float64(len(vals))
	return math.RoundToEven(mean*100) / 100 / 100, true
}

// pairwiseSum is numpy's sum of a float64 array (pairwise_sum in its
// loops_utils.h): eight running sums over blocks of up to 128 values,
// halves above that.
func pairwiseSum(a []float64) float64 {
	n := len(a)
	switch {
	case n < 8:
		var s float64
		for _, v := range a {
			s += v
		}
		return s
	case n <= 128:
		var r [8]float64
		copy(r[:], a[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			for j := range r {
				r[j] += a[i+j]
			}
		}
		s := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			s += a[i]
		}
		return s
	}
	half := n / 2
	half -= half % 8
	return pairwiseSum(a[:half]) + pairwiseSum(a[half:])
}
