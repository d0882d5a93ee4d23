package sched

import (
	"cmp"
	"slices"

	"github.com/gpufleet/gpufleet/internal/sched/fairshare"
)

// pendingOrder is the order the cycle decides pending workloads in: first
// the workloads holding a node from an earlier cycle (first, in the order
// carryHolds found them), then the queues, by class level (highest
// first), each level's queues by team and each queue by submission; the
// reserved workload that would borrow (reservedBorrower) is decided first
// of those that would.
//
// Rule: first and reservedBorrower are set when the cycle starts and do
// not change. The queues only shrink: next pops them. Which team of a
// level comes next depends on the teams' usage, which only grows; a
// level's best (the team next chose last) stays the one to choose while
// teamLedger.usageGen is the one it was chosen at (gen) and its queue
// has work left.
type pendingOrder struct {
	levels           []*level
	first            []*pendingWork
	reservedBorrower *pendingWork
}

// level is the queues of one class value, by team.
type level struct {
	value int
	ord   int // its place among the levels as they were found (teamState.queues)
	teams []*teamQueue
	// best is the team next chose last, when the usages were at gen.
	best *teamQueue
	gen  uint64
}

// teamQueue is a team's pending work of one level.
type teamQueue struct {
	team *teamState
	ws   []*pendingWork // by submission
	n    int            // its size, while the queues are made
}

// fill puts each pending workload (pws, in the snapshot's order) in its
// queue (queueOf, by the same index; readPending made the queues with
// their sizes), each queue's list a part of ws, and sorts the levels, the
// queues and each queue's work.
func (o *pendingOrder) fill(ws []*pendingWork, pws []pendingWork, queueOf []*teamQueue) {
	for _, l := range o.levels {
		for _, q := range l.teams {
			q.ws, ws = ws[:0:q.n], ws[q.n:]
		}
	}
	for k, q := range queueOf {
		q.ws = append(q.ws, &pws[k])
	}
	slices.SortFunc(o.levels, func(a, b *level) int { return cmp.Compare(b.value, a.value) })
	bySubmission := func(a, b *pendingWork) int {
		if a.seq != b.seq {
			return cmp.Compare(a.seq, b.seq)
		}
		return cmp.Compare(a.id, b.id)
	}
	for _, l := range o.levels {
		slices.SortFunc(l.teams, func(a, b *teamQueue) int { return cmp.Compare(a.team.team.Name, b.team.team.Name) })
		for _, q := range l.teams {
			// Often in order already (the snapshot's).
			if !slices.IsSortedFunc(q.ws, bySubmission) {
				slices.SortStableFunc(q.ws, bySubmission)
			}
		}
	}
}

// next pops the next pending workload of the queues, the teams' usage at
// usageGen: the highest class first; within a class, the team furthest
// below its fair share (usage/share, recomputed as placements are made),
// then the team with the larger share, then by team name; within a team,
// the earliest submitted.
func (o *pendingOrder) next(usageGen uint64) *pendingWork {
	for len(o.levels) > 0 {
		l := o.levels[0]
		// The team chosen last stays the one to choose while no team's
		// usage changed and it has work left.
		if b := l.best; b != nil && l.gen == usageGen && len(b.ws) > 0 {
			p := b.ws[0]
			b.ws = b.ws[1:]
			return p
		}
		var best *teamQueue
		for _, q := range l.teams {
			if len(q.ws) == 0 {
				continue
			}
			if best == nil {
				best = q
				continue
			}
			// Furthest below its fair share first; at a tie, the team
			// entitled to more.
			if d := fairshare.CompareDeficit(q.team.usage, q.team.share, best.team.usage, best.team.share); d < 0 || (d == 0 && q.team.share > best.team.share) {
				best = q
			}
		}
		if best == nil {
			o.levels = o.levels[1:]
			continue
		}
		l.best, l.gen = best, usageGen
		p := best.ws[0]
		best.ws = best.ws[1:]
		return p
	}
	return nil
}
