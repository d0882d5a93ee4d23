package cli

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// The estimate reproduces the seed's example exactly, at a rate and at a
// pool's price of each kind (a monthly 5840 is 8 per GPU-hour: the
// monthly price is converted once), and compares price kinds with their
// break-even utilisation; get pools and get prices say what each price is
// per.
func TestCostEstimate(t *testing.T) {
	s := startLiveServer(t)
	if r := s.run(t, s.admin, "cost", "estimate", "--gpus", "100", "--hours", "720", "--rate", "8"); r.code != 0 || r.stdout != "100 GPUs × 8.00 USD/GPU-hour × 720 h = 576000.00 USD\n" {
		t.Errorf("exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	var est api.CostEstimate
	mustJSON(t, s.must(t, "cost", "estimate", "--gpus", "100", "--hours", "720", "--rate", "8", "-o", "json"), &est)
	if est.Total != 576000*quantity.MoneyUnit {
		t.Errorf("-o json total %s, want 576000", est.Total)
	}
	s.must(t, "set", "price", "local", "--monthly", "5840")
	out := s.must(t, "cost", "estimate", "--gpus", "100", "--hours", "720", "--pool", "local")
	if want := "pool local: monthly 5840.00 USD/GPU-month = 8.00 USD/GPU-hour\n100 GPUs × 8.00 USD/GPU-hour × 720 h = 576000.00 USD\n"; out != want {
		t.Errorf("estimate at a monthly 5840:\n%s\nwant\n%s", out, want)
	}
	pools := s.must(t, "get", "pools")
	if !strings.Contains(pools, "monthly 5840.00 USD/GPU-month = 8.00 USD/GPU-hour") || strings.Contains(pools, "5840/GPU-h") {
		t.Errorf("get pools calls a monthly price what it is not:\n%s", pools)
	}
	prices := s.must(t, "get", "prices")
	if !strings.Contains(prices, "monthly 5840.00 USD/GPU-month = 8.00 USD/GPU-hour") {
		t.Errorf("get prices:\n%s", prices)
	}
	mustJSON(t, s.must(t, "cost", "estimate", "--gpus", "8", "--hours", "720", "--on-demand", "4", "--reserved", "2", "--utilisation", "0.25", "-o", "json"), &est)
	var reserved *api.EstimateOption
	for i := range est.Compare {
		if est.Compare[i].Kind == api.PriceReserved {
			reserved = &est.Compare[i]
		}
	}
	// On-demand at 25%: 8 × 720 × 0.25 × 4 = 5760; reserved billed whole:
	// 8 × 720 × 2 = 11520; break-even at 2/4 = 50%.
	if reserved == nil || reserved.Total != 11520*quantity.MoneyUnit || reserved.BreakEvenUtilisation == nil || *reserved.BreakEvenUtilisation != 0.5 {
		t.Errorf("compare: %+v", est.Compare)
	}
	for _, o := range est.Compare {
		if o.Kind == api.PriceOnDemand && o.Total != 5760*quantity.MoneyUnit {
			t.Errorf("on-demand at 25%%: %s, want 5760", o.Total)
		}
	}
	for _, bad := range [][]string{
		{"--gpus", "0", "--hours", "1", "--rate", "1"},
		{"--gpus", "1", "--hours", "1", "--rate", "-1"},
		{"--gpus", "1", "--hours", "-1", "--rate", "1"},
		{"--gpus", "1", "--hours", "1", "--rate", "1", "--utilisation", "2"},
		{"--gpus", "1", "--hours", "1"},
	} {
		if r := s.run(t, s.admin, append([]string{"cost", "estimate"}, bad...)...); r.code != 2 || r.stderr == "" {
			t.Errorf("estimate %v: exit %d %q, want a usage error", bad, r.code, r.stderr)
		}
	}
	for flags, field := range map[string]string{
		"--pool nowhere":          "pool",
		"--rate 1 --currency XYZ": "currency",
		"--rate 1 --currency EUR": "currency",
	} {
		r := s.run(t, s.admin, append([]string{"cost", "estimate", "--gpus", "1", "--hours", "1"}, strings.Fields(flags)...)...)
		if r.code == 0 || !strings.Contains(r.stderr, field) {
			t.Errorf("estimate %s: exit %d %q, want a refusal naming %s", flags, r.code, r.stderr, field)
		}
	}
}

// Bad prices, budgets, outputs and windows are 4xx answers naming the
// field, and change nothing.
func TestLiveCostBadInput(t *testing.T) {
	s := startLiveServer(t)
	c := api.NewClient("http://"+s.addr, s.admin)
	ctx := context.Background()
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := c.AddPrice(ctx, &api.Price{Pool: "local", Kind: api.PriceOnDemand, Rate: 2 * quantity.MoneyUnit, EffectiveFrom: future}); err != nil {
		t.Fatal(err)
	}
	wantField := func(name string, err error, status int, field string) {
		t.Helper()
		var se *api.StatusError
		if !errors.As(err, &se) || se.Status != status {
			t.Errorf("%s: %v, want %d", name, err, status)
			return
		}
		if field == "" {
			return
		}
		for _, f := range se.Err.Fields {
			if f.Field == field {
				return
			}
		}
		t.Errorf("%s: fields %+v, want one naming %s", name, se.Err.Fields, field)
	}
	for _, tc := range []struct {
		name  string
		p     api.Price
		field string
	}{
		{"a negative rate", api.Price{Pool: "local", Kind: api.PriceOnDemand, Rate: -1}, "rate"},
		{"an unknown kind", api.Price{Pool: "local", Kind: "spot", Rate: 1}, "kind"},
		{"reserved without GPUs", api.Price{Pool: "local", Kind: api.PriceReserved, Rate: 1, Term: "8760h"}, "gpus"},
		{"owned without depreciation", api.Price{Pool: "local", Kind: api.PriceOwned, Purchase: 30000 * quantity.MoneyUnit}, "depreciation"},
		{"the past", api.Price{Pool: "local", Kind: api.PriceOnDemand, Rate: 1, EffectiveFrom: time.Now().Add(-time.Hour)}, "effectiveFrom"},
		{"a version at the same time", api.Price{Pool: "local", Kind: api.PriceOnDemand, Rate: 3, EffectiveFrom: future}, "effectiveFrom"},
	} {
		_, err := c.AddPrice(ctx, &tc.p)
		wantField(tc.name, err, http.StatusBadRequest, tc.field)
	}
	if ps, err := c.Prices(ctx); err != nil || len(ps.Items) != 1 {
		t.Errorf("prices after the refusals: %+v %v, want the one version", ps, err)
	}
	if r := s.run(t, s.admin, "set", "price", "local", "--on-demand", "abc"); r.code != 2 || !strings.Contains(r.stderr, "--on-demand") {
		t.Errorf("set price --on-demand abc: exit %d %q", r.code, r.stderr)
	}

	_, err := c.SetBudget(ctx, "nosuchteam", &api.Budget{Monthly: 100 * quantity.MoneyUnit})
	wantField("a budget for a team that does not exist", err, http.StatusNotFound, "")
	_, err = c.SetBudget(ctx, "default", &api.Budget{Monthly: -5})
	wantField("a negative budget", err, http.StatusBadRequest, "monthly")
	if bs, err := c.Budgets(ctx); err != nil || len(bs.Items) != 0 {
		t.Errorf("budgets after the refusals: %+v %v", bs, err)
	}

	_, err = c.Cost(ctx, api.CostQuery{From: "2025-01-01T00:00:00Z", To: "2026-06-01T00:00:00Z"})
	wantField("a window over 400 days", err, http.StatusBadRequest, "to")
	_, err = c.Cost(ctx, api.CostQuery{From: "2026-06-01T00:00:00Z", To: "2026-01-01T00:00:00Z"})
	wantField("from after to", err, http.StatusBadRequest, "from")
	_, err = c.Cost(ctx, api.CostQuery{By: "colour"})
	wantField("an unknown dimension", err, http.StatusBadRequest, "by")

	id := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.25", "--", "sh", "-c", `printf 'accepted=5 unit=tokens\naccepted=lots\n' >> "$GPUFLEET_OUTPUTS_FILE"`))
	s.must(t, "wait", id)
	before, err := c.Cost(ctx, api.CostQuery{By: api.CostByWorkload, Since: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReportOutputs(ctx, id, &api.Outputs{Accepted: -1, Unit: "tokens"})
	wantField("negative outputs", err, http.StatusBadRequest, "accepted")
	_, err = c.ReportOutputs(ctx, id, &api.Outputs{Accepted: 5})
	wantField("outputs without a unit", err, http.StatusBadRequest, "unit")
	after, err := c.Cost(ctx, api.CostQuery{By: api.CostByWorkload, Since: "1h"})
	if err != nil || after.Total.AcceptedOutputs != before.Total.AcceptedOutputs {
		t.Errorf("refused outputs were counted: %d accepted before, %d after (%v)", before.Total.AcceptedOutputs, after.Total.AcceptedOutputs, err)
	}
	for _, tc := range []struct {
		name  string
		req   api.EstimateRequest
		field string
	}{
		{"an estimate at a pool with no price", api.EstimateRequest{GPUs: 1000, Hours: 1, Pool: "nowhere"}, "pool"},
		{"an estimate of negative hours", api.EstimateRequest{GPUs: 1000, Hours: -1, Rate: quantity.MoneyUnit}, "hours"},
		{"an estimate in an unknown currency", api.EstimateRequest{GPUs: 1000, Hours: 1, Rate: quantity.MoneyUnit, Currency: "ZZZ"}, "currency"},
	} {
		_, err := c.Estimate(ctx, &tc.req)
		wantField(tc.name, err, http.StatusBadRequest, tc.field)
	}
	w, err := c.ReportOutputs(ctx, id, &api.Outputs{Accepted: 2, Unit: "tokens"})
	if err != nil || w.Status.Outputs == nil || w.Status.Outputs.Accepted != 7 || w.Status.Outputs.Unit != "tokens" {
		t.Fatalf("outputs after the file's 5 and 2 more: %+v %v", w.Status.Outputs, err)
	}
	evs := s.must(t, "describe", id)
	if !strings.Contains(evs, "MalformedOutputs") || !strings.Contains(evs, "line 2") {
		t.Errorf("a malformed outputs line: want one Warning event naming it:\n%s", evs)
	}
}
