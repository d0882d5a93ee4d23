package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpufleet/gpufleet/internal/core"
)

var (
	descCost = prometheus.NewDesc("gpufleet_cost_total",
		"Cost accrued since the server started, in currency (the server's, ISO 4217), by team and pool (team __idle__: what pools bill that no workload held).",
		[]string{"currency", "team", "pool"}, nil)
	descBudgetSpent = prometheus.NewDesc("gpufleet_budget_spent_ratio",
		"Share of its monthly budget a team has spent this calendar month (1 is all of it).",
		[]string{"team"}, nil)
	descBudgetSpentAmount = prometheus.NewDesc("gpufleet_budget_spent",
		"What a team with a budget has spent this calendar month (UTC), in currency.",
		[]string{"currency", "team"}, nil)
	descBudgetLimit = prometheus.NewDesc("gpufleet_budget_limit",
		"A team's monthly budget, in currency.",
		[]string{"currency", "team"}, nil)
)

// Budget is a team's budget this month as the metrics show it, in
// currency units.
type Budget struct {
	Spent, Limit, SpentRatio float64
}

// costCollector reads the cost ledger at scrape time.
type costCollector struct {
	opts Options
}

func (c *costCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCost
	ch <- descBudgetSpent
	ch <- descBudgetSpentAmount
	ch <- descBudgetLimit
}

func (c *costCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	cur := c.opts.Currency
	if c.opts.Cost != nil {
		sums, err := c.opts.Cost(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descCost, err)
		}
		for k, v := range sums {
			ch <- prometheus.MustNewConstMetric(descCost, prometheus.CounterValue, v, cur, k[0], k[1])
		}
	}
	if c.opts.Budgets != nil {
		bs, err := c.opts.Budgets(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descBudgetSpent, err)
		}
		for t, b := range bs {
			ch <- prometheus.MustNewConstMetric(descBudgetSpent, prometheus.GaugeValue, b.SpentRatio, string(t))
			ch <- prometheus.MustNewConstMetric(descBudgetSpentAmount, prometheus.GaugeValue, b.Spent, cur, string(t))
			ch <- prometheus.MustNewConstMetric(descBudgetLimit, prometheus.GaugeValue, b.Limit, cur, string(t))
		}
	}
}

// The GPU use of the teams' and workloads' running work, from the latest
// utilisation sample of each workload (Options.Workloads).
var (
	descTeamUtil = prometheus.NewDesc("gpufleet_team_gpu_utilization_ratio",
		"Sampled GPU utilisation of each team's running workloads, 0 to 1: their GPUs' utilisation, weighted by the GPUs each holds (fractions count).",
		[]string{"team"}, nil)
	descTeamMem = prometheus.NewDesc("gpufleet_team_gpu_memory_used_bytes",
		"Sampled GPU memory used by each team's running workloads.", []string{"team"}, nil)
	descWorkloadUtil = prometheus.NewDesc("gpufleet_workload_gpu_utilization_ratio",
		"Sampled GPU utilisation of each running workload, 0 to 1: the mean over its GPUs.", []string{"team", "workload", "name"}, nil)
	descWorkloadMem = prometheus.NewDesc("gpufleet_workload_gpu_memory_used_bytes",
		"Sampled GPU memory used by each running workload's processes, all its GPUs together.", []string{"team", "workload", "name"}, nil)
)

// workloadUsage writes the GPU use of each running workload sampled in its
// current attempt, and of each team that runs any (a team whose workloads
// are not sampled reads nothing, rather than an idle 0).
func workloadUsage(ch chan<- prometheus.Metric, snap *core.Snapshot, samples []core.WorkloadSample) {
	byID := make(map[core.WorkloadID]core.WorkloadSample, len(samples))
	for _, s := range samples {
		byID[s.ID] = s
	}
	type teamUse struct {
		weighted, gpus float64
		mem            int64
	}
	teams := map[core.TeamName]*teamUse{}
	for _, w := range snap.Running {
		s, ok := byID[w.ID]
		if !ok || s.Attempt != w.Status.Attempts {
			continue
		}
		var milli int64
		for _, a := range w.Status.Placement {
			milli += a.MilliGPU
		}
		id := string(w.ID)
		ch <- prometheus.MustNewConstMetric(descWorkloadUtil, prometheus.GaugeValue, s.Utilization, string(w.Team), id, w.Name)
		ch <- prometheus.MustNewConstMetric(descWorkloadMem, prometheus.GaugeValue, float64(s.MemoryUsedMiB)*(1<<20), string(w.Team), id, w.Name)
		u := teams[w.Team]
		if u == nil {
			u = &teamUse{}
			teams[w.Team] = u
		}
		g := float64(milli) / 1000
		u.weighted += s.Utilization * g
		u.gpus += g
		u.mem += s.MemoryUsedMiB
	}
	for t, u := range teams {
		r := 0.0
		if u.gpus > 0 {
			r = u.weighted / u.gpus
		}
		ch <- prometheus.MustNewConstMetric(descTeamUtil, prometheus.GaugeValue, r, string(t))
		ch <- prometheus.MustNewConstMetric(descTeamMem, prometheus.GaugeValue, float64(u.mem)*(1<<20), string(t))
	}
}
