package sched

import (
	"cmp"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gpufleet/gpufleet/internal/core"
)

// parallelPendingAt is the fewest pending workloads that newCycle reads on
// several goroutines (GOMAXPROCS): below it the goroutines would cost more
// than they save.
const parallelPendingAt = 4096

// parallelNodesAt is the fewest nodes whose states newCycle makes, and
// whose eligible work it notes, on several goroutines (inParts).
const parallelNodesAt = 256

// inParts calls f over [0, n) in GOMAXPROCS contiguous parts at once, each
// on its own goroutine, when n is at least least; otherwise once, here.
// Each call must write only what belongs to its part.
func inParts(n, least int, f func(lo, hi int)) {
	if !inParallel(n, least) {
		f(0, n)
		return
	}
	parts := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for i := range parts {
		lo, hi := i*n/parts, (i+1)*n/parts
		wg.Go(func() { f(lo, hi) })
	}
	wg.Wait()
}

// inParallel reports whether work over n items, least or more, is worth
// splitting: there are that many, and several goroutines run at once.
// (With one, the victim indexes are built by the code that catches them
// up, so that a test at GOMAXPROCS 1 checks the parallel builds against
// it.)
func inParallel(n, least int) bool {
	return n >= least && runtime.GOMAXPROCS(0) >= 2
}

// pendingBuffers are a cycle's arrays by pending workload (its records,
// their flags and queues, the queues' lists, the list of those that
// borrow), its node states, its nodes' stages and its memo's scores by
// node, kept from one cycle for the next (pendingPool) instead of made
// anew: at 1,000 nodes and 50,000 pending they are 8 MB a cycle, and what a cycle allocates sets how often the
// collector marks the whole snapshot. Each array by pending workload is
// zero over all its capacity while pooled, as make would give it.
type pendingBuffers struct {
	pws       []pendingWork
	flags     []uint8
	queueOf   []*teamQueue
	ws        []*pendingWork // the queues' lists, each a part of it
	borrowing []*pendingWork
	// stages are the node states the cycle made for nodes' stages
	// (cycle.stage), the first nStages in use: given back, each holds
	// nothing but its device slice, which the next clone reuses.
	stages  []*nodeState
	nStages int
	// scores are the arrays of scores by node the cycle's memo used
	// (cycle.newScores), the first nScores in use; each is zero over all
	// its length while pooled, and those beyond maxKeptScores bytes are
	// not kept (nil).
	scores  [][]scored
	nScores int
	// nodes are the cycle's node states (fleet.nodes, newNodeStateIn),
	// the first nNodes in use; given back, each holds nothing but its
	// device slice.
	nodes  []*nodeState
	nNodes int
}

// maxKeptScores bounds the bytes of the memo's score arrays the buffers
// keep: there is one a request shape the memo saw, each as long as the
// cluster has nodes (1.7 MB at 12,500 nodes), and the shapes of a real
// queue are many. Those beyond it are made anew by the cycle that needs
// them.
const maxKeptScores = 32 << 20

// pendingPool holds the buffers the last cycle gave back, for the next
// (one at a time: a cycle that finds none makes its own). It is one slot,
// not a sync.Pool, whose Get on another processor than the Put's found
// nothing most of the time here; so buffers for the longest queue
// scheduled stay allocated between cycles (3.6 MB of records at 50,000
// pending).
var pendingPool atomic.Pointer[pendingBuffers]

// takePendingBuffers gives zeroed buffers for n pending workloads, from
// the pool where it holds some large enough.
func takePendingBuffers(n int) *pendingBuffers {
	b := pendingPool.Swap(nil)
	if b == nil {
		b = &pendingBuffers{}
	}
	if cap(b.pws) < n { // all five are as long
		b.pws, b.flags, b.queueOf = make([]pendingWork, n), make([]uint8, n), make([]*teamQueue, n)
		b.ws, b.borrowing = make([]*pendingWork, 0, n), make([]*pendingWork, 0, n)
		return b
	}
	b.pws, b.flags, b.queueOf = b.pws[:n], b.flags[:n], b.queueOf[:n]
	b.ws, b.borrowing = b.ws[:0], b.borrowing[:0]
	return b
}

// stage gives a clone of f for a node's stages, in a node state that an
// earlier cycle's stages used where the buffers keep one.
func (c *cycle) stage(f *nodeState) *nodeState {
	b := c.bufs
	if b.nStages == len(b.stages) {
		b.stages = append(b.stages, &nodeState{})
	}
	st := b.stages[b.nStages]
	b.nStages++
	f.cloneInto(st)
	return st
}

// nodeStates gives n node states to make the cycle's nodes in
// (newNodeStateIn), those an earlier cycle's nodes used first.
func (b *pendingBuffers) nodeStates(n int) []*nodeState {
	for len(b.nodes) < n {
		b.nodes = append(b.nodes, &nodeState{})
	}
	b.nNodes = n
	return b.nodes[:n]
}

// newScores gives a zeroed array of n scores, one that an earlier cycle's
// memo used where the buffers keep one long enough.
func (c *cycle) newScores(n int) []scored {
	b := c.bufs
	if b.nScores == len(b.scores) {
		b.scores = append(b.scores, nil)
	}
	if len(b.scores[b.nScores]) < n {
		b.scores[b.nScores] = make([]scored, n)
	}
	s := b.scores[b.nScores][:n]
	b.nScores++
	return s
}

// give zeroes what the cycle used of b (so that the pool holds nothing of
// the snapshot) and gives it back to the pool.
func (b *pendingBuffers) give(borrowing []*pendingWork) {
	clear(b.pws)
	clear(b.flags)
	clear(b.queueOf)
	clear(b.ws[:cap(b.ws)])
	clear(borrowing[:cap(borrowing)])
	b.borrowing = borrowing[:0]
	for _, st := range b.stages[:b.nStages] {
		*st = nodeState{used: st.used[:0]}
	}
	b.nStages = 0
	kept := 0 // bytes of score arrays kept, at most maxKeptScores
	for i, s := range b.scores[:b.nScores] {
		if kept += len(s) * int(unsafe.Sizeof(scored{})); kept > maxKeptScores {
			b.scores[i] = nil
			continue
		}
		clear(s)
	}
	b.nScores = 0
	for _, ns := range b.nodes[:b.nNodes] {
		*ns = nodeState{used: ns.used[:0]}
	}
	b.nNodes = 0
	pendingPool.Store(b)
}

// Flags of a pending workload found by readOne.
const (
	pendingAdmitted  uint8 = 1 << iota // admissibleOf
	pendingStarvable                   // waited StarvationAfter, admitted
	pendingCapped                      // a task of an array with a cap (arrayDemand)
)

// readPending makes the cycle's record of each pending workload
// (pendingWork, in the snapshot's order) and finds the queue each joins
// (by class level and team, made here with its size), while counting the
// workloads in the packing mix, their teams' pending work and demand, and
// choosing the starving workload.
//
// What a workload's record reads of the cycle does not change during the
// pass (the teams' usage, the classes, the kinds of device, the stops
// under way), so on a long queue (parallelPendingAt) the records are made
// on GOMAXPROCS goroutines, each over one contiguous part of the queue,
// writing only that part of the array, numbering the shapes it sees in
// its own table and finding its part's starving workload; they only read
// the cycle (readOne). A workload of a team the snapshot does not list is
// left to the pass after, which makes the team. That pass, one goroutine
// in the snapshot's order, does what depends on the order as the reading
// one by one did: the shapes are numbered again in the order first seen
// (each part's new shapes after those of the parts before it, in its own
// order: the order of first appearance in the whole queue), the mix
// counts each workload (and reweighs as the counts grow; what it reads of
// a request is in its shape, kept from the shape's first workload), the
// levels and queues are made in the order first seen, and capped arrays
// count their tasks. The starving workload is the least of the parts'
// by class, wait, submission and then place in the queue (starvesBefore:
// the first of equals, as the reading in order chose). So the cycle
// starts the same however the queue was split (TestPendingReadInPartsAsInOrder).
func (c *cycle) readPending(pending []*core.Workload, mix *Mix) ([]pendingWork, []*teamQueue) {
	c.shapeNumbers = shapeNumbers{byKey: map[shape]int32{}, byNumber: map[[5]int64]int32{}}
	pws, flags := c.bufs.pws, c.bufs.flags
	parts := 1
	if len(pending) >= parallelPendingAt {
		parts = max(1, runtime.GOMAXPROCS(0))
	}
	// Part i reads pending[bound(i):bound(i+1)], numbers its shapes in
	// tables[i] (part 0 in the cycle's) and finds its starving workload.
	bound := func(i int) int { return i * len(pending) / parts }
	tables := make([]shapeNumbers, parts)
	starvers := make([]int, parts)
	read := func(i int) {
		t := &tables[i]
		if i == 0 {
			t = &c.shapeNumbers
		} else {
			*t = shapeNumbers{byKey: map[shape]int32{}, byNumber: map[[5]int64]int32{}}
		}
		starver := -1
		for k := bound(i); k < bound(i+1); k++ {
			w := pending[k]
			p := &pws[k]
			p.shape = t.number(shapeKey(w.Request))
			if ts := c.teams.byName[w.Team]; ts != nil { // read only here
				flags[k] = c.readOne(p, w, ts)
				if flags[k]&pendingStarvable != 0 && (starver < 0 || c.starvesBefore(pws, k, starver)) {
					starver = k
				}
			}
		}
		starvers[i] = starver
	}
	if parts == 1 {
		read(0)
	} else {
		var wg sync.WaitGroup
		for i := range parts {
			wg.Go(func() { read(i) })
		}
		wg.Wait()
		var ids []int32
		for i := 1; i < parts; i++ {
			ids = ids[:0]
			for _, k := range tables[i].shapes {
				ids = append(ids, c.number(k))
			}
			for k := bound(i); k < bound(i+1); k++ {
				pws[k].shape = ids[pws[k].shape]
			}
		}
	}
	starver := -1
	for _, k := range starvers {
		if k >= 0 && (starver < 0 || c.starvesBefore(pws, k, starver)) {
			starver = k
		}
	}

	byValue := map[int]*level{}
	queueOf := c.bufs.queueOf
	// By shape number: its place in the mix (Mix.add), and a request of
	// it with its count (the shape holds what the mix reads of it).
	type mixShape struct {
		at  int
		req *core.Request
		n   float64
	}
	var mixAt []mixShape
	var last *level
	for k := range pws {
		p := &pws[k]
		if int(p.shape) == len(mixAt) {
			req := &pending[k].Request
			n := float64(req.Count())
			mixAt = append(mixAt, mixShape{mix.add(*req, n), req, n})
		} else if m := mixAt[p.shape]; m.at >= 0 {
			mix.addAt(m.at, *m.req, m.n)
		}
		if p.ts == nil { // a team the snapshot does not list
			w := pending[k]
			flags[k] = c.readOne(p, w, c.team(w.Team))
			if flags[k]&pendingStarvable != 0 && (starver < 0 || c.starvesBefore(pws, k, starver)) {
				starver = k
			}
		}
		ts := p.ts
		v := -1 << 30 // unknown classes go last and are explained
		if p.class != nil {
			v = p.class.Value
		}
		l := last
		if l == nil || l.value != v {
			l = byValue[v]
			if l == nil {
				l = &level{value: v, ord: len(c.order.levels)}
				byValue[v] = l
				c.order.levels = append(c.order.levels, l)
			}
			last = l
		}
		for len(ts.queues) <= l.ord {
			ts.queues = append(ts.queues, nil)
		}
		q := ts.queues[l.ord]
		if q == nil {
			q = &teamQueue{team: ts}
			l.teams = append(l.teams, q)
			ts.queues[l.ord] = q
		}
		queueOf[k] = q
		q.n++
		ts.pending += p.ask
		// Fair shares weigh only demand that could be admitted: not batch
		// (it borrows idle capacity and never reclaims), not work its
		// team's limit or its class's quota rule keeps out, not the tasks
		// of a job array beyond its cap.
		if f := flags[k]; f&pendingAdmitted != 0 && (f&pendingCapped == 0 || c.arrayDemand(p.w)) {
			ts.demand += p.ask
		}
	}
	// The one workload that may hold a node against starvation: the
	// highest class, then the longest waiting, among those that waited
	// StarvationAfter and pass their quota rules.
	if starver >= 0 {
		c.starving.w = pending[starver]
	}
	return pws, queueOf
}

// readOne fills p, the record of pending w of team ts, but for its shape,
// and returns its flags. It reads the cycle and changes nothing there:
// readPending calls it on several goroutines at once.
func (c *cycle) readOne(p *pendingWork, w *core.Workload, ts *teamState) uint8 {
	var class *core.PriorityClass
	if i := c.classIndex(w); i >= 0 {
		class = &c.classes[i]
	}
	*p = pendingWork{w: w, id: w.ID, ts: ts, class: class, ask: c.askMilli(w), seq: w.Seq, shape: p.shape, nominated: w.Status.Nominated != ""}
	_, byKey := ts.team.ModelKey(w.Request.GPUModels)
	if !byKey {
		_, byKey = ts.team.PoolKey(&w.Request)
	}
	p.totalGuarantee = !byKey
	p.plainBase = !p.nominated && c.plainStatic(w)
	var f uint8
	if a := w.Array; a != nil && a.MaxRunning > 0 {
		f = pendingCapped
	}
	if c.admissibleOf(p) {
		f |= pendingAdmitted
		if c.opts.StarvationAfter > 0 && !w.CreatedAt.IsZero() && c.now.Sub(w.CreatedAt) >= c.opts.StarvationAfter {
			f |= pendingStarvable
		}
	}
	return f
}

// starvesBefore reports whether pending workload j comes before k for the
// starvation reservation: the higher class, then the longer waiting, then
// the earlier submitted, then the earlier in the snapshot (the first of
// equals, as when they are compared in the snapshot's order). Both are
// starvable (their classes defined).
func (c *cycle) starvesBefore(pws []pendingWork, j, k int) bool {
	a, b := &pws[j], &pws[k]
	return cmp.Or(cmp.Compare(b.class.Value, a.class.Value), a.w.CreatedAt.Compare(b.w.CreatedAt), cmp.Compare(a.seq, b.seq), cmp.Compare(j, k)) < 0
}
