package sched

import (
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// NextWake is the earliest instant after now at which a decision of plan
// (Schedule's answer for snap at now) could change by the passage of time
// alone, with nothing stored changing; zero when none could. A control loop
// sleeps until then, or until something changes, instead of scheduling
// again on a fixed period. The instants it considers:
//
//   - a pending workload crossing StarvationAfter, when its class is above
//     that of every pending workload that crossed it already (it may then
//     take the starvation reservation, which goes to the highest class,
//     then the longest waiting);
//   - a pending workload having waited Burst.After, when a class it may
//     burst in and a burst node exist;
//   - a pending workload's MinRuntime window after its last preemption
//     (Status.PreemptedAt) ending;
//   - with fair-share reclaim on and work pending, a running workload
//     reaching MinRuntime (it becomes a fair-share victim).
//
// It may answer early (a crossing that changes nothing costs one cycle).
// It answers late only where a workload that crossed StarvationAfter
// fails its quota rules and one of a lower class crossing later would
// take the reservation instead (a control loop's safety resync covers
// that). Max runtimes are the control loop's: it asks the stop, and the
// stop is a change.
func (o Options) NextWake(snap *core.Snapshot, plan core.Plan, now time.Time) time.Time {
	var next time.Time
	at := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	placed := make(map[core.WorkloadID]bool, len(plan.Placements))
	for _, p := range plan.Placements {
		placed[p.Workload] = true
	}
	className := func(w *core.Workload) string {
		if w.Priority == "" {
			return core.DefaultPriority(w.Kind)
		}
		return w.Priority
	}
	classes := snap.Classes
	if classes == nil {
		classes = core.DefaultPriorityClasses()
	}
	values := map[string]int{}
	value := func(w *core.Workload) int {
		name := className(w)
		v, ok := values[name]
		if !ok {
			cl, _ := core.Class(classes, name)
			v = cl.Value
			values[name] = v
		}
		return v
	}
	// The highest class that crossed StarvationAfter already: only a
	// workload of a higher class crossing later changes the starver.
	crossed, anyCrossed := 0, false
	if o.StarvationAfter > 0 {
		for _, w := range snap.Pending {
			if !placed[w.ID] && !w.CreatedAt.IsZero() && !now.Before(w.CreatedAt.Add(o.StarvationAfter)) {
				if v := value(w); !anyCrossed || v > crossed {
					crossed, anyCrossed = v, true
				}
			}
		}
	}
	burst := o.Burst.After > 0 && len(o.Burst.Classes) > 0 && slices.ContainsFunc(snap.Nodes, (*core.Node).Burst)
	for _, w := range snap.Pending {
		if placed[w.ID] {
			continue
		}
		if o.StarvationAfter > 0 && !w.CreatedAt.IsZero() && (!anyCrossed || value(w) > crossed) {
			at(w.CreatedAt.Add(o.StarvationAfter))
		}
		if burst {
			name := className(w)
			if since := waitedSince(w); !since.IsZero() && slices.Contains(o.Burst.Classes, name) {
				at(since.Add(o.Burst.After))
			}
		}
		if p := w.Status.PreemptedAt; p != nil && o.MinRuntime > 0 {
			at(p.Add(o.MinRuntime))
		}
	}
	if o.FairShareReclaim && o.MinRuntime > 0 && len(snap.Pending) > len(placed) {
		for _, w := range snap.Running {
			if w.Status.StartedAt != nil {
				at(w.Status.StartedAt.Add(o.MinRuntime))
			}
		}
	}
	return next
}
