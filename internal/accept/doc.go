// Package accept holds the pure rules of acceptance cards and their runs:
// reading a card, judging criteria against metrics, the figures derived
// from samples (the workload's and the load generator's), the review
// against the brief, decisions, a run's status and its HTML report. It
// does no I/O, reads no clock (times come in with the run), starts no goroutines
// and imports only api, the standard library and go.yaml.in/yaml/v3 (for
// line numbers). The runner that submits stage workloads, disrupts them
// and collects metrics lives with the server; the wire types are in api
// (acceptance.go).
//
// # Cards
//
// ParseCard reads YAML or JSON (JSON is read as YAML, so its lines are
// known too). The file must say kind: AcceptanceCard. Every problem is
// reported at once, each with its field path as the API writes it
// ("stages[1].criteria[0]") and its line: syntax errors, unknown fields
// (at every level, the workload spec's included), values of the wrong JSON
// type, YAML aliases and merge keys (not supported), keys given twice, and
// everything CheckCard finds: an unknown stage type, a
// criterion that does not parse, a failure stage without disrupt (or
// disrupt elsewhere), a review stage with a workload or not last, a
// running stage without one, duplicate stage names, a card with no stage
// that runs something, the workload spec's own checks and the brief's
// (which, in a card, may leave out the model's shape and the context
// length: the review needs only its targets). A problem CheckCard finds in
// a field already reported is not repeated.
//
// # Criteria
//
// A criterion is "METRIC OP NUMBER" (ParseCriterion): a metric name
// (letters, digits, '_' and '.', not starting with a digit), one of <=, <,
// >=, >, ==, != and a finite decimal number. Evaluate judges each one:
// one that does not parse fails; one whose metric nobody reported fails
// with "no metric NAME was reported", never passes by default; a NaN or
// infinite value fails every operator, != included. == is exact. A
// running stage with no criteria is judged by DefaultCriteria
// (exit_code == 0), so no stage passes for showing nothing.
//
// # Metrics
//
// A workload writes JSON lines to $GPUFLEET_METRICS_FILE
// ({"name":"p95_latency_ms","value":182,"unit":"ms"}); the executor reads
// them at the attempt's end (core.ParseMetrics): a name written once is
// its value; a name written more than once keeps its last value under the
// bare name and every value as samples. The runner gives those samples to
// WithSummaries, which derives p50_NAME, p95_NAME, p99_NAME, mean_NAME and
// count_NAME (Summarize), except for a name the workload reported itself
// (a workload that writes p95_latency_ms keeps its figure). Merge joins
// them with the platform's measurements (exit_code, queue_wait_seconds,
// start_seconds, restarts, gpu_memory_peak_mib, memory_headroom_ratio,
// recovery_seconds, ...): the platform's values win over a workload's of
// the same name. The load generator's samples (latency_ms, ttft_ms,
// itl_ms) are summarised the same way.
//
// Percentile is the nearest rank: the sample at rank ceil(p/100 × n) of
// the sorted samples, always a measured value, never an interpolation (so
// p95 of the samples 1..100 is 95). MemoryHeadroom is
// memory_headroom_ratio = 1 - peak/limit, negative when the peak went over
// the limit; Peak finds the peak in a sample series.
//
// # Load and failure stages
//
// LoadResults derives a load stage's figures from what the load
// generator (internal/loadgen) measured, step by step: requests_total,
// error_rate, requests_per_second and output_tokens_per_second over each
// step's measured window, and Summarize of latency_ms, ttft_ms, itl_ms
// and tpot_ms over the requests answered (vLLM's benchmark vocabulary).
// With one step those are the stage's metrics; with several the stage's
// are of every request together and each step's are there too as
// cN.NAME. It also keeps the latency and TTFT series for the charts (at
// most 1000 points each, evenly spread).
//
// FailureProblem judges a failure stage beyond its criteria: a workload
// that ended before it was disrupted tested nothing, and one disrupted
// that never ran (or served) again did not recover; either fails the
// stage with a message that says so.
//
// # Review and status
//
// Review compares what the stages recorded (Recorded: one value per name,
// a later stage's over an earlier's) with the brief's targets (TargetsOf:
// p95LatencyMs gives p95_latency_ms <= target, throughputPerSecond gives
// throughput_per_second >= target, or, when no stage recorded that, the
// load generator's requests_per_second or output_tokens_per_second in the
// target's unit) and then the review stage's own
// criteria; a target whose metric nobody reported fails. With no targets
// and no criteria the review has no results and passes. Decisions
// (extend, reserve, dedicate, scale, reject) are recorded separately and
// do not change the status: Decide appends each to the run's decisions,
// never replacing one, and refuses a decision that commits capacity
// (every one but reject) on a run that did not pass unless it overrides
// with a note.
//
// StageVerdict is a stage's status from its results. RunStatus is a run's:
// Error stays Error; the first Failed stage fails the run, its message
// naming the stage and the first failing criterion; a Pending or Running
// stage keeps it Running; a Skipped stage with no failure before it fails
// it; otherwise Passed, so a run passes only when every stage that runs
// passed and the review met the brief's targets.
//
// # Report
//
// ReportHTML renders a run as one self-contained page through
// html/template (every value escaped): inline CSS, an inline SVG line
// chart of each stage's sample series (at most 2000 points a series), a
// load stage's steps as a table and as charts against their concurrency,
// a failure stage's disruptions, every decision,
// each criterion with its value and verdict, the qualification evidence
// of the nodes used and a readiness checklist. Checklist derives that
// checklist from the run and the evidence: a smoke, functional, load (with
// p95 latency and memory headroom) and failure (with a recovery time)
// stage passed, the nodes passed qualification, the targets were met, and
// a decision is on record.
package accept
