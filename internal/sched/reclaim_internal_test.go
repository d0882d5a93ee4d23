package sched

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
)

// admitsAlone reports whether reclaim may take r, of the bucket, with the
// victims chosen before it (the rule of quotaBucket, by admits).
func (b *quotaBucket) admitsAlone(r *runningWorkload) bool {
	l := b.level(r.class.Value)
	l.pend = r.held
	if r.covered {
		l.pendCovered = true
	} else {
		l.pendLeast = r.held
	}
	ok := b.admits()
	l.pend, l.pendLeast, l.pendCovered = 0, 0, false
	return ok
}

// TestLimitsAsAdmits: over random buckets (a guarantee, what the team
// runs at each class, the victims taken, their least and whether one
// within quota is among them) that keep the rule, reclaim may take one
// more workload alone
// by the rule of quotaBucket (admits) exactly when it holds at most its
// level's limit (setLimits), which cycle.chose compares instead.
func TestLimitsAsAdmits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := &quotaBucket{guaranteed: rapid.Int64Range(0, 8000).Draw(t, "guaranteed")}
		levels := rapid.IntRange(1, 4).Draw(t, "levels")
		for i := range levels {
			l := b.level(1000 - 100*i)
			l.running = rapid.Int64Range(0, 8000).Draw(t, "running")
			l.taken = rapid.Int64Range(0, l.running).Draw(t, "taken")
			if l.taken > 0 {
				l.least = rapid.Int64Range(0, l.taken).Draw(t, "least")
				l.covered = rapid.Bool().Draw(t, "covered")
			}
		}
		if !b.admits() {
			return // a state reclaim never leaves: its victims broke the rule
		}
		b.setLimits()
		i := rapid.IntRange(0, levels-1).Draw(t, "level")
		r := &runningWorkload{class: core.PriorityClass{Value: b.levels[i].value}, held: rapid.Int64Range(1, 8000).Draw(t, "held"),
			covered: rapid.Bool().Draw(t, "workloadCovered")}
		limit := b.levels[i].limit.over
		if r.covered {
			limit = b.levels[i].limit.covered
		}
		if got, want := r.held <= limit, b.admitsAlone(r); got != want {
			t.Fatalf("workload of %d (covered %t) at level %d: within the limit %d: %t; admits: %t (levels %+v)", r.held, r.covered, i, limit, got, want, b.levels)
		}
	})
}
