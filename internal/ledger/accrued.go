package ledger

import (
	"context"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/cost"
)

// accrued sums the cost of the windows read so far, for a counter.
type accrued struct {
	to   time.Time // the end of the last window summed
	sums map[[2]string]api.Money
}

// Accrued returns the cost accrued since start (the server's start) per
// team and pool, idle under team api.IdleRow: gpufleet_cost_total. Each call
// adds the window since the previous one, so the sums only grow (a price
// rounds once per window, so they may differ from one report over the
// whole time by a micro-unit per window and row).
func (l *Ledger) Accrued(ctx context.Context, start, now time.Time) (map[[2]string]api.Money, error) {
	l.mu.Lock()
	a := l.acc
	l.mu.Unlock()
	if a.sums == nil {
		a = accrued{to: start, sums: map[[2]string]api.Money{}}
	}
	if now.After(a.to) {
		in, err := l.Input(ctx, a.to, now, now)
		if err != nil {
			return nil, err
		}
		sums := make(map[[2]string]api.Money, len(a.sums))
		for k, v := range a.sums {
			sums[k] = v
		}
		for k, v := range cost.Totals(in) {
			sums[k] += v
		}
		a = accrued{to: now, sums: sums}
		l.mu.Lock()
		l.acc = a
		l.mu.Unlock()
	}
	return a.sums, nil
}

// SpentRatios returns each budgeted team's spent / monthly this month:
// gpufleet_budget_spent_ratio.
func (l *Ledger) SpentRatios(ctx context.Context, now time.Time) (map[core.TeamName]float64, error) {
	bs, err := l.Budgets(ctx, now, BudgetRefresh)
	if err != nil {
		return nil, err
	}
	out := make(map[core.TeamName]float64, len(bs))
	for t, b := range bs {
		out[t] = b.SpentRatio
	}
	return out, nil
}
