package cost

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// mandatory are the 21 mandatory columns of FOCUS 1.2, which 1.3 keeps
// (../shared/research/cost-and-health-specs.md §1), written out again so
// that the test does not trust FOCUSColumns; focus_spec_test.go checks
// 1.3's.
var mandatory = []string{"BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingAccountId", "BillingAccountName",
	"BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
	"ChargeClass", "ChargeDescription", "PricingQuantity", "PricingUnit", "InvoiceIssuerName", "ProviderName", "PublisherName",
	"ServiceCategory", "ServiceName"}

func exportRecords(t *testing.T, in Input, gran time.Duration, vis Visibility) (map[string]int, [][]string) {
	t.Helper()
	var buf bytes.Buffer
	n, err := ExportFOCUS(&buf, in, gran, vis, "acme")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if n != len(recs)-1 {
		t.Errorf("ExportFOCUS says %d rows, wrote %d", n, len(recs)-1)
	}
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	return col, recs[1:]
}

func TestFOCUS(t *testing.T) {
	reserved := api.Price{Pool: "r", Kind: api.PriceReserved, Rate: units(3600), GPUs: 2, Term: "8760h", EffectiveFrom: t0.Add(-time.Hour)}
	w := job("a", "alpha", core.Succeeded, 5400)
	w.Labels = map[string]string{"project": "cats"}
	in := Input{From: t0, To: t0.Add(2 * time.Hour), Now: t0.Add(2 * time.Hour), Currency: "EUR",
		Prices: []api.Price{perSecond("p"), reserved},
		Intervals: []Interval{
			iv("a", "p", 0, 1000, 1800, 5400), // 3600 s across the hour
			iv("b", "r", 0, 1000, 0, 600),
		},
		Workloads: workloads(w, job("b", "beta", core.Succeeded, 600))}
	col, recs := exportRecords(t, in, time.Hour, admin)
	for i, c := range mandatory {
		if j, ok := col[c]; !ok || j != i {
			t.Errorf("mandatory column %s at %d, want %d", c, j, i)
		}
	}
	for _, c := range []string{"ResourceId", "ResourceName", "ResourceType", "Tags", "ConsumedQuantity", "ConsumedUnit",
		"CommitmentDiscountId", "CommitmentDiscountCategory", "CommitmentDiscountStatus", "ChargeFrequency", "x_Team", "x_Pool", "x_GPUHours"} {
		if _, ok := col[c]; !ok {
			t.Errorf("no column %s", c)
		}
	}
	var billed, purchase, committed Money
	for _, r := range recs {
		get := func(c string) string { return r[col[c]] }
		for _, c := range []string{"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"} {
			if _, err := time.Parse(FOCUSTime, get(c)); err != nil {
				t.Errorf("%s %q: %v", c, get(c), err)
			}
		}
		s, _ := time.Parse(FOCUSTime, get("ChargePeriodStart"))
		e, _ := time.Parse(FOCUSTime, get("ChargePeriodEnd"))
		if e.Sub(s) != time.Hour || s.Minute() != 0 {
			t.Errorf("charge period %s–%s is not an hour", s, e)
		}
		if get("BillingPeriodStart") != "2026-03-01T00:00:00Z" || get("BillingPeriodEnd") != "2026-04-01T00:00:00Z" {
			t.Errorf("billing period %s–%s, want March", get("BillingPeriodStart"), get("BillingPeriodEnd"))
		}
		if get("BillingCurrency") != "EUR" || get("ServiceCategory") != "AI and Machine Learning" || get("PricingUnit") != "GPU-Hours" {
			t.Errorf("row %v", r)
		}
		var tags map[string]any
		if err := json.Unmarshal([]byte(get("Tags")), &tags); err != nil {
			t.Errorf("tags %q: %v", get("Tags"), err)
		}
		b, err := quantity.ParseMoney(get("BilledCost"))
		if err != nil {
			t.Fatal(err)
		}
		billed += b
		ec, _ := quantity.ParseMoney(get("EffectiveCost"))
		switch {
		case get("ChargeCategory") == "Purchase":
			purchase += b
		case get("CommitmentDiscountId") != "":
			committed += ec
			if b != 0 {
				t.Errorf("covered usage billed %s", b)
			}
		}
		if get("ResourceId") == "a" && get("ChargePeriodStart") == "2026-03-10T12:00:00Z" {
			if b != units(1800) || tags["project"] != "cats" || tags["gpufleet/team"] != "alpha" || get("ConsumedQuantity") != "0.5" {
				t.Errorf("workload a's first hour: billed %s, tags %v, consumed %s", b, tags, get("ConsumedQuantity"))
			}
		}
	}
	rep := mustReport(t, in, api.CostByWorkload, admin)
	if billed != rep.Total.TotalCost {
		t.Errorf("Σ BilledCost %s, the report's total %s", billed, rep.Total.TotalCost)
	}
	if want := units(2 * 7200); purchase != want || committed != want {
		t.Errorf("purchase %s and covered usage %s, want both the commitment's %s", purchase, committed, want)
	}
	// A member gets no idle and no purchase, and pays its covered usage.
	_, mine := exportRecords(t, in, 24*time.Hour, Visibility{Teams: map[core.TeamName]bool{"beta": true}})
	if len(mine) != 1 || mine[0][col["ResourceId"]] != "b" || mine[0][col["BilledCost"]] != "600" || mine[0][col["CommitmentDiscountStatus"]] != "Used" {
		t.Errorf("beta's export: %v", mine)
	}
	if _, err := ExportFOCUS(&bytes.Buffer{}, in, time.Minute, admin, ""); err == nil {
		t.Errorf("a granularity of a minute is accepted")
	}
}

func TestFOCUSUnalignedWindow(t *testing.T) {
	in := Input{From: at(1800), To: at(1800 + 7200), Now: at(9000), Prices: []api.Price{perSecond("p")},
		Intervals: []Interval{iv("a", "p", 0, 1000, 0, 9000)}, Workloads: workloads(job("a", "t", core.Running, -1))}
	col, recs := exportRecords(t, in, time.Hour, admin)
	var periods []string
	for _, r := range recs {
		periods = append(periods, r[col["ChargePeriodStart"]]+" "+r[col["ChargePeriodEnd"]]+" "+r[col["BilledCost"]])
	}
	want := []string{
		"2026-03-10T12:30:00Z 2026-03-10T13:00:00Z 1800",
		"2026-03-10T13:00:00Z 2026-03-10T14:00:00Z 3600",
		"2026-03-10T14:00:00Z 2026-03-10T14:30:00Z 1800",
	}
	if !slices.Equal(periods, want) {
		t.Errorf("periods %q, want %q", periods, want)
	}
}
