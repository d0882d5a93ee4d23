package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descCost = prometheus.NewDesc("gpufleet_cost_total",
		"Cost accrued since the server started, in the server's currency, by team and pool (team __idle__: what pools bill that no workload held).",
		[]string{"team", "pool"}, nil)
	descBudgetSpent = prometheus.NewDesc("gpufleet_budget_spent_ratio",
		"Share of its monthly budget a team has spent this calendar month (1 is all of it).",
		[]string{"team"}, nil)
)

// costCollector reads the cost ledger at scrape time.
type costCollector struct {
	opts Options
}

func (c *costCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCost
	ch <- descBudgetSpent
}

func (c *costCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	if c.opts.Cost != nil {
		sums, err := c.opts.Cost(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descCost, err)
		}
		for k, v := range sums {
			ch <- prometheus.MustNewConstMetric(descCost, prometheus.CounterValue, v, k[0], k[1])
		}
	}
	if c.opts.BudgetSpent != nil {
		ratios, err := c.opts.BudgetSpent(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descBudgetSpent, err)
		}
		for t, r := range ratios {
			ch <- prometheus.MustNewConstMetric(descBudgetSpent, prometheus.GaugeValue, r, string(t))
		}
	}
}
