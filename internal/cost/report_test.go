package cost

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func units(u int64) Money { return Money(u) * quantity.MoneyUnit }

// perSecond is 3600 per GPU-hour: one unit per GPU-second.
func perSecond(pool string) api.Price {
	return api.Price{Pool: pool, Kind: api.PriceOnDemand, Rate: units(3600)}
}

func iv(w string, pool string, gpu int, milli int64, from, to int) Interval {
	x := Interval{Workload: core.WorkloadID(w), Attempt: 1, Pool: pool, Node: "n1", GPU: gpu, Milli: milli, Start: at(from)}
	if to >= 0 {
		x.End = at(to)
	}
	return x
}

func job(id, team string, phase core.Phase, finished int) *Workload {
	w := &Workload{ID: core.WorkloadID(id), Team: core.TeamName(team), Owner: team + "-user", Kind: api.KindJob, Attempts: 1, Phase: phase}
	if finished >= 0 {
		w.FinishedAt = at(finished)
	}
	return w
}

func workloads(ws ...*Workload) map[core.WorkloadID]*Workload {
	m := map[core.WorkloadID]*Workload{}
	for _, w := range ws {
		m[w.ID] = w
	}
	return m
}

var admin = Visibility{All: true}

func rowsByName(rep api.CostReport) map[string]api.CostRow {
	m := map[string]api.CostRow{}
	for _, r := range rep.Items {
		m[r.Name] = r
	}
	return m
}

func mustReport(t *testing.T, in Input, by string, vis Visibility) api.CostReport {
	t.Helper()
	rep, err := Report(in, by, vis)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func money(m Money) *Money { return &m }

// TestReportChargesEachGPUSecond: at a price of 3600 per GPU-hour (one
// unit per GPU-second), four workloads (two sharing a GPU, one failed)
// cost their GPU-seconds, by workload, by team and per accepted output of
// each unit.
func TestReportChargesEachGPUSecond(t *testing.T) {
	a := job("a", "vision", core.Succeeded, 6)
	a.Reported, a.Outputs = true, []Output{{At: at(6), Accepted: 120, Rejected: 3, Unit: "images"}}
	b := job("b", "vision", core.Succeeded, 20)
	c := job("c", "vision", core.Succeeded, 20)
	d := job("d", "nlp", core.Failed, 34)
	d.Attempts = 2
	in := Input{
		From: t0, To: t0.Add(time.Hour), Now: t0.Add(time.Hour), Currency: "USD",
		Prices: []api.Price{perSecond("local")},
		Pools:  []PoolGPUs{{"local", 2}},
		Intervals: []Interval{
			iv("a", "local", 0, 1000, 0, 6),
			iv("b", "local", 1, 500, 10, 20),
			iv("c", "local", 1, 500, 10, 20),
			iv("d", "local", 0, 1000, 30, 34),
		},
		Workloads: workloads(a, b, c, d),
	}
	in.Intervals[3].Outcome = OutcomeFailed
	rep := mustReport(t, in, api.CostByWorkload, admin)
	h := func(s float64) float64 { return s / 3600 }
	want := []api.CostRow{
		{Name: "a", GPUHours: h(6), AcceleratorCost: units(6), TotalCost: units(6), AcceptedOutputs: 120, RejectedOutputs: 3, Unit: "images", CostPerAcceptedOutput: money(50_000),
			OutputsByUnit: []api.UnitOutputs{{Unit: "images", Accepted: 120, Rejected: 3, CostPerAccepted: money(50_000)}}},
		{Name: "b", GPUHours: h(5), AcceleratorCost: units(5), TotalCost: units(5), AcceptedOutputs: 1, Unit: "job", CostPerAcceptedOutput: money(units(5)),
			OutputsByUnit: []api.UnitOutputs{{Unit: "job", Accepted: 1, CostPerAccepted: money(units(5))}}},
		{Name: "c", GPUHours: h(5), AcceleratorCost: units(5), TotalCost: units(5), AcceptedOutputs: 1, Unit: "job", CostPerAcceptedOutput: money(units(5)),
			OutputsByUnit: []api.UnitOutputs{{Unit: "job", Accepted: 1, CostPerAccepted: money(units(5))}}},
		{Name: "d", GPUHours: h(4), AcceleratorCost: units(4), TotalCost: units(4), FailedGPUHours: h(4), Retries: 1, OutputsByUnit: []api.UnitOutputs{}},
	}
	opt := cmpopts.EquateApprox(0, 1e-12)
	if diff := cmp.Diff(want, rep.Items, opt); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	// Images and jobs: no one cost per output, but one per unit: each
	// unit's own workloads' cost (6 and 10) and a share of the failed
	// job's 4 in proportion (1.5 and 2.5): 7.5 / 120 images, 12.5 / 2 jobs.
	wantTotal := api.CostRow{GPUHours: h(20), AcceleratorCost: units(20), TotalCost: units(20), AcceptedOutputs: 122, RejectedOutputs: 3,
		Unit: "mixed", FailedGPUHours: h(4), Retries: 1, OutputsByUnit: []api.UnitOutputs{
			{Unit: "images", Accepted: 120, Rejected: 3, CostPerAccepted: money(62_500)},
			{Unit: "job", Accepted: 2, CostPerAccepted: money(6_250_000)},
		}}
	if diff := cmp.Diff(wantTotal, rep.Total, opt); diff != "" {
		t.Errorf("total (-want +got):\n%s", diff)
	}
	// The two halves together cost what one GPU did for those 10 s.
	rows := rowsByName(rep)
	if got := rows["b"].AcceleratorCost + rows["c"].AcceleratorCost; got != units(10) {
		t.Errorf("two halves cost %s, want 10", got)
	}
	team := rowsByName(mustReport(t, in, api.CostByTeam, admin))
	if team["vision"].TotalCost != units(16) || team["nlp"].TotalCost != units(4) {
		t.Errorf("by team: vision %s nlp %s, want 16 and 4", team["vision"].TotalCost, team["nlp"].TotalCost)
	}
}

func TestPriceVersionMidWindow(t *testing.T) {
	later := api.Price{Pool: "p", Kind: api.PriceOnDemand, Rate: units(7200), EffectiveFrom: at(1800)}
	first := perSecond("p")
	first.EffectiveFrom = t0.Add(-time.Hour)
	in := Input{From: t0, To: t0.Add(time.Hour), Now: t0.Add(2 * time.Hour),
		Prices:    []api.Price{later, first},
		Intervals: []Interval{iv("j", "p", 0, 1000, 1740, 1860)},
		Workloads: workloads(job("j", "t", core.Succeeded, 1860)),
	}
	rep := mustReport(t, in, api.CostByWorkload, admin)
	if got, want := rep.Total.AcceleratorCost, units(60+120); got != want {
		t.Errorf("a job across the version change costs %s, want %s (60 s at 1, 60 s at 2)", got, want)
	}
	// A window before the change bills the old price only.
	in.To = at(1800)
	if got, want := mustReport(t, in, api.CostByWorkload, admin).Total.AcceleratorCost, units(60); got != want {
		t.Errorf("before the change: %s, want %s", got, want)
	}
}

func TestCommittedIdle(t *testing.T) {
	hour := Input{From: t0, To: t0.Add(time.Hour), Now: t0.Add(2 * time.Hour), Pools: []PoolGPUs{{"p", 4}},
		Workloads: workloads(job("j", "t", core.Succeeded, 1800))}
	reserved := api.Price{Pool: "p", Kind: api.PriceReserved, Rate: units(3600), GPUs: 2, Term: "8760h", EffectiveFrom: t0.Add(-time.Hour)}
	owned := api.Price{Pool: "p", Kind: api.PriceOwned, Purchase: units(3600 * 1000), Depreciation: "1000h"}
	monthly := api.Price{Pool: "p", Kind: api.PriceMonthly, Rate: units(3600 * 730)}
	for _, tc := range []struct {
		name      string
		price     api.Price
		milli     int64
		job, idle Money
		idleHours float64
	}{
		{"reserved half used bills the commitment", reserved, 1000, units(1800), units(5400), 1.5},
		{"reserved over the commitment bills the overage", reserved, 3000, units(5400), units(3600), 1},
		{"owned bills every device", owned, 1000, units(1800), units(12600), 3.5},
		{"monthly bills every device", monthly, 1000, units(1800), units(12600), 3.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := hour
			in.Prices = []api.Price{tc.price}
			in.Intervals = []Interval{iv("j", "p", 0, tc.milli, 0, 1800)}
			rows := rowsByName(mustReport(t, in, api.CostByTeam, admin))
			if got := rows["t"].AcceleratorCost; got != tc.job {
				t.Errorf("job: %s, want %s", got, tc.job)
			}
			idle := rows[api.IdleRow]
			if idle.AcceleratorCost != tc.idle || idle.IdleGPUHours != tc.idleHours || idle.GPUHours != 0 {
				t.Errorf("idle row: %s over %v idle hours (%v held), want %s over %v", idle.AcceleratorCost, idle.IdleGPUHours, idle.GPUHours, tc.idle, tc.idleHours)
			}
		})
	}
	t.Run("reserved term ends", func(t *testing.T) {
		in := hour
		r := reserved
		r.Term = "90m" // ends at t0+30m
		in.Prices = []api.Price{r}
		in.Intervals = []Interval{iv("j", "p", 0, 1000, 0, 3600)}
		rows := rowsByName(mustReport(t, in, api.CostByTeam, admin))
		if got, want := rows[api.IdleRow].AcceleratorCost, units(1800); got != want {
			t.Errorf("idle %s, want %s (one unheld GPU until the term ends)", got, want)
		}
		if got, want := rows["t"].AcceleratorCost, units(3600); got != want {
			t.Errorf("job %s, want %s (the reserved rate after the term too)", got, want)
		}
	})
}

func TestBillingIncrement(t *testing.T) {
	p := perSecond("p")
	p.BillingIncrement = "1m"
	in := Input{From: t0, To: t0.Add(time.Hour), Now: t0.Add(time.Hour), Prices: []api.Price{p},
		Intervals: []Interval{iv("j", "p", 0, 500, 0, 61), iv("k", "p", 1, 1000, 100, 160)},
		Workloads: workloads(job("j", "t", core.Succeeded, 61), job("k", "t", core.Succeeded, 160))}
	rows := rowsByName(mustReport(t, in, api.CostByWorkload, admin))
	if got, want := rows["j"].AcceleratorCost, units(60); got != want {
		t.Errorf("a half GPU for 61 s in minutes: %s, want %s (120 s × 0.5)", got, want)
	}
	if got, want := rows["j"].GPUHours, 0.5*61/3600; got != want {
		t.Errorf("GPU hours %v, want the held %v", got, want)
	}
	if got, want := rows["k"].AcceleratorCost, units(60); got != want {
		t.Errorf("exactly a minute: %s, want %s", got, want)
	}
}

func TestVisibility(t *testing.T) {
	in := Input{From: t0, To: t0.Add(time.Hour), Now: t0.Add(time.Hour),
		Prices: []api.Price{{Pool: "p", Kind: api.PriceOwned, PerGPUHour: units(3600)}}, Pools: []PoolGPUs{{"p", 2}},
		Intervals: []Interval{iv("a1", "p", 0, 1000, 0, 10), iv("b1", "p", 1, 1000, 0, 20)},
		Workloads: workloads(job("a1", "alpha", core.Succeeded, 10), job("b1", "beta", core.Succeeded, 20))}
	member := Visibility{Teams: map[core.TeamName]bool{"alpha": true}}
	for _, by := range []string{api.CostByTeam, api.CostByPool, api.CostByWorkload, api.CostByUser, "label:x"} {
		t.Run(by, func(t *testing.T) {
			rep := mustReport(t, in, by, member)
			if len(rep.Items) != 1 {
				t.Fatalf("a member of alpha sees %d rows, want 1: %+v", len(rep.Items), rep.Items)
			}
			if got := rep.Items[0].TotalCost; got != units(10) || rep.Total.TotalCost != units(10) {
				t.Errorf("row %s total %s, want alpha's 10", got, rep.Total.TotalCost)
			}
			if rep.Total.IdleGPUHours != 0 {
				t.Errorf("a member sees idle hours %v", rep.Total.IdleGPUHours)
			}
		})
	}
	all := mustReport(t, in, api.CostByTeam, admin)
	if got, want := all.Total.TotalCost, units(7200); got != want {
		t.Errorf("an admin's total %s, want %s (the pool bills both GPUs all hour)", got, want)
	}
	if rows := rowsByName(all); rows[api.IdleRow].TotalCost != units(7200-30) {
		t.Errorf("idle %s, want %s", rows[api.IdleRow].TotalCost, units(7200-30))
	}
	if rep := mustReport(t, in, api.CostByTeam, Visibility{}); len(rep.Items) != 0 || rep.Total.TotalCost != 0 {
		t.Errorf("nobody's visibility sees %+v", rep)
	}
}

func TestOtherLines(t *testing.T) {
	p := api.Price{Pool: "p", Kind: api.PriceOnDemand, Rate: units(1), CPUCoreHour: units(2), MemoryGiBHour: units(3),
		EgressGiB: units(5), LicenceGPUHour: units(7), LicencePerWorkload: map[string]Money{api.KindJob: units(11)}}
	run := iv("j", "p", 0, 500, 0, 3600)
	run.HostMilliCPU, run.HostMemoryMiB = 4000, 2048
	second := iv("j", "p", 1, 500, 0, 3600) // another device of the replica: host once
	w := job("j", "t", core.Succeeded, 3600)
	w.EgressBytes = 3 << 30
	in := Input{From: t0, To: t0.Add(2 * time.Hour), Now: t0.Add(2 * time.Hour), Prices: []api.Price{p},
		Intervals: []Interval{run, second}, Workloads: workloads(w)}
	got := mustReport(t, in, api.CostByWorkload, admin).Items[0]
	want := api.CostRow{Name: "j", GPUHours: 1, AcceleratorCost: units(1), HostCost: units(4*2 + 2*3), NetworkCost: units(15),
		LicenceCost: units(7 + 11), TotalCost: units(1 + 14 + 15 + 18), AcceptedOutputs: 1, Unit: "job", CostPerAcceptedOutput: money(units(48)),
		OutputsByUnit: []api.UnitOutputs{{Unit: "job", Accepted: 1, CostPerAccepted: money(units(48))}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The licence per workload and the egress belong to the windows of
	// the first start and of the end.
	in.From = at(1)
	got = mustReport(t, in, api.CostByWorkload, admin).Items[0]
	if got.LicenceCost >= units(11) || got.NetworkCost != units(15) {
		t.Errorf("a window after the start: licence %s, network %s; want no per-workload licence and the egress", got.LicenceCost, got.NetworkCost)
	}
	in.From, in.To = t0, at(3599)
	got = mustReport(t, in, api.CostByWorkload, admin).Items[0]
	if got.NetworkCost != 0 || got.AcceptedOutputs != 0 {
		t.Errorf("a window before the end: network %s, accepted %d; want neither", got.NetworkCost, got.AcceptedOutputs)
	}
}

func TestActiveWorkload(t *testing.T) {
	w := job("j", "t", core.Running, -1)
	w.Attempts = 3
	in := Input{From: t0, To: t0.Add(time.Hour), Now: at(100), Prices: []api.Price{perSecond("p")},
		Intervals: []Interval{iv("j", "p", 0, 1000, 50, -1)}, Workloads: workloads(w)}
	got := mustReport(t, in, api.CostByTeam, admin).Items[0]
	if got.AcceleratorCost != units(50) || got.Retries != 2 || got.CostPerAcceptedOutput != nil || got.Unit != "" {
		t.Errorf("an open interval up to now: %+v; want 50, 2 retries, no outputs", got)
	}
}

func TestReportErrors(t *testing.T) {
	in := Input{From: t0, To: t0.Add(time.Hour)}
	if _, err := Report(in, "colour", admin); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("unknown by: %v", err)
	}
	if _, err := Report(in, "label:", admin); err == nil {
		t.Errorf("label: without a key is accepted")
	}
	in.From, in.To = in.To, in.From
	if _, err := Report(in, api.CostByTeam, admin); err == nil || !strings.Contains(err.Error(), "from") {
		t.Errorf("from after to: %v", err)
	}
	if _, err := Series(Input{From: t0, To: t0.Add(time.Hour)}, api.CostByTeam, time.Second, admin); err == nil {
		t.Errorf("a step of a second is accepted")
	}
	if _, err := Series(Input{From: t0, To: t0.Add(2001 * time.Minute)}, api.CostByTeam, time.Minute, admin); err == nil {
		t.Errorf("2001 points are accepted")
	}
}

func TestSeries(t *testing.T) {
	in := Input{From: t0, To: t0.Add(3 * time.Hour), Now: t0.Add(3 * time.Hour), Prices: []api.Price{perSecond("p")},
		Intervals: []Interval{iv("a", "p", 0, 1000, 3000, 4200), iv("b", "p", 1, 1000, 0, 60)},
		Workloads: workloads(job("a", "alpha", core.Succeeded, 4200), job("b", "beta", core.Succeeded, 60))}
	s, err := Series(in, api.CostByTeam, time.Hour, admin)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.CostSeriesPoint{
		{Start: t0, Items: map[string]Money{"alpha": units(600), "beta": units(60)}},
		{Start: t0.Add(time.Hour), Items: map[string]Money{"alpha": units(600)}},
		{Start: t0.Add(2 * time.Hour), Items: map[string]Money{}},
	}
	if diff := cmp.Diff(want, s.Points); diff != "" || s.Step != "1h" {
		t.Errorf("step %q, points (-want +got):\n%s", s.Step, diff)
	}
}

func TestTotals(t *testing.T) {
	in := Input{From: t0, To: t0.Add(time.Hour), Now: t0.Add(time.Hour),
		Prices: []api.Price{{Pool: "p", Kind: api.PriceOwned, PerGPUHour: units(3600)}, perSecond("q")}, Pools: []PoolGPUs{{"p", 1}, {"q", 1}},
		Intervals: []Interval{iv("a", "p", 0, 1000, 0, 10), iv("a", "q", 0, 1000, 0, 20)},
		Workloads: workloads(job("a", "alpha", core.Succeeded, 20))}
	want := map[[2]string]Money{{"alpha", "p"}: units(10), {"alpha", "q"}: units(20), {api.IdleRow, "p"}: units(3590)}
	if diff := cmp.Diff(want, Totals(in)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// An owned price whose amortisation has no small common denominator with
// the others takes the big-number path; the amounts stay exact.
func TestBigDenominator(t *testing.T) {
	owned := api.Price{Pool: "o", Kind: api.PriceOwned, Purchase: units(30_000) + 1, Depreciation: "36mo", PerGPUHour: 7}
	in := Input{From: t0, To: t0.Add(time.Hour), Now: t0.Add(time.Hour), Pools: []PoolGPUs{{"o", 1}},
		Prices:    []api.Price{owned, {Pool: "m", Kind: api.PriceMonthly, Rate: 1_000_003}},
		Intervals: []Interval{iv("a", "o", 0, 333, 0, 1234)}, Workloads: workloads(job("a", "t", core.Succeeded, 1234))}
	b := newBook(in.Prices, in.Pools)
	if b.scales[cAccel].l != 0 {
		t.Fatalf("L = %s fits in 64 bits; the test wants one that does not", b.scales[cAccel].L)
	}
	rows := rowsByName(mustReport(t, in, api.CostByTeam, admin))
	// Per GPU-hour: 30000000001/26280 + 7 µ; the whole GPU for the hour.
	hourly := big.NewRat(30_000_000_001, 26280)
	hourly.Add(hourly, big.NewRat(7, 1))
	job := new(big.Rat).Mul(hourly, big.NewRat(333*1234, 1000*3600))
	if got, want := rows["t"].AcceleratorCost, roundRat(job); got-want > 1 || want-got > 1 {
		t.Errorf("job %s, want %s", got, want)
	}
	if got, want := rows["t"].AcceleratorCost+rows[api.IdleRow].AcceleratorCost, roundRat(hourly); got != want {
		t.Errorf("job + idle %s, want the hour's %s", got, want)
	}
}
