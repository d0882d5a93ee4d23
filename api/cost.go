package api

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Price kinds: how a pool's GPUs are paid for.
const (
	PriceOnDemand = "on-demand" // a rate per GPU-hour, billed per second (or per increment) while held
	PriceReserved = "reserved"  // a commitment of N GPUs at a rate per GPU-hour for a term, billed used or not
	PriceMonthly  = "monthly"   // a flat price per GPU per month, prorated per second, billed used or not
	PriceOwned    = "owned"     // purchase price amortised over a depreciation period, plus a rate per GPU-hour
)

// PriceKinds lists the price kinds, for messages.
var PriceKinds = []string{PriceOnDemand, PriceReserved, PriceMonthly, PriceOwned}

// Price is one version of a pool's price model: it applies from
// EffectiveFrom until the pool's next version. A new version never rewrites
// the past. Money fields are in the server's currency.
type Price struct {
	Pool string `json:"pool"`
	Kind string `json:"kind"`
	// EffectiveFrom is when this version starts to apply; absent (the zero
	// time) in the configuration file means since the server's store was
	// made (not allowed for reserved); through the API, now.
	EffectiveFrom time.Time `json:"effectiveFrom"`

	// Rate is per GPU-hour for on-demand and reserved, per GPU-month for
	// monthly (prorated per second); unused for owned.
	Rate Money `json:"rate,omitempty"`
	// BillingIncrement (on-demand) rounds each allocation up to a multiple
	// of it ("1m"); absent: per second.
	BillingIncrement string `json:"billingIncrement,omitempty"`
	// GPUs and Term (reserved): the commitment, billed whether used or not,
	// for Term from EffectiveFrom ("8760h", "12mo", "1y").
	GPUs int    `json:"gpus,omitempty"`
	Term string `json:"term,omitempty"`
	// Purchase (owned) is the price of one GPU, amortised over
	// Depreciation ("36mo"); PerGPUHour adds power and operations.
	Purchase     Money  `json:"purchase,omitempty"`
	Depreciation string `json:"depreciation,omitempty"`
	PerGPUHour   Money  `json:"perGPUHour,omitempty"`

	// Host, network, storage and licence lines, for every kind.
	CPUCoreHour     Money `json:"cpuCoreHour,omitempty"`
	MemoryGiBHour   Money `json:"memoryGiBHour,omitempty"`
	EgressGiB       Money `json:"egressGiB,omitempty"`
	StorageGiBMonth Money `json:"storageGiBMonth,omitempty"`
	LicenceGPUHour  Money `json:"licenceGPUHour,omitempty"`
	// LicencePerWorkload is a price per workload of a kind (job, notebook,
	// service), charged once, when it first starts.
	LicencePerWorkload map[string]Money `json:"licencePerWorkload,omitempty"`

	// GPUHourRate is set by the server in its answers and ignored in
	// requests: what the version bills one GPU for one hour (a monthly
	// rate over quantity.HoursPerMonth, an owned GPU's purchase over its
	// depreciation hours plus perGPUHour), rounded to a micro-unit for
	// display; the ledger bills the exact rate.
	GPUHourRate Money `json:"gpuHourRate,omitempty"`
}

// PriceList is the answer of GET /prices.
type PriceList struct {
	Currency string  `json:"currency"`
	Items    []Price `json:"items"`
}

// Validate checks a price version, the one check of prices: the server runs
// it on every version it stores (config file and API), the CLI before it
// sends one. Each problem names its field by its wire name.
func (p Price) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if p.Pool == "" {
		add("pool", "is required")
	} else if len(p.Pool) > 63 || strings.ContainsAny(p.Pool, " \t\n/\\\"'") {
		add("pool", "must be a name of at most 63 characters without spaces, slashes or quotes")
	}
	money := func(field string, m Money) {
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
	case PriceOnDemand, PriceReserved, PriceMonthly:
		money("rate", p.Rate)
		if p.Rate == 0 {
			add("rate", "is required for the price kind %s", p.Kind)
		}
		unused("purchase", p.Purchase != 0)
		unused("depreciation", p.Depreciation != "")
		unused("perGPUHour", p.PerGPUHour != 0)
	case PriceOwned:
		money("purchase", p.Purchase)
		money("perGPUHour", p.PerGPUHour)
		period("depreciation", p.Depreciation, p.Purchase != 0)
		if p.Purchase == 0 && p.PerGPUHour == 0 {
			add("purchase", "is required for an owned price (or perGPUHour)")
		}
		unused("rate", p.Rate != 0)
	case "":
		add("kind", "is required: one of %s", strings.Join(PriceKinds, ", "))
	default:
		add("kind", "%q is not a price kind: one of %s", p.Kind, strings.Join(PriceKinds, ", "))
	}
	if p.Kind == PriceReserved {
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
		if p.Kind != PriceOnDemand {
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
		if !validKind(k) {
			add("licencePerWorkload."+k, "%q is not a workload kind: one of %s", k, strings.Join(WorkloadKinds, ", "))
		}
		money("licencePerWorkload."+k, m)
	}
	if !p.EffectiveFrom.IsZero() && (p.EffectiveFrom.Year() < 2000 || p.EffectiveFrom.Year() > 9999) {
		add("effectiveFrom", "must be a time from year 2000 to 9999")
	}
	return errs
}

// WorkloadKinds lists the kinds of workload, for messages.
var WorkloadKinds = []string{KindJob, KindService, KindNotebook}

func validKind(k string) bool {
	for _, w := range WorkloadKinds {
		if w == k {
			return true
		}
	}
	return false
}

// Budget is a team's monthly budget (PUT /teams/{name}/budget).
type Budget struct {
	Team string `json:"team,omitempty"`
	// Monthly is the budget per calendar month (UTC).
	Monthly Money `json:"monthly"`
	// AlertPercent is the share of the budget at which a Warning event,
	// the metric and the portal banner speak (default 80).
	AlertPercent int `json:"alertPercent,omitempty"`
	// Hard makes new non-production workloads of the team wait
	// (BudgetExceeded) once spent plus what running work accrues reaches
	// the budget.
	Hard bool `json:"hard,omitempty"`
	// StopRunning also stops running work then, lowest classes first.
	StopRunning bool `json:"stopRunning,omitempty"`
}

// Validate checks a budget.
func (b Budget) Validate() []FieldError {
	var errs []FieldError
	switch {
	case b.Monthly <= 0:
		errs = append(errs, FieldError{"monthly", "must be a positive amount"})
	case b.Monthly > quantity.MaxMoney:
		errs = append(errs, FieldError{"monthly", fmt.Sprintf("must be at most %s", quantity.MaxMoney)})
	}
	if b.AlertPercent < 0 || b.AlertPercent > 100 {
		errs = append(errs, FieldError{"alertPercent", "must be from 1 to 100 (0: the default, 80)"})
	}
	if b.StopRunning && !b.Hard {
		errs = append(errs, FieldError{"stopRunning", "applies only to a hard budget"})
	}
	return errs
}

// BudgetStatus is a budget with what the month has spent (GET
// /budgets, GET /teams/{name}/budget).
type BudgetStatus struct {
	Budget
	Currency string `json:"currency"`
	// MonthStart and ResetsAt bound the calendar month (UTC).
	MonthStart time.Time `json:"monthStart"`
	ResetsAt   time.Time `json:"resetsAt"`
	Spent      Money     `json:"spent"`
	// BurnPerHour is what the team's running work accrues per hour now.
	BurnPerHour Money `json:"burnPerHour"`
	// SpentRatio is spent / monthly.
	SpentRatio float64 `json:"spentRatio"`
	// ExhaustedAt is when, at the current burn rate, the budget runs out:
	// always in the future; absent when it does not within the month, and
	// once it has (ExhaustedSince).
	ExhaustedAt *time.Time `json:"exhaustedAt,omitempty"`
	// ExhaustedSince is when this month's spend reached the budget (to
	// the second), present once it has.
	ExhaustedSince *time.Time `json:"exhaustedSince,omitempty"`
	Alerting       bool       `json:"alerting"`
	// Exceeded: a hard budget whose spent plus accruing work reached it.
	Exceeded bool `json:"exceeded"`
}

// BudgetList is the answer of GET /budgets.
type BudgetList struct {
	Items []BudgetStatus `json:"items"`
}

// Outputs is completed work a workload reports (POST
// /workloads/{id}/outputs adds it, at the time it is posted; a workload's
// status shows the sums). A report names its unit.
type Outputs struct {
	Accepted int64  `json:"accepted"`
	Rejected int64  `json:"rejected"`
	Unit     string `json:"unit,omitempty"`
}

// MaxOutputs bounds the outputs one report adds.
const MaxOutputs = 1_000_000_000_000

// Validate checks one report of outputs.
func (o Outputs) Validate() []FieldError {
	var errs []FieldError
	if o.Accepted < 0 || o.Accepted > MaxOutputs {
		errs = append(errs, FieldError{"accepted", "must be from 0 to a thousand billion"})
	}
	if o.Rejected < 0 || o.Rejected > MaxOutputs {
		errs = append(errs, FieldError{"rejected", "must be from 0 to a thousand billion"})
	}
	switch {
	case o.Unit == "":
		errs = append(errs, FieldError{"unit", "is required: what is counted (images, requests, tokens)"})
	case len(o.Unit) > 32 || strings.ContainsAny(o.Unit, " \t\n\"'=") || strings.ContainsAny(o.Unit[:1], "-+=@"):
		errs = append(errs, FieldError{"unit", "must be a word of at most 32 characters, starting with a letter or digit"})
	}
	return errs
}

// Cost report dimensions (by=).
const (
	CostByTeam     = "team"
	CostByPool     = "pool"
	CostByWorkload = "workload"
	CostByUser     = "user"
	CostByLabel    = "label:" // label:KEY
)

// IdleRow names the row of what pools bill that no workload held.
const IdleRow = "__idle__"

// MaxCostWindow bounds a cost report's window.
const MaxCostWindow = 400 * 24 * time.Hour

// CostRow is one row of a cost report: a team, pool, workload, user or
// label value (Name; a workload row's name is its ID, WorkloadName its
// name), or the total. Accelerator cost is the billed GPU time counted
// once; the idle, failed and preempted hours explain it and are not added
// to it again.
type CostRow struct {
	Name         string `json:"name,omitempty"`
	WorkloadName string `json:"workloadName,omitempty"`
	// AcceptanceStage (rows by workload) is "RUN/STAGE" for the workload
	// of an acceptance card's stage: its outputs are the card's evidence,
	// counted in AcceptanceOutputs, not the team's.
	AcceptanceStage string  `json:"acceptanceStage,omitempty"`
	GPUHours        float64 `json:"gpuHours"`
	AcceleratorCost Money   `json:"acceleratorCost"`
	HostCost        Money   `json:"hostCost"`
	StorageCost     Money   `json:"storageCost"`
	NetworkCost     Money   `json:"networkCost"`
	LicenceCost     Money   `json:"licenceCost"`
	TotalCost       Money   `json:"totalCost"`
	// AcceptedOutputs and RejectedOutputs sum OutputsByUnit; Unit is
	// their one unit, "mixed" when there are several, and
	// CostPerAcceptedOutput TotalCost / AcceptedOutputs when there is one
	// (null otherwise: OutputsByUnit has each unit's).
	AcceptedOutputs       int64  `json:"acceptedOutputs"`
	RejectedOutputs       int64  `json:"rejectedOutputs"`
	Unit                  string `json:"unit"`
	CostPerAcceptedOutput *Money `json:"costPerAcceptedOutput"`
	// UnacceptedOutputs are outputs reported accepted by workloads that
	// then failed: shown, never in a cost per accepted output.
	UnacceptedOutputs int64 `json:"unacceptedOutputs"`
	// AcceptanceOutputs are the outputs acceptance stages reported
	// accepted: not the team's.
	AcceptanceOutputs int64 `json:"acceptanceOutputs"`
	// OutputsByUnit is the row's outputs, one entry per unit, by unit.
	OutputsByUnit     []UnitOutputs `json:"outputsByUnit"`
	IdleGPUHours      float64       `json:"idleGPUHours"`
	FailedGPUHours    float64       `json:"failedGPUHours"`
	PreemptedGPUHours float64       `json:"preemptedGPUHours"`
	Retries           int64         `json:"retries"`
	// Efficiency is what the row's attempts used of the host CPU and
	// memory they requested, over their time in the window (an attempt's
	// use is measured once, at its end, and counted in proportion to its
	// time in the window): absent when none in the row was measured. The
	// host cost bills the requests; this does not change it.
	Efficiency *Efficiency `json:"efficiency,omitempty"`
}

// UnitOutputs is a row's outputs of one unit, with the cost of one
// accepted output (null when none was accepted): the cost of the
// workloads that reported only this unit, plus a share of the row's other
// cost (failed or idle work, workloads of several units or none) in
// proportion to it.
type UnitOutputs struct {
	Unit            string `json:"unit"`
	Accepted        int64  `json:"accepted"`
	Rejected        int64  `json:"rejected"`
	Unaccepted      int64  `json:"unaccepted"`
	Acceptance      int64  `json:"acceptance"`
	CostPerAccepted *Money `json:"costPerAccepted"`
}

// CostReport is the answer of GET /cost.
type CostReport struct {
	Currency string    `json:"currency"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	By       string    `json:"by"`
	Items    []CostRow `json:"items"`
	Total    CostRow   `json:"total"`
}

// CostSeries is the answer of GET /cost/series: the cost report's rows per
// step of the window, for plots (the portal's stacked cost by team).
type CostSeries struct {
	Currency string            `json:"currency"`
	From     time.Time         `json:"from"`
	To       time.Time         `json:"to"`
	By       string            `json:"by"`
	Step     string            `json:"step"` // a Go duration: "1h"
	Points   []CostSeriesPoint `json:"points"`
}

// CostSeriesPoint is one step of a series: each row's total cost in
// [Start, Start+Step).
type CostSeriesPoint struct {
	Start time.Time        `json:"start"`
	Items map[string]Money `json:"items"`
}

// EstimateRequest is what POST /cost/estimate prices: GPUs for Hours at a
// pool's price in effect now (Pool), or at a price kind and rate (Kind,
// on-demand when absent, and Rate in that kind's unit: per GPU-hour, per
// GPU-month for monthly), compared with other kinds (Compare, each a kind
// and a rate in its unit) at an expected Utilisation (1 when absent).
// Currency, when given, must be the server's: prices are never converted.
type EstimateRequest struct {
	GPUs        Milli            `json:"gpus"`
	Hours       float64          `json:"hours"`
	Pool        string           `json:"pool,omitempty"`
	Kind        string           `json:"kind,omitempty"`
	Rate        Money            `json:"rate,omitempty"`
	Utilisation *float64         `json:"utilisation,omitempty"`
	Currency    string           `json:"currency,omitempty"`
	Compare     []EstimateOption `json:"compare,omitempty"`
}

// CostEstimate is what `gpufleet cost estimate` prints: GPUs × hours × rate,
// and, given prices of several kinds and an expected utilisation, what the
// same work costs under each, with the utilisation above which a committed
// price (billed used or not) is cheaper than on-demand.
type CostEstimate struct {
	Currency string  `json:"currency"`
	GPUs     Milli   `json:"gpus"`
	Hours    float64 `json:"hours"`
	Pool     string  `json:"pool,omitempty"`
	// Price is the pool's version the estimate used (with Pool).
	Price *Price `json:"price,omitempty"`
	Kind  string `json:"kind"`
	// Rate is per GPU-hour (a monthly price over quantity.HoursPerMonth, an owned
	// purchase over its depreciation), rounded to a micro-unit for
	// display: Total is computed from the exact rate.
	Rate  Money `json:"rate"`
	Total Money `json:"total"`
	// Utilisation is the expected share of the hours the GPUs are held
	// (on-demand bills only that share), 0 to 1.
	Utilisation float64          `json:"utilisation"`
	Compare     []EstimateOption `json:"compare,omitempty"`
}

// EstimateOption is the same work under one price kind. In a request, Rate
// is in the kind's unit (per GPU-month for monthly, else per GPU-hour); in
// an answer, per GPU-hour, with the rate as given in PriceRate per
// PriceUnit.
type EstimateOption struct {
	Kind      string `json:"kind"`
	Rate      Money  `json:"rate"`
	PriceRate Money  `json:"priceRate,omitempty"`
	PriceUnit string `json:"priceUnit,omitempty"`
	Total     Money  `json:"total"`
	// BreakEvenUtilisation (committed kinds) is the utilisation above which
	// this kind costs less than on-demand.
	BreakEvenUtilisation *float64 `json:"breakEvenUtilisation,omitempty"`
}
