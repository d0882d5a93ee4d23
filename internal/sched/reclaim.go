package sched

import "slices"

// quotaBucket is one guarantee of a team (its total, or one of its model
// or pool guarantees) with the team's running work that counts against
// it, by class: what reclaim may take from the team there.
//
// Reclaim (by a guarantee or a fair share) may take a set of a team's
// workloads in a bucket where, for each victim of class c, counting what
// the team still runs there at c and above once the set, the victims
// other teams' work took before it in the cycle and the work already
// stopping are gone:
//
//   - a workload over quota (classify's order: the guarantee covers the
//     team's highest classes, then its earliest work) would not be within
//     the guarantee if submitted again: what is left, plus it, exceeds
//     the guarantee (so that it does not reclaim its room back at once);
//   - a workload within quota that has run MinRuntime leaves the team at
//     least its guarantee.
//
// So a team above its guarantee gives back what it runs beyond it from
// any of its work at the classes concerned, not only from the workloads
// its order left over quota: a fraction reclaims a fraction, not the gang
// that the order happened to leave over quota next to fractions within
// it; and the team keeps its guarantee, as it did. MinRuntime protects a
// workload the guarantee covered while it starts: it may be one that
// reclaim just stopped and the guarantee let run again.
type quotaBucket struct {
	kind       bucketKind
	key        string
	guaranteed int64
	levels     []quotaLevel // by class value, highest first
	largest    int64        // the most one of the team's workloads in it holds
	marked     bool         // listed in a check under way (victimScratch.admits)
}

// bucketKind is which guarantee a quotaBucket is.
type bucketKind int8

const (
	bucketTotal bucketKind = iota
	bucketModel
	bucketPool
)

// quotaLevel is a team's work of one class in a bucket.
type quotaLevel struct {
	value int
	// running is what the class's work not stopping held when the cycle
	// started; taken what the victims chosen from it in this cycle hold;
	// least the least that one of them reclaimed over quota holds (0:
	// none); covered is set once one within quota is reclaimed.
	running, taken, least int64
	covered               bool
	// cands are the class's workloads reclaim could take alone when the
	// cycle started, over quota [0] and within it [1], largest first;
	// those it may no longer take come off the front (cycle.chose).
	cands [2][]*runningWorkload
	// left and limit are setLimits's: what the team still runs at this
	// class and above, and the most one workload of it may hold for
	// reclaim to take it alone.
	left  int64
	limit levelLimit
	// pend, pendLeast and pendCovered are taken, least and covered for a
	// set being weighed (admits).
	pend, pendLeast int64
	pendCovered     bool
}

// level returns the bucket's level of class value v, made if missing.
func (b *quotaBucket) level(v int) *quotaLevel {
	i, found := slices.BinarySearchFunc(b.levels, v, func(l quotaLevel, v int) int { return v - l.value })
	if !found {
		b.levels = slices.Insert(b.levels, i, quotaLevel{value: v})
	}
	return &b.levels[i]
}

// over is what the team runs in the bucket, at class value v and above,
// beyond its guarantee there (before any victim of this cycle).
func (b *quotaBucket) over(v int) int64 {
	var u int64
	for i := range b.levels {
		if b.levels[i].value < v {
			break
		}
		u += b.levels[i].running
	}
	return u - b.guaranteed
}

// admits reports whether the victims chosen from the bucket, with the
// set being weighed (pend), keep the rule of quotaBucket at every class.
func (b *quotaBucket) admits() bool {
	var u, s int64
	for i := range b.levels {
		l := &b.levels[i]
		u += l.running
		s += l.taken + l.pend
		left := u - s // what the team still runs at this class and above
		least := l.least
		if l.pendLeast > 0 && (least == 0 || l.pendLeast < least) {
			least = l.pendLeast
		}
		if (l.covered || l.pendCovered) && left < b.guaranteed {
			return false
		}
		if least > 0 && left+least <= b.guaranteed {
			return false
		}
	}
	return true
}

// bucketOf returns ts's bucket of kind and key, made if missing.
func (ts *teamState) bucketOf(kind bucketKind, key string, guaranteed int64) *quotaBucket {
	for _, b := range ts.buckets {
		if b.kind == kind && b.key == key {
			return b
		}
	}
	b := &quotaBucket{kind: kind, key: key, guaranteed: guaranteed}
	ts.buckets = append(ts.buckets, b)
	return b
}

// reclaimable marks which of a team's running workloads reclaim may take
// alone (runningWorkload.over), once classify has said which run within
// quota (covered): batch always; other work by the rule of quotaBucket.
func (c *cycle) reclaimable(ts *teamState) {
	for _, r := range ts.running {
		if r.bucket == nil {
			continue
		}
		r.bucket.largest = max(r.bucket.largest, r.held)
		if r.w.Status.StopRequested == "" {
			r.bucket.level(r.class.Value).running += r.held
		}
	}
	for _, r := range ts.running {
		if r.bucket == nil {
			continue
		}
		over := r.bucket.over(r.class.Value)
		if r.covered {
			ran := r.w.Status.StartedAt != nil && c.now.Sub(*r.w.Status.StartedAt) >= c.opts.MinRuntime
			r.over = ran && over >= r.held
		} else {
			r.over = over > 0
		}
		if r.over && r.eligible {
			l := r.bucket.level(r.class.Value)
			k := 0
			if r.covered {
				k = 1
			}
			l.cands[k] = append(l.cands[k], r)
		}
	}
	for _, b := range ts.buckets {
		for i := range b.levels {
			for k := range b.levels[i].cands {
				slices.SortStableFunc(b.levels[i].cands[k], heldDescending)
			}
		}
	}
}

// reclaims reports whether a victim chosen by rule is reclaimed from its
// team, under the rule of quotaBucket.
func (v *candidate) reclaims() bool {
	return v.rule == ruleGuarantee || v.rule == ruleFairShare
}

// chose records victim v as taken in this cycle: where another team's
// preemptor takes it, its team's usage without it, for fair-share
// reclaim, and its bucket's; and then takes out of the victim tiers the
// workloads of its bucket that reclaim may no longer take even alone, so
// that the victim index's bounds stay tight. (Work a team preempts for
// its own is replaced by that work.)
func (c *cycle) chose(v *candidate) {
	v.chosen = true
	if v.sameTeam {
		return
	}
	v.team.reclaimed += v.held
	c.demoteFair(v.team)
	b := v.bucket
	if b == nil {
		return
	}
	l := b.level(v.class.Value)
	l.taken += v.held
	switch {
	case !v.reclaims():
	case v.covered:
		l.covered = true
	case l.least == 0 || v.held < l.least:
		l.least = v.held
	}
	if b.roomy() {
		return
	}
	// Reclaim may take a workload of a level alone while it holds at most
	// a limit (setLimits): those above it come off, largest first.
	b.setLimits()
	for i := range b.levels {
		for k, covered := range [2]bool{false, true} {
			l := &b.levels[i]
			limit := l.limit.over
			if covered {
				limit = l.limit.covered
			}
			for len(l.cands[k]) > 0 {
				r := l.cands[k][0]
				if !r.chosen && r.over && r.held <= limit {
					break
				}
				l.cands[k] = l.cands[k][1:]
				if !r.chosen && r.over {
					c.unreclaimable(r)
				}
			}
		}
	}
}

// unreclaimable takes r out of the victim tiers it is counted in: reclaim
// may no longer take it in this cycle.
func (c *cycle) unreclaimable(r *runningWorkload) {
	wasFair := r.fair
	r.over, r.fair = false, false
	for i, a := range r.w.Status.Placement {
		if placedBefore(r.w.Status.Placement, i) {
			continue // core.Nodes: each node once, as first named
		}
		if ns := c.fleet.byName[a.Node]; ns != nil {
			ns.retier(r, [tiers]bool{tierOver: true, tierFair: wasFair})
			c.touch(ns)
		}
	}
}

// roomy reports whether reclaim may still take any one of the bucket's
// workloads with the victims chosen from it: at every class, what the
// team still runs there and above, less the largest of them, is at least
// the guarantee (which implies every condition of quotaBucket).
func (b *quotaBucket) roomy() bool {
	var left int64
	for i := range b.levels {
		left += b.levels[i].running - b.levels[i].taken
		if left-b.largest < b.guaranteed {
			return false
		}
	}
	return true
}

// levelLimit is the most a workload of a level may hold for reclaim to
// take it alone, over quota and within it (-1: none may be taken).
type levelLimit struct{ over, covered int64 }

// setLimits sets, level by level (quotaLevel.limit), the most one
// workload may hold for reclaim to take it alone with the victims chosen
// before it: what the rule of quotaBucket leaves at its level and below
// (a victim counts at its class and every lower one).
func (b *quotaBucket) setLimits() {
	var u int64
	for i := range b.levels {
		u += b.levels[i].running - b.levels[i].taken
		b.levels[i].left = u
	}
	const none = int64(-1)
	bound := int64(1 << 62) // the victims' conditions at this level and below
	for i := len(b.levels) - 1; i >= 0; i-- {
		l := &b.levels[i]
		if l.covered {
			bound = min(bound, l.left-b.guaranteed)
		}
		if l.least > 0 {
			bound = min(bound, l.left+l.least-b.guaranteed-1)
		}
		l.limit = levelLimit{over: bound, covered: min(bound, l.left-b.guaranteed)}
		if l.left <= b.guaranteed {
			l.limit.over = none
		}
		l.limit.over, l.limit.covered = max(l.limit.over, none), max(l.limit.covered, none)
	}
}

// admits reports whether the candidates js (of cands) may be taken
// together with the victims chosen before them in this cycle: the rule
// of quotaBucket for those reclaimed, and, for a team that fair-share
// reclaim takes from, its usage without all of them at least its fair
// share. (Both hold for any part of a set they hold for.)
func (sc *victimScratch) admits(cands []candidate, js []int) bool {
	buckets, teams := sc.buckets[:0], sc.teams[:0]
	for _, j := range js {
		v := &cands[j]
		if v.sameTeam {
			continue
		}
		t := v.team
		if !t.marked {
			t.marked = true
			teams = append(teams, t)
		}
		t.pend += v.held
		t.pendFair = t.pendFair || v.rule == ruleFairShare
		if !v.reclaims() || v.bucket == nil {
			continue
		}
		b := v.bucket
		if !b.marked {
			b.marked = true
			buckets = append(buckets, b)
		}
		l := b.level(v.class.Value)
		l.pend += v.held
		switch {
		case v.covered:
			l.pendCovered = true
		case l.pendLeast == 0 || v.held < l.pendLeast:
			l.pendLeast = v.held
		}
	}
	ok := true
	for _, b := range buckets {
		ok = ok && b.admits()
		b.marked = false
		for i := range b.levels {
			b.levels[i].pend, b.levels[i].pendLeast, b.levels[i].pendCovered = 0, 0, false
		}
	}
	for _, t := range teams {
		ok = ok && (!t.pendFair || t.usage-t.reclaimed-t.pend >= t.share)
		t.marked, t.pend, t.pendFair = false, 0, false
	}
	sc.buckets, sc.teams = buckets, teams
	return ok
}

// bucketFor returns the bucket that r, running for ts, counts against:
// the model guarantee covering its devices, else the pool guarantee
// covering its node, else the total (classify's buckets); nil for batch.
func (c *cycle) bucketFor(ts *teamState, r *runningWorkload) *quotaBucket {
	if r.class.IdleOnly || !r.known {
		return nil
	}
	if key, ok := c.deviceKey(ts, r.w.Status.Placement); ok {
		return ts.bucketOf(bucketModel, key, ts.team.GuaranteedByModel[key])
	}
	if key, ok := c.nodePoolKey(ts, r.w.Status.Placement); ok {
		return ts.bucketOf(bucketPool, key, ts.team.GuaranteedByPool[key])
	}
	return ts.bucketOf(bucketTotal, "", ts.team.Guaranteed)
}
