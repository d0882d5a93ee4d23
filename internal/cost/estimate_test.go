package cost

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

func TestEstimate(t *testing.T) {
	est, err := Estimate(100_000, 720, "", units(8), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if est.Total != units(576_000) || est.Kind != api.PriceOnDemand || est.Rate != units(8) {
		t.Errorf("100 GPUs × 8 × 720 h = %s (%s at %s), want 576000 exactly", est.Total, est.Kind, est.Rate)
	}
	// At 70% utilisation on-demand bills 70% of the hours; reserved at 5
	// and monthly at 4380 (6 per GPU-hour) bill them all.
	half := 0.5
	est, err = Estimate(100_000, 720, api.PriceOnDemand, units(8), 0.7, []api.EstimateOption{
		{Kind: api.PriceReserved, Rate: units(4)}, {Kind: api.PriceMonthly, Rate: units(4380)}, {Kind: api.PriceOnDemand, Rate: units(8)}})
	if err != nil {
		t.Fatal(err)
	}
	threeQ := 0.75
	want := []api.EstimateOption{
		{Kind: api.PriceReserved, Rate: units(4), Total: units(288_000), BreakEvenUtilisation: &half},
		{Kind: api.PriceMonthly, Rate: units(6), Total: units(432_000), BreakEvenUtilisation: &threeQ},
		{Kind: api.PriceOnDemand, Rate: units(8), Total: units(403_200)},
	}
	if est.Total != units(403_200) {
		t.Errorf("on-demand at 0.7: %s, want 403200", est.Total)
	}
	if diff := cmp.Diff(want, est.Compare); diff != "" {
		t.Errorf("compare (-want +got):\n%s", diff)
	}
	// Without an on-demand rate there is no break-even.
	est, _ = Estimate(1000, 1, api.PriceReserved, units(1), 1, []api.EstimateOption{{Kind: api.PriceMonthly, Rate: units(730)}})
	if est.Compare[0].BreakEvenUtilisation != nil || est.Total != units(1) || est.Compare[0].Total != units(1) {
		t.Errorf("no on-demand: %+v", est)
	}
	for _, tc := range []struct {
		name  string
		gpus  api.Milli
		hours float64
		kind  string
		rate  Money
		u     float64
		field string
	}{
		{"no GPUs", 0, 1, "", 1, 1, "gpus"},
		{"negative hours", 1000, -1, "", 1, 1, "hours"},
		{"unknown kind", 1000, 1, "spot", 1, 1, "kind"},
		{"negative rate", 1000, 1, "", -1, 1, "rate"},
		{"utilisation over 1", 1000, 1, "", 1, 1.5, "utilisation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Estimate(tc.gpus, tc.hours, tc.kind, tc.rate, tc.u, nil)
			fe, ok := err.(api.FieldErrors)
			if !ok || len(fe) != 1 || fe[0].Field != tc.field {
				t.Errorf("got %v, want an error naming %s", err, tc.field)
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
	st := Budget(in, "t", api.Budget{Monthly: units(100)})
	if st.Spent != units(64) || st.BurnPerHour != units(7) || st.Team != "t" || !st.MonthStart.Equal(month) || !st.ResetsAt.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("status %+v; want spent 64, burn 7, March", st)
	}
	// 36 left at 7 an hour: 5h8m34.285714285s, before the month resets.
	if st.ExhaustedAt == nil || !st.ExhaustedAt.Equal(now.Add(36*time.Hour/7)) || st.Alerting || st.Exceeded || st.SpentRatio != 0.64 {
		t.Errorf("forecast %v alerting %v exceeded %v ratio %v", st.ExhaustedAt, st.Alerting, st.Exceeded, st.SpentRatio)
	}
	if st := Budget(in, "t", api.Budget{Monthly: units(1000)}); st.ExhaustedAt != nil {
		t.Errorf("a budget that lasts the month runs out at %v", st.ExhaustedAt)
	}
	if st := Budget(in, "t", api.Budget{Monthly: units(80)}); !st.Alerting || st.Exceeded {
		t.Errorf("64 of 80 (a soft budget): alerting %v exceeded %v", st.Alerting, st.Exceeded)
	}
	if st := Budget(in, "t", api.Budget{Monthly: units(64), Hard: true}); !st.Exceeded || st.ExhaustedAt == nil || !st.ExhaustedAt.Equal(now) {
		t.Errorf("a hard budget spent: %+v", st)
	}
	// 64 + 7/60 in the next minute reaches 64.1.
	if st := Budget(in, "t", api.Budget{Monthly: units(64) + 100_000, Hard: true}); !st.Exceeded {
		t.Errorf("a hard budget the next minute reaches is not exceeded")
	}
	if st := Budget(in, "t", api.Budget{Monthly: units(65), Hard: true}); st.Exceeded {
		t.Errorf("a hard budget a minute does not reach is exceeded")
	}
}
