package cost

import (
	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Efficiency is the wire form of what attempts used against what they
// requested: each figure null where nothing measured it.
func Efficiency(e core.Efficiency) api.Efficiency {
	out := api.Efficiency{MeasuredAttempts: e.Measured}
	if e.CPUAttempts > 0 {
		out.CPUSeconds = ptr(float64(e.CPUMicros) / 1e6)
	}
	if s, ok := e.CPUShare(); ok {
		out.RequestedCPUSeconds = ptr(float64(e.RequestedCPUMicros) / 1e6)
		out.CPUEfficiency = &s
	}
	if e.MemoryAttempts > 0 {
		out.PeakMemoryBytes = ptr(e.PeakMemoryBytes)
	}
	if s, ok := e.MemoryShare(); ok {
		out.MemoryEfficiency = &s
	}
	return out
}

// Attempts is the wire form of a workload's attempts that ended, each
// with what it used over its whole run, and their totals.
func Attempts(as []core.Attempt) api.AttemptList {
	out := api.AttemptList{Items: make([]api.Attempt, 0, len(as))}
	var total core.Efficiency
	for _, a := range as {
		var e core.Efficiency
		e.AddAll(a)
		total.Merge(e)
		out.Items = append(out.Items, api.Attempt{Attempt: a.Number, StartedAt: a.Start, FinishedAt: a.End, RuntimeSeconds: a.Runtime().Seconds(),
			Phase: string(a.Phase), Reason: a.Reason, CPU: quantity.Milli(a.MilliCPU), MemoryMiB: a.MemoryMiB, Efficiency: Efficiency(e)})
	}
	out.Total = Efficiency(total)
	return out
}

// addEfficiency adds, to the visible rows, what the input's attempts used
// over their time in the window: each attempt goes to the row of its
// workload's cell in the pool of its first interval (the cell its host
// resources are billed in).
func (rc *reportCells) addEfficiency(get func(c int32) *row, total *row, vis Visibility) {
	e := rc.e
	if len(e.in.Attempts) == 0 {
		return
	}
	type attemptKey struct {
		id core.WorkloadID
		n  int
	}
	pools := make(map[attemptKey]string, len(e.in.Attempts))
	for i := range e.in.Intervals {
		iv := &e.in.Intervals[i]
		k := attemptKey{iv.Workload, iv.Attempt}
		if _, ok := pools[k]; !ok {
			pools[k] = iv.Pool
		}
	}
	for _, a := range e.in.Attempts {
		pool, ok := pools[attemptKey{a.Workload, a.Number}]
		w, known := e.wlIdx[a.Workload]
		if !ok || !known {
			continue
		}
		c := int32(-1)
		for _, r := range e.wls[w].cells {
			if r.pool == pool {
				c = r.cell
			}
		}
		if c < 0 || !e.visible(c, vis) {
			continue
		}
		var one core.Efficiency
		one.Add(a, e.in.From, e.in.To)
		if one.Measured == 0 {
			continue
		}
		get(c).eff.Merge(one)
		total.eff.Merge(one)
	}
}

func ptr[T any](v T) *T { return &v }
