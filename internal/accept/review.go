package accept

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
)

// Targets are the brief's targets the review compares results with; zero
// means no target. Unit is what the throughput counts ("" for requests).
type Targets struct {
	P95LatencyMs        float64
	ThroughputPerSecond float64
	Unit                string
}

// TargetsOf is the targets of a card's brief; none without a brief.
func TargetsOf(b *api.WorkloadBrief) Targets {
	if b == nil {
		return Targets{}
	}
	return Targets{P95LatencyMs: float64(b.Targets.P95LatencyMs), ThroughputPerSecond: b.Targets.ThroughputPerSecond, Unit: b.Targets.Unit}
}

// Criteria are the criteria the targets imply, given the metrics recorded:
// p95_latency_ms <= the latency target, and the throughput target on
// throughput_per_second (what a workload reports of itself) or, when no
// stage recorded it, on the load generator's figure in the target's unit:
// output_tokens_per_second for tokens, requests_per_second for requests.
func (t Targets) Criteria(recorded []api.Metric) []string {
	var out []string
	if t.P95LatencyMs > 0 {
		out = append(out, Criterion{Metric: MetricP95Latency, Op: OpLE, Threshold: t.P95LatencyMs}.String())
	}
	if t.ThroughputPerSecond > 0 {
		metric := MetricThroughput
		if !slices.ContainsFunc(recorded, func(m api.Metric) bool { return m.Name == MetricThroughput }) {
			switch strings.ToLower(t.Unit) {
			case "", "request", "requests":
				metric = MetricRequestsPerSec
			case "token", "tokens", "output-token", "output-tokens":
				metric = MetricOutputTokensSec
			}
		}
		out = append(out, Criterion{Metric: metric, Op: OpGE, Threshold: t.ThroughputPerSecond}.String())
	}
	return out
}

// Recorded is the metrics the stages before the review recorded, one per
// name: when two stages report the same name, the later stage's value
// counts (a failure stage's exit_code over the smoke stage's).
func Recorded(stages []api.StageRun) []api.Metric {
	var out []api.Metric
	index := map[string]int{}
	for _, s := range stages {
		if s.Type == api.StageReview {
			continue
		}
		for _, m := range s.Metrics {
			if i, ok := index[m.Name]; ok {
				out[i] = m
				continue
			}
			index[m.Name] = len(out)
			out = append(out, m)
		}
	}
	return out
}

// Review judges the recorded results (Recorded(stages)) against the
// brief's targets and then the review stage's own criteria. A target whose
// metric nobody reported fails. No targets and no criteria: no results.
func Review(t Targets, criteria []string, stages []api.StageRun) []api.CriterionResult {
	recorded := Recorded(stages)
	return Evaluate(append(t.Criteria(recorded), criteria...), recorded)
}

// StageVerdict is a stage's status from its criteria' results: Passed
// when every one passed, else Failed with a message naming the first
// failing criterion. The runner fails a stage whose workloads could not
// run before it gets here.
func StageVerdict(results []api.CriterionResult) (status, message string) {
	if f := FirstFailure(results); f != nil {
		return api.StageFailed, fmt.Sprintf("criterion %q failed: %s", f.Expression, f.Reason)
	}
	return api.StagePassed, ""
}

// RunStatus is a run's status from its stages, in order:
//
//  1. a run the platform marked Error stays Error, with its message;
//  2. the first Failed stage makes it Failed, naming the stage and its first
//     failing criterion (or the stage's message when none failed);
//  3. a Pending or Running stage before any failure keeps it Running;
//  4. a Skipped stage with no failure before it makes it Failed;
//  5. otherwise Passed: every stage that runs passed, and the review stage
//     passed its derived criteria or had none.
func RunStatus(run *api.AcceptanceRun) (status, message string) {
	if run.Status == api.RunError {
		return api.RunError, run.Message
	}
	if len(run.Stages) == 0 {
		return api.RunFailed, "the run has no stages"
	}
	for _, s := range run.Stages {
		switch s.Status {
		case api.StagePassed:
		case api.StageFailed:
			if f := FirstFailure(s.Criteria); f != nil {
				return api.RunFailed, fmt.Sprintf("stage %s failed: criterion %q: %s", s.Name, f.Expression, f.Reason)
			}
			if s.Message != "" {
				return api.RunFailed, fmt.Sprintf("stage %s failed: %s", s.Name, s.Message)
			}
			return api.RunFailed, fmt.Sprintf("stage %s failed", s.Name)
		case api.StagePending, api.StageRunning:
			return api.RunRunning, ""
		case api.StageSkipped:
			return api.RunFailed, fmt.Sprintf("stage %s was skipped", s.Name)
		default:
			return api.RunFailed, fmt.Sprintf("stage %s has unknown status %q", s.Name, s.Status)
		}
	}
	return api.RunPassed, ""
}
