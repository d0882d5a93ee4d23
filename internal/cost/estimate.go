package cost

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/gpufleet/gpufleet/api"
)

// Estimate prices gpus (milli-GPU) for hours under a price kind at rate:
// per GPU-hour for on-demand, reserved and owned (the owned rate is its
// amortised purchase plus power per GPU-hour), per GPU-month for monthly
// (converted at api.HoursPerMonth). utilisation (0 to 1) is the share of
// the hours the GPUs are expected to be held: on-demand bills only that
// share, the committed kinds bill every hour (pass 1 for fully used GPUs).
// An empty kind is on-demand.
//
// Total is gpus/1000 × hours × rate per GPU-hour (× utilisation for
// on-demand), computed exactly from the float hours' and utilisation's
// binary values and rounded half-up to a micro-unit once: 100 GPUs × 8 ×
// 720 h is 576000 exactly. Each option of opts (kind and rate, by the same
// rules) is the same work under that kind, with, for a committed kind when
// there is an on-demand rate to compare with (the estimate's own or an
// option's), the break-even utilisation: its rate per GPU-hour over the
// on-demand one, above which the committed kind is cheaper. Rate fields of
// the answer are per GPU-hour (a monthly rate divided by 730, rounded
// half-up to a micro-unit for display; totals use the exact rate).
func Estimate(gpus api.Milli, hours float64, kind string, rate Money, utilisation float64, opts []api.EstimateOption) (api.CostEstimate, error) {
	if kind == "" {
		kind = api.PriceOnDemand
	}
	est := api.CostEstimate{GPUs: gpus, Hours: hours, Kind: kind, Utilisation: utilisation}
	var errs api.FieldErrors
	if gpus <= 0 || gpus > 1_000_000_000 {
		errs = append(errs, api.FieldError{Field: "gpus", Problem: "must be a positive number of GPUs (at most a million)"})
	}
	if math.IsNaN(hours) || math.IsInf(hours, 0) || hours <= 0 || hours > 100*8760 {
		errs = append(errs, api.FieldError{Field: "hours", Problem: "must be a positive number of hours, at most 100 years"})
	}
	if math.IsNaN(utilisation) || utilisation < 0 || utilisation > 1 {
		errs = append(errs, api.FieldError{Field: "utilisation", Problem: "must be from 0 to 1"})
	}
	check := func(field, k string, r Money) {
		if !knownKind(k) {
			errs = append(errs, api.FieldError{Field: field + "kind", Problem: fmt.Sprintf("%q is not a price kind: one of %s", k, strings.Join(api.PriceKinds, ", "))})
		}
		if r < 0 || r > api.MaxMoney {
			errs = append(errs, api.FieldError{Field: field + "rate", Problem: fmt.Sprintf("must be from 0 to %s", api.MaxMoney)})
		}
	}
	check("", kind, rate)
	for i, o := range opts {
		check(fmt.Sprintf("compare[%d].", i), o.Kind, o.Rate)
	}
	if len(errs) > 0 {
		return est, errs
	}
	work := new(big.Rat).SetFrac64(int64(gpus), 1000)
	work.Mul(work, new(big.Rat).SetFloat64(hours))
	u := new(big.Rat).SetFloat64(utilisation)
	hourly := func(k string, r Money) *big.Rat {
		x := new(big.Rat).SetInt64(int64(r))
		if k == api.PriceMonthly {
			x.Quo(x, big.NewRat(api.HoursPerMonth, 1))
		}
		return x
	}
	total := func(k string, r *big.Rat) Money {
		t := new(big.Rat).Mul(work, r)
		if k == api.PriceOnDemand {
			t.Mul(t, u)
		}
		return Money(roundHalfUp(t))
	}
	own := hourly(kind, rate)
	est.Rate = Money(roundHalfUp(own))
	est.Total = total(kind, own)
	var onDemand *big.Rat
	if kind == api.PriceOnDemand {
		onDemand = own
	}
	for _, o := range opts {
		if onDemand == nil && (o.Kind == api.PriceOnDemand || o.Kind == "") {
			onDemand = hourly(api.PriceOnDemand, o.Rate)
		}
	}
	for _, o := range opts {
		k := o.Kind
		if k == "" {
			k = api.PriceOnDemand
		}
		r := hourly(k, o.Rate)
		out := api.EstimateOption{Kind: k, Rate: Money(roundHalfUp(r)), Total: total(k, r)}
		if k != api.PriceOnDemand && onDemand != nil && onDemand.Sign() > 0 {
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
	return k == ""
}
