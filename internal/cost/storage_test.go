package cost

import (
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

const gib = 1 << 30

// month is the definition's month: quantity.HoursPerMonth hours.
const month = quantity.HoursPerMonth * time.Hour

// storagePrice is a price of pool with StorageGiBMonth micro-units per
// GiB-month (and a GPU rate, so that it is a whole version).
func storagePrice(pool string, perGiBMonth Money, from time.Time) api.Price {
	return api.Price{Pool: pool, Kind: api.PriceOnDemand, Rate: units(1), StorageGiBMonth: perGiBMonth, EffectiveFrom: from}
}

// exactStorage is the definition: perGiBMonth × size/2^30 × d/month,
// rounded half-up once.
func exactStorage(perGiBMonth Money, size int64, d time.Duration) Money {
	r := new(big.Rat).SetFrac(big.NewInt(int64(perGiBMonth)), big.NewInt(gib))
	r.Mul(r, big.NewRat(size, 1))
	r.Mul(r, new(big.Rat).SetFrac64(int64(d), int64(month)))
	return roundRat(r)
}

func TestStorageHalfAMonth(t *testing.T) {
	tenth := quantity.MoneyUnit / 10 // 0.10 per GiB-month
	// A window of one month, the volume in its second half: 100 × 0.10 / 2.
	in := Input{From: t0, To: t0.Add(month), Now: t0.Add(month), Currency: "USD",
		Prices:  []api.Price{storagePrice("local", tenth, time.Time{})},
		Volumes: []Volume{{Team: "alpha", Name: "data", Pool: "local", SizeBytes: 100 * gib, Created: t0.Add(month / 2)}}}
	rep := mustReport(t, in, api.CostByTeam, admin)
	if len(rep.Items) != 1 {
		t.Fatalf("rows %+v: want alpha's only, a team with a volume and no workloads", rep.Items)
	}
	r := rep.Items[0]
	if r.Name != "alpha" || r.StorageCost != units(5) || r.TotalCost != units(5) || r.GPUHours != 0 || r.AcceptedOutputs != 0 {
		t.Fatalf("row %+v: want alpha's storage 5.00 exactly, nothing else", r)
	}
	if rep.Total.StorageCost != units(5) {
		t.Fatalf("total storage %s, want 5", rep.Total.StorageCost)
	}

	// A calendar month (November, 720 h), the volume in its second half:
	// 360 of the 730 hours of a month.
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dec := nov.AddDate(0, 1, 0)
	mid := nov.Add(dec.Sub(nov) / 2)
	in = Input{From: nov, To: dec, Now: dec, Currency: "USD",
		Prices:  []api.Price{storagePrice("local", tenth, time.Time{})},
		Volumes: []Volume{{Team: "alpha", Name: "data", Pool: "local", SizeBytes: 100 * gib, Created: mid}}}
	want := exactStorage(tenth, 100*gib, dec.Sub(mid))
	if want != 4_931_507 { // 10 × 360/730 = 4.9315068…
		t.Fatalf("the definition gives %s", want)
	}
	if got := mustReport(t, in, api.CostByTeam, admin).Total.StorageCost; got != want {
		t.Fatalf("November's second half bills %s, want %s", got, want)
	}
}

func TestStorageLifetime(t *testing.T) {
	tenth := quantity.MoneyUnit / 10
	now := t0.Add(146 * time.Hour)
	in := Input{From: t0, To: t0.Add(month), Now: now, Currency: "USD",
		Prices: []api.Price{storagePrice("local", tenth, time.Time{})},
		Volumes: []Volume{
			// Made before the window, deleted 73 h in: 2 × 0.10 × 73/730.
			{Team: "alpha", Name: "old", Pool: "local", SizeBytes: 2 * gib, Created: t0.Add(-time.Hour), Deleted: t0.Add(73 * time.Hour)},
			// Still there: billed up to Now, 1 × 0.10 × 146/730.
			{Team: "beta", Name: "live", Pool: "local", SizeBytes: gib, Created: t0},
			// Deleted before the window: nothing.
			{Team: "gamma", Name: "gone", Pool: "local", SizeBytes: gib, Created: t0.Add(-3 * time.Hour), Deleted: t0.Add(-time.Hour)},
			// Made after Now: nothing yet.
			{Team: "gamma", Name: "later", Pool: "local", SizeBytes: gib, Created: now.Add(time.Hour)},
		}}
	rows := rowsByName(mustReport(t, in, api.CostByTeam, admin))
	if len(rows) != 2 {
		t.Fatalf("rows %v: want alpha and beta (gamma's volumes are outside the window)", rows)
	}
	if got, want := rows["alpha"].StorageCost, exactStorage(tenth, 2*gib, 73*time.Hour); got != want || want != 20_000 {
		t.Errorf("deleted volume bills %s, want %s (up to its deletion)", got, want)
	}
	if got, want := rows["beta"].StorageCost, exactStorage(tenth, gib, 146*time.Hour); got != want || want != 20_000 {
		t.Errorf("live volume bills %s, want %s (up to now)", got, want)
	}
	byWl := rowsByName(mustReport(t, in, api.CostByWorkload, admin))
	if byWl[VolumeRow("alpha", "old")].StorageCost != 20_000 {
		t.Errorf("by workload: %v, want a row %s", byWl, VolumeRow("alpha", "old"))
	}
	if byPool := rowsByName(mustReport(t, in, api.CostByPool, admin)); byPool["local"].StorageCost != 40_000 {
		t.Errorf("by pool: %v, want local 0.04", byPool)
	}
	if byUser := rowsByName(mustReport(t, in, api.CostByUser, admin)); byUser["(none)"].StorageCost != 40_000 {
		t.Errorf("by user: %v, want (none) 0.04", byUser)
	}
	// A member sees its team's volumes only.
	mine := mustReport(t, in, api.CostByTeam, Visibility{Teams: map[core.TeamName]bool{"beta": true}})
	if len(mine.Items) != 1 || mine.Items[0].Name != "beta" || mine.Total.StorageCost != 20_000 {
		t.Errorf("beta's member sees %+v", mine)
	}
	if tot := Totals(in); tot[[2]string{"alpha", "local"}] != 20_000 || tot[[2]string{"beta", "local"}] != 20_000 {
		t.Errorf("Totals %v", tot)
	}
}

func TestStoragePriceVersions(t *testing.T) {
	half := t0.Add(month / 2)
	in := Input{From: t0, To: t0.Add(month), Now: t0.Add(month), Currency: "USD",
		Prices: []api.Price{storagePrice("local", quantity.MoneyUnit/10, t0.Add(-time.Hour)), storagePrice("local", 3*quantity.MoneyUnit/10, half)},
		Volumes: []Volume{
			{Team: "alpha", Name: "data", Pool: "local", SizeBytes: 10 * gib, Created: t0.Add(-time.Hour)},
			// No price in this pool: 0, but its row is there.
			{Team: "beta", Name: "free", Pool: "unpriced", SizeBytes: 10 * gib, Created: t0},
		}}
	rows := rowsByName(mustReport(t, in, api.CostByTeam, admin))
	// 10 × 0.10 × ½ + 10 × 0.30 × ½.
	if got := rows["alpha"].StorageCost; got != units(2) {
		t.Errorf("alpha's storage across two versions: %s, want 2.00", got)
	}
	if r, ok := rows["beta"]; !ok || r.TotalCost != 0 {
		t.Errorf("beta's volume in a pool without a price: %+v (present %v), want a row of 0", r, ok)
	}
	// A price version with no storage price bills 0 from then on.
	in.Prices[1].StorageGiBMonth = 0
	if got := rowsByName(mustReport(t, in, api.CostByTeam, admin))["alpha"].StorageCost; got != units(1)/2 {
		t.Errorf("storage priced the first half only: %s, want 0.50", got)
	}
}

func TestStorageWithWorkloads(t *testing.T) {
	in := Input{From: t0, To: at(3600), Now: at(3600), Currency: "USD",
		Prices:    []api.Price{{Pool: "p", Kind: api.PriceOnDemand, Rate: units(3600), StorageGiBMonth: 730 * quantity.MoneyUnit}},
		Intervals: []Interval{iv("a", "p", 0, 1000, 0, 1800)},
		Workloads: workloads(job("a", "alpha", core.Succeeded, 1800)),
		// 1 GiB at 730 per GiB-month: 1 per hour.
		Volumes: []Volume{{Team: "alpha", Name: "data", Pool: "p", SizeBytes: gib, Created: t0.Add(-time.Hour)}}}
	rep := mustReport(t, in, api.CostByTeam, admin)
	r := rowsByName(rep)["alpha"]
	if r.AcceleratorCost != units(1800) || r.StorageCost != units(1) || r.TotalCost != units(1801) || r.AcceptedOutputs != 1 {
		t.Fatalf("alpha %+v: want 1800 of GPU and 1 of storage, one output", r)
	}
	if c := r.CostPerAcceptedOutput; c == nil || *c != units(1801) {
		t.Errorf("cost per output %v: storage is the team's cost too", c)
	}
	s, err := Series(in, api.CostByTeam, 30*time.Minute, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Points) != 2 || s.Points[0].Items["alpha"] != units(1800)+units(1)/2 || s.Points[1].Items["alpha"] != units(1)/2 {
		t.Errorf("series %+v: want 1800.5 then 0.5", s.Points)
	}
	// Budget: the live volume burns 1 per hour.
	st := Budget(in, "alpha", api.Budget{Monthly: units(10000)}, time.Time{})
	if st.BurnPerHour != units(1) {
		t.Errorf("burn %s, want 1 (the volume)", st.BurnPerHour)
	}
}

func TestFOCUSStorage(t *testing.T) {
	// 0.73 per GiB-month is 0.001 per GiB-hour.
	p := storagePrice("local", 730_000, time.Time{})
	in := Input{From: t0, To: at(7200), Now: at(7200), Currency: "USD", Prices: []api.Price{p},
		Volumes: []Volume{{Team: "alpha", Name: "data", Pool: "local", SizeBytes: gib, Created: t0.Add(-time.Hour)},
			{Team: "beta", Name: "scratch", Pool: "local", SizeBytes: 2 * gib, Created: at(1800), Deleted: at(5400)}}}
	col, recs := exportRecords(t, in, time.Hour, admin)
	type key struct{ id, start string }
	got := map[key][]string{}
	var billed Money
	for _, r := range recs {
		if r[col["ServiceCategory"]] != "Storage" || r[col["ChargeCategory"]] != "Usage" || r[col["ResourceType"]] != "Volume" {
			t.Errorf("row %v: want a Storage usage row of a volume", r)
		}
		if r[col["PricingUnit"]] != "GiB-Months" || r[col["ConsumedUnit"]] != "GiB-Months" || r[col["x_Workload"]] != "" {
			t.Errorf("row %v: units", r)
		}
		if r[col["x_StorageCost"]] != r[col["BilledCost"]] || r[col["x_AcceleratorCost"]] != "0" {
			t.Errorf("row %v: x_StorageCost is the cost", r)
		}
		m, err := quantity.ParseMoney(r[col["BilledCost"]])
		if err != nil {
			t.Fatal(err)
		}
		billed += m
		got[key{r[col["ResourceId"]], r[col["ChargePeriodStart"]]}] = r
	}
	h0, h1 := t0.Format(FOCUSTime), at(3600).Format(FOCUSTime)
	want := map[key]struct {
		cost     Money
		gibMonth float64
	}{
		{"alpha/data", h0}:   {1000, 1.0 / 730},
		{"alpha/data", h1}:   {1000, 1.0 / 730},
		{"beta/scratch", h0}: {1000, 1.0 / 730}, // 2 GiB for half an hour
		{"beta/scratch", h1}: {1000, 1.0 / 730},
	}
	if len(got) != len(want) || len(recs) != len(want) {
		t.Fatalf("%d rows %v, want %d", len(recs), got, len(want))
	}
	for k, w := range want {
		r, ok := got[k]
		if !ok {
			t.Errorf("no row for %v", k)
			continue
		}
		team, _, _ := strings.Cut(k.id, "/")
		if r[col["BilledCost"]] != w.cost.String() || r[col["x_Team"]] != team || r[col["x_Pool"]] != "local" {
			t.Errorf("%v: %v, want cost %s", k, r, w.cost)
		}
		for _, c := range []string{"PricingQuantity", "ConsumedQuantity"} {
			q, err := strconv.ParseFloat(r[col[c]], 64)
			if err != nil || q < w.gibMonth*(1-1e-9) || q > w.gibMonth*(1+1e-9) {
				t.Errorf("%v: %s %q, want %g GiB-months", k, c, r[col[c]], w.gibMonth)
			}
		}
	}
	if rep := mustReport(t, in, api.CostByWorkload, admin); billed != rep.Total.TotalCost || billed != 4000 {
		t.Errorf("the export bills %s, the report %s; want 0.004", billed, rep.Total.TotalCost)
	}
	// A member of beta sees beta's volume only.
	_, recs = exportRecords(t, in, time.Hour, Visibility{Teams: map[core.TeamName]bool{"beta": true}})
	for _, r := range recs {
		if r[col["ResourceId"]] != "beta/scratch" || r[col["x_Team"]] != "beta" {
			t.Errorf("beta's member sees %v", r)
		}
	}
	if len(recs) != 2 {
		t.Errorf("beta's member sees %d rows, want 2", len(recs))
	}
}
