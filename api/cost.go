package api

import (
	"time"
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
