package sched

import (
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ReasonArrayLimit: its job array already runs as many tasks as its cap
// (submit --array 0-999%50) allows.
const ReasonArrayLimit = "ArrayLimit"

// arrayCounts counts, by capped job array, its tasks running or placed in
// this cycle (running, for the arrays' caps: arrayFull) and its pending
// tasks counted in its team's demand (wanted, for fair shares:
// arrayDemand).
//
// Rule: running is made from the snapshot when the cycle starts and only
// counts up, once for each task placed (arrayStarted). wanted is counted
// while the pending workloads are read, before any is decided, and not
// after.
type arrayCounts struct {
	running, wanted map[core.WorkloadID]int
}

// runningArrays counts the running tasks of each capped job array.
func runningArrays(running []*core.Workload) map[core.WorkloadID]int {
	var out map[core.WorkloadID]int
	for _, w := range running {
		if a := w.Array; a != nil && a.MaxRunning > 0 {
			if out == nil {
				out = map[core.WorkloadID]int{}
			}
			out[a.ID]++
		}
	}
	return out
}

// arrayFull reports whether w is a task of a job array that already runs
// as many tasks (running, or placed in this cycle) as its cap, and if so
// records why it waits.
func (c *cycle) arrayFull(w *core.Workload) bool {
	a := w.Array
	if a == nil || a.MaxRunning <= 0 || c.arrays.running[a.ID] < a.MaxRunning {
		return false
	}
	c.unplaced(w, ReasonArrayLimit, fmt.Sprintf("array %s runs %d of its tasks, its cap (%%%d)", a.ID, c.arrays.running[a.ID], a.MaxRunning), "")
	return true
}

// arrayStarted counts w, placed in this cycle, against its array's cap.
func (c *cycle) arrayStarted(w *core.Workload) {
	if a := w.Array; a != nil && a.MaxRunning > 0 {
		if c.arrays.running == nil {
			c.arrays.running = map[core.WorkloadID]int{}
		}
		c.arrays.running[a.ID]++
	}
}

// arrayDemand reports whether pending w counts in its team's demand for
// fair shares: a task of a capped array counts only while the array's
// running tasks and the pending ones counted so far are below its cap
// (the others could not start however large the share). It is called
// once for each pending workload, before any is decided.
func (c *cycle) arrayDemand(w *core.Workload) bool {
	a := w.Array
	if a == nil || a.MaxRunning <= 0 {
		return true
	}
	if c.arrays.wanted == nil {
		c.arrays.wanted = map[core.WorkloadID]int{}
	}
	if c.arrays.running[a.ID]+c.arrays.wanted[a.ID] >= a.MaxRunning {
		return false
	}
	c.arrays.wanted[a.ID]++
	return true
}
