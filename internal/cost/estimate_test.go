package cost

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// estimate is Estimate of gpus (milli-GPU) for hours at kind and rate, in
// USD with no price versions.
func estimate(gpus quantity.Milli, hours float64, kind string, rate Money, u float64, compare []api.EstimateOption) (api.CostEstimate, error) {
	return Estimate(api.EstimateRequest{GPUs: gpus, Hours: hours, Kind: kind, Rate: rate, Utilisation: &u, Compare: compare}, nil, "USD", at(0))
}

func TestEstimate(t *testing.T) {
	est, err := estimate(100_000, 720, "", units(8), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if est.Total != units(576_000) || est.Kind != api.PriceOnDemand || est.Rate != units(8) || est.Currency != "USD" {
		t.Errorf("100 GPUs × 8 × 720 h = %s (%s at %s %s), want 576000 USD exactly", est.Total, est.Kind, est.Rate, est.Currency)
	}
	// At 70% utilisation on-demand bills 70% of the hours; reserved at 5
	// and monthly at 4380 (6 per GPU-hour) bill them all.
	half := 0.5
	est, err = estimate(100_000, 720, api.PriceOnDemand, units(8), 0.7, []api.EstimateOption{
		{Kind: api.PriceReserved, Rate: units(4)}, {Kind: api.PriceMonthly, Rate: units(4380)}, {Kind: api.PriceOnDemand, Rate: units(8)}})
	if err != nil {
		t.Fatal(err)
	}
	threeQ := 0.75
	want := []api.EstimateOption{
		{Kind: api.PriceReserved, Rate: units(4), PriceRate: units(4), PriceUnit: "GPU-hour", Total: units(288_000), BreakEvenUtilisation: &half},
		{Kind: api.PriceMonthly, Rate: units(6), PriceRate: units(4380), PriceUnit: "GPU-month", Total: units(432_000), BreakEvenUtilisation: &threeQ},
		{Kind: api.PriceOnDemand, Rate: units(8), PriceRate: units(8), PriceUnit: "GPU-hour", Total: units(403_200)},
	}
	if est.Total != units(403_200) {
		t.Errorf("on-demand at 0.7: %s, want 403200", est.Total)
	}
	if diff := cmp.Diff(want, est.Compare); diff != "" {
		t.Errorf("compare (-want +got):\n%s", diff)
	}
	// Without an on-demand rate there is no break-even.
	est, _ = estimate(1000, 1, api.PriceReserved, units(1), 1, []api.EstimateOption{{Kind: api.PriceMonthly, Rate: units(730)}})
	if est.Compare[0].BreakEvenUtilisation != nil || est.Total != units(1) || est.Compare[0].Total != units(1) {
		t.Errorf("no on-demand: %+v", est)
	}
}

// A pool's price is looked up at now and converted once, as the ledger
// bills it: a monthly 5840 is 8 per GPU-hour, so 100 GPUs for 720 h cost
// 576000, never 5840 or 5840/730/730 per GPU-hour.
func TestEstimateAtAPoolsPrice(t *testing.T) {
	prices := []api.Price{
		{Pool: "eu-onprem", Kind: api.PriceMonthly, Rate: units(5840)},
		{Pool: "later", Kind: api.PriceOnDemand, Rate: units(8), EffectiveFrom: at(100)},
	}
	est, err := Estimate(api.EstimateRequest{GPUs: 100_000, Hours: 720, Pool: "eu-onprem"}, prices, "USD", at(0))
	if err != nil {
		t.Fatal(err)
	}
	if est.Total != units(576_000) || est.Rate != units(8) || est.Kind != api.PriceMonthly || est.Price == nil || est.Price.Rate != units(5840) {
		t.Errorf("got %s at %s per GPU-hour (%s, price %+v), want 576000 at 8", est.Total, est.Rate, est.Kind, est.Price)
	}
	for _, tc := range []struct {
		name  string
		req   api.EstimateRequest
		field string
	}{
		{"no GPUs", api.EstimateRequest{Hours: 1, Rate: 1}, "gpus"},
		{"negative hours", api.EstimateRequest{GPUs: 1000, Hours: -1, Rate: 1}, "hours"},
		{"unknown kind", api.EstimateRequest{GPUs: 1000, Hours: 1, Kind: "spot", Rate: 1}, "kind"},
		{"negative rate", api.EstimateRequest{GPUs: 1000, Hours: 1, Rate: -1}, "rate"},
		{"utilisation over 1", api.EstimateRequest{GPUs: 1000, Hours: 1, Rate: 1, Utilisation: ptr(1.5)}, "utilisation"},
		{"a pool with no price", api.EstimateRequest{GPUs: 1000, Hours: 1, Pool: "nowhere"}, "pool"},
		{"a pool whose price starts later", api.EstimateRequest{GPUs: 1000, Hours: 1, Pool: "later"}, "pool"},
		{"a pool and a rate", api.EstimateRequest{GPUs: 1000, Hours: 1, Pool: "eu-onprem", Rate: 1}, "pool"},
		{"neither pool nor rate", api.EstimateRequest{GPUs: 1000, Hours: 1}, "rate"},
		{"an unknown currency", api.EstimateRequest{GPUs: 1000, Hours: 1, Rate: 1, Currency: "XYZ"}, "currency"},
		{"another currency than the server's", api.EstimateRequest{GPUs: 1000, Hours: 1, Rate: 1, Currency: "EUR"}, "currency"},
		{"a bad option", api.EstimateRequest{GPUs: 1000, Hours: 1, Rate: 1, Compare: []api.EstimateOption{{Kind: "spot"}}}, "compare[0].kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Estimate(tc.req, prices, "USD", at(0))
			fe, ok := err.(api.FieldErrors)
			if !ok || len(fe) != 1 || fe[0].Field != tc.field {
				t.Errorf("got %v, want one error naming %s", err, tc.field)
			}
		})
	}
}

func TestPriceAt(t *testing.T) {
	prices := []api.Price{
		{Pool: "p", Kind: api.PriceOnDemand, Rate: 1},
		{Pool: "p", Kind: api.PriceOnDemand, Rate: 2, EffectiveFrom: at(100)},
		{Pool: "q", Kind: api.PriceOnDemand, Rate: 3, EffectiveFrom: at(50)},
	}
	for _, tc := range []struct {
		pool string
		t    time.Time
		rate Money
		ok   bool
	}{
		{"p", at(-1e6), 1, true}, {"p", at(99), 1, true}, {"p", at(100), 2, true}, {"q", at(49), 0, false}, {"q", at(50), 3, true}, {"r", at(0), 0, false},
	} {
		p, ok := PriceAt(prices, tc.pool, tc.t)
		if ok != tc.ok || p.Rate != tc.rate {
			t.Errorf("PriceAt(%s, %s) = %d %v, want %d %v", tc.pool, tc.t, p.Rate, ok, tc.rate, tc.ok)
		}
	}
}

func TestCheckVersions(t *testing.T) {
	existing := []api.Price{
		{Pool: "p", Kind: api.PriceOnDemand, Rate: 1},
		{Pool: "p", Kind: api.PriceOnDemand, Rate: 2, EffectiveFrom: at(100)},
		{Pool: "q", Kind: api.PriceOnDemand, Rate: 3, EffectiveFrom: at(500)},
	}
	v := func(pool string, sec int) api.Price {
		return api.Price{Pool: pool, Kind: api.PriceOnDemand, Rate: 5, EffectiveFrom: at(sec)}
	}
	for _, tc := range []struct {
		name string
		p    api.Price
		now  time.Time
		errs int
	}{
		{"a new version from now is fine", v("p", 200), at(200), 0},
		{"a new pool is fine", v("r", 200), at(200), 0},
		{"the same time as a version", v("p", 100), at(50), 1},
		{"in the past", v("p", 150), at(200), 1},
		{"before the pool's latest", v("q", 300), at(300), 1},
		{"a configuration file may list history", v("p", 50), time.Time{}, 0},
		{"but not two versions from one time", api.Price{Pool: "p", Kind: api.PriceOnDemand, Rate: 7}, time.Time{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := CheckVersions(existing, tc.p, tc.now)
			if len(errs) != tc.errs {
				t.Fatalf("got %v, want %d errors", errs, tc.errs)
			}
			for _, e := range errs {
				if e.Field != "effectiveFrom" {
					t.Errorf("error names %s", e.Field)
				}
			}
		})
	}
}

func TestBudget(t *testing.T) {
	now := time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)
	month := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	w := func(id, team string) *Workload {
		return &Workload{ID: core.WorkloadID(id), Team: core.TeamName(team), Attempts: 1, Phase: core.Running}
	}
	in := Input{From: month, To: now, Now: now, Currency: "USD",
		Prices: []api.Price{{Pool: "p", Kind: api.PriceOnDemand, Rate: units(10), CPUCoreHour: units(1)}},
		Intervals: []Interval{
			{Workload: "a", Pool: "p", Milli: 1000, Start: now.Add(-10 * time.Hour), End: now.Add(-5 * time.Hour)}, // 50
			{Workload: "b", Pool: "p", Milli: 500, Start: now.Add(-2 * time.Hour), HostMilliCPU: 2000},             // open: 10 + 4 so far, 7/h
			{Workload: "c", Pool: "p", Milli: 1000, Start: now.Add(-1 * time.Hour)},                                // another team's
		},
		Workloads: workloads(w("a", "t"), w("b", "t"), w("c", "u"))}
	st := Budget(in, "t", api.Budget{Monthly: units(100)}, time.Time{})
	if st.Spent != units(64) || st.BurnPerHour != units(7) || st.Team != "t" || !st.MonthStart.Equal(month) || !st.ResetsAt.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("status %+v; want spent 64, burn 7, March", st)
	}
	// 36 left at 7 an hour: 5h8m34.285714285s, before the month resets.
	if st.ExhaustedAt == nil || !st.ExhaustedAt.Equal(now.Add(36*time.Hour/7)) || st.Alerting || st.Exceeded || st.SpentRatio != 0.64 {
		t.Errorf("forecast %v alerting %v exceeded %v ratio %v", st.ExhaustedAt, st.Alerting, st.Exceeded, st.SpentRatio)
	}
	if st := Budget(in, "t", api.Budget{Monthly: units(1000)}, time.Time{}); st.ExhaustedAt != nil {
		t.Errorf("a budget that lasts the month runs out at %v", st.ExhaustedAt)
	}
	if st := Budget(in, "t", api.Budget{Monthly: units(80)}, time.Time{}); !st.Alerting || st.Exceeded {
		t.Errorf("64 of 80 (a soft budget): alerting %v exceeded %v", st.Alerting, st.Exceeded)
	}
	// A budget spent says since when, to the second, and no run-out
	// time: a's 10 an hour reached 30 three hours after it started; b's 7
	// an hour took the 50 of a to 57 an hour after b started.
	for _, tc := range []struct {
		monthly Money
		since   time.Time
	}{{units(64), now}, {units(57), now.Add(-time.Hour)}, {units(30), now.Add(-7 * time.Hour)}, {units(30) + 1, now.Add(-7 * time.Hour).Add(time.Second)}} {
		st := Budget(in, "t", api.Budget{Monthly: tc.monthly, Hard: true}, time.Time{})
		if !st.Exceeded || st.ExhaustedAt != nil || st.ExhaustedSince == nil || !st.ExhaustedSince.Equal(tc.since) {
			t.Errorf("a hard budget of %s spent: exceeded %v, runs out at %v, spent since %v; want since %v", tc.monthly, st.Exceeded, st.ExhaustedAt, st.ExhaustedSince, tc.since)
		}
	}
	// When it was spent is taken as given when the caller knows it.
	if st := Budget(in, "t", api.Budget{Monthly: units(30)}, month.Add(time.Hour)); st.ExhaustedSince == nil || !st.ExhaustedSince.Equal(month.Add(time.Hour)) {
		t.Errorf("a known time the budget was spent: %v", st.ExhaustedSince)
	}
	// 64 + 7/60 in the next minute reaches 64.1.
	if st := Budget(in, "t", api.Budget{Monthly: units(64) + 100_000, Hard: true}, time.Time{}); !st.Exceeded {
		t.Errorf("a hard budget the next minute reaches is not exceeded")
	}
	if st := Budget(in, "t", api.Budget{Monthly: units(65), Hard: true}, time.Time{}); st.Exceeded {
		t.Errorf("a hard budget a minute does not reach is exceeded")
	}
}
