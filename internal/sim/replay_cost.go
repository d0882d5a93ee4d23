package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/ledger"
)

// ReplayDefaultPool is the pool of a replayed node that names none: the
// pool a server gives its own machine's node when its configuration names
// none (config.DefaultPool).
const ReplayDefaultPool = "local"

// ReplayCurrency is the currency of a replay's cost when the configuration
// names none, the server's default.
const ReplayCurrency = "USD"

// ReplayCost is what a replay's work cost under the pools' price models: the
// cost ledger (internal/ledger) over the replay's store, from the first
// submission to the last completion, at the virtual clock's end. Money is
// exact, in micro-units of Currency.
type ReplayCost struct {
	Currency string `json:"currency"`
	// Total is every line of the ledger: accelerator time (idle included),
	// host and licence lines.
	Total           quantity.Money `json:"total"`
	AcceleratorCost quantity.Money `json:"acceleratorCost"`
	// IdleCost is what owned, monthly and reserved prices bill for GPUs
	// that no task held (the ledger's api.IdleRow); Total and
	// AcceleratorCost include it. On-demand prices bill no idle time.
	IdleCost quantity.Money `json:"idleCost"`
	// GPUHours are held by the tasks (the lost work of preempted attempts
	// included); IdleGPUHours are billed and held by none.
	GPUHours     float64 `json:"gpuHours"`
	IdleGPUHours float64 `json:"idleGPUHours"`
	// CompletedTasks are the ledger's accepted outputs: a replayed task
	// reports none, so each one that succeeded counts one.
	CompletedTasks int64 `json:"completedTasks"`
	// CostPerCompletedTask is Total / CompletedTasks rounded half-up to a
	// micro-unit; null when no task completed.
	CostPerCompletedTask *quantity.Money `json:"costPerCompletedTask"`
	// ByTeam are the ledger's rows by team, highest total first; the idle
	// row (api.IdleRow) is among them when there is idle cost.
	ByTeam []api.CostRow `json:"byTeam"`
	// UnpricedPools are the pools of the replay's nodes that no price
	// names: their GPU time costs nothing.
	UnpricedPools []string `json:"unpricedPools,omitempty"`
}

// IdleShare is the share of the total that is idle cost (0 when the total
// is 0).
func (c *ReplayCost) IdleShare() float64 {
	if c == nil || c.Total <= 0 {
		return 0
	}
	return float64(c.IdleCost) / float64(c.Total)
}

// ReplayPools returns the pools of nodes, sorted, a node that names none in
// ReplayDefaultPool.
func ReplayPools(nodes []core.Node) []string {
	var out []string
	for _, n := range nodes {
		if p := cmp.Or(n.Pool, ReplayDefaultPool); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// OnDemandPrices is one on-demand price of rate per GPU-hour, since always,
// for each pool of nodes (ReplayPools).
func OnDemandPrices(nodes []core.Node, rate quantity.Money) []api.Price {
	var out []api.Price
	for _, p := range ReplayPools(nodes) {
		out = append(out, api.Price{Pool: p, Kind: api.PriceOnDemand, Rate: rate})
	}
	return out
}

// CheckReplayPrices checks the price versions of a replay as a server
// checks those of its configuration file: each valid (cost.CheckPrice),
// no two of a pool from the same time. A problem names the version by its
// index, prices[i].field.
func CheckReplayPrices(prices []api.Price) error {
	for i, p := range prices {
		fe := cost.CheckPrice(p)
		if len(fe) == 0 {
			fe = cost.CheckVersions(prices[:i], p, time.Time{})
		}
		if len(fe) > 0 {
			return fmt.Errorf("prices[%d].%s: %s", i, fe[0].Field, fe[0].Problem)
		}
	}
	return nil
}

// cost prices the replay from what its store recorded. The ledger's window
// is half-open: it ends a nanosecond after the last completion so that the
// tasks that end then count as completed. That nanosecond of idle GPUs
// under a committed price is far below the half micro-unit the ledger
// rounds away.
func (r *replayer) cost(ctx context.Context) (*ReplayCost, error) {
	first := ReplayEpoch
	if len(r.tasks) > 0 {
		first = ReplayEpoch.Add(r.tasks[0].Submitted)
	}
	end := r.lastEnd
	if end.Before(first) {
		end = first
	}
	to := end.Add(time.Nanosecond)
	l := &ledger.Ledger{Store: r.store, Currency: cmp.Or(r.cfg.Currency, ReplayCurrency), FilePrices: r.cfg.Prices, DefaultPool: ReplayDefaultPool}
	rep, err := l.Report(ctx, api.CostByTeam, first, to, maxTime(r.clock, to), cost.Visibility{All: true})
	if err != nil {
		return nil, fmt.Errorf("replay: cost: %w", err)
	}
	c := &ReplayCost{
		Currency:             rep.Currency,
		Total:                rep.Total.TotalCost,
		AcceleratorCost:      rep.Total.AcceleratorCost,
		GPUHours:             rep.Total.GPUHours,
		IdleGPUHours:         rep.Total.IdleGPUHours,
		CompletedTasks:       rep.Total.AcceptedOutputs,
		CostPerCompletedTask: rep.Total.CostPerAcceptedOutput,
		ByTeam:               rep.Items,
	}
	for _, row := range rep.Items {
		if row.Name == api.IdleRow {
			c.IdleCost = row.TotalCost
		}
	}
	for _, p := range ReplayPools(r.cfg.Nodes) {
		if !slices.ContainsFunc(r.cfg.Prices, func(v api.Price) bool { return v.Pool == p }) {
			c.UnpricedPools = append(c.UnpricedPools, p)
		}
	}
	return c, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
