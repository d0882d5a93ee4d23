package burst

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Provisioner asks a cluster for capacity (the kubernetes executor does
// it with ProvisioningRequests). Each call gets the request it is about,
// so that one implementation may serve several clusters and find the
// namespace from the team.
type Provisioner interface {
	// Provision asks for the capacity and returns the request's name.
	Provision(ctx context.Context, req core.ProvisionRequest) (string, error)
	// ProvisionStatus says what became of it, with the cluster's words.
	ProvisionStatus(ctx context.Context, req core.ProvisionRequest, name string) (core.ProvisionState, string, error)
	// DeleteProvision withdraws it; one already gone is no error.
	DeleteProvision(ctx context.Context, req core.ProvisionRequest, name string) error
}

// ElasticPool is what the reconciler knows of a pool.
type ElasticPool struct {
	Cluster string
	Kind    string // only core.PoolBurst pools are asked
	Region  string
	// Price orders the burst pools a workload may use, cheapest first
	// (any one unit; equal prices go by name).
	Price float64
	// Selector holds the labels that put a node in the pool (its node
	// selector): the new nodes must carry them, and a workload that
	// selects other values for them is not asked for.
	Selector map[string]string
}

// ElasticOptions configures an Elastic reconciler.
type ElasticOptions struct {
	// Policy says which workloads may burst and when (Allows).
	Policy sched.BurstPolicy
	// Pools by name; Provisioners by cluster name ("" for a server with
	// one cluster). A burst pool whose cluster has no Provisioner is
	// never asked.
	Pools        map[string]ElasticPool
	Provisioners map[string]Provisioner
	// Timeout is how long a request may stay unanswered before it is
	// withdrawn as if it had failed; default 10 minutes.
	Timeout time.Duration
	// Backoff is how long a pool that failed a workload is not asked for
	// it again: Backoff after its first failure, doubled at each further
	// failure of the workload, at most MaxBackoff. Defaults 1 minute and
	// 30 minutes.
	Backoff, MaxBackoff time.Duration
	// Every is Run's period; default 10 seconds.
	Every  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Elastic asks burst pools for nodes when work waits for capacity that no
// node has (elastic pools). Each Step, for every pending
// workload that
//
//   - the scheduler left waiting for capacity (reason Unschedulable),
//   - the burst policy lets onto a burst node now (Policy.Allows), and
//   - no burst pool it may use (residency, node selector) has room for
//     it now, every replica counted against the devices free on the
//     pool's schedulable nodes and then on its idle-released nodes still
//     ready (a pool with room needs no new node: the scheduler places
//     there, on released nodes once the Releaser has taken them back,
//     release.go),
//
// it asks the cheapest of those pools whose cluster has a Provisioner
// once and remembers the request. It
// watches it: Provisioned needs nothing more (the scheduler places the
// workload on the new nodes once they register); Failed, or no answer
// within Timeout, withdraws it, keeps that pool from being asked for the
// workload for the backoff, and asks the next pool at the next Step (all
// pools backing off: it waits). The request is withdrawn as soon as the
// workload is no longer pending (started, ended, deleted): the nodes then
// belong to the cluster's autoscaler, which scales them down once their
// pods are gone; a node on which no work has run for burst.idleRelease
// takes no more (the Releaser, release.go), so that it stays empty.
//
// What it remembers is in memory: after a restart it asks again, and a
// Provisioner that finds the live request of the workload and pool (as
// the kubernetes one does) answers with it rather than make another.
type Elastic struct {
	Store *store.Store
	opts  ElasticOptions
	log   *slog.Logger

	mu   sync.Mutex
	byWL map[core.WorkloadID]*elasticWL
}

// elasticWL is what the reconciler remembers of one workload.
type elasticWL struct {
	req      core.ProvisionRequest // of the live request; Pool "" when none
	name     string
	asked    time.Time
	state    core.ProvisionState
	message  string
	failures int
	blocked  map[string]time.Time // pool → not asked again before
}

// NewElastic returns a reconciler with the options' defaults filled in.
func NewElastic(s *store.Store, opts ElasticOptions) *Elastic {
	opts.Timeout = cmp.Or(opts.Timeout, 10*time.Minute)
	opts.Backoff = cmp.Or(opts.Backoff, time.Minute)
	opts.MaxBackoff = cmp.Or(opts.MaxBackoff, 30*time.Minute)
	opts.Every = cmp.Or(opts.Every, 10*time.Second)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elastic{Store: s, opts: opts, log: opts.Logger, byWL: map[core.WorkloadID]*elasticWL{}}
}

// Run reconciles every Every until ctx ends.
func (e *Elastic) Run(ctx context.Context) {
	t := time.NewTicker(e.opts.Every)
	defer t.Stop()
	for {
		if err := e.Step(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("elastic pools", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ElasticRequest is one live request, for status pages and tests.
type ElasticRequest struct {
	Workload core.WorkloadID
	Cluster  string
	Pool     string
	Name     string
	State    core.ProvisionState
	Message  string
	Asked    time.Time
}

// Requests lists the live requests, by workload.
func (e *Elastic) Requests() []ElasticRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []ElasticRequest
	for _, id := range slices.Sorted(maps.Keys(e.byWL)) {
		st := e.byWL[id]
		if st.name == "" {
			continue
		}
		out = append(out, ElasticRequest{Workload: id, Cluster: st.req.Cluster, Pool: st.req.Pool, Name: st.name, State: st.state, Message: st.message, Asked: st.asked})
	}
	return out
}

// Step reconciles once. It goes on past a provisioner that fails and
// returns the first error.
func (e *Elastic) Step(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.opts.Now()
	snap, err := e.Store.Snapshot(ctx)
	if err != nil {
		return err
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	pending := map[core.WorkloadID]*core.Workload{}
	for _, w := range snap.Pending {
		pending[w.ID] = w
	}

	// Workloads no longer pending: withdraw what was asked for them.
	for _, id := range slices.Sorted(maps.Keys(e.byWL)) {
		if pending[id] != nil {
			continue
		}
		st := e.byWL[id]
		if st.name != "" {
			if err := e.withdraw(ctx, st, "the workload is no longer pending"); err != nil {
				keep(err)
				continue // tried again at the next Step
			}
		}
		delete(e.byWL, id)
	}

	// Live requests: read what became of them.
	for _, id := range slices.Sorted(maps.Keys(e.byWL)) {
		st := e.byWL[id]
		if st.name == "" || st.state == core.ProvisionProvisioned {
			continue
		}
		p := e.opts.Provisioners[st.req.Cluster]
		if p == nil {
			continue
		}
		state, msg, err := p.ProvisionStatus(ctx, st.req, st.name)
		if err != nil {
			keep(fmt.Errorf("status of provisioning request %s for %s in pool %s: %w", st.name, id, st.req.Pool, err))
			state, msg = st.state, st.message
		}
		st.state, st.message = state, msg
		switch {
		case state == core.ProvisionProvisioned:
			e.log.Info("capacity provisioned", "workload", id, "pool", st.req.Pool, "request", st.name, "message", msg)
		case state == core.ProvisionFailed:
			e.fail(ctx, st, now, "failed: "+msg, keep)
		case now.Sub(st.asked) >= e.opts.Timeout:
			e.fail(ctx, st, now, fmt.Sprintf("no answer after %s", e.opts.Timeout), keep)
		}
	}

	// Waiting workloads: ask the cheapest pool that may help.
	var released map[core.NodeName]bool // read once, when first needed
	for _, w := range snap.Pending {
		st := e.byWL[w.ID]
		if st != nil && st.name != "" {
			continue
		}
		if w.Status.Reason != sched.ReasonUnschedulable || !e.opts.Policy.Allows(className(w), w, now) {
			continue
		}
		if released == nil {
			statuses, err := e.Store.NodeStatuses(ctx)
			if err != nil {
				return cmp.Or(first, fmt.Errorf("node statuses: %w", err))
			}
			released = releasedNodes(snap, statuses)
		}
		pools := e.candidates(snap, w, now, st, released)
		if len(pools) == 0 {
			continue
		}
		if st == nil {
			st = &elasticWL{blocked: map[string]time.Time{}}
			e.byWL[w.ID] = st
		}
		pool := pools[0]
		req := provisionRequest(snap, w, pool, e.opts.Pools[pool])
		name, err := e.opts.Provisioners[req.Cluster].Provision(ctx, req)
		if err != nil {
			keep(fmt.Errorf("ask pool %s for %s: %w", pool, w.ID, err))
			st.block(pool, now, e.opts)
			continue
		}
		st.req, st.name, st.asked, st.state, st.message = req, name, now, core.ProvisionPending, ""
		e.log.Info("capacity asked", "workload", w.ID, "cluster", req.Cluster, "pool", pool, "request", name, "pods", req.Count, "gpus", req.GPUs)
	}
	return first
}

// fail withdraws a request that failed or timed out and keeps its pool
// from being asked again for the backoff.
func (e *Elastic) fail(ctx context.Context, st *elasticWL, now time.Time, why string, keep func(error)) {
	e.log.Warn("capacity not provisioned", "workload", st.req.Workload, "pool", st.req.Pool, "request", st.name, "why", why)
	pool := st.req.Pool
	if err := e.withdraw(ctx, st, why); err != nil {
		keep(err)
	}
	st.block(pool, now, e.opts)
}

// withdraw deletes the live request; st keeps no request once it is gone.
func (e *Elastic) withdraw(ctx context.Context, st *elasticWL, why string) error {
	p := e.opts.Provisioners[st.req.Cluster]
	if p == nil {
		return fmt.Errorf("delete provisioning request %s for %s: no provisioner for cluster %q", st.name, st.req.Workload, st.req.Cluster)
	}
	if err := p.DeleteProvision(ctx, st.req, st.name); err != nil {
		return fmt.Errorf("delete provisioning request %s for %s in pool %s: %w", st.name, st.req.Workload, st.req.Pool, err)
	}
	e.log.Info("capacity request withdrawn", "workload", st.req.Workload, "pool", st.req.Pool, "request", st.name, "why", why)
	st.req, st.name, st.state, st.message = core.ProvisionRequest{}, "", "", ""
	return nil
}

// block keeps pool from being asked again for the workload until the
// backoff of its failures so far has passed.
func (st *elasticWL) block(pool string, now time.Time, o ElasticOptions) {
	d := o.Backoff
	for range st.failures {
		if d >= o.MaxBackoff {
			break
		}
		d *= 2
	}
	st.blocked[pool] = now.Add(min(d, o.MaxBackoff))
	st.failures++
}

// candidates are the burst pools that may be asked for w now, cheapest
// first: a Provisioner serves their cluster, w may use them (residency,
// node selector) and they are not backing off for w. There are none
// when some burst pool w may use has room for it now, its released nodes
// counted (poolRoom): the scheduler places it there, on released nodes
// once the Releaser has taken them back.
func (e *Elastic) candidates(snap *core.Snapshot, w *core.Workload, now time.Time, st *elasticWL, released map[core.NodeName]bool) []string {
	var out []string
	for name, pool := range e.opts.Pools {
		if pool.Kind != core.PoolBurst || !mayUsePool(name, pool, w.Request) {
			continue
		}
		if ok, _ := poolRoom(snap, name, w.Request, released); ok {
			return nil
		}
		if e.opts.Provisioners[pool.Cluster] == nil {
			continue
		}
		if st != nil && now.Before(st.blocked[name]) {
			continue
		}
		out = append(out, name)
	}
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(e.opts.Pools[a].Price, e.opts.Pools[b].Price), cmp.Compare(a, b))
	})
	return out
}

// mayUsePool reports whether req's residency and node selector allow the
// pool's nodes.
func mayUsePool(name string, pool ElasticPool, req core.Request) bool {
	if len(req.Regions) > 0 && !slices.Contains(req.Regions, pool.Region) {
		return false
	}
	for k, v := range req.NodeSelector {
		switch k {
		case core.LabelPool:
			if v != name {
				return false
			}
		case core.LabelRegion:
			if v != pool.Region {
				return false
			}
		case core.LabelNode:
			return false // a node named in advance is not one to be made
		default:
			if have, ok := pool.Selector[k]; ok && have != v {
				return false
			}
		}
	}
	return true
}

// poolRoom reports whether the pool's nodes hold, free now, every
// replica of req: each replica is put, greedily, on free devices of one
// node, and checked with core.Fits. The schedulable nodes come first,
// then the released ones (released: idle-released nodes still ready,
// counted as in service, for the Releaser takes them back for such
// work). It returns the released nodes the replicas need.
func poolRoom(snap *core.Snapshot, pool string, req core.Request, released map[core.NodeName]bool) (bool, []core.NodeName) {
	left := req.Count()
	// fill puts what replicas it can on n and reports whether it put any.
	fill := func(n *core.Node) bool {
		used := cloneUsage(snap.Usage[n.Name])
		took := false
		for left > 0 {
			as := freeDevices(n, used, req)
			if as == nil || core.Fits(n, used, req, as) != nil {
				break
			}
			used.Add(n.Name, req, as)
			left--
			took = true
		}
		return took
	}
	for _, n := range snap.Nodes {
		if n.Pool == pool && n.Schedulable {
			fill(n)
			if left == 0 {
				return true, nil
			}
		}
	}
	var need []core.NodeName
	for _, n := range snap.Nodes {
		if n.Pool != pool || !released[n.Name] {
			continue
		}
		c := n.Clone()
		c.Schedulable, c.State = true, core.NodeReady
		if fill(c) {
			need = append(need, n.Name)
		}
		if left == 0 {
			return true, need
		}
	}
	return false, nil
}

// freeDevices picks devices of n for one replica of req: that many unused
// devices of an allowed model for whole GPUs, one device with enough
// share left for a fraction; nil when the node has none.
func freeDevices(n *core.Node, used *core.NodeUsage, req core.Request) []core.Assignment {
	whole := req.WholeGPUs()
	var as []core.Assignment
	for _, g := range n.GPUs {
		if !req.ModelAllowed(g.Model) {
			continue
		}
		if !g.Usable() {
			continue
		}
		milli, mem, ok := req.ShareOn(g)
		if !ok {
			continue
		}
		u := used.GPUs[g.Index]
		a := core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem}
		if whole > 0 {
			if u.MilliGPU == 0 && u.MemoryMiB == 0 {
				as = append(as, a)
				if len(as) == whole {
					return as
				}
			}
			continue
		}
		if u.MilliGPU+milli <= 1000 && u.MemoryMiB+mem <= g.MemoryMiB {
			return []core.Assignment{a}
		}
	}
	return nil
}

func cloneUsage(u *core.NodeUsage) *core.NodeUsage {
	out := &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
	if u != nil {
		maps.Copy(out.GPUs, u.GPUs)
		out.MilliCPU, out.MemoryMiB = u.MilliCPU, u.MemoryMiB
	}
	return out
}

// provisionRequest is w's pod shape for the pool. Its GPU model is the
// one model of the fleet's devices that w allows, named in full ("H100"
// may stand for "NVIDIA H100 80GB HBM3", which a node's labels carry);
// else w's own when it lists one; else none.
func provisionRequest(snap *core.Snapshot, w *core.Workload, pool string, p ElasticPool) core.ProvisionRequest {
	r := w.Request
	req := core.ProvisionRequest{
		Cluster: p.Cluster, Pool: pool, PoolSelector: maps.Clone(p.Selector), Team: w.Team, Workload: w.ID,
		GPUs: max(1, r.WholeGPUs()), Count: r.Count(),
		NodeSelector: maps.Clone(r.NodeSelector), MilliCPU: r.MilliCPU, MemoryMiB: r.MemoryMiB,
	}
	if len(r.GPUModels) > 0 {
		known := map[string]bool{}
		for _, n := range snap.Nodes {
			for _, g := range n.GPUs {
				if r.ModelAllowed(g.Model) {
					known[g.Model] = true
				}
			}
		}
		switch {
		case len(known) == 1:
			req.GPUModel = slices.Collect(maps.Keys(known))[0]
		case len(known) == 0 && len(r.GPUModels) == 1:
			req.GPUModel = r.GPUModels[0]
		}
	}
	return req
}

// className is the priority class w runs at (its kind's default when it
// names none), as the scheduler reads it.
func className(w *core.Workload) string {
	if w.Priority != "" {
		return w.Priority
	}
	return core.DefaultPriority(w.Kind)
}
