package control

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ReasonBudgetExceeded stops a team's running work once its hard budget,
// with stopRunning, is spent; the workload goes back to the queue, where it
// waits for the month to reset (or the budget to grow).
const ReasonBudgetExceeded = "BudgetExceeded"

// ReasonBudgetAlert is the Warning event of a team's budget reaching its
// alert level.
const ReasonBudgetAlert = "BudgetAlert"

// Budgets is the cost ledger as the loop reads it (ledger.Ledger): what
// each team's monthly budget says now.
type Budgets interface {
	Gates(ctx context.Context, now time.Time) (map[core.TeamName]core.BudgetGate, error)
}

// budgets applies the teams' budgets to a cycle: a spent hard budget holds
// the team's pending preemptible work (through the snapshot, for the
// scheduler) and, with stopRunning, stops its running preemptible work,
// lowest classes first; a budget at its alert level raises one Warning
// event a month on each of the team's running workloads.
func (l *Loop) budgets(ctx context.Context, snap *core.Snapshot, now time.Time) {
	if l.opts.Budgets == nil {
		return
	}
	gates, err := l.opts.Budgets.Gates(ctx, now)
	if err != nil {
		l.log.Error("budgets", "err", err)
		return
	}
	class := func(w *core.Workload) (core.PriorityClass, bool) { return core.Class(l.opts.Classes, w.Priority) }
	var stop []*core.Workload
	for team, g := range gates {
		if g.Exceeded {
			if snap.BudgetExceeded == nil {
				snap.BudgetExceeded = map[core.TeamName]string{}
			}
			snap.BudgetExceeded[team] = g.Message
		}
		// The alert is raised once a month, on the team's running
		// workloads: it waits for one to run.
		alert := g.Alerting && l.alerted[team] != g.Month
		for _, w := range snap.Running {
			if w.Team != team || w.Status.StopRequested != "" {
				continue
			}
			if alert {
				if ok, err := l.opts.Store.Warn(ctx, w.ID, w.Status.Attempts, ReasonBudgetAlert, g.Message, now); err != nil {
					l.log.Error("budget alert", "workload", w.ID, "err", err)
				} else if ok {
					l.alerted[team] = g.Month
				}
			}
			if c, ok := class(w); g.StopRunning && ok && c.Preemptible {
				stop = append(stop, w)
			}
		}
	}
	// Lowest classes first, then the newest: all of them go, but in the
	// order a person would choose.
	slices.SortStableFunc(stop, func(a, b *core.Workload) int {
		ca, _ := class(a)
		cb, _ := class(b)
		return cmp.Or(cmp.Compare(ca.Value, cb.Value), b.CreatedAt.Compare(a.CreatedAt))
	})
	for _, w := range stop {
		if _, err := l.opts.Store.RequestStop(ctx, w.ID, ReasonBudgetExceeded, snap.BudgetExceeded[w.Team], now); err != nil {
			l.log.Error("request stop", "workload", w.ID, "err", err)
		}
	}
}

// alertDue reports whether one of ws is of a team whose budget alert this
// month is yet to be raised: budgets raises it on the team's running
// workloads, so the cycle after ws start must run.
func (l *Loop) alertDue(ws []*core.Workload) bool {
	for _, w := range ws {
		if g, ok := l.wake.gates[w.Team]; ok && g.Alerting && l.alerted[w.Team] != g.Month {
			return true
		}
	}
	return false
}
