package cost

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Estimate answers an estimate request against the server's price versions
// and currency at now: req.GPUs (milli-GPU) for req.Hours at the price of
// req.Pool in effect at now (PriceAt), or at req.Kind (on-demand when
// empty) and req.Rate in that kind's unit (per GPU-month for monthly, per
// GPU-hour otherwise, an owned one's amortised rate included). Every rate
// becomes a rate per GPU-hour by GPUHourRate, the ledger's conversion, so
// an estimate and a report of the same work agree. Utilisation (0 to 1; 1
// when absent) is the share of the hours the GPUs are expected to be held:
// on-demand bills only that share, the committed kinds bill every hour.
//
// Total is gpus/1000 × hours × the exact rate per GPU-hour (× utilisation
// for on-demand), computed exactly from the float hours' and utilisation's
// binary values and rounded half-up to a micro-unit once: 100 GPUs × 8 ×
// 720 h is 576000 exactly, and so is a monthly price of 5840 (8 per
// GPU-hour at 730 h a month). Each option of req.Compare (a kind and a
// rate in its unit) is the same work under that kind, with, for a
// committed kind when there is an on-demand rate to compare with (the
// estimate's own or an option's), the break-even utilisation: its rate per
// GPU-hour over the on-demand one, above which the committed kind is
// cheaper. Rates in the answer are per GPU-hour, rounded half-up to a
// micro-unit for display (HourlyRate).
//
// Problems are api.FieldErrors naming the field: GPUs or hours out of
// range, a utilisation outside 0 to 1, an unknown kind, a negative rate, a
// pool with no price in effect at now, a pool and a rate both or neither,
// a currency that is not ISO 4217 or not the server's.
func Estimate(req api.EstimateRequest, prices []api.Price, currency string, now time.Time) (api.CostEstimate, error) {
	u := 1.0
	if req.Utilisation != nil {
		u = *req.Utilisation
	}
	est := api.CostEstimate{Currency: currency, GPUs: req.GPUs, Hours: req.Hours, Pool: req.Pool, Utilisation: u}
	var errs api.FieldErrors
	add := func(field, format string, args ...any) {
		errs = append(errs, api.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if req.GPUs <= 0 || req.GPUs > 1_000_000_000 {
		add("gpus", "must be a positive number of GPUs (at most a million)")
	}
	if math.IsNaN(req.Hours) || math.IsInf(req.Hours, 0) || req.Hours <= 0 || req.Hours > 100*8760 {
		add("hours", "must be a positive number of hours, at most 100 years")
	}
	if math.IsNaN(u) || u < 0 || u > 1 {
		add("utilisation", "must be from 0 to 1")
	}
	switch {
	case req.Currency == "" || req.Currency == currency:
	case !ValidCurrency(req.Currency):
		add("currency", "%q is not an ISO 4217 currency code (USD, EUR)", req.Currency)
	default:
		add("currency", "this server's prices are in %s; gpufleet converts no currency", currency)
	}
	option := func(field, kind string, rate Money) api.Price {
		if kind == "" {
			kind = api.PriceOnDemand
		}
		if !knownKind(kind) {
			add(field+"kind", "%q is not a price kind: one of %s", kind, strings.Join(api.PriceKinds, ", "))
		}
		if rate < 0 || rate > quantity.MaxMoney {
			add(field+"rate", "must be from 0 to %s", quantity.MaxMoney)
		}
		if kind == api.PriceOwned {
			return api.Price{Kind: kind, PerGPUHour: rate}
		}
		return api.Price{Kind: kind, Rate: rate}
	}
	var opts []api.Price
	for i, o := range req.Compare {
		opts = append(opts, option(fmt.Sprintf("compare[%d].", i), o.Kind, o.Rate))
	}
	var main api.Price
	switch {
	case req.Pool != "" && (req.Rate != 0 || req.Kind != ""):
		add("pool", "give a pool or a kind and rate, not both")
	case req.Pool != "":
		p, ok := PriceAt(prices, req.Pool, now)
		if !ok {
			add("pool", "pool %s has no price in effect now: see GET /prices (gpufleet get prices)", req.Pool)
		}
		main = p
		est.Price = &p
	case req.Rate != 0 || req.Kind != "":
		main = option("", req.Kind, req.Rate)
	case len(opts) > 0:
		main = opts[0]
	default:
		add("rate", "give a pool, a rate, or prices to compare")
	}
	if len(errs) > 0 {
		return est, errs
	}
	work := new(big.Rat).SetFrac64(int64(req.GPUs), 1000)
	work.Mul(work, new(big.Rat).SetFloat64(req.Hours))
	util := new(big.Rat).SetFloat64(u)
	total := func(kind string, r *big.Rat) Money {
		t := new(big.Rat).Mul(work, r)
		if kind == api.PriceOnDemand {
			t.Mul(t, util)
		}
		return Money(roundHalfUp(t))
	}
	own := GPUHourRate(main)
	est.Kind, est.Rate, est.Total = main.Kind, Money(roundHalfUp(own)), total(main.Kind, own)
	var onDemand *big.Rat
	if main.Kind == api.PriceOnDemand {
		onDemand = own
	}
	for _, o := range opts {
		if onDemand == nil && o.Kind == api.PriceOnDemand {
			onDemand = GPUHourRate(o)
		}
	}
	for _, o := range opts {
		r := GPUHourRate(o)
		out := api.EstimateOption{Kind: o.Kind, Rate: Money(roundHalfUp(r)), PriceRate: o.Rate + o.PerGPUHour, PriceUnit: PriceUnit(o.Kind), Total: total(o.Kind, r)}
		if o.Kind == api.PriceOwned {
			out.PriceUnit = "GPU-hour"
		}
		if o.Kind != api.PriceOnDemand && onDemand != nil && onDemand.Sign() > 0 {
			be, _ := new(big.Rat).Quo(r, onDemand).Float64()
			out.BreakEvenUtilisation = &be
		}
		est.Compare = append(est.Compare, out)
	}
	return est, nil
}

func knownKind(k string) bool {
	for _, x := range api.PriceKinds {
		if k == x {
			return true
		}
	}
	return false
}
