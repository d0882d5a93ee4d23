package sim

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// CheckReplayPolicy returns an error unless p is ReplayGPUFleet or
// ReplayReservation.
func CheckReplayPolicy(p string) error {
	if p != ReplayGPUFleet && p != ReplayReservation {
		return fmt.Errorf("%q: want %s or %s", p, ReplayGPUFleet, ReplayReservation)
	}
	return nil
}

// GPUNodes returns the first max nodes that have GPUs, in order; max ≤ 0
// returns nodes as they are, GPU-less ones included.
func GPUNodes(nodes []core.Node, max int) []core.Node {
	if max <= 0 {
		return nodes
	}
	var out []core.Node
	for _, n := range nodes {
		if len(n.GPUs) > 0 && len(out) < max {
			out = append(out, n)
		}
	}
	return out
}

// ReplayPolicies replays cfg once per policy, side by side, each on its own
// store, and returns the results in the order of policies. cfg.Policy is
// ignored; cfg.Progress, when set, is called with one call at a time (the
// replays do not overlap their calls), so it needs no lock of its own. The
// first error, naming its policy, is returned.
func ReplayPolicies(ctx context.Context, cfg ReplayConfig, policies []string) ([]ReplayResult, error) {
	runs := make([]ReplayResult, len(policies))
	errs := make([]error, len(policies))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, p := range policies {
		c := cfg
		c.Policy = p
		if cfg.Progress != nil {
			c.Progress = func(pr ReplayProgress) {
				mu.Lock()
				defer mu.Unlock()
				cfg.Progress(pr)
			}
		}
		wg.Go(func() { runs[i], errs[i] = Replay(ctx, c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", policies[i], err)
		}
	}
	return runs, nil
}

// ServerTrace turns a snapshot of a live server, read through its API, into
// a trace: its nodes, its teams with their quotas (no limit, or a negative
// one, is core.Unlimited; the weight is at least 1), and the workloads,
// submitted at their creation times counted from the first one. A
// workload's runtime is finished − started, or the time it has run by now
// when it is running; one that never started runs for its max runtime when
// it has one, and has trace.UnknownRuntime otherwise (replay skips it).
// source names the trace.
func ServerTrace(source string, now time.Time, nodes []api.Node, teams []api.Team, ws []api.Workload) trace.Trace {
	t := trace.Trace{Source: source}
	for _, n := range nodes {
		cn := core.Node{Name: core.NodeName(n.Name), Pool: n.Pool, Region: n.Region, Labels: n.Labels,
			MilliCPU: int64(n.CPU), MemoryMiB: n.MemoryMiB, Schedulable: true}
		for _, g := range n.GPUs {
			cn.GPUs = append(cn.GPUs, core.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryMiB: g.MemoryMiB, Domain: g.Domain, Simulated: g.Simulated})
		}
		t.Nodes = append(t.Nodes, cn)
	}
	for _, tm := range teams {
		limit := core.Unlimited
		if tm.LimitMilliGPU != nil && *tm.LimitMilliGPU >= 0 {
			limit = *tm.LimitMilliGPU
		}
		t.Teams = append(t.Teams, trace.Team{Name: tm.Name, Guaranteed: tm.GuaranteedMilliGPU, Limit: limit, Weight: max(1, tm.Weight)})
	}
	var start time.Time
	for _, w := range ws {
		if start.IsZero() || w.CreatedAt.Before(start) {
			start = w.CreatedAt
		}
	}
	for _, w := range ws {
		r := w.Resources
		task := trace.Task{Name: cmp.Or(w.Name, w.ID), Team: w.Team, Priority: w.Priority, Submitted: w.CreatedAt.Sub(start),
			Runtime: trace.UnknownRuntime,
			Request: core.Request{MilliGPU: int64(r.GPUs), GPUMemoryMiB: r.GPUMemoryMiB, GPUModels: r.GPUModels,
				MilliCPU: int64(r.CPU), MemoryMiB: r.MemoryMiB, Replicas: w.Replicas, NodeSelector: w.NodeSelector}}
		switch s := w.Status; {
		case s.StartedAt != nil && s.FinishedAt != nil:
			task.Runtime = max(0, s.FinishedAt.Sub(*s.StartedAt))
		case s.StartedAt != nil && s.Phase == api.PhaseRunning:
			task.Runtime = max(0, now.Sub(*s.StartedAt))
		case w.MaxRuntimeSeconds > 0:
			task.Runtime = time.Duration(w.MaxRuntimeSeconds) * time.Second
		}
		t.Tasks = append(t.Tasks, task)
	}
	return t
}
