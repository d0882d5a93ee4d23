package config

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

func TestCostConfig(t *testing.T) {
	c, err := Load(write(t, `
pool: onprem
cost:
  currency: EUR
  prices:
    - {pool: onprem, kind: owned, purchase: 30000, depreciation: 36mo, perGPUHour: 0.4}
    - {pool: onprem, kind: on-demand, rate: 3.2, effectiveFrom: "2027-01-01T00:00:00Z"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid file: %v", err)
	}
	if c.Pool != "onprem" || c.Cost.Currency != "EUR" || len(c.Cost.Prices) != 2 {
		t.Fatalf("pool %q currency %q prices %d", c.Pool, c.Cost.Currency, len(c.Cost.Prices))
	}
	if p := c.Cost.Prices[0]; p.Purchase != 30000*quantity.MoneyUnit || p.PerGPUHour != 400_000 || !p.EffectiveFrom.IsZero() {
		t.Errorf("owned price %+v", p)
	}
	if p := c.Cost.Prices[1]; p.Rate != 3_200_000 || !p.EffectiveFrom.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("on-demand price %+v", p)
	}
	// A file without a cost section keeps the default currency.
	d, err := Load(write(t, "cost: {prices: []}\n"))
	if err != nil || d.Cost.Currency != "USD" || d.Pool != DefaultPool {
		t.Errorf("defaults: %q %q %v", d.Cost.Currency, d.Pool, err)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"unknown currency", "cost: {currency: XYZ}\n", `cost.currency "XYZ"`},
		{"lowercase currency", "cost: {currency: usd}\n", `cost.currency "usd"`},
		{"negative rate", "cost: {prices: [{pool: a, kind: on-demand, rate: -1}]}\n", "cost.prices[0].rate: must not be negative"},
		{"non-numeric rate", "cost: {prices: [{pool: a, kind: on-demand, rate: cheap}]}\n", "cheap"},
		{"unknown kind", "cost: {prices: [{pool: a, kind: spot, rate: 1}]}\n", `cost.prices[0].kind: "spot" is not a price kind`},
		{"two versions at once", "cost: {prices: [{pool: a, kind: on-demand, rate: 1}, {pool: a, kind: monthly, rate: 2}]}\n", "cost.prices[1].effectiveFrom"},
		{"bad pool", "pool: \"a b\"\n", `pool "a b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(t, tc.body))
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
