package sched

import (
	"reflect"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// TestBuffersReusedDecideAsNew: a cycle that reuses the buffers an earlier
// cycle gave back (pendingBuffers: of the same cluster, or of another)
// plans what a cycle with buffers of its own plans, and the buffers given
// back hold nothing of the cycle (all zero, the stages' device slices
// aside).
func TestBuffersReusedDecideAsNew(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		opts, snap := vrDraw(t, rapid.Bool().Draw(t, "hostCPU"))
		other, otherSnap := vrDraw(t, false)
		pendingPool.Swap(nil)
		want := vrPlanText(opts.Schedule(snap, vrNow))
		checkGivenBack(t)
		for _, before := range []string{"the same cluster", "another cluster"} {
			if before == "another cluster" {
				other.Schedule(otherSnap, vrNow)
				checkGivenBack(t)
			}
			if got := vrPlanText(opts.Schedule(snap, vrNow)); got != want {
				t.Fatalf("after %s, with its buffers, the plan:\n%s\ndiffers from the one with new buffers:\n%s", before, got, want)
			}
			checkGivenBack(t)
		}
	})
}

// checkGivenBack fails unless the pool's buffers are all zero but for the
// stages' device slices.
func checkGivenBack(t *rapid.T) {
	b := pendingPool.Load()
	if b == nil {
		t.Fatalf("no buffers were given back")
	}
	for i := range b.pws[:cap(b.pws)] {
		if b.pws[:cap(b.pws)][i] != (pendingWork{}) {
			t.Fatalf("pending record %d given back holds %+v", i, b.pws[:cap(b.pws)][i])
		}
	}
	for i, q := range b.queueOf[:cap(b.queueOf)] {
		if q != nil {
			t.Fatalf("queue %d given back is not nil", i)
		}
	}
	for i, f := range b.flags[:cap(b.flags)] {
		if f != 0 {
			t.Fatalf("flags %d given back are %d", i, f)
		}
	}
	for _, l := range [][]*pendingWork{b.ws[:cap(b.ws)], b.borrowing[:cap(b.borrowing)]} {
		for i, p := range l {
			if p != nil {
				t.Fatalf("list entry %d given back is not nil", i)
			}
		}
	}
	if b.nStages != 0 {
		t.Fatalf("%d stages in use given back", b.nStages)
	}
	if b.nScores != 0 {
		t.Fatalf("%d arrays of scores in use given back", b.nScores)
	}
	for i, s := range b.scores {
		for j := range s {
			if !reflect.ValueOf(s[j]).IsZero() {
				t.Fatalf("score %d of array %d given back holds %+v", j, i, s[j])
			}
		}
	}
	if b.nNodes != 0 {
		t.Fatalf("%d node states in use given back", b.nNodes)
	}
	for i, ns := range b.nodes {
		if !reflect.DeepEqual(nodeState{used: ns.used}, *ns) {
			t.Fatalf("node state %d given back holds %+v", i, *ns)
		}
	}
	for i, st := range b.stages {
		if st.node != nil || st.future != nil || st.running != nil || st.models != nil || st.frag != nil || st.version != 0 {
			t.Fatalf("stage %d given back holds a node state", i)
		}
	}
}

// TestGivenBackScoresBounded: the buffers given back keep at most
// maxKeptScores bytes of score arrays (the first ones, zeroed); those
// beyond are dropped, so that a queue of many shapes on a large cluster
// does not hold its arrays for ever.
func TestGivenBackScoresBounded(t *testing.T) {
	defer pendingPool.Store(nil)
	const nodes = 12500
	size := nodes * int(unsafe.Sizeof(scored{}))
	b := takePendingBuffers(0)
	b.scores = nil
	for range 3*maxKeptScores/size + 1 {
		s := make([]scored, nodes)
		s[nodes-1].score = 1
		b.scores = append(b.scores, s)
	}
	b.nScores = len(b.scores)
	b.give(nil)
	got := pendingPool.Swap(nil)
	kept := 0
	for i, s := range got.scores {
		kept += len(s) * int(unsafe.Sizeof(scored{}))
		for j := range s {
			if !reflect.DeepEqual(s[j], scored{}) {
				t.Fatalf("kept score array %d not zeroed at %d", i, j)
			}
		}
	}
	if kept > maxKeptScores || kept == 0 {
		t.Errorf("kept %d bytes of score arrays, want some and at most %d", kept, maxKeptScores)
	}
}
