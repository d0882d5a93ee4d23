package ledger

import (
	"context"
	"time"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
)

// accrued is the last answer of Accrued, for a counter that never goes
// down.
type accrued struct {
	sums map[[2]string]quantity.Money
}

// Accrued returns the cost accrued since start (the server's start) per
// team and pool, idle under team api.IdleRow: gpufleet_cost_total. It is
// the ledger of the whole time since start as of now (so an interval is
// billed once, its billing increment included), and each sum is kept at
// least what it was before: a counter does not go down when a rounding
// moves a micro-unit from one row to another.
func (l *Ledger) Accrued(ctx context.Context, start, now time.Time) (map[[2]string]quantity.Money, error) {
	in, err := l.Input(ctx, start, now, now)
	if err != nil {
		return nil, err
	}
	totals := cost.Totals(in)
	l.mu.Lock()
	defer l.mu.Unlock()
	sums := make(map[[2]string]quantity.Money, len(totals))
	for k, v := range l.acc.sums {
		sums[k] = v
	}
	for k, v := range totals {
		sums[k] = max(sums[k], v)
	}
	l.acc = accrued{sums: sums}
	return sums, nil
}
