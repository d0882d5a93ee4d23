package cost

import (
	"math/big"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// DefaultAlertPercent is a budget's alert level when it names none.
const DefaultAlertPercent = 80

// Budget is a team's budget status for the calendar month (UTC) holding
// in.Now. The caller builds in over that month so far: From the month's
// start, To = Now (Budget does not check it).
//
//   - Spent is the team's total cost in the window (Report by team).
//   - BurnPerHour is what the team's intervals still open at Now (End zero,
//     Start ≤ Now) accrue per hour at the prices in effect at Now:
//     accelerator, licence per GPU-hour and host; and what its volumes
//     that exist at Now (Deleted zero, Created ≤ Now) accrue, storage;
//     rounded half-up once.
//   - ExhaustedAt is Now + (Monthly − Spent) / BurnPerHour when Spent is
//     below Monthly and that is before ResetsAt (absent otherwise, or with
//     no burn): a time to come.
//   - ExhaustedSince, once Spent has reached Monthly, is the first second
//     of the month at whose end the team's spend had reached it
//     (SpendReached); since, when not zero, is that instant already known
//     to the caller (the past does not change), and is used as is.
//   - Alerting: Spent ≥ AlertPercent (default 80) % of Monthly.
//   - Exceeded (a hard budget only): Spent plus what the open intervals
//     accrue in the next minute (BurnPerHour / 60, exactly) reaches Monthly.
func Budget(in Input, team core.TeamName, b api.Budget, since time.Time) api.BudgetStatus {
	if b.Team == "" {
		b.Team = string(team)
	}
	now := in.Now.UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	st := api.BudgetStatus{Budget: b, Currency: in.Currency, MonthStart: month, ResetsAt: month.AddDate(0, 1, 0)}
	st.Spent = teamSpent(in, team)
	st.BurnPerHour = burn(&in, team)
	if b.Monthly > 0 {
		st.SpentRatio = float64(st.Spent) / float64(b.Monthly)
	}
	alert := b.AlertPercent
	if alert == 0 {
		alert = DefaultAlertPercent
	}
	sp, mo := big.NewInt(int64(st.Spent)), big.NewInt(int64(b.Monthly))
	st.Alerting = b.Monthly > 0 && new(big.Int).Mul(sp, big.NewInt(100)).Cmp(new(big.Int).Mul(mo, big.NewInt(int64(alert)))) >= 0
	if b.Hard {
		lhs := new(big.Int).Mul(sp, big.NewInt(60))
		lhs.Add(lhs, big.NewInt(int64(st.BurnPerHour)))
		st.Exceeded = lhs.Cmp(new(big.Int).Mul(mo, big.NewInt(60))) >= 0
	}
	switch {
	case st.Spent >= b.Monthly:
		t := since
		if t.IsZero() {
			t = SpendReached(in, team, b.Monthly)
		}
		st.ExhaustedSince = &t
	case st.BurnPerHour > 0:
		// (Monthly − Spent) / burn hours, in nanoseconds.
		left := new(big.Int).Mul(big.NewInt(int64(b.Monthly-st.Spent)), big.NewInt(nsPerHour))
		left.Quo(left, big.NewInt(int64(st.BurnPerHour)))
		if left.IsInt64() {
			if t := in.Now.Add(time.Duration(left.Int64())); t.Before(st.ResetsAt) && t.After(in.Now) {
				st.ExhaustedAt = &t
			}
		}
	}
	return st
}

// teamSpent is the team's total cost over in's window.
func teamSpent(in Input, team core.TeamName) Money {
	rep, err := Report(in, api.CostByTeam, Visibility{Teams: map[core.TeamName]bool{team: true}})
	if err != nil {
		return 0
	}
	return rep.Total.TotalCost
}

// SpendReached is the first whole second t of in's window (From to Now;
// Now itself when that is sooner) such that the team's spend over [From,
// t) has reached amount, found by
// bisection on the spend as of t (the ledger of [From, t) with the clock
// at t), which only grows with t; Now when even the whole window's spend
// falls short.
func SpendReached(in Input, team core.TeamName, amount Money) time.Time {
	at := func(t time.Time) Money {
		x := in
		x.To, x.Now = t, t
		return teamSpent(x, team)
	}
	lo, hi := in.From, in.Now
	if at(hi) < amount {
		return hi
	}
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if at(mid) >= amount {
			hi = mid
		} else {
			lo = mid
		}
	}
	if t := hi.Truncate(time.Second); !t.Before(hi) || at(t) >= amount {
		return t
	}
	return minTimeOf(hi.Truncate(time.Second).Add(time.Second), in.Now)
}

func minTimeOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// burn is what a team's open intervals and existing volumes accrue in an
// hour at Now.
func burn(in *Input, team core.TeamName) Money {
	bk := newBook(in.Prices, in.Pools)
	now := nanos(in.Now)
	var a [nComp]acc
	for i := range in.Intervals {
		iv := &in.Intervals[i]
		if !iv.End.IsZero() || nanos(iv.Start) > now || iv.Milli <= 0 {
			continue
		}
		if w := in.Workloads[iv.Workload]; w == nil || w.Team != team {
			continue
		}
		si := bk.spanAt(bk.pool(iv.Pool), now)
		if si < 0 {
			continue
		}
		sp := &bk.spans[si]
		q := mul64(uint64(iv.Milli), nsPerHour)
		a[cAccel].add(sp.accel, q)
		a[cLicence].add(sp.licHour, q)
		if iv.HostMilliCPU > 0 {
			a[cHost].add(sp.cpu, mul64(uint64(iv.HostMilliCPU), nsPerHour))
		}
		if iv.HostMemoryMiB > 0 {
			a[cHost].add(sp.mem, mul64(uint64(iv.HostMemoryMiB), nsPerHour))
		}
	}
	for i := range in.Volumes {
		v := &in.Volumes[i]
		if v.Team != team || !v.Deleted.IsZero() || nanos(v.Created) > now || v.SizeBytes <= 0 {
			continue
		}
		if si := bk.spanAt(bk.pool(v.Pool), now); si >= 0 {
			a[cStorage].add(bk.spans[si].storage, mul64(uint64(v.SizeBytes), nsPerHour))
		}
	}
	sum := new(big.Rat)
	for c := range nComp {
		if a[c].isZero() {
			continue
		}
		n := a[c].n.big()
		if a[c].b != nil {
			n.Add(n, a[c].b)
		}
		sum.Add(sum, new(big.Rat).SetFrac(n, bk.scales[c].L))
	}
	return Money(roundHalfUp(sum))
}

// roundHalfUp rounds a non-negative fraction to an integer, saturating.
func roundHalfUp(r *big.Rat) int64 {
	num := new(big.Int).Lsh(r.Num(), 1)
	num.Add(num, r.Denom())
	num.Quo(num, new(big.Int).Lsh(r.Denom(), 1))
	if !num.IsInt64() {
		return int64(quantity.MaxMoney) * 1000
	}
	return num.Int64()
}
