// Package plan turns a workload brief (api.WorkloadBrief: what must be
// completed, not which GPUs) into advice (api.Plan): the GPU memory the
// work needs, term by term with each formula, and the allocations of the
// fleet that could carry it, least exclusive first, with their cost per
// hour and per completed unit, the wait now, and how fast each may serve.
//
// It is pure: a brief and a Fleet (the nodes, their GPUs and what is free
// on each, the pools' rates per GPU-hour, the pending count) go in, a plan
// comes out. No I/O, no clock (Advise takes now), no goroutines, no
// logging. It imports the standard library and api only (rapid in tests).
// The API server builds the Fleet from its store and ledger
// (internal/apiserver/plan.go); the CLI prints the plan.
//
// # The catalogue
//
// Catalogue holds public architectures by name (llama-3-8b, llama-3-70b,
// mistral-7b, mixtral-8x7b, qwen2-7b, gemma-2-9b, phi-3-mini), each from
// its published Hugging Face config.json (catalogue.go names the
// repositories). A brief names one (model.name, any case) or gives the
// shape; fields given beside a name override the catalogue's. Resolve
// fills the shape in, makes the defaults explicit (precision bf16;
// concurrency 1 for serving, batch 1 for training) and refuses, as
// api.FieldErrors naming the field, what CheckBrief refuses, an unknown name
// and a shape too incomplete for the workload's terms.
//
// # The estimate
//
// Memory is one copy of the work on one GPU, one line per term. Sources
// are in ../shared/research/cost-and-health-specs.md §7 unless said
// otherwise:
//
//   - weights = params × bytes per parameter: fp32 4, bf16 and fp16 2, fp8
//     and int8 1, int4 0.5 (huggingface/accelerate
//     src/accelerate/commands/estimate.py divides the fp32 size by 2, 4
//     and 8). finetune-qlora holds an NF4 base at 4.127 bits a parameter:
//     4 bits plus 0.127 of double-quantised constants (Dettmers et al.
//     2023, QLoRA, https://huggingface.co/papers/2305.14314, §3).
//   - kv cache (serving kinds) = 2 × layers × KV heads × head dim × bytes
//     × tokens × sequences, the tokens rounded up to whole 16-token blocks
//     (vLLM FullAttentionSpec.page_size_bytes = 2 × block_size ×
//     num_kv_heads × head_size × dtype_size per layer; default block 16).
//     The cache is in the precision's bytes, except that int8 and int4
//     quantise only the weights and keep a 16-bit cache (a choice: the
//     common default of weight-only quantisation). Training keeps none.
//   - activations, serving: 0.2 × params × activation bytes (2, or 4 in
//     fp32): Accelerate's model size estimator says to "add up to an
//     additional 20%", citing EleutherAI (docs/source/usage_guides/
//     model_size_estimator.md). It is an allowance for a forward pass, not
//     a measurement. Training: 34 × layers × sequence × batch × hidden
//     bytes in 16 bits (68 in fp32), the per-layer sbh(34 + 5as/h) of
//     Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
//     Transformer Models" (arXiv 2205.05198; not in the research notes),
//     without its attention-score term (FlashAttention keeps no scores)
//     and without recomputation: a brief that checkpoints activations
//     needs less.
//   - gradients and optimizer state (training kinds): fp32 gradients, 4
//     bytes a trained parameter, and AdamW's two fp32 moments, 8 bytes,
//     plus an fp32 master copy, 4 bytes, under mixed precision: with the
//     2-byte weights 18 bytes a parameter, Hugging Face's
//     docs/source/en/model_memory_anatomy.md figure (16 in fp32). LoRA and
//     QLoRA train only their adapters, taken as AdapterPercent (1%) of the
//     parameters: no authoritative constant exists (it depends on the
//     rank and the target modules), and 1% is above a rank-16 adapter on
//     every projection of an 8B model (about 0.5%).
//   - overhead = 1 GiB per GPU: the CUDA context, the libraries'
//     workspaces and the allocator's slack (an allowance).
//
// TotalBytes is the sum of the lines (a property test checks it), each
// line capped at MaxLineBytes so that no brief within api's bounds
// overflows. Headroom (0.10) is what an allocation keeps free: vLLM's
// gpu_memory_utilization, 0.9 in earlier releases (0.92 now); the plan
// keeps the larger margin.
//
// # The candidates
//
// The healthy GPUs of the nodes that take work, and of those being
// registered or qualified (capacity to come, none of it free now), within
// the brief's residency, are grouped by pool, region, model and memory;
// cordoned, draining, failed, lost and not-ready nodes are left out. For each group
// the scopes are tried from least exclusive up, and listed up to the first
// that fits (and does not look too slow for the targets: see Speed below),
// each with why:
//
//  1. fraction: a share of one GPU by memory, total / (memory × 0.9)
//     rounded up to a quarter ("0.25", "0.5", "0.75"; a share above three
//     quarters is a whole GPU). Quarters keep the requests few and
//     comparable and leave room for three neighbours at most; a
//     finer share would follow the estimate's error too closely.
//  2. gpu: one whole GPU.
//  3. node: 2, 4 or 8 GPUs in one NVLink domain of one node, the model's
//     terms split evenly (tensor, pipeline or fully sharded data
//     parallelism), the overhead on every GPU. It fits only where a node
//     has that many of the group's GPUs in one domain.
//  4. nodes: replicas nodes of the group's largest domain, the fewest that
//     hold it (at most spec.MaxReplicas).
//
// A candidate fits when what each GPU holds is at most 90% of what it is
// given. Less orders them: scope, fewer GPUs in all, those that fit first,
// cheaper, then pool, region, model and memory. gpus is what `submit
// --gpus` takes; replicas, what `submit --replicas` takes.
//
// Cost per hour is GPUs × the pool's rate per GPU-hour (the caller passes
// cost.GPUHourRate of the version in effect, exact: on-demand and reserved
// rates as they are, monthly over 730 h, owned amortised), computed exactly
// and rounded half up to a micro-unit once. Cost per unit is that over the
// throughput target's units an hour (unit "request" unless the brief
// names one) or, without a target, the whole run over the expected
// duration (unit "run"). A committed price (reserved, monthly, owned)
// bills its GPUs whether used or not, so its marginal cost is lower than
// this; the plan prices the hours the work holds, as a showback would.
//
// Expected wait is "0s" when free capacity holds the candidate now (a
// device with the share free; devices wholly free in one domain, on
// enough nodes), "unknown" when only busy or qualifying capacity does (Why
// says so, with the pending count and the nodes being qualified: the wait
// depends on when running work and qualification end, which the plan does
// not predict), "never" when it does not fit.
//
// Speed (speed.go) bounds how fast each serving candidate may go, from
// memory bandwidth: a decode step reads the weights once (the active
// share, for a mixture of experts in the catalogue) and the KV cache of
// every sequence at the full context (the kv cache line), so the time
// between two tokens is at least those bytes over the allocation's
// bandwidth (each GPU's share of its datasheet figure, summed: a fraction
// gets its share), and the output tokens a second of all sequences at
// most the sequences over that time. With the brief's outputTokens a
// request's decode takes at least outputTokens such steps and the
// requests a second are at most the tokens a second over outputTokens.
// The bandwidths come from the vendors' datasheets (speed.go names each);
// a GPU model not in that catalogue gets no figure. The brief's
// p95LatencyMs (with outputTokens) and throughputPerSecond (in tokens, or
// in requests with outputTokens) are judged against these bounds; the
// result is labelled an estimate, an upper bound on speed that an
// acceptance card's load stage measures. A candidate that fits but looks
// too slow does not end its group's search: the larger scopes are tried
// until one also looks fast enough (the node and nodes scopes skip the
// sizes that look too slow), Best prefers a candidate that fits and looks
// fast enough, and the verdict says whether the targets look reachable
// and that smaller allocations looked too slow.
//
// Needs says what the work needs in terms of the fleet's largest GPU (80
// GiB when the fleet has none): one GPU of at least some size, the fewest
// of them in one NVLink domain ("at least 2 × 80 GiB in one NVLink
// domain"), or nodes of 8. Verdict says what to ask for (the first
// candidate that fits) and whether it is free now, or that nothing fits
// and why (no nodes, nothing in the residency, nothing large enough); and
// when the brief has a deadline, whether it has passed or the expected
// duration, started now, would end after it.
package plan
