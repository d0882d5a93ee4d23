package api

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// KindWorkloadBrief is the kind of a workload brief file.
const KindWorkloadBrief = "WorkloadBrief"

// Workload kinds of a brief: what must be completed, which decides the
// memory terms (a KV cache for serving, gradients and optimizer state for
// training).
const (
	BriefInference     = "inference"
	BriefTraining      = "training"
	BriefFinetune      = "finetune"
	BriefFinetuneLoRA  = "finetune-lora"
	BriefFinetuneQLoRA = "finetune-qlora"
	BriefBatch         = "batch"
	BriefNotebook      = "notebook"
)

// BriefWorkloads lists the workload kinds of a brief, for messages.
var BriefWorkloads = []string{BriefInference, BriefTraining, BriefFinetune, BriefFinetuneLoRA, BriefFinetuneQLoRA, BriefBatch, BriefNotebook}

// Trains reports whether a brief's workload kind trains (keeps gradients
// and optimizer state, takes batch rather than concurrency).
func Trains(workload string) bool {
	switch workload {
	case BriefTraining, BriefFinetune, BriefFinetuneLoRA, BriefFinetuneQLoRA:
		return true
	}
	return false
}

// Precisions of a brief's weights (and compute).
const (
	PrecisionFP32 = "fp32"
	PrecisionBF16 = "bf16"
	PrecisionFP16 = "fp16"
	PrecisionFP8  = "fp8"
	PrecisionINT8 = "int8"
	PrecisionINT4 = "int4"
)

// Precisions lists the precisions, for messages.
var Precisions = []string{PrecisionFP32, PrecisionBF16, PrecisionFP16, PrecisionFP8, PrecisionINT8, PrecisionINT4}

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

// WorkloadBrief says what must be completed, not which GPUs: the model,
// its precision, the tokens it holds, the targets, where its data may be
// and who owns it (POST /plan; `gpufleet plan -f brief.yaml`).
type WorkloadBrief struct {
	// Kind is "WorkloadBrief" in a file; it may be left out on the API.
	Kind string `json:"kind,omitempty"`
	// Workload is one of BriefWorkloads.
	Workload string    `json:"workload"`
	Model    ModelSpec `json:"model"`
	// Precision is one of Precisions; empty means bf16.
	Precision string `json:"precision,omitempty"`
	// ContextLength is the tokens of one sequence (prompt and output for
	// serving, the sequence length for training).
	ContextLength int64 `json:"contextLength"`
	// Concurrency is the sequences served at once (inference, batch,
	// notebook; default 1). Batch is the sequences of one training step
	// (training kinds, and batch inference; default 1).
	Concurrency int64        `json:"concurrency,omitempty"`
	Batch       int64        `json:"batch,omitempty"`
	Targets     BriefTargets `json:"targets,omitzero"`
	// OutputTokens is the output tokens of a typical request (serving):
	// with it the plan estimates the latency of a request and the
	// requests per second each candidate may reach.
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// Residency lists the regions the workload's data may be in; empty:
	// any.
	Residency []string `json:"residency,omitempty"`
	// DataBoundary says what the service may reach beyond the platform:
	// an acceptance card's load stage carries it to its workload as the
	// workload's network policy.
	DataBoundary *DataBoundary `json:"dataBoundary,omitempty"`
	// ExpectedDuration is how long the work runs ("8h", "3d").
	ExpectedDuration string `json:"expectedDuration,omitempty"`
	Owner            string `json:"owner,omitempty"`
}

// DataBoundary is where a workload's data may go: Egress allow or deny
// (EgressAllow, EgressDeny; empty says nothing), and Dependencies, the
// destinations it may reach when egress is denied (CIDRs, addresses or
// host names, each with an optional :port: an object store, a model
// registry). Where the data may be stored is the brief's residency.
type DataBoundary struct {
	Egress       string   `json:"egress,omitempty"`
	Dependencies []string `json:"dependencies,omitempty"`
}

// ModelSpec names a model of the plan's catalogue, or gives its shape.
// Fields given beside a name override the catalogue's. Revision pins the
// model's weights (a tag, branch or commit of its repository); the plan
// carries it as given.
type ModelSpec struct {
	Name       string `json:"name,omitempty"`
	Revision   string `json:"revision,omitempty"`
	Parameters int64  `json:"parameters,omitempty"`
	Layers     int64  `json:"layers,omitempty"`
	KVHeads    int64  `json:"kvHeads,omitempty"`
	HeadDim    int64  `json:"headDim,omitempty"`
	Hidden     int64  `json:"hidden,omitempty"`
}

// BriefTargets are what the work must achieve; all optional.
type BriefTargets struct {
	P95LatencyMs int64 `json:"p95LatencyMs,omitempty"`
	// ThroughputPerSecond is completed units (Unit) per second; with it
	// the plan prices one unit.
	ThroughputPerSecond float64 `json:"throughputPerSecond,omitempty"`
	// Unit names what the throughput counts ("request" by default).
	Unit string `json:"unit,omitempty"`
	// Deadline is when the work must be done (RFC 3339).
	Deadline *time.Time `json:"deadline,omitempty"`
}

// BriefPrecision is the brief's precision, bf16 when it gives none.
func (b *WorkloadBrief) BriefPrecision() string {
	if b.Precision == "" {
		return PrecisionBF16
	}
	return b.Precision
}

// Validate checks a brief as written and returns every problem, each naming
// its field by its wire name. It needs no catalogue: whether model.name is
// a known model, and whether the shape is complete enough for the
// workload's memory terms, is the plan's check. The server and the CLI run
// the same check.
func (b *WorkloadBrief) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if b.Kind != "" && b.Kind != KindWorkloadBrief {
		add("kind", "%q is not a brief: want %s", b.Kind, KindWorkloadBrief)
	}
	switch {
	case b.Workload == "":
		add("workload", "is required: one of %s", strings.Join(BriefWorkloads, ", "))
	case !oneOf(b.Workload, BriefWorkloads):
		add("workload", "%q is not a workload kind: one of %s", b.Workload, strings.Join(BriefWorkloads, ", "))
	}
	if b.Precision != "" && !oneOf(b.Precision, Precisions) {
		add("precision", "%q is not a precision: one of %s", b.Precision, strings.Join(Precisions, ", "))
	}
	if Trains(b.Workload) && b.Workload != BriefFinetuneQLoRA && (b.Precision == PrecisionINT8 || b.Precision == PrecisionINT4) {
		add("precision", "%s trains in fp32, bf16, fp16 or fp8; a 4-bit base is finetune-qlora", b.Workload)
	}
	if b.Workload == BriefFinetuneQLoRA && (b.Precision == PrecisionINT8 || b.Precision == PrecisionINT4 || b.Precision == PrecisionFP8) {
		add("precision", "is the compute precision of the adapters (fp32, bf16 or fp16); the base is 4-bit already")
	}
	m := b.Model
	if m.Name != "" && (len(m.Name) > MaxNameLen || !labelRE.MatchString(m.Name)) {
		add("model.name", "must be a name of at most %d letters, digits, '-', '_' and '.'", MaxNameLen)
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
	if t.Unit != "" && (len(t.Unit) > 32 || !labelRE.MatchString(t.Unit)) {
		add("targets.unit", "must be a word of at most 32 characters")
	}
	if t.Deadline != nil && (t.Deadline.Year() < 2000 || t.Deadline.Year() > 9999) {
		add("targets.deadline", "must be a time from year 2000 to 9999")
	}
	if len(b.Residency) > MaxResidency {
		add("residency", "at most %d regions", MaxResidency)
	}
	for i, r := range b.Residency {
		if r == "" || len(r) > MaxNameLen || !labelRE.MatchString(r) {
			add(fmt.Sprintf("residency[%d]", i), "%q is not a region name (%s)", r, LabelRule)
		}
	}
	if b.OutputTokens < 0 || b.OutputTokens > MaxContextLength {
		add("outputTokens", "must be from 1 to %d tokens, not %d", MaxContextLength, b.OutputTokens)
	} else if b.OutputTokens > 0 && b.ContextLength > 0 && b.OutputTokens > b.ContextLength {
		add("outputTokens", "%d output tokens do not fit in a context of %d (contextLength counts prompt and output)", b.OutputTokens, b.ContextLength)
	}
	if d := b.DataBoundary; d != nil {
		if d.Egress != "" && d.Egress != EgressAllow && d.Egress != EgressDeny {
			add("dataBoundary.egress", "%q: want %s or %s", d.Egress, EgressAllow, EgressDeny)
		}
		if len(d.Dependencies) > MaxEgressAllow {
			add("dataBoundary.dependencies", "at most %d destinations", MaxEgressAllow)
		}
		for i, dep := range d.Dependencies {
			if problem := DestinationProblem(dep); problem != "" {
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
	if b.Owner != "" && !ValidName(b.Owner) {
		add("owner", "must be a team or user name: lowercase letters, digits and '-', at most %d characters", MaxNameLen)
	}
	return errs
}

var revisionRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`)

func oneOf(s string, list []string) bool {
	for _, x := range list {
		if s == x {
			return true
		}
	}
	return false
}

// Candidate scopes, least exclusive first.
const (
	// ScopeFraction is a share of one GPU (gpus "0.25", "0.5", "0.75").
	ScopeFraction = "fraction"
	// ScopeGPU is one whole GPU.
	ScopeGPU = "gpu"
	// ScopeNode is several GPUs of one node, in one NVLink domain.
	ScopeNode = "node"
	// ScopeNodes is several nodes (replicas × gpus).
	ScopeNodes = "nodes"
)

// Scopes lists the candidate scopes, least exclusive first.
var Scopes = []string{ScopeFraction, ScopeGPU, ScopeNode, ScopeNodes}

// Plan is the advice for a brief (the answer of POST /plan): the memory the
// work needs, line by line, and the allocations of the fleet that could
// carry it, least exclusive first.
type Plan struct {
	// Brief is the brief as planned: the catalogue's shape filled in, the
	// defaults made explicit.
	Brief    WorkloadBrief  `json:"brief"`
	Currency string         `json:"currency,omitempty"`
	Memory   MemoryEstimate `json:"memory"`
	// Candidates are the allocations considered, least exclusive first
	// (fraction, one GPU, one node, several nodes; then fewer GPUs, those
	// that fit, cheaper), each saying whether it fits and why.
	Candidates []PlanCandidate `json:"candidates"`
	// Verdict says, in a sentence, what to ask for (the first candidate
	// that fits), or that nothing in the fleet fits.
	Verdict string `json:"verdict"`
	// Needs says what the work needs in the terms of GPUs ("one GPU with
	// at least 39 GiB", "at least 2 × 24 GiB in one NVLink domain").
	Needs string `json:"needs"`
}

// Best returns the first candidate that fits and whose speed estimate
// does not put the brief's targets out of reach; else the first that
// fits; nil when none does.
func (p *Plan) Best() *PlanCandidate {
	var first *PlanCandidate
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

// MemoryEstimate is the GPU memory one copy of the work needs, by term.
// TotalBytes is the sum of Lines; the named fields are the same lines by
// term (OptimizerBytes holds the gradients and the optimizer state).
type MemoryEstimate struct {
	WeightsBytes     int64        `json:"weightsBytes"`
	KVCacheBytes     int64        `json:"kvCacheBytes"`
	ActivationsBytes int64        `json:"activationsBytes"`
	OptimizerBytes   int64        `json:"optimizerBytes"`
	OverheadBytes    int64        `json:"overheadBytes"`
	TotalBytes       int64        `json:"totalBytes"`
	Lines            []MemoryLine `json:"lines"`
	// HeadroomRatio is the share of an allocation's GPU memory the plan
	// keeps free: a candidate fits when its need is at most (1 −
	// HeadroomRatio) of what it is given.
	HeadroomRatio float64 `json:"headroomRatio"`
}

// MemoryLine is one term of the estimate with the formula it came from,
// its numbers written in.
type MemoryLine struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	Formula string `json:"formula"`
}

// PlanCandidate is one allocation that could carry the work: the request
// to make (GPUs as `submit --gpus` takes them, Replicas nodes of them, the
// model and pool), what it costs and how long it would wait now.
type PlanCandidate struct {
	Scope string `json:"scope"`
	GPUs  string `json:"gpus"`
	// Replicas is the nodes of the nodes scope (absent: one).
	Replicas int    `json:"replicas,omitempty"`
	GPUModel string `json:"gpuModel"`
	// GPUMemoryMiB is the memory of one of the GPUs.
	GPUMemoryMiB int64  `json:"gpuMemoryMiB"`
	Pool         string `json:"pool"`
	Region       string `json:"region,omitempty"`
	// CostPerHour is GPUs × replicas × the pool's rate per GPU-hour;
	// absent when the pool has no price.
	CostPerHour *Money `json:"costPerHour"`
	// CostPerUnit is the cost of one Unit: of a completed unit at the
	// throughput target, or of the whole run over the expected duration
	// (Unit "run"); absent without either, or without a price.
	CostPerUnit *Money `json:"costPerUnit"`
	Unit        string `json:"unit,omitempty"`
	// ExpectedWait is "0s" when free capacity holds it now, "unknown"
	// when it fits but the capacity is busy (Why says so), "never" when
	// it does not fit.
	ExpectedWait string `json:"expectedWait"`
	Fits         bool   `json:"fits"`
	// HeadroomRatio is the share of the allocation's memory the estimate
	// leaves free (negative when it does not fit).
	HeadroomRatio float64 `json:"headroomRatio"`
	Why           string  `json:"why"`
	// Speed is the serving speed the allocation may reach at most, from
	// its memory bandwidth, and whether the brief's targets look
	// reachable there: an estimate, which an acceptance card's load stage
	// then measures. Absent for training kinds.
	Speed *SpeedEstimate `json:"speed,omitempty"`
}

// SpeedEstimate bounds how fast an allocation may serve a brief: each
// decode step reads the weights once and the KV cache of every sequence,
// so a step takes at least BytesPerStep over the allocation's memory
// bandwidth. It is an upper bound on speed (compute, prefill, batching
// and the serving stack only slow it down), labelled an estimate.
type SpeedEstimate struct {
	// Estimate says what this is and how it is checked.
	Estimate string `json:"estimate"`
	// MemoryBandwidthGBps is the allocation's (its share of each GPU's
	// bandwidth, summed), 0 when the GPU model has no figure in the
	// catalogue; BandwidthSource names the datasheet it comes from.
	MemoryBandwidthGBps float64 `json:"memoryBandwidthGBps"`
	BandwidthSource     string  `json:"bandwidthSource,omitempty"`
	// BytesPerStep is what one decode step reads: the weights (the
	// active ones, for a mixture of experts) and the KV cache of every
	// sequence at the full context.
	BytesPerStep int64 `json:"bytesPerStep,omitempty"`
	// InterTokenLatencyMs is a lower bound on the time between two
	// tokens of a sequence; DecodeTokensPerSecond an upper bound on the
	// output tokens of all sequences together.
	InterTokenLatencyMs   float64 `json:"interTokenLatencyMs,omitempty"`
	DecodeTokensPerSecond float64 `json:"decodeTokensPerSecond,omitempty"`
	// LatencyMs and RequestsPerSecond, with the brief's outputTokens: a
	// lower bound on one request's decode time and an upper bound on the
	// requests answered a second.
	LatencyMs         *float64 `json:"latencyMs,omitempty"`
	RequestsPerSecond *float64 `json:"requestsPerSecond,omitempty"`
	// Reachable says whether the brief's targets look reachable on the
	// allocation; absent when none of them can be estimated. Why says
	// each target's comparison, or why none could be made.
	Reachable *bool  `json:"reachable,omitempty"`
	Why       string `json:"why"`
}
