package api

import (
	"time"
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
