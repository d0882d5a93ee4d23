package burst_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/burst"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// releaseEnv is an elasticEnv (a real store, the burst pools cheap and
// dear of cluster k8s) with a Releaser of idleRelease 10 minutes on the
// same store and clock; work of class training may burst at once.
type releaseEnv struct {
	*elasticEnv
	rel *burst.Releaser
}

func newReleaseEnv(t *testing.T) *releaseEnv {
	t.Helper()
	x := &releaseEnv{elasticEnv: newElasticEnv(t, func(o *burst.ElasticOptions) { o.Policy.After = 0 })}
	x.rel = x.releaser()
	return x
}

// releaser is a Releaser of the env's store and clock, as a new leader
// would make it.
func (x *releaseEnv) releaser() *burst.Releaser {
	return burst.NewReleaser(x.store, burst.ReleaseOptions{
		After:  10 * time.Minute,
		Policy: sched.BurstPolicy{Classes: []string{"training"}},
		Now:    func() time.Time { return x.now },
	})
}

// burstNode registers (or rewrites, as its cluster's sync does) a node of
// a burst pool with gpus H100s, ready and schedulable unless edit says.
func (x *releaseEnv) burstNode(name, pool string, gpus int, edit func(*core.Node)) {
	x.t.Helper()
	n := core.Node{Name: core.NodeName(name), Pool: pool, PoolKind: core.PoolBurst, Cluster: "k8s", Region: "us-east",
		Schedulable: true, UpdatedAt: x.now}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920})
	}
	if edit != nil {
		edit(&n)
	}
	if err := x.store.PutNode(context.Background(), n); err != nil {
		x.t.Fatal(err)
	}
}

func (x *releaseEnv) releaseStep() {
	x.t.Helper()
	if err := x.rel.Step(context.Background()); err != nil {
		x.t.Fatalf("Releaser.Step: %v", err)
	}
}

// place puts every replica of w on node, gpus devices each from device
// 0 up, as an applied plan would.
func (x *releaseEnv) place(w *core.Workload, node string, gpus int) {
	x.t.Helper()
	var as []core.Assignment
	for r := range w.Request.Count() {
		for g := range gpus {
			i := r*gpus + g
			as = append(as, core.Assignment{Replica: r, Node: core.NodeName(node), GPUIndex: i, GPUUUID: fmt.Sprintf("GPU-%s-%d", node, i), MilliGPU: 1000, MemoryMiB: 81920})
		}
	}
	res, err := x.store.ApplyPlan(context.Background(), core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: as}}}, x.now)
	if err != nil || res[0].Err != nil {
		x.t.Fatalf("place %s on %s: %v %v", w.ID, node, err, res[0].Err)
	}
}

func (x *releaseEnv) finish(w *core.Workload) {
	x.t.Helper()
	if _, err := x.store.Finish(context.Background(), w.ID, 1, core.Succeeded, "Completed", "exit 0", nil, x.now); err != nil {
		x.t.Fatal(err)
	}
}

// state is a node's status: its state and reason.
func (x *releaseEnv) state(node string) (core.NodeState, string) {
	x.t.Helper()
	st, _, err := x.store.NodeStatus(context.Background(), core.NodeName(node))
	if err != nil {
		x.t.Fatal(err)
	}
	return st.State, st.Reason
}

func (x *releaseEnv) wantState(node string, state core.NodeState, reason string) {
	x.t.Helper()
	if s, r := x.state(node); s != state || r != reason {
		x.t.Fatalf("at +%s node %s is %s (%s); want %s (%s)", x.now.Sub(e0), node, s, r, state, reason)
	}
}

// schedulable reports whether the scheduler's snapshot may place on node.
func (x *releaseEnv) schedulable(node string) bool {
	x.t.Helper()
	snap, err := x.store.Snapshot(context.Background())
	if err != nil {
		x.t.Fatal(err)
	}
	for _, n := range snap.Nodes {
		if string(n.Name) == node {
			return n.Schedulable
		}
	}
	x.t.Fatalf("no node %s", node)
	return false
}

// events lists node's event reasons, oldest first.
func (x *releaseEnv) events(node string) []core.NodeEvent {
	x.t.Helper()
	evs, err := x.store.NodeEvents(context.Background(), core.NodeName(node))
	if err != nil {
		x.t.Fatal(err)
	}
	return evs
}

func (x *releaseEnv) audit() []core.AuditEntry {
	x.t.Helper()
	es, err := x.store.Audit(context.Background(), store.AuditFilter{})
	if err != nil {
		x.t.Fatal(err)
	}
	return es
}

// job submits a one-replica job of gpus GPUs that is still being decided
// on (no reason).
func (x *releaseEnv) job(gpus int) *core.Workload {
	x.t.Helper()
	return x.waiting("", func(w *core.Workload) { w.Request = core.Request{MilliGPU: int64(gpus) * 1000} })
}

func TestReleaseIdleBurstNode(t *testing.T) {
	x := newReleaseEnv(t)
	x.burstNode("b0", "cheap", 2, nil)
	x.node("o0", "onprem", 2) // not a burst node: never released
	x.releaseStep()
	x.advance(6 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeReady, "") // 6 of 10 minutes in service

	// Work runs there from +6m to +21m; the Releaser sees it once.
	w := x.job(2)
	x.place(w, "b0", 2)
	x.advance(14 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeReady, "")
	x.advance(time.Minute)
	x.finish(w)
	x.advance(9 * time.Minute) // +30m: it ended 9 minutes ago
	x.releaseStep()
	x.wantState("b0", core.NodeReady, "")
	if !x.schedulable("b0") {
		t.Fatal("b0 not schedulable before its release")
	}

	x.advance(time.Minute + time.Second)
	x.releaseStep()
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
	if x.schedulable("b0") {
		t.Error("a released node is schedulable")
	}
	if s, _ := x.state("o0"); s != core.NodeReady {
		t.Errorf("owned node o0 is %s; want it left alone", s)
	}
	evs := x.events("b0")
	if len(evs) != 1 {
		t.Fatalf("events of b0 %+v; want one", evs)
	}
	if e := evs[0]; e.Reason != burst.ReasonIdleReleased || e.From != core.NodeReady || e.To != core.NodeCordoned || !strings.Contains(e.Message, "10m0s") || !e.Time.Equal(x.now) {
		t.Errorf("event %+v; want IdleReleased, Ready → Cordoned, naming idleRelease, now", e)
	}
	var found bool
	for _, a := range x.audit() {
		if a.Object == "b0" && a.Action == "release idle burst node" && a.User == "gpufleet" && a.Path == "/api/v1/nodes/b0/cordon" {
			found = true
		}
	}
	if !found {
		t.Errorf("audit %+v; want the release of b0 by gpufleet", x.audit())
	}

	// Released once: later steps change nothing.
	x.advance(time.Hour)
	x.releaseStep()
	if evs := x.events("b0"); len(evs) != 1 {
		t.Errorf("events of b0 after more steps: %+v; want the one release", evs)
	}
}

// The idle time is read from the store: work that ran between two steps
// counts, and a new Releaser (a restart, another leader), after the
// cluster's sync has rewritten every node, releases a node whose work
// ended before the restart when the old one would have; a node that ran
// no work waits idleRelease from the rewrite.
func TestReleaseIdleTimeFromStore(t *testing.T) {
	x := newReleaseEnv(t)
	x.burstNode("b0", "cheap", 2, nil)
	x.burstNode("b1", "cheap", 2, nil)
	x.advance(20 * time.Minute)
	// Work on b1 from +20m to +21m, between two steps.
	w := x.job(1)
	x.place(w, "b1", 1)
	x.advance(time.Minute)
	x.finish(w)
	x.advance(time.Minute)
	x.releaseStep() // +22m
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
	x.wantState("b1", core.NodeReady, "") // idle for 1 minute only

	// A restart at +25m: nothing remembered, every node written again.
	x.advance(3 * time.Minute)
	x.rel = x.releaser()
	x.burstNode("b1", "cheap", 2, nil)
	x.burstNode("b2", "cheap", 2, nil) // came before, never ran work
	x.advance(5*time.Minute + time.Second)
	x.releaseStep() // +30m1s: 9m1s after the end
	x.wantState("b1", core.NodeReady, "")
	x.advance(time.Minute)
	x.releaseStep() // +31m1s
	x.wantState("b1", core.NodeCordoned, burst.ReasonIdleReleased)
	x.wantState("b2", core.NodeReady, "")
	x.advance(4 * time.Minute)
	x.releaseStep() // +35m1s: 10m1s after the rewrite
	x.wantState("b2", core.NodeCordoned, burst.ReasonIdleReleased)
}

// A node that ran no work is in service for idleRelease before it is
// released: counted from the later of its record's last write and its
// status's state.
func TestReleaseWaitsForNewNodes(t *testing.T) {
	x := newReleaseEnv(t)
	x.advance(time.Hour)
	x.burstNode("b0", "cheap", 2, nil) // written at +1h
	x.advance(9 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeReady, "")
	// An operator cordons and uncordons it at +1h9m: in service since.
	ctx := context.Background()
	for _, to := range []core.NodeState{core.NodeCordoned, core.NodeReady} {
		if _, err := x.store.UpdateNodeStatus(ctx, "b0", x.now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
			st.State, st.Reason, st.Since = to, "by hand", x.now
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	x.advance(5 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeReady, "by hand")
	x.advance(5 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)

	// Not released: cordoned by an operator, not ready, not schedulable in
	// its cluster, a qualification asked for.
	x.burstNode("c", "cheap", 2, nil)
	x.burstNode("nr", "cheap", 2, func(n *core.Node) { n.NotReady = true })
	x.burstNode("un", "cheap", 2, func(n *core.Node) { n.Schedulable = false })
	x.burstNode("v", "cheap", 2, nil)
	set := func(node string, fn func(st *core.NodeStatus)) {
		if _, err := x.store.UpdateNodeStatus(ctx, core.NodeName(node), x.now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
			fn(st)
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	set("c", func(st *core.NodeStatus) { st.State, st.Reason = core.NodeCordoned, "Cordoned" })
	set("v", func(st *core.NodeStatus) { st.Validate = &core.ValidateRequest{Level: 1, At: x.now} })
	x.advance(time.Hour)
	x.releaseStep()
	x.wantState("c", core.NodeCordoned, "Cordoned")
	x.wantState("v", core.NodeReady, "")
	for _, n := range []string{"nr", "un"} {
		if evs := x.events(n); len(evs) != 0 {
			t.Errorf("events of %s %+v; want none", n, evs)
		}
	}
}

// releaseTwo makes b0 (2 GPUs) and b1 (2 GPUs) of cheap and releases
// them.
func (x *releaseEnv) releaseTwo() {
	x.t.Helper()
	x.burstNode("b0", "cheap", 2, nil)
	x.burstNode("b1", "cheap", 2, nil)
	x.advance(10 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
	x.wantState("b1", core.NodeCordoned, burst.ReasonIdleReleased)
}

// Work that may burst and fits the released nodes takes them back: the
// Elastic reconciler asks for nothing, and the Releaser takes back the
// nodes it needs.
func TestReleaseTakenBackForWaitingWork(t *testing.T) {
	x := newReleaseEnv(t)
	x.releaseTwo()

	// Work that may not burst (class batch), or that waits for quota,
	// takes nothing back.
	x.waiting(sched.ReasonUnschedulable, func(w *core.Workload) { w.Priority = "batch" })
	x.waiting(sched.ReasonQuotaLimit, nil)
	x.releaseStep()
	x.step()
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
	if n := x.prov.askedCount(); n != 0 {
		t.Fatalf("asked %d", n)
	}

	// One replica of 2 GPUs: one node is taken back, the first.
	w := x.waiting(sched.ReasonUnschedulable, func(w *core.Workload) { w.Request = core.Request{MilliGPU: 2000} })
	x.step() // Elastic first: the released nodes are room
	if n := x.prov.askedCount(); n != 0 {
		t.Fatalf("asked %d: %+v; want nothing, the released nodes hold the work", n, x.prov.asked)
	}
	x.advance(time.Second)
	x.releaseStep()
	x.wantState("b0", core.NodeReady, burst.ReasonTakenBack)
	x.wantState("b1", core.NodeCordoned, burst.ReasonIdleReleased)
	if !x.schedulable("b0") {
		t.Error("b0 taken back but not schedulable")
	}
	evs := x.events("b0")
	// The event is served to every caller: it names no workload (the
	// waiting one may be another team's); the audit entry (admins) does.
	if e := evs[len(evs)-1]; e.Reason != burst.ReasonTakenBack || e.From != core.NodeCordoned || e.To != core.NodeReady || strings.Contains(e.Message, string(w.ID)) {
		t.Errorf("last event %+v; want TakenBack, Cordoned → Ready, not naming %s", e, w.ID)
	}
	var found bool
	for _, a := range x.audit() {
		found = found || a.Object == "b0" && a.Action == "take back released burst node" && a.Path == "/api/v1/nodes/b0/uncordon" && strings.Contains(a.Message, string(w.ID))
	}
	if !found {
		t.Errorf("audit %+v; want the take-back of b0, naming %s", x.audit(), w.ID)
	}

	// The scheduler places it there; b0 is not released again until it
	// has been idle for idleRelease since.
	x.place(w, "b0", 2)
	x.advance(5 * time.Minute)
	x.finish(w)
	x.advance(9 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeReady, burst.ReasonTakenBack)
	x.advance(time.Minute + time.Second)
	x.releaseStep()
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
}

// Work whose replicas do not all fit takes nothing back, and the Elastic
// reconciler asks for it: the same room for both.
func TestReleaseNotTakenBackWithoutRoom(t *testing.T) {
	x := newReleaseEnv(t)
	x.releaseTwo()
	// 3 replicas of 2 GPUs on two nodes of 2: no room in cheap.
	x.waiting(sched.ReasonUnschedulable, func(w *core.Workload) { w.Request = core.Request{MilliGPU: 2000, Replicas: 3} })
	x.releaseStep()
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
	x.wantState("b1", core.NodeCordoned, burst.ReasonIdleReleased)
	x.step()
	if n := x.prov.askedCount(); n != 1 || x.prov.asked[0].Pool != "cheap" {
		t.Fatalf("asked %+v; want cheap once", x.prov.asked)
	}

	// 2 replicas: both nodes are taken back.
	y := newReleaseEnv(t)
	y.releaseTwo()
	y.waiting(sched.ReasonUnschedulable, nil) // 2 replicas of 2 GPUs
	y.step()
	if n := y.prov.askedCount(); n != 0 {
		t.Fatalf("asked %+v; want nothing", y.prov.asked)
	}
	y.releaseStep()
	y.wantState("b0", core.NodeReady, burst.ReasonTakenBack)
	y.wantState("b1", core.NodeReady, burst.ReasonTakenBack)
}

// A released node that its cluster removed is taken back once, is then
// not schedulable, so the Elastic reconciler asks for new nodes, and it
// is not released again.
func TestReleaseGoneNode(t *testing.T) {
	x := newReleaseEnv(t)
	x.burstNode("b0", "cheap", 2, nil)
	x.advance(10 * time.Minute)
	x.releaseStep()
	x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
	// The autoscaler removes it: the cluster's sync rewrites it not
	// schedulable (nodeSync.put of a node that left).
	x.advance(time.Minute)
	x.burstNode("b0", "cheap", 2, func(n *core.Node) { n.Schedulable = false })
	x.waiting(sched.ReasonUnschedulable, func(w *core.Workload) { w.Request = core.Request{MilliGPU: 2000} })
	x.step()
	if n := x.prov.askedCount(); n != 0 {
		t.Fatalf("asked %d; want the released node counted", n)
	}
	x.releaseStep()
	x.wantState("b0", core.NodeReady, burst.ReasonTakenBack)
	if x.schedulable("b0") {
		t.Fatal("a node its cluster no longer lists is schedulable")
	}
	x.step()
	if n := x.prov.askedCount(); n != 1 {
		t.Fatalf("asked %d after the take-back; want cheap asked", n)
	}
	x.advance(time.Hour)
	x.releaseStep()
	x.releaseStep()
	if evs := x.events("b0"); len(evs) != 2 {
		t.Errorf("events %+v; want the release and the take-back only", evs)
	}
}

// A released node with work on it (a placement that raced the release)
// or no longer in a burst pool is taken back.
func TestReleaseTakenBackBusyOrNotBurst(t *testing.T) {
	x := newReleaseEnv(t)
	x.burstNode("b0", "cheap", 2, nil)
	x.burstNode("b1", "cheap", 2, nil)
	w := x.job(1)
	x.place(w, "b0", 1)
	// The race's outcome: released while the placement committed.
	for _, n := range []core.NodeName{"b0", "b1"} {
		if _, err := x.store.UpdateNodeStatus(context.Background(), n, x.now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
			st.State, st.Reason = core.NodeCordoned, burst.ReasonIdleReleased
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	x.releaseStep()
	x.wantState("b0", core.NodeReady, burst.ReasonTakenBack)
	x.wantState("b1", core.NodeCordoned, burst.ReasonIdleReleased)
	if evs := x.events("b0"); len(evs) != 1 || !strings.Contains(evs[0].Message, "work was placed") {
		t.Errorf("events of b0 %+v", evs)
	}
	x.burstNode("b1", "cheap", 2, func(n *core.Node) { n.PoolKind = core.PoolOnDemand })
	x.releaseStep()
	x.wantState("b1", core.NodeReady, burst.ReasonTakenBack)
}

func TestReleaseOff(t *testing.T) {
	x := newReleaseEnv(t)
	x.rel = burst.NewReleaser(x.store, burst.ReleaseOptions{Policy: sched.BurstPolicy{Classes: []string{"training"}}, Now: func() time.Time { return x.now }})
	x.burstNode("b0", "cheap", 2, nil)
	x.advance(24 * time.Hour)
	x.releaseStep()
	x.wantState("b0", core.NodeReady, "")
}

// Waiting work takes released nodes back from the cheapest pool with
// room, and none when that pool's nodes in service hold it.
func TestReleaseTakeBackCheapestPool(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prices map[string]int64
		want   core.NodeState
	}{
		{name: "dear is cheaper and has room in service", prices: map[string]int64{"dear": 1, "cheap": 2}, want: core.NodeCordoned},
		{name: "cheap is cheaper", prices: map[string]int64{"dear": 2, "cheap": 1}, want: core.NodeReady},
		{name: "only dear is priced", prices: map[string]int64{"dear": 5}, want: core.NodeCordoned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newReleaseEnv(t)
			x.burstNode("b0", "cheap", 2, nil)
			x.advance(10 * time.Minute)
			x.releaseStep()
			x.wantState("b0", core.NodeCordoned, burst.ReasonIdleReleased)
			x.burstNode("d0", "dear", 2, nil)
			x.rel = burst.NewReleaser(x.store, burst.ReleaseOptions{After: 10 * time.Minute,
				Policy: sched.BurstPolicy{Classes: []string{"training"}, Prices: tc.prices}, Now: func() time.Time { return x.now }})
			x.waiting(sched.ReasonUnschedulable, func(w *core.Workload) { w.Request = core.Request{MilliGPU: 2000} })
			x.releaseStep()
			if s, _ := x.state("b0"); s != tc.want {
				t.Errorf("b0 is %s; want %s", s, tc.want)
			}
		})
	}
}
