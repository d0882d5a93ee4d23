package cost

import (
	"math/big"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// GPUHourRate is what a price version bills for one GPU for one hour, in
// micro-units, exactly: the rate of on-demand and reserved, a monthly rate
// over quantity.HoursPerMonth, an owned GPU's purchase price over its
// depreciation in hours plus its rate per GPU-hour. It is the one
// conversion of a price to a GPU-hour: the ledger, estimates, plans and
// the rates shown to people all go through it. A version of no kind (or an
// owned one with no depreciation to spread its purchase over) bills what
// its other terms say, 0 when none.
func GPUHourRate(p api.Price) *big.Rat {
	r := new(big.Rat)
	switch p.Kind {
	case api.PriceOnDemand, api.PriceReserved:
		r.SetInt64(int64(p.Rate))
	case api.PriceMonthly:
		r.SetFrac64(int64(p.Rate), quantity.HoursPerMonth)
	case api.PriceOwned:
		if d, err := quantity.ParsePeriod(p.Depreciation); err == nil && d > 0 && p.Purchase > 0 {
			// Purchase / (d in hours) = Purchase × 3600e9 / d in ns.
			r.SetFrac(new(big.Int).Mul(big.NewInt(int64(p.Purchase)), big.NewInt(int64(time.Hour))), big.NewInt(int64(d)))
		}
		r.Add(r, new(big.Rat).SetInt64(int64(p.PerGPUHour)))
	}
	return r
}

// HourlyRate is GPUHourRate rounded half up to a micro-unit: the figure a
// person reads (api.Price.GPUHourRate, a pool's price, an estimate's rate).
// Every total is computed from the exact rate, never from this one.
func HourlyRate(p api.Price) Money {
	return Money(roundHalfUp(GPUHourRate(p)))
}

// PriceUnit is what a price version's GPU rate is per, as people read it:
// "GPU-hour" for on-demand and reserved, "GPU-month" for monthly, "GPU"
// for an owned purchase (spread over its depreciation).
func PriceUnit(kind string) string {
	switch kind {
	case api.PriceMonthly:
		return "GPU-month"
	case api.PriceOwned:
		return "GPU"
	}
	return "GPU-hour"
}
