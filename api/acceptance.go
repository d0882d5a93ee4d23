package api

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
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

// Bounds on an acceptance card.
const (
	MaxStages               = 32
	MaxStageCount           = 16 // workloads one stage submits
	MaxCriteria             = 64 // per stage
	MaxCriterionLen         = 256
	MaxMetricNameLen        = 128
	MaxDisruptAfterSeconds  = 3600
	DefaultDisruptAfterSecs = 10
	MaxDecisionNoteLen      = 4096
	MaxDecisions            = 100 // decisions one run keeps
	MaxBriefFileLen         = 4096
)

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
	// 1. At most MaxStageCount.
	Count int `json:"count,omitempty"`
	// Disrupt is what gpufleet does to a failure stage's workload once it
	// has run DisruptAfterSeconds: one of Disruptions. Failure stages only,
	// and required there.
	Disrupt string `json:"disrupt,omitempty"`
	// DisruptAfterSeconds is how long the workload runs before the
	// disruption; 0 means DefaultDisruptAfterSecs.
	DisruptAfterSeconds int64 `json:"disruptAfterSeconds,omitempty"`
	// Load, on a load stage, is gpufleet's own load generator: it drives
	// the stage's workload once it serves, and the stage ends when the
	// load has run. Without it a load stage judges what its workload
	// reports.
	Load *LoadSpec `json:"load,omitempty"`
	// Criteria are expressions over the stage's metrics, each
	// "METRIC OP NUMBER" (ParseCriterion). A criterion whose metric is not
	// reported fails.
	Criteria []string `json:"criteria,omitempty"`
}

// Workloads is how many workloads the stage submits (Count, or 1).
func (s Stage) Workloads() int {
	if s.Count <= 0 {
		return 1
	}
	return s.Count
}

// DisruptAfter is how long a failure stage's workload runs before gpufleet
// disrupts it.
func (s Stage) DisruptAfter() time.Duration {
	if s.DisruptAfterSeconds <= 0 {
		return DefaultDisruptAfterSecs * time.Second
	}
	return time.Duration(s.DisruptAfterSeconds) * time.Second
}

// Validate checks a card and returns every problem, each naming its field
// ("stages[1].criteria[0]"). It needs no server state: whether the team
// and the target pool exist is the server's check.
func (c *AcceptanceCard) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if c.Kind != "" && c.Kind != KindAcceptanceCard {
		add("kind", "must be %s, not %q", KindAcceptanceCard, c.Kind)
	}
	if !ValidName(c.Name) {
		add("name", "must be lowercase letters, digits and '-', starting and ending with a letter or digit, at most %d characters", MaxNameLen)
	}
	if c.Team != "" && !ValidName(c.Team) {
		add("team", "is not a valid team name")
	}
	if c.Brief != nil {
		if c.BriefFile != "" {
			add("briefFile", "give either brief or briefFile, not both")
		}
		for _, fe := range c.Brief.Validate() {
			switch {
			case fe.Field == "model" && c.Brief.Model.Name == "" && c.Brief.Model.Parameters == 0:
			case fe.Field == "contextLength" && c.Brief.ContextLength == 0:
			default:
				add("brief."+fe.Field, "%s", fe.Problem)
			}
		}
	}
	if len(c.BriefFile) > MaxBriefFileLen || strings.IndexByte(c.BriefFile, 0) >= 0 {
		add("briefFile", "must be a path of at most %d bytes without NUL", MaxBriefFileLen)
	}
	if p := c.Target.Pool; p != "" && (len(p) > 63 || strings.ContainsAny(p, " \t\r\n/\\\"'")) {
		add("target.pool", "%q is not a pool's name", p)
	}
	if m := c.Target.GPUModel; m != "" && (strings.TrimSpace(m) == "" || len(m) > 64) {
		add("target.gpuModel", "must be a model name of at most 64 characters")
	}
	switch {
	case len(c.Stages) == 0:
		add("stages", "must list at least one stage")
	case len(c.Stages) > MaxStages:
		add("stages", "at most %d stages", MaxStages)
	}
	seen := map[string]int{}
	runs := 0
	for i, s := range c.Stages {
		at := fmt.Sprintf("stages[%d]", i)
		if !ValidName(s.Name) {
			add(at+".name", "must be lowercase letters, digits and '-', at most %d characters", MaxNameLen)
		} else if j, dup := seen[s.Name]; dup {
			add(at+".name", "%q is also the name of stages[%d]", s.Name, j)
		} else {
			seen[s.Name] = i
		}
		known := false
		for _, t := range StageTypes {
			known = known || s.Type == t
		}
		if !known {
			add(at+".type", "unknown stage type %q: want one of %s", s.Type, strings.Join(StageTypes, ", "))
		}
		if s.Type == StageReview {
			if s.Workload != nil {
				add(at+".workload", "a review stage runs nothing: it compares the recorded results with the brief's targets")
			}
			if s.Count != 0 {
				add(at+".count", "a review stage runs nothing")
			}
			if i != len(c.Stages)-1 {
				add(at+".type", "a review stage must be the last stage")
			}
		} else if known {
			runs++
			if s.Workload == nil {
				add(at+".workload", "a %s stage needs the workload it runs", s.Type)
			}
		}
		if s.Workload != nil {
			for _, fe := range s.Workload.Validate() {
				add(at+".workload."+fe.Field, "%s", fe.Problem)
			}
		}
		if s.Count < 0 || s.Count > MaxStageCount {
			add(at+".count", "must be from 1 to %d (0 means 1)", MaxStageCount)
		}
		if s.Type == StageFailure {
			switch s.Disrupt {
			case "":
				add(at+".disrupt", "a failure stage needs a disruption: one of %s", strings.Join(Disruptions, ", "))
			case DisruptRequeue, DisruptStop, DisruptDrain:
			default:
				add(at+".disrupt", "unknown disruption %q: want one of %s", s.Disrupt, strings.Join(Disruptions, ", "))
			}
			if s.DisruptAfterSeconds < 0 || s.DisruptAfterSeconds > MaxDisruptAfterSeconds {
				add(at+".disruptAfterSeconds", "must be from 1 to %d (0 means %d)", MaxDisruptAfterSeconds, DefaultDisruptAfterSecs)
			}
		} else {
			if s.Disrupt != "" {
				add(at+".disrupt", "only a failure stage disrupts its workload")
			}
			if s.DisruptAfterSeconds != 0 {
				add(at+".disruptAfterSeconds", "only a failure stage disrupts its workload")
			}
		}
		if s.Load != nil {
			if s.Type != StageLoad {
				add(at+".load", "only a load stage has a load generator")
			} else {
				errs = append(errs, s.Load.validate(at+".load", s.Workload)...)
			}
		}
		if len(s.Criteria) > MaxCriteria {
			add(at+".criteria", "at most %d criteria", MaxCriteria)
		}
		for j, e := range s.Criteria {
			if _, err := ParseCriterion(e); err != nil {
				add(fmt.Sprintf("%s.criteria[%d]", at, j), "%v", err)
			}
		}
	}
	if len(c.Stages) > 0 && runs == 0 {
		add("stages", "must have a stage that runs something (smoke, functional, load or failure)")
	}
	return errs
}

// Criterion operators.
const (
	OpLE = "<="
	OpLT = "<"
	OpGE = ">="
	OpGT = ">"
	OpEQ = "=="
	OpNE = "!="
)

// Criterion is a parsed criterion: METRIC OP THRESHOLD.
type Criterion struct {
	Metric    string
	Op        string
	Threshold float64
}

var (
	// MetricNameRE is what a metric's name is made of.
	MetricNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)
	criterionRE  = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|==|!=|<|>)\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*$`)
)

// ParseCriterion parses "p95_latency_ms <= 200": a metric name (letters,
// digits, '_' and '.', not starting with a digit), an operator (<=, <, >=,
// >, ==, !=) and a finite decimal number (no hex, no NaN or Inf, no
// units). Spaces around the operator are optional.
func ParseCriterion(s string) (Criterion, error) {
	if len(s) > MaxCriterionLen {
		return Criterion{}, fmt.Errorf("criterion longer than %d characters", MaxCriterionLen)
	}
	m := criterionRE.FindStringSubmatch(s)
	if m == nil {
		return Criterion{}, fmt.Errorf("criterion %q does not parse: want METRIC OP NUMBER, such as \"p95_latency_ms <= 200\" (OP one of <=, <, >=, >, ==, !=)", s)
	}
	if len(m[1]) > MaxMetricNameLen {
		return Criterion{}, fmt.Errorf("criterion %q: metric name longer than %d characters", s, MaxMetricNameLen)
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return Criterion{}, fmt.Errorf("criterion %q: %s is not a finite number", s, m[3])
	}
	return Criterion{Metric: m[1], Op: m[2], Threshold: v}, nil
}

// String writes the criterion back: "p95_latency_ms <= 200".
func (c Criterion) String() string {
	return c.Metric + " " + c.Op + " " + strconv.FormatFloat(c.Threshold, 'g', -1, 64)
}

// Holds reports whether value meets the criterion. NaN meets none, not
// even "!=". Equality is exact: criteria on measured fractions should use
// <= or >=.
func (c Criterion) Holds(value float64) bool {
	if math.IsNaN(value) {
		return false
	}
	switch c.Op {
	case OpLE:
		return value <= c.Threshold
	case OpLT:
		return value < c.Threshold
	case OpGE:
		return value >= c.Threshold
	case OpGT:
		return value > c.Threshold
	case OpEQ:
		return value == c.Threshold
	case OpNE:
		return value != c.Threshold
	}
	return false
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

// Commits reports whether a decision commits capacity (extend, reserve,
// dedicate, scale): every decision but reject.
func (d *Decision) Commits() bool { return d.Decision != DecisionReject }

// Validate checks a decision as submitted.
func (d *Decision) Validate() []FieldError {
	var errs []FieldError
	known := false
	for _, k := range Decisions {
		known = known || d.Decision == k
	}
	if !known {
		errs = append(errs, FieldError{Field: "decision", Problem: fmt.Sprintf("unknown decision %q: want one of %s", d.Decision, strings.Join(Decisions, ", "))})
	}
	if len(d.Note) > MaxDecisionNoteLen || strings.IndexByte(d.Note, 0) >= 0 {
		errs = append(errs, FieldError{Field: "note", Problem: fmt.Sprintf("at most %d bytes, without NUL", MaxDecisionNoteLen)})
	} else if d.Override && strings.TrimSpace(d.Note) == "" {
		errs = append(errs, FieldError{Field: "note", Problem: "an override needs a note saying why the run's result is overridden"})
	}
	if d.By != "" {
		errs = append(errs, FieldError{Field: "by", Problem: "is set by the server"})
	}
	if !d.At.IsZero() {
		errs = append(errs, FieldError{Field: "at", Problem: "is set by the server"})
	}
	return errs
}
