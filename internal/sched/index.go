package sched

import (
	"math"

	"github.com/gpufleet/gpufleet/internal/core"
)

// shapeIndex orders the nodes where a request shape fits now by their
// remembered score (scored), best first, so that a placement visits the
// nodes in the order of the bound on their score and stops once no node
// left can beat the best found: what a placement finds on a node (a hold,
// a reservation, the budget) can only raise the score the shape has
// there (another device, which scored no better), never lower it. The
// index is a binary heap of (score, position) entries, each valid while
// its node's version is the one it was made at; a node a placement
// changed (cycle.changed) is scored again and pushed anew, stale entries
// are dropped when they surface. Placement through the index and through
// the scan of every node choose the same node and devices; the scan stays
// for the explanation when nothing fits.
type shapeIndex struct {
	heap   []indexEntry
	cursor int      // into cycle.changed
	pushed []uint64 // by position: the version last pushed
	// parked holds, by position, the nodes taken out of the heap because
	// what they are held for leaves the shape no room, with the state of
	// their futures then: a node held for preemptors takes a placement
	// only where it also fits their future (fitOn), which depends on the
	// node and its futures alone (remembered with the score). A parked
	// node returns when its future changes (cycle.changed); a workload
	// the node is held for checks its own held nodes itself (search).
	parked []futureVersion
	req    core.Request
	broken bool // a score is NaN: no order, the scan decides
	buf    []indexEntry
}

type indexEntry struct {
	score   float64
	pos     int
	version uint64
}

func (a indexEntry) less(b indexEntry) bool {
	return a.score < b.score || (a.score == b.score && a.pos < b.pos)
}

func newShapeIndex(c *cycle, req core.Request, memo []scored) *shapeIndex {
	x := &shapeIndex{pushed: make([]uint64, len(c.fleet.nodes)), parked: make([]futureVersion, len(c.fleet.nodes)), req: req, cursor: len(c.changed)}
	for _, ns := range c.fleet.nodes {
		x.note(c, ns, memo)
	}
	for i := len(x.heap)/2 - 1; i >= 0; i-- {
		x.down(i)
	}
	return x
}

// note scores ns for the shape if its score is stale, and adds it to the
// heap (unsorted: callers restore the order) when it fits and is not
// there at this version.
func (x *shapeIndex) note(c *cycle, ns *nodeState, memo []scored) {
	m := &memo[ns.pos]
	if p := x.parked[ns.pos]; p != (futureVersion{}) {
		if p == ns.futureVersion(c) {
			return
		}
		x.parked[ns.pos], x.pushed[ns.pos] = futureVersion{}, 0
	}
	if m.version != ns.version+1 {
		ch, reason := onNodeWith(ns, x.req, c.scores.scorer)
		*m = scored{version: ns.version + 1, gpu: ch.gpu, score: ch.score, why: reason}
	}
	if m.why != "" || x.pushed[ns.pos] == m.version {
		return
	}
	if math.IsNaN(m.score) {
		x.broken = true
	}
	x.pushed[ns.pos] = m.version
	x.heap = append(x.heap, indexEntry{score: m.score, pos: ns.pos, version: m.version})
}

// search finds w's place as placeOne's scan would, outside the burst
// pass; found is false when the index cannot say (then the scan decides).
func (x *shapeIndex) search(c *cycle, w *core.Workload, memo []scored) (best choice, keep, found bool) {
	for ; x.cursor < len(c.changed); x.cursor++ {
		if ns := c.fleet.nodes[c.changed[x.cursor]]; true {
			n := len(x.heap)
			x.note(c, ns, memo)
			if len(x.heap) > n {
				x.up(n)
			}
		}
	}
	if x.broken {
		return choice{}, false, false
	}
	buf := x.buf[:0]
	for len(x.heap) > 0 {
		e := x.heap[0]
		ns := c.fleet.nodes[e.pos]
		if ns.version+1 != e.version {
			x.pop()
			continue
		}
		if found && (e.score > best.score || (e.score == best.score && e.pos > best.ns.pos)) {
			break
		}
		x.pop()
		buf = append(buf, e)
		if c.burst.any && ns.node.Burst() {
			continue // the burst nodes are a pass of their own
		}
		ch, k, reason := c.fitOn(ns, w, w.Request, &memo[e.pos])
		if reason == whyReserved {
			// Held for others with no room in their future for the
			// shape, whoever asks (see parked): out of the heap.
			if m := &memo[e.pos]; m.heldAt == ns.futureVersion(c) && !m.heldOK {
				x.parked[e.pos] = m.heldAt
				buf = buf[:len(buf)-1]
			}
			continue
		}
		if reason != "" {
			continue
		}
		if math.IsNaN(ch.score) {
			found = false
			break
		}
		if !found || ch.score < best.score || (ch.score == best.score && ns.pos < best.ns.pos) {
			best, keep, found = ch, k, true
		}
	}
	for _, e := range buf {
		x.heap = append(x.heap, e)
		x.up(len(x.heap) - 1)
	}
	x.buf = buf
	if !found {
		return choice{}, false, false
	}
	// A workload some nodes are held for may take them where others may
	// not: its own held nodes are weighed here, parked or not.
	for _, ns := range c.heldBefore(w) {
		if x.parked[ns.pos] == (futureVersion{}) || (c.burst.any && ns.node.Burst()) {
			continue
		}
		ch, k, reason := c.fitOn(ns, w, w.Request, &memo[ns.pos])
		if reason == "" && (ch.score < best.score || (ch.score == best.score && ns.pos < best.ns.pos)) {
			best, keep = ch, k
		}
	}
	return best, keep, true
}

func (x *shapeIndex) pop() {
	n := len(x.heap) - 1
	x.heap[0] = x.heap[n]
	x.heap = x.heap[:n]
	if n > 0 {
		x.down(0)
	}
}

func (x *shapeIndex) up(i int) {
	h := x.heap
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (x *shapeIndex) down(i int) {
	h := x.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
