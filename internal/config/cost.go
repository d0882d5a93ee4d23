package config

import (
	"fmt"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/cost"
)

// Cost configures the cost ledger: the currency every price and budget is
// in, the price versions known from the file (admins add more through the
// API; a file version is never stored, so editing the file changes it),
// and the pool of this machine's node.
type Cost struct {
	// Currency is an ISO 4217 code, USD by default.
	Currency string `json:"currency,omitempty"`
	// Prices are price versions (api.Price); EffectiveFrom absent means
	// since this server's store was made (a reserved commitment must give
	// its start).
	Prices []api.Price `json:"prices,omitempty"`
}

// DefaultPool is the pool of the local machine's node when none is
// configured.
const DefaultPool = "local"

func (c Cost) validate() []error {
	var errs []error
	if c.Currency != "" && !cost.ValidCurrency(c.Currency) {
		errs = append(errs, fmt.Errorf("cost.currency %q: want an ISO 4217 code such as USD or EUR", c.Currency))
	}
	seen := map[string]bool{}
	for i, p := range c.Prices {
		for _, fe := range cost.CheckPrice(p) {
			errs = append(errs, fmt.Errorf("cost.prices[%d].%s: %s", i, fe.Field, fe.Problem))
		}
		if p.Kind == api.PriceReserved && p.EffectiveFrom.IsZero() {
			errs = append(errs, fmt.Errorf("cost.prices[%d].effectiveFrom: a reserved commitment starts at a time: give its start", i))
		}
		k := p.Pool + "@" + p.EffectiveFrom.String()
		if seen[k] {
			errs = append(errs, fmt.Errorf("cost.prices[%d].effectiveFrom: pool %s has two versions from the same time", i, p.Pool))
		}
		seen[k] = true
	}
	return errs
}
