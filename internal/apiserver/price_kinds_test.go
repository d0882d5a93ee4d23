package apiserver

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/store"
)

// seedTotal is the seed's example: 100 GPUs × 8 per GPU-hour × 24 h × 30
// days.
const seedTotal = 576_000 * quantity.MoneyUnit

// priceKinds are the four price kinds, each set to 8 per GPU-hour: a
// monthly 5840 is 8 an hour at 730 h a month, an owned GPU bought for
// 210240 over 36 months (26280 h) is 8 an hour.
func priceKinds(from time.Time) []api.Price {
	return []api.Price{
		{Pool: "on-demand", Kind: api.PriceOnDemand, Rate: 8 * quantity.MoneyUnit, EffectiveFrom: from},
		{Pool: "reserved", Kind: api.PriceReserved, Rate: 8 * quantity.MoneyUnit, GPUs: 100, Term: "8760h", EffectiveFrom: from},
		{Pool: "monthly", Kind: api.PriceMonthly, Rate: 5840 * quantity.MoneyUnit, EffectiveFrom: from},
		{Pool: "owned", Kind: api.PriceOwned, Purchase: 210240 * quantity.MoneyUnit, Depreciation: "36mo", EffectiveFrom: from},
	}
}

// Every price kind gives the same figure on every path that prices work:
// an estimate at the pool's price, the pool's rate per GPU-hour (GET
// /pools), the price list (GET /prices), the plan's cost of a run, the
// ledger's report of 100 GPUs held for 720 hours, and its FOCUS export.
// Each is 100 × 8 × 720 = 576000 for each kind.
func TestEveryPriceKindGivesTheSameFigureOnEveryPath(t *testing.T) {
	kinds := priceKinds(fixtureStart)
	f := newFixture(t, store.Options{NoSync: true}, RateLimit{}, func(o *Options) {
		o.Ledger = &ledger.Ledger{Store: o.Store, Currency: "USD", Since: fixtureStart, FilePrices: kinds}
	})
	ctx := context.Background()
	start, end := fixtureStart.Add(time.Hour), fixtureStart.Add(time.Hour+720*time.Hour)
	for _, p := range kinds {
		node := "node-" + p.Pool
		putGPUNode(t, f.st, node, p.Pool, "H100", 81920, 100)
		w, _, err := f.st.CreateWorkload(ctx, &core.Workload{CreatedAt: start, Spec: core.Spec{Name: "train-" + p.Pool, Team: "research", Owner: "member",
			Priority: "training", Command: []string{"x"}, Request: core.Request{MilliGPU: 100_000}}}, nil, start)
		if err != nil {
			t.Fatal(err)
		}
		var as []core.Assignment
		for i := range 100 {
			as = append(as, core.Assignment{Node: core.NodeName(node), GPUIndex: i, GPUUUID: fmt.Sprintf("GPU-%s-%d", node, i), MilliGPU: 1000, MemoryMiB: 81920})
		}
		if res, err := f.st.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: as}}}, start); err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
		zero := 0
		if _, err := f.st.Finish(ctx, w.ID, 1, core.Succeeded, "Completed", "", &zero, end); err != nil {
			t.Fatal(err)
		}
	}
	f.advance(800 * time.Hour)
	window := "from=" + start.Format(time.RFC3339) + "&to=" + end.Format(time.RFC3339)

	var pools api.List[api.Pool]
	f.must("member", "GET", "/api/v1/pools", "", http.StatusOK, &pools)
	var prices api.PriceList
	f.must("member", "GET", "/api/v1/prices", "", http.StatusOK, &prices)
	var report api.CostReport
	f.must("admin", "GET", "/api/v1/cost?by=pool&"+window, "", http.StatusOK, &report)
	var plan api.Plan
	f.must("member", "POST", "/api/v1/plan", issueBrief+`,"expectedDuration":"720h"}`, http.StatusOK, &plan)
	a := f.do("admin", "GET", "/api/v1/cost/export?granularity=day&"+window, "")
	if a.status != http.StatusOK {
		t.Fatalf("export: %d %s", a.status, a.body)
	}
	focus := focusByPool(t, a.body)

	// times100GPUs720h is a rate per GPU-hour for the seed's work.
	times100GPUs720h := func(rate quantity.Money) quantity.Money { return rate * 100 * 720 }
	for _, p := range kinds {
		t.Run(p.Kind, func(t *testing.T) {
			var est api.CostEstimate
			f.must("member", "POST", "/api/v1/cost/estimate", `{"gpus":100,"hours":720,"pool":"`+p.Pool+`"}`, http.StatusOK, &est)
			if est.Total != seedTotal || est.Rate != 8*quantity.MoneyUnit || est.Currency != "USD" {
				t.Errorf("estimate: %s at %s %s per GPU-hour, want 576000 at 8 USD", est.Total, est.Rate, est.Currency)
			}
			var pool *api.Pool
			for i := range pools.Items {
				if pools.Items[i].Name == p.Pool {
					pool = &pools.Items[i]
				}
			}
			if pool == nil || pool.Price == nil || pool.Price.Kind != p.Kind || pool.Currency != "USD" || times100GPUs720h(pool.Price.GPUHourRate) != seedTotal {
				t.Errorf("GET /pools: %+v, want its %s price at 8 USD per GPU-hour", pool, p.Kind)
			}
			found := false
			for _, v := range prices.Items {
				if v.Pool == p.Pool {
					found = true
					if times100GPUs720h(v.GPUHourRate) != seedTotal {
						t.Errorf("GET /prices: %s's gpuHourRate %s, want 8", p.Pool, v.GPUHourRate)
					}
				}
			}
			if !found {
				t.Errorf("GET /prices has no version of %s", p.Pool)
			}
			var row *api.CostRow
			for i := range report.Items {
				if report.Items[i].Name == p.Pool {
					row = &report.Items[i]
				}
			}
			if row == nil || row.TotalCost != seedTotal || row.GPUHours != 72_000 {
				t.Errorf("the ledger: %+v, want 72000 GPU-hours costing 576000", row)
			}
			if got := focus[p.Pool]; got != seedTotal {
				t.Errorf("the FOCUS export bills %s %s, want 576000", p.Pool, got)
			}
			priced := 0
			for _, c := range plan.Candidates {
				if c.Pool != p.Pool {
					continue
				}
				priced++
				// The run of 720 h on the candidate's GPUs, scaled to 100 GPUs.
				milli := big.NewRat(int64(TotalMilliOf(t, c)), 1000)
				if c.CostPerUnit == nil || c.Unit != "run" {
					t.Errorf("plan candidate %+v: no cost of the run", c)
					continue
				}
				got := new(big.Rat).Quo(big.NewRat(int64(*c.CostPerUnit)*100, 1), milli)
				if got.Cmp(big.NewRat(int64(seedTotal), 1)) != 0 {
					t.Errorf("plan candidate of %s GPUs: a 720 h run costs %s, which is %s for 100 GPUs; want 576000", c.GPUs, c.CostPerUnit, got.FloatString(6))
				}
			}
			if priced == 0 {
				t.Errorf("the plan has no candidate in pool %s", p.Pool)
			}
		})
	}
}

// TotalMilliOf is a plan candidate's GPUs in milli-GPU, all replicas.
func TotalMilliOf(t *testing.T, c api.PlanCandidate) quantity.Milli {
	t.Helper()
	m, err := quantity.ParseMilli(c.GPUs)
	if err != nil {
		t.Fatalf("candidate GPUs %q: %v", c.GPUs, err)
	}
	return m * quantity.Milli(max(c.Replicas, 1))
}

// focusByPool sums a FOCUS export's BilledCost by x_Pool.
func focusByPool(t *testing.T, body string) map[string]quantity.Money {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("export: %v, %d records", err, len(recs))
	}
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	out := map[string]quantity.Money{}
	for _, r := range recs[1:] {
		m, err := quantity.ParseMoney(r[col["BilledCost"]])
		if err != nil {
			t.Fatalf("BilledCost %q: %v", r[col["BilledCost"]], err)
		}
		out[r[col["x_Pool"]]] += m
	}
	return out
}
