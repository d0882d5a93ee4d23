package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/metrics"
	"github.com/gpufleet/gpufleet/internal/qualify"
	"github.com/gpufleet/gpufleet/internal/reclaim"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/usage"
)

// observability is the utilisation tracker, the metrics and the monitor
// (nil when sampling is off) of one server.
type observability struct {
	tracker *usage.Tracker
	metrics *metrics.Metrics
	monitor *control.Monitor
}

// newObservability wires utilisation sampling, idle reclaim, memory
// enforcement and metrics. The sampler is a DCGM exporter when
// usage.dcgmURL is set; otherwise it follows the executor: the
// simulated-usage files for simulated GPUs, nvidia-smi for real ones on the
// local executor, nothing on Kubernetes (the monitor then sees no workload
// and reclaims nothing).
func newObservability(cfg config.Config, st *store.Store, ex executor.Executor, led *ledger.Ledger, lc *qualify.Qualifier, log *slog.Logger) *observability {
	interval := cfg.Usage.SampleInterval.Duration
	keep := cfg.Usage.History.Duration
	if keep <= 0 {
		keep = 24 * time.Hour
	}
	tick := interval
	if tick <= 0 {
		tick = 10 * time.Second
	}
	o := &observability{tracker: usage.NewTracker(tick, keep)}
	started := time.Now().UTC()
	o.metrics = metrics.New(metrics.Options{Server: cfg.ServerName, FencedWrites: st.FencedWrites, Snapshot: st.Snapshot, Shares: st.Shares, GPUs: o.tracker.GPUs,
		Workloads: o.tracker.Workloads, Currency: led.Currency,
		Cost: func(ctx context.Context) (map[[2]string]float64, error) {
			sums, err := led.Accrued(ctx, started, time.Now().UTC())
			out := make(map[[2]string]float64, len(sums))
			for k, v := range sums {
				out[k] = float64(v) / float64(quantity.MoneyUnit)
			}
			return out, err
		},
		Budgets: func(ctx context.Context) (map[core.TeamName]metrics.Budget, error) {
			bs, err := led.Budgets(ctx, time.Now().UTC(), ledger.BudgetRefresh)
			out := make(map[core.TeamName]metrics.Budget, len(bs))
			unit := float64(quantity.MoneyUnit)
			for t, b := range bs {
				out[t] = metrics.Budget{Spent: float64(b.Spent) / unit, Limit: float64(b.Monthly) / unit, SpentRatio: b.SpentRatio}
			}
			return out, err
		},
		Volumes: func(ctx context.Context) ([]core.Volume, error) { return st.Volumes(ctx, "") },
	})
	if interval <= 0 {
		return o
	}
	var sampler usage.Multi
	switch lex, ok := ex.(*local.Executor); {
	case cfg.Usage.DCGMURL != "":
		sampler = append(sampler, &usage.DCGM{URL: cfg.Usage.DCGMURL})
	case ok:
		sampler = append(sampler, localSampler{lex: lex, node: core.NodeName(cfg.NodeName), nvidiaSMI: cfg.Usage.NvidiaSMI})
	}
	o.monitor = control.NewMonitor(control.MonitorOptions{
		Store:    st,
		Sampler:  sampler,
		Tracker:  o.tracker,
		Rules:    reclaimRules(cfg.Usage),
		Interval: interval,
		Logger:   log.With("component", "monitor"),
		OnXid:    lc.Xid,
	})
	return o
}

// localSampler samples the local node: its simulated GPUs through the
// usage files, its real ones with nvidia-smi.
type localSampler struct {
	lex       *local.Executor
	node      core.NodeName
	nvidiaSMI string
}

func (s localSampler) Sample(ctx context.Context, snap *core.Snapshot) (core.Sample, error) {
	real := false
	for _, n := range snap.Nodes {
		if n.Name != s.node {
			continue
		}
		for _, g := range n.GPUs {
			real = real || !g.Simulated
		}
	}
	if !real {
		return (&usage.Sim{File: s.lex.UsageFile}).Sample(ctx, snap)
	}
	nv := &usage.Nvidia{Node: s.node, Path: s.nvidiaSMI, Tasks: func() []usage.TaskProcess {
		var out []usage.TaskProcess
		for _, p := range s.lex.Processes() {
			out = append(out, usage.TaskProcess(p))
		}
		return out
	}}
	return nv.Sample(ctx, snap)
}

// onCycle records a control loop cycle.
func (o *observability) onCycle(d time.Duration, _ core.Plan) { o.metrics.ObserveCycle(d) }

func reclaimRules(u config.Usage) reclaim.Rules {
	r := reclaim.Rules{Memory: reclaim.MemoryRule{Enabled: u.Memory.Enforce, GraceSamples: u.Memory.GraceSamples}}
	for _, i := range u.Idle {
		r.Idle = append(r.Idle, reclaim.IdleRule{Kind: core.Kind(i.Kind), Team: core.TeamName(i.Team), Threshold: i.Threshold,
			Timeout: i.Timeout.Duration, Warning: i.Warning.Duration})
	}
	return r
}
