package burst_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/burst"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// memProvisioner is a whole in-memory Provisioner: it keeps every request
// with its state until it is deleted, and the test answers them as a
// cluster's autoscaler would.
type memProvisioner struct {
	mu      sync.Mutex
	n       int
	live    map[string]*memRequest
	asked   []core.ProvisionRequest // every Provision, in order
	deleted []string
	refuse  map[string]error // pool → Provision fails
	onAsk   func(name string, req core.ProvisionRequest)
}

type memRequest struct {
	req   core.ProvisionRequest
	state core.ProvisionState
	msg   string
}

func newMemProvisioner() *memProvisioner {
	return &memProvisioner{live: map[string]*memRequest{}, refuse: map[string]error{}}
}

func (m *memProvisioner) Provision(_ context.Context, req core.ProvisionRequest) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuse[req.Pool]; err != nil {
		return "", err
	}
	m.n++
	name := fmt.Sprintf("pr-%s-%s-%d", req.Workload, req.Pool, m.n)
	m.live[name] = &memRequest{req: req, state: core.ProvisionPending}
	m.asked = append(m.asked, req)
	if m.onAsk != nil {
		m.onAsk(name, req)
	}
	return name, nil
}

func (m *memProvisioner) ProvisionStatus(_ context.Context, req core.ProvisionRequest, name string) (core.ProvisionState, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.live[name]
	if r == nil {
		return core.ProvisionFailed, "no such request", nil
	}
	if r.req.Workload != req.Workload || r.req.Pool != req.Pool {
		return "", "", fmt.Errorf("request %s is of %s/%s, asked about %s/%s", name, r.req.Workload, r.req.Pool, req.Workload, req.Pool)
	}
	return r.state, r.msg, nil
}

func (m *memProvisioner) DeleteProvision(_ context.Context, _ core.ProvisionRequest, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live[name] != nil {
		m.deleted = append(m.deleted, name)
	}
	delete(m.live, name)
	return nil
}

// answer sets the state of the one live request for pool.
func (m *memProvisioner) answer(t *testing.T, pool string, st core.ProvisionState, msg string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.live {
		if r.req.Pool == pool {
			r.state, r.msg = st, msg
			return
		}
	}
	t.Fatalf("no live request for pool %s", pool)
}

// livePools lists the pools of the live requests, sorted.
func (m *memProvisioner) livePools() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.live {
		out = append(out, r.req.Pool)
	}
	slices.Sort(out)
	return out
}

func (m *memProvisioner) askedCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.asked)
}

// elasticEnv is a store with a team, an owned node (full or not), and
// two empty burst pools of one cluster: cheap (us-east) and dear
// (us-west).
type elasticEnv struct {
	t     *testing.T
	store *store.Store
	now   time.Time
	prov  *memProvisioner
	el    *burst.Elastic
}

var e0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func newElasticEnv(t *testing.T, edit func(*burst.ElasticOptions)) *elasticEnv {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "gpufleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.CreateTeam(ctx, core.NewTeam("a", e0)); err != nil {
		t.Fatal(err)
	}
	x := &elasticEnv{t: t, store: s, now: e0, prov: newMemProvisioner()}
	opts := burst.ElasticOptions{
		Policy: sched.BurstPolicy{After: 2 * time.Minute, Classes: []string{"training"}},
		Pools: map[string]burst.ElasticPool{
			"onprem": {Cluster: "local", Kind: core.PoolOwned, Region: "eu-west"},
			"cheap":  {Cluster: "k8s", Kind: core.PoolBurst, Region: "us-east", Price: 2, Selector: map[string]string{"nodepool": "cheap"}},
			"dear":   {Cluster: "k8s", Kind: core.PoolBurst, Region: "us-west", Price: 3.5},
		},
		Provisioners: map[string]burst.Provisioner{"k8s": x.prov},
		Timeout:      5 * time.Minute,
		Backoff:      time.Minute,
		MaxBackoff:   4 * time.Minute,
		Now:          func() time.Time { return x.now },
	}
	if edit != nil {
		edit(&opts)
	}
	x.el = burst.NewElastic(s, opts)
	return x
}

// node registers a node of pool with gpus H100s.
func (x *elasticEnv) node(name, pool string, gpus int) {
	x.t.Helper()
	n := core.Node{Name: core.NodeName(name), Pool: pool, Schedulable: true, UpdatedAt: x.now}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920})
	}
	if err := x.store.PutNode(context.Background(), n); err != nil {
		x.t.Fatal(err)
	}
}

// waiting submits a workload and records the scheduler's verdict on it:
// reason (Unschedulable: waiting for capacity).
func (x *elasticEnv) waiting(reason string, edit func(*core.Workload)) *core.Workload {
	x.t.Helper()
	w := &core.Workload{Spec: core.Spec{Name: "train", Team: "a", Owner: "alice", Kind: core.KindJob, Priority: "training",
		Request: core.Request{MilliGPU: 2000, Replicas: 2}, Command: []string{"train"}}}
	if edit != nil {
		edit(w)
	}
	out, _, err := x.store.CreateWorkload(context.Background(), w, nil, x.now)
	if err != nil {
		x.t.Fatal(err)
	}
	x.decide(out.ID, reason)
	return out
}

func (x *elasticEnv) decide(id core.WorkloadID, reason string) {
	x.t.Helper()
	plan := core.Plan{Unplaced: []core.Decision{{Workload: id, Reason: reason, Message: "waiting: " + reason}}}
	if _, err := x.store.ApplyPlan(context.Background(), plan, x.now); err != nil {
		x.t.Fatal(err)
	}
}

func (x *elasticEnv) step() {
	x.t.Helper()
	if err := x.el.Step(context.Background()); err != nil {
		x.t.Fatalf("Step: %v", err)
	}
}

func (x *elasticEnv) advance(d time.Duration) { x.now = x.now.Add(d) }

func TestElasticAsksCheapestOnceThenFailsOver(t *testing.T) {
	x := newElasticEnv(t, nil)
	w := x.waiting(sched.ReasonUnschedulable, nil)

	x.step() // waited 0 of 2 minutes: not yet
	if n := x.prov.askedCount(); n != 0 {
		t.Fatalf("asked %d before burst.after", n)
	}
	x.advance(2 * time.Minute)
	x.step()
	x.step()
	if got := x.prov.livePools(); !slices.Equal(got, []string{"cheap"}) {
		t.Fatalf("live requests %v; want one, of the cheapest pool", got)
	}
	if n := x.prov.askedCount(); n != 1 {
		t.Fatalf("asked %d times; want once", n)
	}
	req := x.prov.asked[0]
	if req.Workload != w.ID || req.Team != "a" || req.Cluster != "k8s" || req.GPUs != 2 || req.Count != 2 {
		t.Errorf("request %+v; want 2 pods of 2 GPUs of workload %s, team a, cluster k8s", req, w.ID)
	}
	if r := x.el.Requests(); len(r) != 1 || r[0].State != core.ProvisionPending || r[0].Pool != "cheap" {
		t.Errorf("Requests() = %+v; want one Pending for cheap", r)
	}

	// cheap fails: withdrawn, and dear is asked.
	x.prov.answer(t, "cheap", core.ProvisionFailed, "Failed: OutOfStock")
	x.step()
	x.step()
	if got := x.prov.livePools(); !slices.Equal(got, []string{"dear"}) {
		t.Fatalf("after cheap failed, live requests %v; want dear's only", got)
	}
	if len(x.prov.deleted) != 1 || !strings.Contains(x.prov.deleted[0], "cheap") {
		t.Errorf("deleted %v; want cheap's request", x.prov.deleted)
	}

	// dear never answers: withdrawn at the timeout; cheap backs off
	// 1 minute from its failure (over by now), so cheap is asked again.
	x.advance(5 * time.Minute)
	x.step()
	if got := x.prov.livePools(); !slices.Equal(got, []string{}) && !slices.Equal(got, []string{"cheap"}) {
		t.Fatalf("after dear timed out, live requests %v", got)
	}
	x.step()
	if got := x.prov.livePools(); !slices.Equal(got, []string{"cheap"}) {
		t.Fatalf("after dear timed out, live requests %v; want cheap's again", got)
	}

	// cheap fails again (third failure: 4 minutes' backoff), dear backs
	// off 2 minutes since its timeout: nothing to ask for a while.
	x.prov.answer(t, "cheap", core.ProvisionFailed, "Failed: again")
	x.step()
	x.step()
	if got := x.prov.livePools(); len(got) != 0 {
		t.Fatalf("with every pool backing off, live requests %v; want none", got)
	}
	x.advance(2 * time.Minute)
	x.step()
	if got := x.prov.livePools(); !slices.Equal(got, []string{"dear"}) {
		t.Fatalf("after dear's backoff, live requests %v; want dear's", got)
	}
}

func TestElasticProvisionedThenStarts(t *testing.T) {
	x := newElasticEnv(t, func(o *burst.ElasticOptions) { o.Policy.After = 0 })
	w := x.waiting(sched.ReasonUnschedulable, nil)
	x.step()
	x.prov.answer(t, "cheap", core.ProvisionProvisioned, "Provisioned: 2 nodes")
	for range 3 {
		x.advance(10 * time.Minute) // past the timeout: a provisioned request stays
		x.step()
	}
	if n, live := x.prov.askedCount(), x.prov.livePools(); n != 1 || !slices.Equal(live, []string{"cheap"}) {
		t.Fatalf("asked %d, live %v; want the one provisioned request kept", n, live)
	}
	if r := x.el.Requests(); len(r) != 1 || r[0].State != core.ProvisionProvisioned || r[0].Message != "Provisioned: 2 nodes" {
		t.Errorf("Requests() = %+v; want it Provisioned with the cluster's words", r)
	}
	// The nodes register and the scheduler places the workload there.
	x.node("cheap-0", "cheap", 2)
	x.node("cheap-1", "cheap", 2)
	var as []core.Assignment
	for r, n := range []string{"cheap-0", "cheap-1"} {
		for g := range 2 {
			as = append(as, core.Assignment{Replica: r, Node: core.NodeName(n), GPUIndex: g, GPUUUID: fmt.Sprintf("GPU-%s-%d", n, g), MilliGPU: 1000, MemoryMiB: 81920})
		}
	}
	res, err := x.store.ApplyPlan(context.Background(), core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: as}}}, x.now)
	if err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res[0].Err)
	}
	x.step()
	if live := x.prov.livePools(); len(live) != 0 {
		t.Errorf("live requests after the start %v; want it withdrawn", live)
	}
	if r := x.el.Requests(); len(r) != 0 {
		t.Errorf("Requests() after the start = %+v", r)
	}
}

func TestElasticWithdrawsWhenCancelled(t *testing.T) {
	x := newElasticEnv(t, func(o *burst.ElasticOptions) { o.Policy.After = 0 })
	w := x.waiting(sched.ReasonUnschedulable, nil)
	x.step()
	if _, err := x.store.RequestStop(context.Background(), w.ID, "Cancelled", "by alice", x.now); err != nil {
		t.Fatal(err)
	}
	x.step()
	if live := x.prov.livePools(); len(live) != 0 || len(x.prov.deleted) != 1 {
		t.Errorf("live %v deleted %v; want the request of the cancelled workload withdrawn", live, x.prov.deleted)
	}
	x.step()
	if n := x.prov.askedCount(); n != 1 {
		t.Errorf("asked %d; want nothing more for an ended workload", n)
	}
}

func TestElasticAsksNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		edit   func(*core.Workload)
		env    func(*elasticEnv)
		opts   func(*burst.ElasticOptions)
	}{
		{name: "class may not burst", reason: sched.ReasonUnschedulable, edit: func(w *core.Workload) { w.Priority = "batch" }},
		{name: "quota, not capacity", reason: sched.ReasonQuotaLimit},
		{name: "not yet decided", reason: ""},
		{name: "residency elsewhere", reason: sched.ReasonUnschedulable, edit: func(w *core.Workload) { w.Request.Regions = []string{"eu-west"} }},
		{name: "another pool selected", reason: sched.ReasonUnschedulable, edit: func(w *core.Workload) {
			w.Request.NodeSelector = map[string]string{core.LabelPool: "onprem"}
		}},
		{name: "a selector the pools' nodes do not carry", reason: sched.ReasonUnschedulable, edit: func(w *core.Workload) {
			w.Request.NodeSelector = map[string]string{"nodepool": "other"}
			w.Request.Regions = []string{"us-east"}
		}},
		{name: "no provisioner for the cluster", reason: sched.ReasonUnschedulable, opts: func(o *burst.ElasticOptions) {
			o.Provisioners = map[string]burst.Provisioner{"other": newMemProvisioner()}
		}},
		{name: "burst pools have room", reason: sched.ReasonUnschedulable, env: func(x *elasticEnv) {
			x.node("c0", "cheap", 4) // both replicas of 2 GPUs fit
			x.node("d0", "dear", 2)
			x.node("d1", "dear", 2)
		}},
		// The scheduler places there: no pool is asked, not even the
		// cheaper one without nodes.
		{name: "one burst pool has room", reason: sched.ReasonUnschedulable, env: func(x *elasticEnv) {
			x.node("d0", "dear", 4)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newElasticEnv(t, func(o *burst.ElasticOptions) {
				o.Policy.After = 0
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			if tc.env != nil {
				tc.env(x)
			}
			x.waiting(tc.reason, tc.edit)
			x.step()
			if n := x.prov.askedCount(); n != 0 {
				t.Errorf("asked %d: %+v; want nothing", n, x.prov.asked)
			}
		})
	}
}

func TestElasticRoomAndResidency(t *testing.T) {
	x := newElasticEnv(t, func(o *burst.ElasticOptions) { o.Policy.After = 0 })
	// cheap has one free 2-GPU node: one replica of two fits, so cheap
	// is asked; dear is outside the residency.
	x.node("c0", "cheap", 2)
	x.waiting(sched.ReasonUnschedulable, func(w *core.Workload) {
		w.Request.Regions = []string{"us-east"}
		w.Request.GPUModels = []string{"H100"}
	})
	x.step()
	if got := x.prov.livePools(); !slices.Equal(got, []string{"cheap"}) {
		t.Fatalf("live %v; want cheap's", got)
	}
	if sel := x.prov.asked[0].PoolSelector; len(sel) != 1 || sel["nodepool"] != "cheap" {
		t.Errorf("pool selector %v; want the pool's labels", sel)
	}
	if m := x.prov.asked[0].GPUModel; m != "NVIDIA H100 80GB HBM3" {
		t.Errorf("GPU model %q; want the fleet's full name for H100", m)
	}
	// cheap fails: dear may not be used, so nothing is asked.
	x.prov.answer(t, "cheap", core.ProvisionFailed, "no")
	x.step()
	x.step()
	if got := x.prov.livePools(); len(got) != 0 {
		t.Errorf("live %v; want none (dear is outside the residency)", got)
	}
}

func TestElasticProvisionError(t *testing.T) {
	x := newElasticEnv(t, func(o *burst.ElasticOptions) { o.Policy.After = 0 })
	x.prov.refuse["cheap"] = errors.New("the cluster has no ProvisioningRequest API")
	x.waiting(sched.ReasonUnschedulable, nil)
	err := x.el.Step(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no ProvisioningRequest API") || !strings.Contains(err.Error(), "cheap") {
		t.Fatalf("Step = %v; want the provisioner's error naming the pool", err)
	}
	x.step() // cheap backs off: dear is asked
	if got := x.prov.livePools(); !slices.Equal(got, []string{"dear"}) {
		t.Errorf("live %v; want dear's", got)
	}
}
