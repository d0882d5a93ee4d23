package metrics

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Options says where the collector reads the cluster at scrape time.
type Options struct {
	// Snapshot reads the nodes and the active workloads (store.Snapshot).
	Snapshot func(ctx context.Context) (*core.Snapshot, error)
	// Shares returns the teams' fair shares of the last cycle
	// (store.Shares); optional.
	Shares func() []core.TeamShare
	// GPUs returns the latest utilisation sample of each GPU
	// (usage.Tracker.GPUs); optional.
	GPUs func() []core.GPUSample
	// Workloads returns the latest utilisation sample of each running
	// workload (usage.Tracker.Workloads); optional.
	Workloads func() []core.WorkloadSample
	// Currency is the currency of Cost and Budgets (ISO 4217).
	Currency string
	// Cost returns the cost accrued since the server started per team
	// and pool, in currency units (ledger.Ledger.Accrued); optional.
	Cost func(ctx context.Context) (map[[2]string]float64, error)
	// Budgets returns each budgeted team's month (ledger.Ledger.Budgets);
	// optional.
	Budgets func(ctx context.Context) (map[core.TeamName]Budget, error)
	// Volumes lists the team volumes (store.Volumes); optional.
	Volumes func(ctx context.Context) ([]core.Volume, error)
	// Xids returns the Xid errors seen since the server started
	// (qualify.Qualifier.XidCounts); optional.
	Xids func() []XidCount
	// Timeout bounds the snapshot read of one scrape; 10 s when zero.
	Timeout time.Duration
	// Server is this server's name, the label of gpufleet_leader.
	Server string
	// FencedWrites counts the writes the store refused for a stale or
	// missing lease (store.FencedWrites); optional.
	FencedWrites func() int64
}

// Metrics holds gpufleet's metrics and serves them.
type Metrics struct {
	reg         *prometheus.Registry
	cycle       prometheus.Histogram
	queueWait   prometheus.Histogram
	preemptions *prometheus.CounterVec
	reclaims    *prometheus.CounterVec
	finished    *prometheus.CounterVec
	started     *prometheus.CounterVec
	leader      prometheus.Gauge
	transitions *prometheus.CounterVec
}

// Reasons of the stops counted in gpufleet_reclaims_total.
var reclaimReasons = map[string]bool{"Idle": true, "GPUMemoryLimitExceeded": true}

// New registers the metrics.
func New(opts Options) *Metrics {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gpufleet_scheduling_cycle_seconds",
			Help:    "Duration of one control loop cycle: snapshot, schedule, apply the plan, launch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms .. 16 s
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gpufleet_queue_wait_seconds",
			Help:    "Time from submission to the first start of a workload, observed when it starts.",
			Buckets: []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400},
		}),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpufleet_preemptions_total",
			Help: "Running workloads stopped and requeued for another workload, by the victim's team and reason (Preempted, Reclaimed).",
		}, []string{"team", "reason"}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpufleet_reclaims_total",
			Help: "Workloads stopped by the monitor, by team and reason (Idle, GPUMemoryLimitExceeded).",
		}, []string{"team", "reason"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpufleet_workloads_finished_total",
			Help: "Attempts that ended, by team and phase (Succeeded, Failed, Cancelled; Preempted and Lost when requeued).",
		}, []string{"team", "phase"}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpufleet_workloads_started_total",
			Help: "Attempts started, by team.",
		}, []string{"team"}),
	}
	m.leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "gpufleet_leader",
		Help:        "1 while this server holds the leader lease (runs the control loop), 0 while it follows.",
		ConstLabels: prometheus.Labels{"server": opts.Server},
	})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "gpufleet_leader_transitions_total",
		Help:        "Changes of this server's leadership: to leader (a lease taken) and to follower (a lease lost, given up or run out).",
		ConstLabels: prometheus.Labels{"server": opts.Server},
	}, []string{"to"})
	if opts.FencedWrites != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "gpufleet_store_fenced_writes_total",
			Help:        "Writes the store refused because the leader lease they were made under was no longer held (a deposed leader's).",
			ConstLabels: prometheus.Labels{"server": opts.Server},
		}, func() float64 { return float64(opts.FencedWrites()) }))
	}
	m.reg.MustRegister(m.cycle, m.queueWait, m.preemptions, m.reclaims, m.finished, m.started, m.leader, m.transitions,
		&clusterCollector{opts: opts}, &costCollector{opts: opts}, &storageCollector{opts: opts},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Leader records a change of this server's leadership (lead.Elector's
// OnChange); token is the lease's fencing token.
func (m *Metrics) Leader(leader bool, token int64) {
	if leader {
		m.leader.Set(1)
		m.transitions.WithLabelValues("leader").Inc()
		return
	}
	m.leader.Set(0)
	m.transitions.WithLabelValues("follower").Inc()
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ObserveCycle records one control loop cycle.
func (m *Metrics) ObserveCycle(d time.Duration) { m.cycle.Observe(d.Seconds()) }

// WorkloadStarted implements control.Reporter.
func (m *Metrics) WorkloadStarted(w *core.Workload, wait time.Duration) {
	m.started.WithLabelValues(string(w.Team)).Inc()
	if w.Status.Attempts == 1 {
		m.queueWait.Observe(wait.Seconds())
	}
}

// WorkloadEnded implements control.Reporter.
func (m *Metrics) WorkloadEnded(w *core.Workload, phase core.Phase, reason string) {
	team := string(w.Team)
	m.finished.WithLabelValues(team, string(phase)).Inc()
	switch {
	case phase == core.Preempted:
		m.preemptions.WithLabelValues(team, reason).Inc()
	case phase == core.Failed && reclaimReasons[reason]:
		m.reclaims.WithLabelValues(team, reason).Inc()
	}
}

// The gauges read at scrape time.
var (
	descGPUs = prometheus.NewDesc("gpufleet_gpus_total",
		"GPUs of each node, by model.", []string{"node", "model"}, nil)
	descAllocated = prometheus.NewDesc("gpufleet_gpus_allocated",
		"GPUs held by the running workloads of each team, by model; fractions count (0.25 + 0.5 = 0.75).", []string{"team", "model"}, nil)
	descNodeInfo = prometheus.NewDesc("gpufleet_node_info",
		"1 for each node, with its pool, cluster, region and pool kind (join on node).", []string{"node", "pool", "cluster", "region", "kind"}, nil)
	descPoolAllocated = prometheus.NewDesc("gpufleet_pool_gpus_allocated",
		"GPUs held by the running workloads of each team in each pool; fractions count.", []string{"pool", "cluster", "team"}, nil)
	descIdle = prometheus.NewDesc("gpufleet_idle_gpus",
		"GPUs with nothing allocated on them.", nil, nil)
	descWorkloads = prometheus.NewDesc("gpufleet_workloads",
		"Active workloads by team and phase (Pending, Running).", []string{"team", "phase"}, nil)
	descUtil = prometheus.NewDesc("gpufleet_gpu_utilization_ratio",
		"Sampled GPU utilisation, 0 to 1 (nvidia-smi utilization.gpu, or what simulated workloads report).", []string{"node", "gpu"}, nil)
	descMem = prometheus.NewDesc("gpufleet_gpu_memory_used_bytes",
		"Sampled GPU memory in use.", []string{"node", "gpu"}, nil)
	descHealthy = prometheus.NewDesc("gpufleet_gpu_healthy",
		"1 when the last sample read the GPU, 0 when it reported an error.", []string{"node", "gpu"}, nil)
	descUsed = prometheus.NewDesc("gpufleet_gpus_used",
		"Sum of the sampled utilisation of all GPUs: the GPUs' worth of work really done.", nil, nil)
	descGuaranteed = prometheus.NewDesc("gpufleet_team_guaranteed_gpus",
		"Each team's guaranteed GPUs.", []string{"team"}, nil)
	descFairShare = prometheus.NewDesc("gpufleet_team_fair_share_gpus",
		"Each team's fair share of the capacity at the last scheduling cycle.", []string{"team"}, nil)
	descPendingGPUs = prometheus.NewDesc("gpufleet_team_pending_gpus",
		"GPUs asked for by each team's pending workloads at the last scheduling cycle.", []string{"team"}, nil)
	descOldestPending = prometheus.NewDesc("gpufleet_oldest_pending_seconds",
		"Age of the oldest pending workload (0 when none).", nil, nil)
)

// clusterCollector reads the cluster at scrape time.
type clusterCollector struct {
	opts Options
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGPUs, descNodeInfo, descPoolAllocated, descAllocated, descIdle, descWorkloads, descUtil, descMem, descHealthy, descUsed,
		descGuaranteed, descFairShare, descPendingGPUs, descOldestPending, descNodeState, descGPUHealth, descXid,
		descTeamUtil, descTeamMem, descWorkloadUtil, descWorkloadMem} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var used float64
	if c.opts.GPUs != nil {
		for _, g := range c.opts.GPUs() {
			node, idx := string(g.Node), strconv.Itoa(g.Index)
			if g.Err != "" {
				gauge(descHealthy, 0, node, idx)
				continue
			}
			gauge(descHealthy, 1, node, idx)
			gauge(descUtil, g.Utilization, node, idx)
			gauge(descMem, float64(g.MemoryUsedMiB)*(1<<20), node, idx)
			used += g.Utilization
		}
	}
	gauge(descUsed, math.Round(used*1e6)/1e6)
	if c.opts.Snapshot == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	snap, err := c.opts.Snapshot(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descGPUs, err)
		return
	}
	type nodeModel struct{ node, model string }
	total := map[nodeModel]int{}
	model := map[core.GPURef]string{}
	idle := 0
	for _, n := range snap.Nodes {
		u := snap.Usage[n.Name]
		for _, g := range n.GPUs {
			total[nodeModel{string(n.Name), g.Model}]++
			model[core.GPURef{Node: n.Name, Index: g.Index}] = g.Model
			if u == nil || u.GPUs[g.Index].MilliGPU == 0 {
				idle++
			}
		}
	}
	for k, v := range total {
		gauge(descGPUs, float64(v), k.node, k.model)
	}
	type poolTeam struct{ pool, cluster, team string }
	nodeOf := map[core.NodeName]*core.Node{}
	for _, n := range snap.Nodes {
		nodeOf[n.Name] = n
		gauge(descNodeInfo, 1, string(n.Name), n.Pool, n.Cluster, n.Region, cmp.Or(n.PoolKind, core.PoolOwned))
	}
	poolAlloc := map[poolTeam]int64{}
	for _, w := range snap.Running {
		for _, a := range w.Status.Placement {
			if n := nodeOf[a.Node]; n != nil {
				poolAlloc[poolTeam{n.Pool, n.Cluster, string(w.Team)}] += a.MilliGPU
			}
		}
	}
	for k, v := range poolAlloc {
		gauge(descPoolAllocated, float64(v)/1000, k.pool, k.cluster, k.team)
	}
	gauge(descIdle, float64(idle))

	type teamModel struct{ team, model string }
	alloc := map[teamModel]int64{}
	type teamPhase struct{ team, phase string }
	count := map[teamPhase]int{}
	models := map[string]bool{}
	for k := range total {
		models[k.model] = true
	}
	for _, t := range snap.Teams {
		count[teamPhase{string(t.Name), string(core.Pending)}] += 0
		count[teamPhase{string(t.Name), string(core.Running)}] += 0
		for m := range models { // a team holding nothing reads 0, not absent
			alloc[teamModel{string(t.Name), m}] += 0
		}
		gauge(descGuaranteed, float64(t.Guaranteed)/1000, string(t.Name))
	}
	for _, w := range snap.Running {
		count[teamPhase{string(w.Team), string(core.Running)}]++
		for _, a := range w.Status.Placement {
			alloc[teamModel{string(w.Team), model[core.GPURef{Node: a.Node, Index: a.GPUIndex}]}] += a.MilliGPU
		}
	}
	var oldest time.Duration
	now := time.Now()
	for _, w := range snap.Pending {
		count[teamPhase{string(w.Team), string(core.Pending)}]++
		oldest = max(oldest, now.Sub(w.CreatedAt))
	}
	for k, v := range alloc {
		gauge(descAllocated, float64(v)/1000, k.team, k.model)
	}
	for k, v := range count {
		gauge(descWorkloads, float64(v), k.team, k.phase)
	}
	gauge(descOldestPending, oldest.Seconds())
	var xids []XidCount
	if c.opts.Xids != nil {
		xids = c.opts.Xids()
	}
	nodeMetrics(ch, snap, xids)
	if c.opts.Workloads != nil {
		workloadUsage(ch, snap, c.opts.Workloads())
	}
	if c.opts.Shares != nil {
		for _, s := range c.opts.Shares() {
			gauge(descFairShare, float64(s.FairShare)/1000, string(s.Team))
			gauge(descPendingGPUs, float64(s.Pending)/1000, string(s.Team))
		}
	}
}
