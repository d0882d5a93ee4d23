package plan

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/spec"
)

// Bounds on a brief's numbers: far above any real model or workload, low
// enough that the byte counts they multiply into stay far from overflow
// (10^13 parameters × 18 bytes is 1.8 × 10^14).
const (
	MaxParameters    = 10_000_000_000_000 // 10^13
	MaxLayers        = 10_000
	MaxKVHeads       = 1_024
	MaxHeadDim       = 16_384
	MaxHidden        = 1_000_000
	MaxContextLength = 10_485_760 // 10 Mi tokens
	MaxConcurrency   = 1_000_000
	MaxResidency     = 64
)

// Trains reports whether a brief's workload kind trains (keeps gradients
// and optimizer state, takes batch rather than concurrency).
func Trains(workload string) bool {
	switch workload {
	case api.BriefTraining, api.BriefFinetune, api.BriefFinetuneLoRA, api.BriefFinetuneQLoRA:
		return true
	}
	return false
}

// Precision is a brief's precision, bf16 when it gives none.
func Precision(b *api.WorkloadBrief) string {
	if b.Precision == "" {
		return api.PrecisionBF16
	}
	return b.Precision
}

// CheckBrief checks a brief as written and returns every problem, each naming
// its field by its wire name. It needs no catalogue: whether model.name is
// a known model, and whether the shape is complete enough for the
// workload's memory terms, is the plan's check. The server and the CLI run
// the same check.
func CheckBrief(b *api.WorkloadBrief) []api.FieldError {
	var errs api.FieldErrors
	add := errs.Add
	if b.Kind != "" && b.Kind != api.KindWorkloadBrief {
		add("kind", "%q is not a brief: want %s", b.Kind, api.KindWorkloadBrief)
	}
	switch {
	case b.Workload == "":
		add("workload", "is required: one of %s", strings.Join(api.BriefWorkloads, ", "))
	case !slices.Contains(api.BriefWorkloads, b.Workload):
		add("workload", "%q is not a workload kind: one of %s", b.Workload, strings.Join(api.BriefWorkloads, ", "))
	}
	if b.Precision != "" && !slices.Contains(api.Precisions, b.Precision) {
		add("precision", "%q is not a precision: one of %s", b.Precision, strings.Join(api.Precisions, ", "))
	}
	if Trains(b.Workload) && b.Workload != api.BriefFinetuneQLoRA && (b.Precision == api.PrecisionINT8 || b.Precision == api.PrecisionINT4) {
		add("precision", "%s trains in fp32, bf16, fp16 or fp8; a 4-bit base is finetune-qlora", b.Workload)
	}
	if b.Workload == api.BriefFinetuneQLoRA && (b.Precision == api.PrecisionINT8 || b.Precision == api.PrecisionINT4 || b.Precision == api.PrecisionFP8) {
		add("precision", "is the compute precision of the adapters (fp32, bf16 or fp16); the base is 4-bit already")
	}
	m := b.Model
	if m.Name != "" && (len(m.Name) > core.MaxNameLen || !core.LabelRE.MatchString(m.Name)) {
		add("model.name", "must be a name of at most %d letters, digits, '-', '_' and '.'", core.MaxNameLen)
	}
	if m.Revision != "" && (len(m.Revision) > 128 || !revisionRE.MatchString(m.Revision)) {
		add("model.revision", "must be a tag, branch or commit of at most 128 letters, digits, '-', '_', '.' and '/'")
	}
	if m.Name == "" && m.Parameters == 0 {
		add("model", "give a catalogue name (model.name) or the parameter count (model.parameters)")
	}
	bound := func(field string, v, max int64) {
		if v < 0 || v > max {
			add(field, "must be from 1 to %d, not %d", max, v)
		}
	}
	bound("model.parameters", m.Parameters, MaxParameters)
	bound("model.layers", m.Layers, MaxLayers)
	bound("model.kvHeads", m.KVHeads, MaxKVHeads)
	bound("model.headDim", m.HeadDim, MaxHeadDim)
	bound("model.hidden", m.Hidden, MaxHidden)
	switch {
	case b.ContextLength == 0:
		add("contextLength", "is required: the tokens of one sequence (prompt and output, or the training sequence length)")
	case b.ContextLength < 0 || b.ContextLength > MaxContextLength:
		add("contextLength", "must be from 1 to %d tokens, not %d", MaxContextLength, b.ContextLength)
	}
	bound("concurrency", b.Concurrency, MaxConcurrency)
	bound("batch", b.Batch, MaxConcurrency)
	if Trains(b.Workload) && b.Concurrency != 0 {
		add("concurrency", "applies to serving; %s takes batch (sequences per step)", b.Workload)
	}
	if b.Concurrency != 0 && b.Batch != 0 {
		add("batch", "give concurrency or batch, not both")
	}
	t := b.Targets
	if t.P95LatencyMs < 0 || t.P95LatencyMs > 86_400_000 {
		add("targets.p95LatencyMs", "must be from 1 to 86400000 (a day), not %d", t.P95LatencyMs)
	}
	if math.IsNaN(t.ThroughputPerSecond) || t.ThroughputPerSecond < 0 || t.ThroughputPerSecond > 1e9 {
		add("targets.throughputPerSecond", "must be a positive number of units per second, at most a billion")
	}
	if t.Unit != "" && (len(t.Unit) > 32 || !core.LabelRE.MatchString(t.Unit)) {
		add("targets.unit", "must be a word of at most 32 characters")
	}
	if t.Deadline != nil && (t.Deadline.Year() < 2000 || t.Deadline.Year() > 9999) {
		add("targets.deadline", "must be a time from year 2000 to 9999")
	}
	if len(b.Residency) > MaxResidency {
		add("residency", "at most %d regions", MaxResidency)
	}
	for i, r := range b.Residency {
		if r == "" || len(r) > core.MaxNameLen || !core.LabelRE.MatchString(r) {
			add(fmt.Sprintf("residency[%d]", i), "%q is not a region name (%s)", r, core.LabelRule)
		}
	}
	if b.OutputTokens < 0 || b.OutputTokens > MaxContextLength {
		add("outputTokens", "must be from 1 to %d tokens, not %d", MaxContextLength, b.OutputTokens)
	} else if b.OutputTokens > 0 && b.ContextLength > 0 && b.OutputTokens > b.ContextLength {
		add("outputTokens", "%d output tokens do not fit in a context of %d (contextLength counts prompt and output)", b.OutputTokens, b.ContextLength)
	}
	if d := b.DataBoundary; d != nil {
		if d.Egress != "" && d.Egress != api.EgressAllow && d.Egress != api.EgressDeny {
			add("dataBoundary.egress", "%q: want %s or %s", d.Egress, api.EgressAllow, api.EgressDeny)
		}
		if len(d.Dependencies) > spec.MaxEgressAllow {
			add("dataBoundary.dependencies", "at most %d destinations", spec.MaxEgressAllow)
		}
		for i, dep := range d.Dependencies {
			if problem := core.DestinationProblem(dep); problem != "" {
				add(fmt.Sprintf("dataBoundary.dependencies[%d]", i), "%s", problem)
			}
		}
	}
	if b.ExpectedDuration != "" {
		d, err := quantity.ParsePeriod(b.ExpectedDuration)
		switch {
		case err != nil:
			add("expectedDuration", "%v", err)
		case d <= 0 || d > 100*8760*time.Hour:
			add("expectedDuration", "must be positive, at most 100 years")
		}
	}
	if b.Owner != "" && !core.ValidName(b.Owner) {
		add("owner", "must be a team or user name: lowercase letters, digits and '-', at most %d characters", core.MaxNameLen)
	}
	return errs
}

var revisionRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`)

// Best returns the first candidate of p that fits and whose speed estimate
// does not put the brief's targets out of reach; else the first that
// fits; nil when none does.
func Best(p *api.Plan) *api.PlanCandidate {
	var first *api.PlanCandidate
	for i := range p.Candidates {
		c := &p.Candidates[i]
		if !c.Fits {
			continue
		}
		if c.Speed == nil || c.Speed.Reachable == nil || *c.Speed.Reachable {
			return c
		}
		if first == nil {
			first = c
		}
	}
	return first
}
