package cost

import (
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// HourlyRate is a price's GPU rate per GPU-hour, for estimates and
// comparisons: the rate of on-demand and reserved, a monthly price over
// api.HoursPerMonth, an owned GPU's purchase price over its depreciation
// hours plus its rate per GPU-hour. Divisions round half up to a
// micro-unit (an estimate's figure; the ledger itself divides once, per
// row).
func HourlyRate(p api.Price) Money {
	div := func(m Money, by int64) Money {
		if by <= 0 {
			return 0
		}
		return (m*2 + Money(by)) / (2 * Money(by))
	}
	switch p.Kind {
	case api.PriceOnDemand, api.PriceReserved:
		return p.Rate
	case api.PriceMonthly:
		return div(p.Rate, api.HoursPerMonth)
	case api.PriceOwned:
		d, err := api.ParsePeriod(p.Depreciation)
		r := p.PerGPUHour
		if err == nil && d > 0 {
			r += div(p.Purchase, int64(d/time.Hour))
		}
		return r
	}
	return 0
}
