package control

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/reclaim"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/usage"
)

// MonitorStore is what the monitor needs of the store (*store.Store).
type MonitorStore interface {
	Snapshot(ctx context.Context) (*core.Snapshot, error)
	Warn(ctx context.Context, id core.WorkloadID, attempt int, reason, message string, now time.Time) (bool, error)
	RequestStop(ctx context.Context, id core.WorkloadID, reason, message string, now time.Time) (*core.Workload, error)
}

var _ MonitorStore = (*store.Store)(nil)

// MonitorOptions configures a Monitor.
type MonitorOptions struct {
	Store   MonitorStore
	Sampler usage.Sampler
	// Tracker receives every sample and the cluster's point.
	Tracker *usage.Tracker
	Rules   reclaim.Rules
	// Interval is the time between two samples; 10 s when zero.
	Interval time.Duration
	// Now is the clock; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
	// OnXid, when set, is told of each new Xid error a sample shows (a
	// GPU's last Xid that changed since the previous sample): the node
	// lifecycle's qualify.Qualifier.Xid.
	OnXid func(ctx context.Context, node core.NodeName, gpu, code int, message string) error
}

// Monitor samples the GPUs' utilisation at a fixed interval, keeps the
// samples in the tracker, and applies idle reclaim and memory enforcement:
// the decisions are reclaim.Decide's; the monitor records the warnings as
// events and asks for the stops through the store (store.RequestStop),
// which the loop carries out as it does for a max runtime, and records as
// Failed with the stop's reason.
type Monitor struct {
	opts  MonitorOptions
	log   *slog.Logger
	state reclaim.State
	// lastErr is the last sampling error logged, so that a lasting
	// failure is logged once.
	lastErr string
	// lastXid is each GPU's last Xid seen, so that one is told once.
	lastXid map[core.GPURef]int
}

// NewMonitor returns a monitor; call Run.
func NewMonitor(opts MonitorOptions) *Monitor {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	return &Monitor{opts: opts, log: opts.Logger, state: reclaim.State{}}
}

// Run samples every interval until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	tick := time.NewTicker(m.opts.Interval)
	defer tick.Stop()
	for {
		m.Step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Step takes one sample and acts on it, and returns the actions taken.
// Never call it while Run runs.
func (m *Monitor) Step(ctx context.Context) []reclaim.Action {
	snap, err := m.opts.Store.Snapshot(ctx)
	if err != nil {
		m.log.Error("snapshot", "err", err)
		return nil
	}
	s, err := m.opts.Sampler.Sample(ctx, snap)
	if err != nil {
		// What the sampler saw (other samplers, other GPUs) still
		// counts; a workload it did not see keeps its idle stretch.
		if msg := err.Error(); msg != m.lastErr {
			m.log.Warn("GPU utilisation sampling failed", "err", err)
			m.lastErr = msg
		}
	} else {
		m.lastErr = ""
	}
	now := m.opts.Now()
	if s.At.IsZero() {
		s.At = now
	}
	if s.Workloads == nil {
		s.Workloads = map[core.WorkloadID]core.WorkloadSample{}
	}
	m.xids(ctx, s)
	var acts []reclaim.Action
	m.state, acts = reclaim.Decide(m.state, reclaim.Input{Now: now, Sample: s, Running: snap.Running, Rules: m.opts.Rules})
	if m.opts.Tracker != nil {
		m.opts.Tracker.Record(s, usage.Point(snap, s, now), m.state.IdleSince())
	}
	for _, a := range acts {
		log := m.log.With("workload", a.Workload, "attempt", a.Attempt, "team", a.Team, "reason", a.Reason)
		switch a.Kind {
		case reclaim.Warn:
			if _, err := m.opts.Store.Warn(ctx, a.Workload, a.Attempt, a.Reason, a.Message, now); err != nil {
				log.Error("record warning", "err", err)
				// Not warned: warn again at the next sample rather
				// than stop without a warning.
				if tr, ok := m.state[a.Workload]; ok && a.Reason == reclaim.ReasonIdleWarning {
					tr.IdleWarned = false
					m.state[a.Workload] = tr
				}
				continue
			}
			log.Info("warned", "message", a.Message)
		case reclaim.Stop:
			if _, err := m.opts.Store.RequestStop(ctx, a.Workload, a.Reason, a.Message, now); err != nil {
				log.Error("request stop", "err", err)
				continue
			}
			log.Info("stopping", "message", a.Message)
		}
	}
	return acts
}

// xids tells OnXid of each GPU whose last Xid changed since the previous
// sample (the first sample of a GPU only sets what it had).
func (m *Monitor) xids(ctx context.Context, s core.Sample) {
	if m.opts.OnXid == nil {
		return
	}
	first := m.lastXid == nil
	if first {
		m.lastXid = map[core.GPURef]int{}
	}
	for _, g := range s.GPUs {
		ref := core.GPURef{Node: g.Node, Index: g.Index}
		prev, seen := m.lastXid[ref]
		m.lastXid[ref] = g.Xid
		if g.Xid == 0 || g.Xid == prev || (!seen && first) {
			continue
		}
		if err := m.opts.OnXid(ctx, g.Node, g.Index, g.Xid, "reported by DCGM (DCGM_FI_DEV_XID_ERROR)"); err != nil {
			m.log.Error("record an Xid", "node", g.Node, "gpu", g.Index, "xid", g.Xid, "err", err)
		}
	}
}
