package sched_test

// The fixtures of the package's tests, one style for all: small chained
// builders that start from a name and end with obj(). How the property
// tests are seeded is at the end.
//
//	node("n1").gpus(4, h100).cpu(8000).obj()
//	job("a").team("vision").class("training").gpus(500).created(t0).obj()
//	job("r").team("a").class("training").gpus(1000).runs(n, 0, t0).obj()
//	team("a").guaranteed(2000).limit(4000).weight(2).obj()

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Device models and their memory, as nvidia-smi reports them.
const (
	h100 = "NVIDIA H100 80GB HBM3"
	a100 = "NVIDIA A100-SXM4-80GB"
	a10  = "NVIDIA A10"
	l4   = "NVIDIA L4"
	// unknown is a device whose memory was not reported.
	unknown = "NVIDIA GPU"
)

// modelMiB is each model's memory; a model not listed reports none.
var modelMiB = map[string]int64{h100: 81920, a100: 81920, a10: 24576, l4: 23034, unknown: 0}

var (
	// now is the clock of the placement tests.
	now = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	// t0 is the clock of the policy tests: teams are created and work is
	// submitted then.
	t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
)

// nodeBuilder builds a schedulable node.
type nodeBuilder struct {
	n      core.Node
	domain int
}

func node(name string) *nodeBuilder {
	return &nodeBuilder{n: core.Node{Name: core.NodeName(name), Schedulable: true}}
}

// gpus adds count devices of a model, indexed after the ones already
// there, in the NVLink domain set by inDomain (0 by default).
func (b *nodeBuilder) gpus(count int, model string) *nodeBuilder {
	for range count {
		i := len(b.n.GPUs)
		b.n.GPUs = append(b.n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", b.n.Name, i), Model: model, MemoryMiB: modelMiB[model], Domain: b.domain})
	}
	return b
}

// inDomain puts the devices added after it in NVLink domain d.
func (b *nodeBuilder) inDomain(d int) *nodeBuilder    { b.domain = d; return b }
func (b *nodeBuilder) cpu(milli int64) *nodeBuilder   { b.n.MilliCPU = milli; return b }
func (b *nodeBuilder) hostMem(mib int64) *nodeBuilder { b.n.MemoryMiB = mib; return b }
func (b *nodeBuilder) pool(p string) *nodeBuilder     { b.n.Pool = p; return b }
func (b *nodeBuilder) cordoned() *nodeBuilder         { b.n.Schedulable = false; return b }

// in sets the node's pool, region and pool kind (core.PoolOwned, ...).
func (b *nodeBuilder) in(pool, region, kind string) *nodeBuilder {
	b.n.Pool, b.n.Region, b.n.PoolKind = pool, region, kind
	return b
}
func (b *nodeBuilder) obj() *core.Node { n := b.n; n.GPUs = slices.Clone(b.n.GPUs); return &n }

// workloadBuilder builds a workload, pending unless runs places it: a job
// of team research with no request, no class (its kind's default) and no
// submission time.
type workloadBuilder struct{ w core.Workload }

func job(id string) *workloadBuilder {
	return &workloadBuilder{core.Workload{ID: core.WorkloadID(id), Spec: core.Spec{Name: id, Team: "research", Kind: core.KindJob, Command: []string{"train"}},
		Status: core.Status{Phase: core.Pending}}}
}

func (b *workloadBuilder) team(name core.TeamName) *workloadBuilder { b.w.Team = name; return b }

// class is the priority class.
func (b *workloadBuilder) class(name string) *workloadBuilder { b.w.Priority = name; return b }
func (b *workloadBuilder) gpus(milli int64) *workloadBuilder  { b.w.Request.MilliGPU = milli; return b }
func (b *workloadBuilder) gpuMem(mib int64) *workloadBuilder {
	b.w.Request.GPUMemoryMiB = mib
	return b
}
func (b *workloadBuilder) models(m ...string) *workloadBuilder { b.w.Request.GPUModels = m; return b }
func (b *workloadBuilder) cpu(milli int64) *workloadBuilder    { b.w.Request.MilliCPU = milli; return b }
func (b *workloadBuilder) hostMem(mib int64) *workloadBuilder  { b.w.Request.MemoryMiB = mib; return b }

// replicas makes the workload a gang of n.
func (b *workloadBuilder) replicas(n int) *workloadBuilder { b.w.Request.Replicas = n; return b }
func (b *workloadBuilder) selector(key, value string) *workloadBuilder {
	if b.w.Request.NodeSelector == nil {
		b.w.Request.NodeSelector = map[string]string{}
	}
	b.w.Request.NodeSelector[key] = value
	return b
}
func (b *workloadBuilder) maxRuntime(d time.Duration) *workloadBuilder { b.w.MaxRuntime = d; return b }
func (b *workloadBuilder) seq(s int64) *workloadBuilder                { b.w.Seq = s; return b }

// regions sets the workload's data residency.
func (b *workloadBuilder) regions(r ...string) *workloadBuilder { b.w.Request.Regions = r; return b }

// preempted records that the scheduler last stopped the workload at t.
func (b *workloadBuilder) preempted(t time.Time) *workloadBuilder {
	b.w.Status.PreemptedAt = &t
	return b
}

// created is the submission time.
func (b *workloadBuilder) created(t time.Time) *workloadBuilder { b.w.CreatedAt = t; return b }

// runs marks the workload running, first attempt, since started, on node
// n's devices from index first: a share of one device for a fraction, one
// whole device a GPU otherwise, replica after replica. It places the
// request set so far.
func (b *workloadBuilder) runs(n *core.Node, first int, started time.Time) *workloadBuilder {
	w := &b.w
	w.Status.Phase = core.Running
	w.Status.Attempts = 1
	w.Status.StartedAt = &started
	w.Status.Placement = nil
	next := first
	for r := range w.Request.Count() {
		if w.Request.MilliGPU < 1000 {
			g := n.GPUs[next]
			next++
			milli, mem, _ := w.Request.ShareOn(g)
			w.Status.Placement = append(w.Status.Placement, core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: milli, MemoryMiB: mem, Replica: r})
			continue
		}
		for range w.Request.WholeGPUs() {
			g := n.GPUs[next]
			next++
			w.Status.Placement = append(w.Status.Placement, core.Assignment{Node: n.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB, Replica: r})
		}
	}
	return b
}

// stopping marks a running workload as asked to stop, for reason, by the
// preemptor by.
func (b *workloadBuilder) stopping(reason string, by core.WorkloadID) *workloadBuilder {
	b.w.Status.StopRequested, b.w.Status.PreemptedBy = reason, by
	return b
}

// waiting records a pending workload's last decision: its reason and the
// node it was nominated for.
func (b *workloadBuilder) waiting(reason string, nominated core.NodeName) *workloadBuilder {
	b.w.Status.Reason, b.w.Status.Nominated = reason, nominated
	return b
}

func (b *workloadBuilder) obj() *core.Workload {
	w := b.w
	w.Status.Placement = slices.Clone(b.w.Status.Placement)
	return &w
}

// teamBuilder builds a team created at t0: no guarantee, no limit,
// weight 1.
type teamBuilder struct{ t core.Team }

func team(name core.TeamName) *teamBuilder { return &teamBuilder{core.NewTeam(name, t0)} }

func (b *teamBuilder) guaranteed(milli int64) *teamBuilder { b.t.Guaranteed = milli; return b }

// guaranteedFor adds a guarantee of milli-GPU of one model.
func (b *teamBuilder) guaranteedFor(model string, milli int64) *teamBuilder {
	if b.t.GuaranteedByModel == nil {
		b.t.GuaranteedByModel = map[string]int64{}
	}
	b.t.GuaranteedByModel[model] = milli
	return b
}
func (b *teamBuilder) limit(milli int64) *teamBuilder { b.t.Limit = milli; return b }
func (b *teamBuilder) weight(w int64) *teamBuilder    { b.t.Weight = w; return b }
func (b *teamBuilder) obj() core.Team                 { return b.t }

// minute is t0 plus k minutes.
func minute(k int) time.Time { return t0.Add(time.Duration(k) * time.Minute) }

// ---------------------------------------------------------------------------
// The property tests: every one is a rapid.Check (pgregory.net/rapid draws
// its cases).

// propTB is what the checks need from *testing.T and *rapid.T.
type propTB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Property tests run with rapid under a fresh random seed every run;
// rapid prints it with a failure ("-rapid.seed=N") and keeps the failing
// case in testdata/rapid/, which it replays first on every later run. The
// seeds that once found a bug are listed in testdata/failed-seeds.txt and
// replayed by CI (hack/failed-seeds.sh: go test -rapid.seed=N for each);
// no test sets a seed itself.
