package portal_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/portal"
)

// The portal writes amounts, per-output figures and GPU-hours by the rule
// the CLI uses (internal/cost's Amount, PerUnit and GPUHours): the page's
// own functions, run in the browser over chosen and random values in
// currencies of 0, 2 and 3 minor units, give the same strings as the Go
// ones.
func TestMoneyRuleInBrowserIsTheCLIs(t *testing.T) {
	chrome := findChromium(t)
	srv := httptest.NewServer(portal.New())
	t.Cleanup(srv.Close)
	b := startBrowser(t, chrome)
	b.run(t, "open the page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))

	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, seed>>1))
	micros := []int64{0, 1, 4, 5, 9, 10, 49, 50, 99, 278, 4999, 5000, 9999, 10000, 72280, 627575, 1_000_000, 576_000_000_000, -4000, -1_005_000, 999_999_999_999_999}
	for range 300 {
		micros = append(micros, r.Int64N(1_000_000_000_000)>>r.UintN(40))
	}
	hours := []float64{0, 0.125, 0.5, 0.09996, 0.99951, 0.0012345, 12.345, 1, 72000, 1e-6, 2.675}
	for range 300 {
		hours = append(hours, r.Float64()*math.Pow(10, float64(r.IntN(12)-6)))
	}
	currencies := []string{"USD", "JPY", "KWD", "EUR", ""}
	type want struct {
		V        float64 `json:"v"`
		Currency string  `json:"currency"`
		Amount   string  `json:"amount"`
		PerUnit  string  `json:"perUnit"`
	}
	var wants []want
	for _, m := range micros {
		v, _ := json.Marshal(quantity.Money(m)) // as the API writes it
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			t.Fatal(err)
		}
		for _, c := range currencies {
			wants = append(wants, want{V: f, Currency: c, Amount: cost.Amount(quantity.Money(m), c), PerUnit: cost.PerUnit(quantity.Money(m), c)})
		}
	}
	in, _ := json.Marshal(wants)
	js := fmt.Sprintf(`import('/ui/cost.js').then(m => %s.map(w => ({v: w.v, currency: w.currency, amount: m.amount(w.v, w.currency), perUnit: m.perUnit(w.v, w.currency)})))`, in)
	got := get(t, b, "format the amounts", chromedp.Evaluate[[]want](js, chromedp.EvalAwaitPromise))
	if len(got) != len(wants) {
		t.Fatalf("%d answers for %d amounts", len(got), len(wants))
	}
	for i := range wants {
		if got[i] != wants[i] {
			t.Errorf("seed %d: %v %s: the portal writes %q (per unit %q), the CLI %q (%q)", seed, wants[i].V, wants[i].Currency, got[i].Amount, got[i].PerUnit, wants[i].Amount, wants[i].PerUnit)
		}
	}
	hin, _ := json.Marshal(hours)
	js = fmt.Sprintf(`import('/ui/cost.js').then(m => %s.map(h => m.hours(h)))`, hin)
	gotH := get(t, b, "format GPU-hours", chromedp.Evaluate[[]string](js, chromedp.EvalAwaitPromise))
	for i, h := range hours {
		if want := cost.GPUHours(h); i >= len(gotH) || gotH[i] != want {
			t.Errorf("seed %d: %v GPU-hours: the portal writes %q, the CLI %q", seed, h, gotH[i], want)
		}
	}
}
