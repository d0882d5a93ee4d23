package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
)

// budgetCache keeps the last evaluation of the budgets, so that the control
// loop, the metrics and the API share one computation per refresh.
type budgetCache struct {
	at       time.Time
	statuses map[core.TeamName]api.BudgetStatus
}

// reachedKey is a team's budget of a month: when its spend reached it does
// not change once found (Ledger.reached), and finding it takes a search
// over the month.
type reachedKey struct {
	team    core.TeamName
	month   time.Time
	monthly quantity.Money
}

// BudgetRefresh is how old an evaluation of the budgets may be when the
// control loop, the metrics or the API read it. A hard budget therefore
// gates new work at most this long after it is spent.
const BudgetRefresh = 10 * time.Second

// SetBudget checks and stores a team's budget.
func (l *Ledger) SetBudget(ctx context.Context, team core.TeamName, b api.Budget) (api.Budget, error) {
	b.Team = string(team)
	if b.AlertPercent == 0 {
		b.AlertPercent = 80
	}
	if fe := cost.CheckBudget(b); len(fe) > 0 {
		return b, &FieldErrors{fe}
	}
	spec, err := json.Marshal(b)
	if err != nil {
		return b, err
	}
	if err := l.Store.SetBudget(ctx, team, spec); err != nil {
		return b, err
	}
	l.forget()
	// Evaluated now, so that the next cycle sees the new budget.
	_, err = l.Budgets(ctx, time.Now().UTC(), BudgetRefresh)
	return b, err
}

// DeleteBudget removes a team's budget.
func (l *Ledger) DeleteBudget(ctx context.Context, team core.TeamName) error {
	err := l.Store.DeleteBudget(ctx, team)
	l.forget()
	return err
}

func (l *Ledger) forget() {
	l.mu.Lock()
	l.budgets = budgetCache{}
	l.gen++
	l.mu.Unlock()
}

// Budgets evaluates every team's budget for the calendar month (UTC) that
// holds now, from an evaluation at most maxAge old. A forecast of when a
// budget runs out that an evaluation made before now has passed is left
// out: it is never in the past.
func (l *Ledger) Budgets(ctx context.Context, now time.Time, maxAge time.Duration) (map[core.TeamName]api.BudgetStatus, error) {
	l.mu.Lock()
	c, gen, reached := l.budgets, l.gen, l.reached
	l.mu.Unlock()
	if c.statuses != nil && now.Sub(c.at) < maxAge && !now.Before(c.at) {
		return notPast(c.statuses, now), nil
	}
	specs, err := l.Store.Budgets(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[core.TeamName]api.BudgetStatus, len(specs))
	found := map[reachedKey]time.Time{}
	if len(specs) > 0 {
		now = now.UTC()
		month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		in, err := l.Input(ctx, month, now, now)
		if err != nil {
			return nil, err
		}
		for team, spec := range specs {
			var b api.Budget
			if err := json.Unmarshal(spec, &b); err != nil {
				return nil, fmt.Errorf("stored budget of team %s: %w", team, err)
			}
			k := reachedKey{team, month, b.Monthly}
			st := cost.Budget(in, team, b, reached[k])
			if st.ExhaustedSince != nil {
				found[k] = *st.ExhaustedSince
			}
			out[team] = st
		}
	}
	// An evaluation begun before a budget changed is not kept: it read
	// the old budgets.
	l.mu.Lock()
	if l.gen == gen {
		l.budgets = budgetCache{at: now, statuses: out}
	}
	l.reached = found
	l.mu.Unlock()
	return out, nil
}

// notPast is statuses without the forecasts before now.
func notPast(statuses map[core.TeamName]api.BudgetStatus, now time.Time) map[core.TeamName]api.BudgetStatus {
	var out map[core.TeamName]api.BudgetStatus
	for team, b := range statuses {
		if b.ExhaustedAt == nil || b.ExhaustedAt.After(now) {
			continue
		}
		if out == nil {
			out = maps.Clone(statuses)
		}
		b.ExhaustedAt = nil
		out[team] = b
	}
	if out == nil {
		return statuses
	}
	return out
}

// ExceededMessage is what a team's waiting work says when its hard budget
// is spent: spent X of Y, and when the month resets.
func ExceededMessage(b api.BudgetStatus) string {
	return fmt.Sprintf("team %s's hard budget is spent: %s of %s this month; the month resets at %s (production still runs)",
		b.Team, cost.Amount(b.Spent, b.Currency), cost.WithCurrency(cost.Amount(b.Monthly, b.Currency), b.Currency), b.ResetsAt.UTC().Format(time.RFC3339))
}

// Gates says, for each team with a budget that alerts or is spent, what
// the control loop must do (core.BudgetGate). It never waits for an
// evaluation: it answers the last one (none before the first) and, when
// that is older than BudgetRefresh, starts the next in the background, so
// that a month of intervals to read never slows a scheduling cycle.
func (l *Ledger) Gates(ctx context.Context, now time.Time) (map[core.TeamName]core.BudgetGate, error) {
	l.mu.Lock()
	c, refreshing := l.budgets, l.refreshing
	stale := c.statuses == nil || now.Sub(c.at) >= BudgetRefresh || now.Before(c.at)
	if stale && !refreshing {
		l.refreshing = true
		go func() {
			_, err := l.Budgets(context.WithoutCancel(ctx), time.Now().UTC(), 0)
			l.mu.Lock()
			l.refreshing = false
			if err != nil {
				l.refreshErr = err.Error()
			}
			l.mu.Unlock()
		}()
	}
	failed := l.refreshErr
	l.refreshErr = ""
	l.mu.Unlock()
	if failed != "" {
		return nil, fmt.Errorf("evaluate the budgets: %s", failed)
	}
	bs := c.statuses
	var out map[core.TeamName]core.BudgetGate
	for team, b := range bs {
		if !b.Alerting && !b.Exceeded {
			continue
		}
		if out == nil {
			out = map[core.TeamName]core.BudgetGate{}
		}
		g := core.BudgetGate{Alerting: b.Alerting, Exceeded: b.Exceeded, StopRunning: b.Exceeded && b.StopRunning,
			Month: b.MonthStart.UTC().Format("2006-01")}
		if b.Exceeded {
			g.Message = ExceededMessage(b)
		} else {
			g.Message = fmt.Sprintf("team %s has spent %s of its %s monthly budget (%.0f%%, alert at %d%%)",
				b.Team, cost.Amount(b.Spent, b.Currency), cost.WithCurrency(cost.Amount(b.Monthly, b.Currency), b.Currency), 100*b.SpentRatio, b.AlertPercent)
			if b.ExhaustedAt != nil {
				g.Message += "; at the current burn rate it runs out at " + b.ExhaustedAt.UTC().Format(time.RFC3339)
			}
		}
		out[team] = g
	}
	return out, nil
}
