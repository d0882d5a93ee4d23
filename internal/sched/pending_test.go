package sched

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// pendingDigest writes down what newCycle found of the pending workloads:
// the starving workload, the shapes by number, the levels with their
// queues in order (each workload's ID, shape number, ask, scope and
// plainness), each team's pending work and demand.
func pendingDigest(c *cycle) string {
	var b strings.Builder
	if c.starving.w != nil {
		fmt.Fprintf(&b, "starver %s\n", c.starving.w.ID)
	}
	fmt.Fprintf(&b, "shapes %v\n", c.shapes)
	for _, l := range c.order.levels {
		fmt.Fprintf(&b, "level %d\n", l.value)
		for _, q := range l.teams {
			fmt.Fprintf(&b, " team %s pending %d demand %d:", q.team.team.Name, q.team.pending, q.team.demand)
			for _, p := range q.ws {
				fmt.Fprintf(&b, " %s/%d/%d/%v/%v/%v", p.id, p.shape, p.ask, p.totalGuarantee, p.plainBase, p.nominated)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestPendingReadInPartsAsInOrder: on a queue long enough for newCycle to
// read it on several goroutines, the cycle starts as it does reading the
// queue on one (GOMAXPROCS 1), whatever the number of parts: the same
// starving workload (among many equals: the first in the snapshot), shapes
// numbered in the order first seen (shapes first seen late in the queue,
// with models and selectors), the same levels, queues, demand (capped
// arrays counted in order) and teams the snapshot does not list.
func TestPendingReadInPartsAsInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 5))
	var nodes []*core.Node
	for i := range 40 {
		nodes = append(nodes, vrNode(fmt.Sprintf("n%02d", i), 8, "H100", 0))
	}
	teams := []core.Team{vrTeam("a", 40000, -1), vrTeam("b", 8000, -1), vrTeam("c", 0, 30000)}
	classes := []string{"production", "training", "development", "batch", "no-such-class", ""}
	var pending []*core.Workload
	const n = 3 * parallelPendingAt
	for i := range n {
		req := core.Request{MilliGPU: []int64{500, 1000, 2000, 4000}[r.IntN(4)]}
		switch r.IntN(10) {
		case 0:
			req.GPUModels = []string{"H100"}
		case 1:
			req.NodeSelector = map[string]string{"zone": fmt.Sprint("z", r.IntN(3))}
		case 2:
			req.MilliGPU = int64(100 * (1 + 9*i/n)) // new shapes late in the queue
		case 3:
			req.Replicas = 2
		}
		team := []string{"a", "b", "c", "unlisted1", "unlisted2"}[r.IntN(5)]
		w := vrJob(fmt.Sprintf("p%05d", i), team, classes[r.IntN(len(classes))], req)
		// Few distinct times and submissions: many equals to starve.
		w.CreatedAt = vrNow.Add(-time.Duration(10+r.IntN(3)) * time.Minute)
		w.Seq = int64(r.IntN(4))
		if r.IntN(20) == 0 {
			w.Array = &core.ArrayTask{ID: core.WorkloadID(fmt.Sprint("arr", r.IntN(3))), MaxRunning: 5}
		}
		pending = append(pending, w)
	}
	snap := &core.Snapshot{Nodes: nodes, Teams: teams, Pending: pending, Usage: vrUsage(nodes, nil)}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	first := newCycle(DefaultOptions(), snap, vrNow)
	want := pendingDigest(first)
	// The starving workload, found as newCycle found it before it read
	// the queue in parts: in the snapshot's order, replaced only by one
	// strictly before it (so the first of equals).
	records := map[core.WorkloadID]*pendingWork{}
	for _, l := range first.order.levels {
		for _, q := range l.teams {
			for _, p := range q.ws {
				records[p.id] = p
			}
		}
	}
	var starver *core.Workload
	var starverValue int
	for _, w := range pending {
		p := records[w.ID]
		if p.class == nil || vrNow.Sub(w.CreatedAt) < DefaultOptions().StarvationAfter || !first.admissibleOf(p) {
			continue
		}
		if starver == nil || cmp.Or(cmp.Compare(starverValue, p.class.Value), w.CreatedAt.Compare(starver.CreatedAt), cmp.Compare(w.Seq, starver.Seq)) < 0 {
			starver, starverValue = w, p.class.Value
		}
	}
	if starver == nil || first.starving.w != starver {
		t.Fatalf("the starving workload is %v, want %v", first.starving.w, starver)
	}
	for _, procs := range []int{2, 3, 5, 8} {
		runtime.GOMAXPROCS(procs)
		c := newCycle(DefaultOptions(), snap, vrNow)
		if got := pendingDigest(c); got != want {
			t.Errorf("GOMAXPROCS=%d: the cycle starts otherwise than reading the queue in order:\n%s", procs, firstDiff(got, want))
		}
		// The packing mix, counted in order, weighs the same.
		if !reflect.DeepEqual(c.scores.scorer, first.scores.scorer) {
			t.Errorf("GOMAXPROCS=%d: the scorer (its packing mix) differs from the one counted in order", procs)
		}
	}
}

// firstDiff is the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("got  %.300s\nwant %.300s", g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}
