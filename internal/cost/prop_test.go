package cost

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// genInput draws pools with price versions of every kind, intervals and
// a window, all on whole seconds (so that the oracle can bill second by
// second).
func genInput(t *rapid.T) Input {
	base := t0.Add(-2 * time.Hour)
	sec := func(label string, lo, hi int) time.Time {
		return base.Add(time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Second)
	}
	npools := rapid.IntRange(1, 3).Draw(t, "pools")
	in := Input{Currency: "USD", Workloads: map[core.WorkloadID]*Workload{}}
	rate := func(label string) Money { return Money(rapid.Int64Range(1, 20_000_000_000).Draw(t, label)) }
	for p := range npools {
		name := fmt.Sprintf("p%d", p)
		in.Pools = append(in.Pools, PoolGPUs{name, rapid.IntRange(0, 4).Draw(t, "gpus")})
		nv := rapid.IntRange(0, 3).Draw(t, "versions")
		used := map[time.Time]bool{}
		for v := range nv {
			pr := api.Price{Pool: name, Kind: rapid.SampledFrom(api.PriceKinds).Draw(t, "kind")}
			if v > 0 || rapid.Bool().Draw(t, "dated") {
				pr.EffectiveFrom = sec("effectiveFrom", 0, 4*3600)
			}
			if used[pr.EffectiveFrom] {
				continue
			}
			used[pr.EffectiveFrom] = true
			switch pr.Kind {
			case api.PriceOnDemand:
				pr.Rate = rate("rate")
				if rapid.Bool().Draw(t, "increment") {
					pr.BillingIncrement = fmt.Sprintf("%ds", rapid.IntRange(1, 300).Draw(t, "incrementSeconds"))
				}
			case api.PriceReserved:
				pr.Rate = rate("rate")
				pr.GPUs = rapid.IntRange(1, 4).Draw(t, "reservedGPUs")
				pr.Term = fmt.Sprintf("%ds", rapid.IntRange(60, 4*3600).Draw(t, "termSeconds"))
			case api.PriceMonthly:
				pr.Rate = rate("rate") * 100
			case api.PriceOwned:
				pr.Purchase = rate("purchase") * 1000
				pr.Depreciation = rapid.SampledFrom([]string{"36mo", "7h", "1000h", "13s", "1y"}).Draw(t, "depreciation")
				if rapid.Bool().Draw(t, "perGPUHour") {
					pr.PerGPUHour = rate("perGPUHour")
				}
			}
			if rapid.Bool().Draw(t, "host") {
				pr.CPUCoreHour, pr.MemoryGiBHour = rate("cpu"), rate("mem")
			}
			if rapid.Bool().Draw(t, "licence") {
				pr.LicenceGPUHour = rate("licence")
			}
			if rapid.Bool().Draw(t, "storage") {
				pr.StorageGiBMonth = rate("storage")
			}
			in.Prices = append(in.Prices, pr)
		}
	}
	teams := []core.TeamName{"alpha", "beta", "gamma"}
	nw := rapid.IntRange(0, 6).Draw(t, "workloads")
	for w := range nw {
		id := core.WorkloadID(fmt.Sprintf("w%d", w))
		wk := &Workload{ID: id, Team: rapid.SampledFrom(teams).Draw(t, "team"), Owner: "u", Kind: api.KindJob,
			Attempts: rapid.IntRange(1, 3).Draw(t, "attempts"), Phase: rapid.SampledFrom([]core.Phase{core.Succeeded, core.Failed, core.Running}).Draw(t, "phase"),
			Labels: map[string]string{"x": rapid.SampledFrom([]string{"", "1", "2"}).Draw(t, "label")}}
		if wk.Phase != core.Running {
			wk.FinishedAt = sec("finished", 0, 5*3600)
		}
		if rapid.IntRange(0, 4).Draw(t, "stage") == 0 {
			wk.Labels[core.LabelAcceptanceRun], wk.Labels[core.LabelAcceptanceStage] = "run", "s"
		}
		for range rapid.IntRange(0, 3).Draw(t, "reports") {
			wk.Outputs = append(wk.Outputs, Output{At: sec("reported", 0, 5*3600), Unit: rapid.SampledFrom([]string{"images", "requests", ""}).Draw(t, "unit"),
				Accepted: rapid.Int64Range(0, 1000).Draw(t, "accepted"), Rejected: rapid.Int64Range(0, 10).Draw(t, "rejected")})
			wk.Reported = true
		}
		in.Workloads[id] = wk
		n := rapid.IntRange(0, 3).Draw(t, "intervals")
		for range n {
			x := Interval{Workload: id, Attempt: rapid.IntRange(1, 2).Draw(t, "attempt"), Pool: fmt.Sprintf("p%d", rapid.IntRange(0, npools).Draw(t, "pool")),
				Milli: rapid.Int64Range(1, 1000).Draw(t, "milli"), Start: sec("start", 0, 4*3600),
				Outcome: rapid.SampledFrom([]Outcome{OutcomeOpen, OutcomeFailed, OutcomePreempted}).Draw(t, "outcome")}
			if rapid.IntRange(0, 4).Draw(t, "open") > 0 {
				x.End = x.Start.Add(time.Duration(rapid.IntRange(1, 3*3600).Draw(t, "duration")) * time.Second)
			}
			if rapid.Bool().Draw(t, "hosted") {
				x.HostMilliCPU, x.HostMemoryMiB = rapid.Int64Range(1, 64000).Draw(t, "cpu"), rapid.Int64Range(1, 1<<20).Draw(t, "mem")
			}
			in.Intervals = append(in.Intervals, x)
		}
	}
	nv := rapid.IntRange(0, 3).Draw(t, "volumes")
	for v := range nv {
		vol := Volume{Team: rapid.SampledFrom(teams).Draw(t, "volumeTeam"), Name: fmt.Sprintf("v%d", v%2),
			Pool: fmt.Sprintf("p%d", rapid.IntRange(0, npools).Draw(t, "volumePool")), SizeBytes: rapid.Int64Range(1, 1<<14).Draw(t, "sizeGiB")<<30 + rapid.Int64Range(0, 1<<30-1).Draw(t, "sizeBytes"),
			Created: sec("created", 0, 4*3600)}
		if rapid.Bool().Draw(t, "deleted") {
			vol.Deleted = vol.Created.Add(time.Duration(rapid.IntRange(1, 3*3600).Draw(t, "lifetime")) * time.Second)
		}
		in.Volumes = append(in.Volumes, vol)
	}
	in.From = sec("from", 0, 4*3600)
	in.To = in.From.Add(time.Duration(rapid.IntRange(0, 3*3600).Draw(t, "window")) * time.Second)
	in.Now = sec("now", 0, 6*3600)
	return in
}

// oracle is what the pools bill in the window by the definitions, second
// by second: the accelerator (on-demand: what is held, each interval's
// clipped time rounded up to the increment of the version at its end;
// reserved within its term: max(committed, held); monthly and owned:
// max(devices, held); other reserved time: what is held), the host and
// the licence per GPU-hour; and the volumes' storage (StorageGiBMonth ×
// GiB × seconds / the seconds of a 730-hour month). Exact fractions of a
// micro-unit.
func oracle(in Input) (accel, host, licence, storage *big.Rat) {
	accel, host, licence, storage = new(big.Rat), new(big.Rat), new(big.Rat), new(big.Rat)
	from, to := in.From.Unix(), in.To.Unix()
	priceAt := func(pool string, s int64) *api.Price {
		var best *api.Price
		for i := range in.Prices {
			p := &in.Prices[i]
			if p.Pool == pool && (p.EffectiveFrom.IsZero() || p.EffectiveFrom.Unix() <= s) && (best == nil || !p.EffectiveFrom.Before(best.EffectiveFrom)) {
				best = p
			}
		}
		return best
	}
	perGPUSecond := func(p *api.Price) *big.Rat { // micro-units per GPU-second
		r := new(big.Rat)
		switch p.Kind {
		case api.PriceOnDemand, api.PriceReserved:
			r.SetFrac64(int64(p.Rate), 3600)
		case api.PriceMonthly:
			r.SetFrac64(int64(p.Rate), 3600*730)
		case api.PriceOwned:
			d, _ := quantity.ParsePeriod(p.Depreciation)
			r.SetFrac(big.NewInt(int64(p.Purchase)), big.NewInt(int64(d/time.Second)))
			r.Add(r, big.NewRat(int64(p.PerGPUHour), 3600))
		}
		return r
	}
	clip := func(x Interval) (int64, int64) {
		s, e := x.Start.Unix(), min(to, in.Now.Unix())
		if !x.End.IsZero() {
			e = x.End.Unix()
		}
		return max(s, from), min(e, to)
	}
	devices := map[string]int64{}
	for _, d := range in.Pools {
		devices[d.Pool] += int64(d.GPUs)
	}
	milliSeconds := func(r *big.Rat, perGPUSec *big.Rat, milli int64) {
		x := new(big.Rat).Mul(perGPUSec, big.NewRat(milli, 1000))
		r.Add(r, x)
	}
	pools := map[string]bool{}
	for _, d := range in.Pools {
		pools[d.Pool] = true
	}
	for _, p := range in.Prices {
		pools[p.Pool] = true
	}
	for pool := range pools {
		for s := from; s < to; s++ {
			p := priceAt(pool, s)
			if p == nil {
				continue
			}
			var held int64
			for _, x := range in.Intervals {
				if a, b := clip(x); x.Pool == pool && a <= s && s < b {
					held += x.Milli
					milliSeconds(licence, big.NewRat(int64(p.LicenceGPUHour), 3600), x.Milli)
					host.Add(host, new(big.Rat).Mul(big.NewRat(int64(p.CPUCoreHour), 3600*1000), big.NewRat(x.HostMilliCPU, 1)))
					host.Add(host, new(big.Rat).Mul(big.NewRat(int64(p.MemoryGiBHour), 3600*1024), big.NewRat(x.HostMemoryMiB, 1)))
				}
			}
			billed := held
			switch p.Kind {
			case api.PriceReserved:
				term, _ := quantity.ParsePeriod(p.Term)
				if p.EffectiveFrom.IsZero() || s < p.EffectiveFrom.Add(term).Unix() {
					billed = max(held, int64(p.GPUs)*1000)
				}
			case api.PriceMonthly, api.PriceOwned:
				billed = max(held, devices[pool]*1000)
			}
			milliSeconds(accel, perGPUSecond(p), billed)
		}
	}
	for _, x := range in.Intervals {
		a, b := clip(x)
		if a >= b {
			continue
		}
		p := priceAt(x.Pool, b-1)
		if p == nil || p.Kind != api.PriceOnDemand || p.BillingIncrement == "" {
			continue
		}
		inc, _ := time.ParseDuration(p.BillingIncrement)
		n := int64(inc / time.Second)
		if r := (b - a) % n; r != 0 {
			milliSeconds(accel, new(big.Rat).Mul(perGPUSecond(p), big.NewRat(n-r, 1)), x.Milli)
		}
	}
	for _, v := range in.Volumes {
		end := min(to, in.Now.Unix())
		if !v.Deleted.IsZero() {
			end = v.Deleted.Unix()
		}
		for s := max(from, v.Created.Unix()); s < min(end, to); s++ {
			if p := priceAt(v.Pool, s); p != nil {
				storage.Add(storage, new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(int64(p.StorageGiBMonth)), big.NewInt(v.SizeBytes)),
					new(big.Int).Mul(big.NewInt(1<<30), big.NewInt(730*3600))))
			}
		}
	}
	return accel, host, licence, storage
}

func roundRat(r *big.Rat) Money { return Money(roundHalfUp(r)) }

func sumFOCUS(t *rapid.T, b []byte) (billed Money, n int) {
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("the export is not CSV: %v", err)
	}
	for _, r := range recs[1:] {
		billed += parseMicro(t, "BilledCost", r[0])
	}
	return billed, len(recs) - 1
}

// parseMicro reads a decimal amount exactly, beyond quantity.MaxMoney too (a
// drawn owned price over seconds can bill more than a billion units).
func parseMicro(t *rapid.T, col, s string) Money {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("%s %q is not a number", col, s)
	}
	r.Mul(r, big.NewRat(int64(quantity.MoneyUnit), 1))
	if !r.IsInt() || !r.Num().IsInt64() {
		t.Fatalf("%s %q is not a whole number of micro-units", col, s)
	}
	return Money(r.Num().Int64())
}

// TestConservation: for any window, Σ workload rows + idle == Σ what the
// pools bill, computed from its definition; every dimension has the same
// total; the FOCUS export bills the report's total; a member's report is
// its teams' part of the admin's.
func TestConservation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		accel, host, licence, storage := oracle(in)
		rep, err := Report(in, api.CostByWorkload, admin)
		if err != nil {
			t.Fatal(err)
		}
		var sum api.CostRow
		for _, r := range rep.Items {
			sum.AcceleratorCost += r.AcceleratorCost
			sum.HostCost += r.HostCost
			sum.LicenceCost += r.LicenceCost
			sum.StorageCost += r.StorageCost
			sum.TotalCost += r.TotalCost
		}
		if sum.StorageCost != rep.Total.StorageCost {
			t.Fatalf("rows' storage adds up to %s, the total says %s", sum.StorageCost, rep.Total.StorageCost)
		}
		if want := roundRat(storage); rep.Total.StorageCost != want {
			t.Fatalf("storage %s, the definition says %s (%s exactly)", rep.Total.StorageCost, want, storage.FloatString(3))
		}
		if sum.AcceleratorCost != rep.Total.AcceleratorCost || sum.TotalCost != rep.Total.TotalCost {
			t.Fatalf("rows add up to %s (total %s), the total says %s (%s)", sum.AcceleratorCost, sum.TotalCost, rep.Total.AcceleratorCost, rep.Total.TotalCost)
		}
		if want := roundRat(accel); rep.Total.AcceleratorCost != want {
			t.Fatalf("workloads + idle bill %s of accelerator, the pools bill %s (%s exactly)", rep.Total.AcceleratorCost, want, accel.FloatString(3))
		}
		if want := roundRat(host); rep.Total.HostCost != want {
			t.Fatalf("host %s, the definition says %s", rep.Total.HostCost, want)
		}
		// The per-workload licence is not in the oracle; licence per
		// GPU-hour only (no price here has a per-workload licence).
		if want := roundRat(licence); rep.Total.LicenceCost != want {
			t.Fatalf("licence %s, the definition says %s", rep.Total.LicenceCost, want)
		}
		for _, by := range []string{api.CostByTeam, api.CostByPool, api.CostByUser, "label:x"} {
			r, err := Report(in, by, admin)
			if err != nil {
				t.Fatal(err)
			}
			if r.Total.TotalCost != rep.Total.TotalCost || r.Total.AcceleratorCost != rep.Total.AcceleratorCost || r.Total.StorageCost != rep.Total.StorageCost {
				t.Fatalf("by %s the total is %s, by workload %s", by, r.Total.TotalCost, rep.Total.TotalCost)
			}
		}
		var tot Money
		for _, m := range Totals(in) {
			tot += m
		}
		if tot != rep.Total.TotalCost {
			t.Fatalf("Totals add up to %s, the report's total is %s", tot, rep.Total.TotalCost)
		}
		gran := rapid.SampledFrom([]time.Duration{time.Hour, 24 * time.Hour}).Draw(t, "granularity")
		for _, vis := range []Visibility{admin, {Teams: map[core.TeamName]bool{"alpha": true}}} {
			var buf bytes.Buffer
			n, err := ExportFOCUS(&buf, in, gran, vis, "acme")
			if err != nil {
				t.Fatal(err)
			}
			billed, rows := sumFOCUS(t, buf.Bytes())
			want := mustReportR(t, in, api.CostByWorkload, vis).Total.TotalCost
			if billed != want || rows != n {
				t.Fatalf("vis %v: the export bills %s over %d rows (said %d), the report %s\n%s", vis, billed, rows, n, want, buf.String())
			}
			checkCommitments(t, buf.Bytes())
		}
		member := Visibility{Teams: map[core.TeamName]bool{"alpha": true}}
		mine := mustReportR(t, in, api.CostByWorkload, member)
		all := rowsByName(rep)
		var want Money
		for _, r := range mine.Items {
			team := core.TeamName("")
			if w := in.Workloads[core.WorkloadID(r.Name)]; w != nil {
				team = w.Team
			} else if id, ok := strings.CutPrefix(r.Name, "volume:"); ok {
				tm, _, _ := strings.Cut(id, "/")
				team = core.TeamName(tm)
			}
			if team != "alpha" || all[r.Name].TotalCost != r.TotalCost {
				t.Fatalf("the member sees %+v, the admin %+v", r, all[r.Name])
			}
			want += r.TotalCost
		}
		if mine.Total.TotalCost != want {
			t.Fatalf("member's total %s, its rows %s", mine.Total.TotalCost, want)
		}
		if in.To.Sub(in.From) >= time.Minute {
			s, err := Series(in, api.CostByTeam, 20*time.Minute, admin)
			if err != nil {
				t.Fatal(err)
			}
			var st Money
			for _, p := range s.Points {
				for _, m := range p.Items {
					st += m
				}
			}
			if d := st - rep.Total.TotalCost; d < -Money(5*len(s.Points)) || d > Money(5*len(s.Points)) {
				t.Fatalf("the series adds up to %s, the report %s", st, rep.Total.TotalCost)
			}
		}
	})
}

func mustReportR(t *rapid.T, in Input, by string, vis Visibility) api.CostReport {
	rep, err := Report(in, by, vis)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkCommitments: per commitment and period, the Used and Unused rows'
// EffectiveCost add up to the Purchase row's BilledCost.
func checkCommitments(t *rapid.T, b []byte) {
	recs, _ := csv.NewReader(bytes.NewReader(b)).ReadAll()
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	type key struct{ id, period string }
	purchase, used := map[key]Money{}, map[key]Money{}
	for _, r := range recs[1:] {
		id := r[col["CommitmentDiscountId"]]
		if id == "" {
			continue
		}
		k := key{id, r[col["ChargePeriodStart"]]}
		switch r[col["ChargeCategory"]] {
		case "Purchase":
			m, _ := quantity.ParseMoney(r[col["BilledCost"]])
			purchase[k] += m
		case "Usage":
			m, _ := quantity.ParseMoney(r[col["EffectiveCost"]])
			used[k] += m
		}
	}
	if len(purchase) == 0 {
		return // a member's export
	}
	for k, m := range used {
		if purchase[k] != m {
			t.Fatalf("commitment %v: usage effective cost %s, purchase %s", k, m, purchase[k])
		}
	}
	for k, m := range purchase {
		if used[k] != m {
			t.Fatalf("commitment %v: purchase %s, usage effective cost %s", k, m, used[k])
		}
	}
}

// TestStorageConservation: with storage priced in every version and
// volumes across the window, the storage billed is the definition's
// (rounded once), every dimension and the FOCUS export (x_StorageCost and
// BilledCost) agree with the report, and a row's storage is its volumes'.
func TestStorageConservation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		for i := range in.Prices {
			in.Prices[i].StorageGiBMonth = Money(rapid.Int64Range(1, 1_000_000_000).Draw(t, "storagePrice"))
		}
		n := rapid.IntRange(1, 3).Draw(t, "moreVolumes")
		for v := range n {
			vol := Volume{Team: rapid.SampledFrom([]core.TeamName{"alpha", "beta"}).Draw(t, "team"), Name: fmt.Sprintf("x%d", v),
				Pool: fmt.Sprintf("p%d", rapid.IntRange(0, len(in.Pools)-1).Draw(t, "pool")), SizeBytes: rapid.Int64Range(1, 1<<50).Draw(t, "size") | 1<<30,
				Created: in.From.Add(-time.Duration(rapid.IntRange(0, 3600).Draw(t, "before")) * time.Second)}
			if rapid.Bool().Draw(t, "deleted") {
				vol.Deleted = vol.Created.Add(time.Duration(rapid.IntRange(1, 4*3600).Draw(t, "lifetime")) * time.Second)
			}
			in.Volumes = append(in.Volumes, vol)
		}
		_, _, _, storage := oracle(in)
		rep := mustReportR(t, in, api.CostByWorkload, admin)
		if want := roundRat(storage); rep.Total.StorageCost != want {
			t.Fatalf("storage %s, the definition says %s (%s exactly)", rep.Total.StorageCost, want, storage.FloatString(3))
		}
		for _, by := range []string{api.CostByTeam, api.CostByPool, api.CostByUser} {
			if r := mustReportR(t, in, by, admin); r.Total.StorageCost != rep.Total.StorageCost || r.Total.TotalCost != rep.Total.TotalCost {
				t.Fatalf("by %s storage %s, by workload %s", by, r.Total.StorageCost, rep.Total.StorageCost)
			}
		}
		var buf bytes.Buffer
		if _, err := ExportFOCUS(&buf, in, time.Hour, admin, "acme"); err != nil {
			t.Fatal(err)
		}
		recs, _ := csv.NewReader(bytes.NewReader(buf.Bytes())).ReadAll()
		col := map[string]int{}
		for i, c := range recs[0] {
			col[c] = i
		}
		var billed, stor Money
		for _, r := range recs[1:] {
			var s Money
			if x := r[col["x_StorageCost"]]; x != "" { // a Purchase row has none
				s = parseMicro(t, "x_StorageCost", x)
			}
			billed += parseMicro(t, "BilledCost", r[col["BilledCost"]])
			stor += s
			if s != 0 && r[col["ServiceCategory"]] != "Storage" {
				t.Fatalf("row %v has storage cost but is not a Storage row", r)
			}
		}
		if billed != rep.Total.TotalCost || stor != rep.Total.StorageCost {
			t.Fatalf("the export bills %s (storage %s), the report %s (%s)", billed, stor, rep.Total.TotalCost, rep.Total.StorageCost)
		}
	})
}

// TestOutputsPerUnitAddUpToTheRow: in every dimension, a row's units'
// costs (cost per accepted output × accepted) add up to its total, within
// the half micro-unit each cost per output is rounded by; and the total's
// outputs by unit, costs per accepted output included, are the same
// whatever the dimension.
func TestOutputsPerUnitAddUpToTheRow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		var first []api.UnitOutputs
		for i, by := range []string{api.CostByWorkload, api.CostByTeam, api.CostByPool, api.CostByUser, "label:x"} {
			rep, err := Report(in, by, admin)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range append(rep.Items, rep.Total) {
				sum, slack := new(big.Rat), int64(0)
				any := false
				for _, u := range r.OutputsByUnit {
					if (u.CostPerAccepted != nil) != (u.Accepted > 0) {
						t.Fatalf("by %s row %s unit %+v: a cost per accepted output without accepted outputs, or none with", by, r.Name, u)
					}
					if u.CostPerAccepted != nil {
						any = true
						sum.Add(sum, big.NewRat(int64(*u.CostPerAccepted)*u.Accepted, 1))
						slack += (u.Accepted + 1) / 2
					}
				}
				if !any {
					continue
				}
				diff := new(big.Rat).Sub(sum, big.NewRat(int64(r.TotalCost), 1))
				if diff.Abs(diff).Cmp(big.NewRat(slack, 1)) > 0 {
					t.Fatalf("by %s row %s: the units cost %s, the row %s (%+v)", by, r.Name, sum.FloatString(0), r.TotalCost, r.OutputsByUnit)
				}
			}
			if i == 0 {
				first = rep.Total.OutputsByUnit
			} else if d := cmp.Diff(first, rep.Total.OutputsByUnit); d != "" {
				t.Fatalf("by %s the total's outputs differ from by workload's (-workload +%s):\n%s", by, by, d)
			}
		}
	})
}
