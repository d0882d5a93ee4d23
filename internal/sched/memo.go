package sched

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// refusalMemo remembers placements that found no place, so that the next
// workload refused alike is refused, with the same explanation, without
// the search. Each map has its own rule:
//
//   - never, by shape number: why no node could hold the shape even
//     empty ("" when some could). Which nodes exist and may be used does
//     not change within a cycle: set once, never cleared.
//   - noFit: shapes that fitted nowhere, for a workload holding no node,
//     for a reason of the shape alone (placementAttempt.soft unset).
//     Nodes only fill within a cycle, so they fit nowhere later either:
//     set once, never cleared.
//   - noFitResv: for workloads the starvation reservation refused
//     (backfill), and nothing else refused softly: its refusals only grow
//     within a cycle for them (what it holds grows; whether it binds them
//     does not depend on usage). Its key names the reservation's workload
//     and whether it binds, so an entry holds while that reservation
//     lasts, and is never read after.
//   - scans: the explanation a scan of every node made when the shape's
//     index found no place, valid while the nodes are as they were then:
//     while cycle.changed is as long as its stamp.
type refusalMemo struct {
	never     map[int32]string
	noFit     map[fitKey]string
	noFitResv map[resvFitKey]string
	scans     map[scanKey]scanMemo
}

// fitKey is noFit's key: a shape (its number), and whether the workload
// may burst (it then tries more nodes than one of its shape that may
// not).
type fitKey struct {
	shape int32
	burst bool
}

// resvFitKey is noFitResv's key: a placement's shape and pass, its max
// runtime (a reservation's backfill reads it), the workload the one
// starvation reservation is for, and whether the reservation binds the
// placement (binds: always for a workload that would borrow; for one
// within its team's guarantee, while the reserved workload is within its
// own, which, its team's usage only growing, once false stays so).
type resvFitKey struct {
	fit        fitKey
	maxRuntime time.Duration
	resv       core.WorkloadID
	binds      bool
}

// resvFitKey is w's key in noFitResv, w within its team's guarantee or
// not (inQuota), while a reservation lasts.
func (c *cycle) resvFitKey(fk fitKey, w *core.Workload, inQuota bool) resvFitKey {
	ns := c.starving.at
	return resvFitKey{fit: fk, maxRuntime: w.MaxRuntime, resv: c.starving.of, binds: c.binds(ns, w, inQuota)}
}

// scanKey is what a placement's explanation depends on besides the nodes
// (for a workload that holds no node and is reserved none): its shape,
// whether it runs within its team's guarantee and its max runtime (a
// reservation's backfill reads them), and what its team may still take.
type scanKey struct {
	shape      shape
	inQuota    bool
	maxRuntime time.Duration
	budget     int64
}

// scanMemo is an explanation made while the nodes were at stamp (the
// length of cycle.changed), with the soft reasons it met.
type scanMemo struct {
	stamp           int
	why             string
	soft, budgetHit bool
}

// decisionMemo remembers the last decision made for each decisionKey, so
// that a plain workload (cycle.plain) decided as the last one of its team,
// class and shape was is decided alike without the search.
//
// Rule: an entry holds while its team's usage, and whether other teams
// hold capacity, are what they were when it was made (cachedDecision
// keeps both; both only grow). Only a decision that waits, is nominated
// nowhere and made no placement or preemption is remembered, and none
// while uncacheable is set: decideAll clears it before a plain workload's
// search, and the search sets it where the next workload alike might be
// decided otherwise (a refusal by the reservation or the budget).
//
// Where classes times shapes are few (decisionTableAt), the entries are
// kept in each team's table (teamState.decided, by class and shape)
// rather than in byKey: table says which.
type decisionMemo struct {
	byKey       map[decisionKey]cachedDecision
	table       bool
	classes     []core.PriorityClass // cycle.classes
	shapes      int                  // how many shapes the cycle numbered
	uncacheable bool
}

// decisionKey is what the decision of a plain workload (cycle.plain)
// depends on besides its team's usage: its team, class and shape. Nodes
// only fill within a cycle, so a shape that fitted nowhere, or found no
// victims, for one such workload does not for the next (noFit,
// victimMemo.none); its quota rules read its team's usage; its message,
// the same, and whether other teams hold capacity (which, once true,
// stays).
type decisionKey struct {
	ts    *teamState
	class *core.PriorityClass // in cycle.classes
	shape int32               // in cycle.shapes
}

// cachedDecision is the last decision made for a decisionKey, with what
// its team held then.
type cachedDecision struct {
	reason, message string
	usage           int64
	others          bool
	set             bool // in a team's table (teamState.decided): one is there
}

// decisionTableAt is the most classes times shapes for which each team
// keeps its decisions in a table (teamState.decided, by class and shape
// number) rather than in the cycle's map: a table read costs no hashing,
// and is small where the shapes are few.
const decisionTableAt = 256

// size readies the memo for the cycle's classes and its number of shapes.
func (m *decisionMemo) size(classes []core.PriorityClass, shapes int) {
	m.classes, m.shapes = classes, shapes
	m.table = len(classes)*shapes <= decisionTableAt
}

// of returns the decision remembered for k, if any.
func (m *decisionMemo) of(k decisionKey) (cachedDecision, bool) {
	if m.table {
		if t := k.ts.decided; t != nil {
			d := t[m.slot(k)]
			return d, d.set
		}
		return cachedDecision{}, false
	}
	d, ok := m.byKey[k]
	return d, ok
}

// remember remembers d for k.
func (m *decisionMemo) remember(k decisionKey, d cachedDecision) {
	if !m.table {
		m.byKey[k] = d
		return
	}
	if k.ts.decided == nil {
		k.ts.decided = make([]cachedDecision, len(m.classes)*m.shapes)
	}
	d.set = true
	k.ts.decided[m.slot(k)] = d
}

// slot is k's place in its team's table: by class (its place in
// cycle.classes), then shape.
func (m *decisionMemo) slot(k decisionKey) int {
	i := 0
	for &m.classes[i] != k.class {
		i++
	}
	return i*m.shapes + int(k.shape)
}

// victimMemo is the victim search's memory: the keys for which it found no
// victim set (none), its index of each preemptor shape (index,
// victimindex.go), the buffers the index builds write in on several
// goroutines (one build at a time), and the scratch victimSet works in.
//
// Rule: none is set when a search finds no set and never cleared: nodes
// only fill, and victims once chosen are gone. (A team whose usage grows
// may let fair-share reclaim take more of its work (promoteFair); a key
// refused before is not searched again for it in the cycle.) An index
// catches up from cycle.changed, from where it stopped, before each use.
type victimMemo struct {
	none       map[victimKey]bool
	index      map[shape]*victimIndex
	orderNotes []orderNote
	teamNotes  []teamNote
	scratch    victimScratch
}

// victimKey is victimMemo.none's key: the team, the class (one of the
// cycle's), the shape's number, whether within quota and whether it may
// burst. It holds no string, so that it hashes at once.
type victimKey struct {
	team           *teamState
	class          *core.PriorityClass
	shape          int32
	inQuota, burst bool
}

// scoreMemo is the packing policy of the cycle (scorer) and, by request
// shape, the score each node gave it with the shape's index (byShape,
// memoEntry).
//
// Rule: the scorer's weights are set once, when the cycle starts, so a
// node's score for a shape changes only when the node does: a score is
// valid while the node's version is the one it was made at
// (scored.version), and the index catches up from cycle.changed. The
// random policy's scores are not functions of the node: nothing is
// remembered for it.
type scoreMemo struct {
	scorer  scorer
	byShape map[memoShape]*memoEntry
}

// newScoreMemo sets the packing policy's weights for the cycle's mix of
// work and nodes.
func newScoreMemo(packing string, mix *Mix, nodes []*nodeState) scoreMemo {
	mix.reweigh()
	sc, err := newScorer(packing, mix, 1)
	if err != nil {
		sc, _ = newScorer(PackGPUFleet, mix, 1)
	}
	setNodes(sc, nodes)
	if pr, ok := sc.(preparer); ok {
		pr.prepare() // the weights hold for the whole cycle
	}
	return scoreMemo{scorer: sc, byShape: map[memoShape]*memoEntry{}}
}

// scored is a node's remembered score for a request shape, valid while the
// node's version is version-1 (0: none).
type scored struct {
	version uint64
	gpu     int
	score   float64
	why     string
	// On a node held for preemptors: the choice that also fits its future
	// and stages (futureChoice), and whether there is one, valid while
	// the node, its future and its stages are as heldAt says.
	heldAt futureVersion
	heldCh choice
	heldOK bool
}

// futureVersion identifies the state of a node, its future and its stages:
// each only changes through add, which counts, and stages are only
// appended, so a change to any of them changes it. Zero: none.
type futureVersion struct {
	node, future, stages, holds uint64
	n                           int
}

func (ns *nodeState) futureVersion(c *cycle) futureVersion {
	v := futureVersion{node: ns.version + 1, future: ns.futureState(c).version, n: len(ns.stages), holds: ns.holdVersion}
	for _, st := range ns.stages {
		v.stages += st.version
	}
	return v
}

// memoShape is what onNodeWith reads of a request.
type memoShape struct {
	milli, gpuMem, cpu, mem   int64
	models, selector, regions string
}

// memoEntry is what a cycle remembers of a request shape.
type memoEntry struct {
	scores []scored // by node position
	index  *shapeIndex
}

// memoFor returns the remembered scores for req's shape, and the shape's
// index (none for the random policy).
func (c *cycle) memoFor(req core.Request) ([]scored, *shapeIndex) {
	if _, random := c.scores.scorer.(*randomFit); random {
		return make([]scored, len(c.fleet.nodes)), nil
	}
	k := memoShape{milli: req.MilliGPU, gpuMem: req.GPUMemoryMiB, cpu: req.MilliCPU, mem: req.MemoryMiB, models: strings.Join(req.GPUModels, "\x00"), regions: strings.Join(req.Regions, "\x00")}
	if len(req.NodeSelector) > 0 {
		keys := slices.Sorted(maps.Keys(req.NodeSelector))
		for _, key := range keys {
			k.selector += key + "=" + req.NodeSelector[key] + "\x00"
		}
	}
	m, ok := c.scores.byShape[k]
	if !ok {
		m = &memoEntry{scores: c.newScores(len(c.fleet.nodes))}
		c.scores.byShape[k] = m
	}
	if m.index == nil {
		m.index = newShapeIndex(c, req, m.scores)
	}
	return m.scores, m.index
}
