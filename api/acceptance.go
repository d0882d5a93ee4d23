package api

import (
	"time"
)

// KindAcceptanceCard is the kind of an acceptance card file.
const KindAcceptanceCard = "AcceptanceCard"

// Stage types of an acceptance card, in the order a card usually lists
// them.
const (
	StageSmoke      = "smoke"
	StageFunctional = "functional"
	StageLoad       = "load"
	StageFailure    = "failure"
	StageReview     = "review"
)

// StageTypes lists the stage types, for messages.
var StageTypes = []string{StageSmoke, StageFunctional, StageLoad, StageFailure, StageReview}

// Disruptions a failure stage makes gpufleet apply to its workload.
const (
	DisruptRequeue = "requeue" // stop the worker and put it back in the queue: a second attempt
	DisruptStop    = "stop"    // stop the worker (the service restarts it, or the stage sees it gone)
	DisruptDrain   = "drain"   // drain the node the worker runs on, when the target allows it
)

// Disruptions lists the disruptions, for messages.
var Disruptions = []string{DisruptRequeue, DisruptStop, DisruptDrain}

// AcceptanceCard says how to prove a workload on real capacity: the brief
// it must meet, the target, and stages in order, each one or more
// workloads whose metrics are judged by the stage's criteria
// (POST /acceptance/runs; `gpufleet accept run card.yaml`).
type AcceptanceCard struct {
	// Kind is "AcceptanceCard" in a file; it may be left out on the API.
	Kind string `json:"kind,omitempty"`
	Name string `json:"name"`
	// Team owns the card and its runs; stage workloads without a team take
	// it. Empty means the caller's team.
	Team string `json:"team,omitempty"`
	// Brief is the workload brief the review stage compares results with
	// (its targets). In a card it may leave out the model's shape and the
	// context length, which only the plan needs.
	Brief *WorkloadBrief `json:"brief,omitempty"`
	// BriefFile names a brief file, relative to the card's file; the CLI
	// reads it into Brief before it sends the card. Not both.
	BriefFile string     `json:"briefFile,omitempty"`
	Target    CardTarget `json:"target,omitzero"`
	Stages    []Stage    `json:"stages"`
}

// CardTarget is the capacity the card proves: a pool, a GPU model, or
// both. Each stage workload is pinned to it.
type CardTarget struct {
	Pool     string `json:"pool,omitempty"`
	GPUModel string `json:"gpuModel,omitempty"`
}

// Stage is one step of a card.
type Stage struct {
	Name string `json:"name"`
	// Type is one of StageTypes.
	Type string `json:"type"`
	// Workload is the spec of the stage's workloads (the fields of a
	// workload spec; team defaults to the card's). Required, but for a
	// review stage, which runs nothing and must not have one.
	Workload *Workload `json:"workload,omitempty"`
	// Count is how many workloads of that spec the stage submits; 0 means
	// 1. At most 16.
	Count int `json:"count,omitempty"`
	// Disrupt is what gpufleet does to a failure stage's workload once it
	// has run DisruptAfterSeconds: one of Disruptions. Failure stages only,
	// and required there.
	Disrupt string `json:"disrupt,omitempty"`
	// DisruptAfterSeconds is how long the workload runs before the
	// disruption; 0 means 10.
	DisruptAfterSeconds int64 `json:"disruptAfterSeconds,omitempty"`
	// Load, on a load stage, is gpufleet's own load generator: it drives
	// the stage's workload once it serves, and the stage ends when the
	// load has run. Without it a load stage judges what its workload
	// reports.
	Load *LoadSpec `json:"load,omitempty"`
	// Criteria are expressions over the stage's metrics, each
	// "METRIC OP NUMBER", such as "p95_latency_ms <= 200". A criterion whose metric is not
	// reported fails.
	Criteria []string `json:"criteria,omitempty"`
}

// Run statuses.
const (
	RunRunning = "Running"
	RunPassed  = "Passed"
	RunFailed  = "Failed"
	RunError   = "Error" // the platform could not run the card (not the card's fault)
)

// Stage statuses.
const (
	StagePending = "Pending"
	StageRunning = "Running"
	StagePassed  = "Passed"
	StageFailed  = "Failed"
	StageSkipped = "Skipped" // not run: an earlier stage failed
)

// Metric sources.
const (
	SourceWorkload = "workload" // written by the workload to $GPUFLEET_METRICS_FILE
	SourcePlatform = "platform" // measured by gpufleet
)

// Criterion verdicts.
const (
	VerdictPass = "pass"
	VerdictFail = "fail"
)

// AcceptanceRun is one run of a card (GET /acceptance/runs/{id}).
type AcceptanceRun struct {
	ID         string         `json:"id"`
	Card       AcceptanceCard `json:"card"`
	Team       string         `json:"team"`
	Status     string         `json:"status"`
	StartedAt  time.Time      `json:"startedAt"`
	FinishedAt *time.Time     `json:"finishedAt,omitempty"`
	Stages     []StageRun     `json:"stages"`
	// Decision is the latest decision recorded (the last of Decisions),
	// for readers of one decision.
	Decision *Decision `json:"decision,omitempty"`
	// Decisions are every decision recorded on the run, oldest first: a
	// later decision is appended, never replaces one.
	Decisions []Decision `json:"decisions,omitempty"`
	// Message says why the run failed (the first failing criterion) or
	// could not run.
	Message string `json:"message,omitempty"`
	// Server names the gpufleet server that runs it (of several sharing a
	// store): the run lives in that server's process.
	Server string `json:"server,omitempty"`
}

// StageRun is what one stage of a run did.
type StageRun struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Status string `json:"status"`
	// Workloads are the IDs of the workloads the stage submitted.
	Workloads []string          `json:"workloads,omitempty"`
	Metrics   []Metric          `json:"metrics,omitempty"`
	Criteria  []CriterionResult `json:"criteria,omitempty"`
	// Samples are the stage's metric series (for the load stage's charts),
	// in time order.
	Samples []Sample `json:"samples,omitempty"`
	// Steps are a load generator's concurrency steps, each with its own
	// metrics (the stage's metrics are of every step together).
	Steps []LoadStep `json:"steps,omitempty"`
	// Disruptions are what a failure stage did to its workloads.
	Disruptions []Disruption `json:"disruptions,omitempty"`
	StartedAt   *time.Time   `json:"startedAt,omitempty"`
	FinishedAt  *time.Time   `json:"finishedAt,omitempty"`
	Message     string       `json:"message,omitempty"`
}

// Metric is one measured value of a stage.
type Metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Source is SourceWorkload or SourcePlatform.
	Source string `json:"source"`
}

// Sample is one point of a metric series.
type Sample struct {
	At    time.Time `json:"at"`
	Name  string    `json:"name"`
	Value float64   `json:"value"`
}

// MetricLine is one line a workload writes to $GPUFLEET_METRICS_FILE:
// {"name":"p95_latency_ms","value":182,"unit":"ms"}.
type MetricLine struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
}

// CriterionResult is the verdict on one criterion.
type CriterionResult struct {
	Expression string  `json:"expression"`
	Metric     string  `json:"metric"`
	Op         string  `json:"op"`
	Threshold  float64 `json:"threshold"`
	// Value is the metric's value; absent when it was not reported.
	Value   *float64 `json:"value"`
	Verdict string   `json:"verdict"`
	Reason  string   `json:"reason,omitempty"`
}

// Decisions a review records.
const (
	DecisionExtend   = "extend"
	DecisionReserve  = "reserve"
	DecisionDedicate = "dedicate"
	DecisionScale    = "scale"
	DecisionReject   = "reject"
)

// Decisions lists the decisions, for messages.
var Decisions = []string{DecisionExtend, DecisionReserve, DecisionDedicate, DecisionScale, DecisionReject}

// Decision is a review's decision on a run (POST
// /acceptance/runs/{id}/decision; `gpufleet accept decide`). By and At are
// set by the server. Extend, reserve, dedicate and scale commit capacity:
// on a run that did not pass they need Override, with a Note saying why.
type Decision struct {
	Decision string    `json:"decision"`
	Note     string    `json:"note,omitempty"`
	By       string    `json:"by,omitempty"`
	At       time.Time `json:"at,omitzero"`
	Override bool      `json:"override,omitempty"`
}
