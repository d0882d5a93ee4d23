package accept

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

func TestReviewComparesWithTheBrief(t *testing.T) {
	stages := []api.StageRun{
		{Name: "smoke", Type: api.StageSmoke, Metrics: []api.Metric{{Name: "p95_latency_ms", Value: 500}}},
		{Name: "load", Type: api.StageLoad, Metrics: []api.Metric{{Name: "p95_latency_ms", Value: 182, Unit: "ms"}}},
	}
	tg := TargetsOf(&api.WorkloadBrief{Workload: api.BriefInference, Targets: api.BriefTargets{P95LatencyMs: 200, ThroughputPerSecond: 50}})
	got := Review(tg, []string{"p95_latency_ms < 190"}, stages)
	var verdicts []string
	for _, r := range got {
		verdicts = append(verdicts, r.Expression+": "+r.Verdict+": "+r.Reason)
	}
	want := []string{
		"p95_latency_ms <= 200: pass: p95_latency_ms is 182 ms, <= 200", // the load stage's value, not the smoke stage's
		"requests_per_second >= 50: fail: no metric requests_per_second was reported",
		"p95_latency_ms < 190: pass: p95_latency_ms is 182 ms, < 190",
	}
	if diff := cmp.Diff(want, verdicts); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The throughput target judges what a workload reports of itself,
	// else the load generator's figure in the target's unit.
	for _, tc := range []struct {
		unit   string
		stages []api.StageRun
		want   string
	}{
		{"", []api.StageRun{{Type: api.StageLoad, Metrics: []api.Metric{{Name: "requests_per_second", Value: 60}}}}, "requests_per_second >= 50"},
		{"tokens", []api.StageRun{{Type: api.StageLoad, Metrics: []api.Metric{{Name: "output_tokens_per_second", Value: 60}}}}, "output_tokens_per_second >= 50"},
		{"tokens", []api.StageRun{{Type: api.StageLoad, Metrics: []api.Metric{{Name: "throughput_per_second", Value: 60}, {Name: "output_tokens_per_second", Value: 1}}}}, "throughput_per_second >= 50"},
		{"images", []api.StageRun{{Type: api.StageLoad, Metrics: []api.Metric{{Name: "requests_per_second", Value: 60}}}}, "throughput_per_second >= 50"},
	} {
		got := Review(Targets{ThroughputPerSecond: 50, Unit: tc.unit}, nil, tc.stages)
		if len(got) != 1 || got[0].Expression != tc.want || (tc.unit != "images" && got[0].Verdict != api.VerdictPass) {
			t.Errorf("unit %q: %+v, want %s", tc.unit, got, tc.want)
		}
	}
	if got := Review(Targets{}, nil, stages); len(got) != 0 {
		t.Errorf("no targets, no criteria: got %+v, want no results", got)
	}
	if tg := TargetsOf(nil); tg != (Targets{}) {
		t.Errorf("no brief: got %+v", tg)
	}
}

func TestRunStatus(t *testing.T) {
	pass := api.CriterionResult{Expression: "exit_code == 0", Verdict: api.VerdictPass}
	fail := api.CriterionResult{Expression: "p95_latency_ms <= 1", Verdict: api.VerdictFail, Reason: "p95_latency_ms is 182 ms, not <= 1"}
	stage := func(name, typ, status string, results ...api.CriterionResult) api.StageRun {
		return api.StageRun{Name: name, Type: typ, Status: status, Criteria: results}
	}
	for _, tc := range []struct {
		name        string
		run         api.AcceptanceRun
		status, msg string
	}{
		{"every stage passed", api.AcceptanceRun{Stages: []api.StageRun{stage("smoke", "smoke", "Passed", pass), stage("review", "review", "Passed")}}, "Passed", ""},
		{"a failing criterion fails the run and is named", api.AcceptanceRun{Stages: []api.StageRun{stage("smoke", "smoke", "Passed", pass), stage("load", "load", "Failed", pass, fail), stage("review", "review", "Skipped")}},
			"Failed", `stage load failed: criterion "p95_latency_ms <= 1": p95_latency_ms is 182 ms, not <= 1`},
		{"a review that misses the targets fails the run", api.AcceptanceRun{Stages: []api.StageRun{stage("smoke", "smoke", "Passed", pass), stage("review", "review", "Failed", fail)}},
			"Failed", `stage review failed: criterion "p95_latency_ms <= 1": p95_latency_ms is 182 ms, not <= 1`},
		{"a stage failed without a criterion names its message", api.AcceptanceRun{Stages: []api.StageRun{{Name: "smoke", Type: "smoke", Status: "Failed", Message: "submit refused"}}}, "Failed", "stage smoke failed: submit refused"},
		{"a running stage keeps the run running", api.AcceptanceRun{Stages: []api.StageRun{stage("smoke", "smoke", "Passed", pass), stage("load", "load", "Running")}}, "Running", ""},
		{"a skipped stage with no failure fails", api.AcceptanceRun{Stages: []api.StageRun{stage("smoke", "smoke", "Skipped")}}, "Failed", "stage smoke was skipped"},
		{"the first failure is named, --continue or not", api.AcceptanceRun{Stages: []api.StageRun{stage("a", "smoke", "Failed", fail), stage("b", "load", "Failed", api.CriterionResult{Expression: "other", Verdict: "fail"})}},
			"Failed", `stage a failed: criterion "p95_latency_ms <= 1": p95_latency_ms is 182 ms, not <= 1`},
		{"an error stays an error", api.AcceptanceRun{Status: "Error", Message: "store down", Stages: []api.StageRun{stage("smoke", "smoke", "Passed", pass)}}, "Error", "store down"},
		{"no stages fails", api.AcceptanceRun{}, "Failed", "the run has no stages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := RunStatus(&tc.run)
			if status != tc.status || msg != tc.msg {
				t.Errorf("got %s %q, want %s %q", status, msg, tc.status, tc.msg)
			}
		})
	}
}

func TestStageVerdict(t *testing.T) {
	results := Evaluate([]string{"exit_code == 0", "nobody_reported <= 1"}, []api.Metric{{Name: "exit_code", Value: 0}})
	status, msg := StageVerdict(results)
	if status != api.StageFailed || !strings.Contains(msg, `"nobody_reported <= 1"`) || !strings.Contains(msg, "no metric nobody_reported was reported") {
		t.Errorf("got %s %q", status, msg)
	}
	if status, _ := StageVerdict(results[:1]); status != api.StagePassed {
		t.Errorf("got %s, want Passed", status)
	}
}
