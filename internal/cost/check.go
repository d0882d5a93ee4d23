package cost

import (
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// CheckPrice checks a price version, the one check of prices: the server runs
// it on every version it stores (config file and API), the CLI before it
// sends one. Each problem names its field by its wire name.
func CheckPrice(p api.Price) []api.FieldError {
	var errs api.FieldErrors
	add := errs.Add
	if p.Pool == "" {
		add("pool", "is required")
	} else if len(p.Pool) > 63 || strings.ContainsAny(p.Pool, " \t\n/\\\"'") {
		add("pool", "must be a name of at most 63 characters without spaces, slashes or quotes")
	}
	money := func(field string, m quantity.Money) {
		switch {
		case m < 0:
			add(field, "must not be negative")
		case m > quantity.MaxMoney:
			add(field, "must be at most %s", quantity.MaxMoney)
		}
	}
	period := func(field, s string, required bool) time.Duration {
		if s == "" {
			if required {
				add(field, "is required for the price kind %s", p.Kind)
			}
			return 0
		}
		d, err := quantity.ParsePeriod(s)
		switch {
		case err != nil:
			add(field, "%v", err)
		case d <= 0:
			add(field, "must be positive")
		case d > 100*8760*time.Hour:
			add(field, "must be at most 100 years")
		}
		return d
	}
	unused := func(field string, set bool) {
		if set {
			add(field, "applies only to another price kind, not %s", p.Kind)
		}
	}
	switch p.Kind {
	case api.PriceOnDemand, api.PriceReserved, api.PriceMonthly:
		money("rate", p.Rate)
		if p.Rate == 0 {
			add("rate", "is required for the price kind %s", p.Kind)
		}
		unused("purchase", p.Purchase != 0)
		unused("depreciation", p.Depreciation != "")
		unused("perGPUHour", p.PerGPUHour != 0)
	case api.PriceOwned:
		money("purchase", p.Purchase)
		money("perGPUHour", p.PerGPUHour)
		period("depreciation", p.Depreciation, p.Purchase != 0)
		if p.Purchase == 0 && p.PerGPUHour == 0 {
			add("purchase", "is required for an owned price (or perGPUHour)")
		}
		unused("rate", p.Rate != 0)
	case "":
		add("kind", "is required: one of %s", strings.Join(api.PriceKinds, ", "))
	default:
		add("kind", "%q is not a price kind: one of %s", p.Kind, strings.Join(api.PriceKinds, ", "))
	}
	if p.Kind == api.PriceReserved {
		switch {
		case p.GPUs <= 0:
			add("gpus", "a reserved price commits a positive number of GPUs")
		case p.GPUs > 1_000_000:
			add("gpus", "must be at most a million")
		}
		period("term", p.Term, true)
	} else {
		unused("gpus", p.GPUs != 0)
		unused("term", p.Term != "")
	}
	if p.BillingIncrement != "" {
		if p.Kind != api.PriceOnDemand {
			unused("billingIncrement", true)
		} else if d, err := time.ParseDuration(p.BillingIncrement); err != nil || d < time.Second || d > 24*time.Hour {
			add("billingIncrement", "%q must be a duration from 1s to 24h", p.BillingIncrement)
		}
	}
	money("cpuCoreHour", p.CPUCoreHour)
	money("memoryGiBHour", p.MemoryGiBHour)
	money("egressGiB", p.EgressGiB)
	money("storageGiBMonth", p.StorageGiBMonth)
	money("licenceGPUHour", p.LicenceGPUHour)
	if len(p.LicencePerWorkload) > 16 {
		add("licencePerWorkload", "at most 16 workload kinds")
	}
	for k, m := range p.LicencePerWorkload {
		if !slices.Contains(api.WorkloadKinds, k) {
			add("licencePerWorkload."+k, "%q is not a workload kind: one of %s", k, strings.Join(api.WorkloadKinds, ", "))
		}
		money("licencePerWorkload."+k, m)
	}
	if !p.EffectiveFrom.IsZero() && (p.EffectiveFrom.Year() < 2000 || p.EffectiveFrom.Year() > 9999) {
		add("effectiveFrom", "must be a time from year 2000 to 9999")
	}
	return errs
}

// CheckBudget checks a budget.
func CheckBudget(b api.Budget) []api.FieldError {
	var errs api.FieldErrors
	switch {
	case b.Monthly <= 0:
		errs.Add("monthly", "must be a positive amount")
	case b.Monthly > quantity.MaxMoney:
		errs.Add("monthly", "must be at most %s", quantity.MaxMoney)
	}
	if b.AlertPercent < 0 || b.AlertPercent > 100 {
		errs.Add("alertPercent", "must be from 1 to 100 (0: the default, 80)")
	}
	if b.StopRunning && !b.Hard {
		errs.Add("stopRunning", "applies only to a hard budget")
	}
	return errs
}
