package control

import (
	"context"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A plan whose write failed may still have been committed: PostgreSQL can
// commit a transaction and lose the connection before it says so, and a
// commit whose flush the database did not confirm fails the same way. Its
// placements are then Running in the store with nothing started for them,
// and no later cycle would start them (a cycle starts only what its own
// write accepted) or find them lost (only a restart's Reconcile looks):
// they would hold their GPUs, Running, until someone cancelled them.
//
// So the loop remembers the placements of a plan whose write failed, with
// the attempt each would have had, and settles them on a later snapshot:
// one Running at that attempt was committed and is started now. One still
// Pending at the attempt before is kept (the store's view may not hold the
// commit yet) until a later write places it, which starts it as any
// placement: a placement is so started once, whichever write took it.
// Any other (gone, or at another attempt) is forgotten.

// rememberUncertain notes the placements of a plan whose write failed.
func (l *Loop) rememberUncertain(snap *core.Snapshot, placements []core.Placement) {
	if len(placements) == 0 {
		return
	}
	attempts := make(map[core.WorkloadID]int, len(snap.Pending))
	for _, w := range snap.Pending {
		attempts[w.ID] = w.Status.Attempts
	}
	for _, p := range placements {
		if a, ok := attempts[p.Workload]; ok {
			l.uncertain[p.Workload] = a + 1
		}
	}
}

// settleUncertain starts the placements of a failed write that the
// snapshot shows were committed after all, and forgets those it settles.
func (l *Loop) settleUncertain(ctx context.Context, snap *core.Snapshot) {
	if len(l.uncertain) == 0 {
		return
	}
	waiting := map[core.WorkloadID]bool{}
	for _, w := range snap.Pending {
		if attempt, ok := l.uncertain[w.ID]; ok && w.Status.Attempts == attempt-1 {
			waiting[w.ID] = true
		}
	}
	var committed []*core.Workload
	for _, w := range snap.Running {
		attempt, ok := l.uncertain[w.ID]
		if !ok || w.Status.Attempts != attempt || l.unrecorded[attemptKey{w.ID, attempt}] != nil {
			continue
		}
		l.log.Warn("a placement whose write failed was committed; starting it", "workload", w.ID, "attempt", attempt)
		committed = append(committed, w)
	}
	for id := range l.uncertain {
		if !waiting[id] {
			delete(l.uncertain, id)
		}
	}
	if len(committed) == 0 {
		return
	}
	if l.starts != nil {
		l.starts.launch(ctx, l, committed)
	} else {
		l.launchAll(ctx, committed)
	}
}
