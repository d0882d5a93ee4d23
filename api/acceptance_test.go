package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func card() AcceptanceCard {
	return AcceptanceCard{
		Kind: KindAcceptanceCard, Name: "llm", Team: "research",
		Brief:  &WorkloadBrief{Workload: BriefInference, Owner: "ml-platform", Targets: BriefTargets{P95LatencyMs: 200}},
		Target: CardTarget{Pool: "local", GPUModel: "H100"},
		Stages: []Stage{
			{Name: "smoke", Type: StageSmoke, Workload: &Workload{Resources: Resources{GPUs: 250}, Command: []string{"sh", "-c", "true"}}, Criteria: []string{"exit_code == 0"}},
			{Name: "failure", Type: StageFailure, Disrupt: DisruptRequeue, DisruptAfterSeconds: 20, Count: 2,
				Workload: &Workload{Resources: Resources{GPUs: 1000}, Command: []string{"python3", "serve.py"}}, Criteria: []string{"recovery_seconds <= 60"}},
			{Name: "review", Type: StageReview},
		},
	}
}

func TestAcceptanceRunRoundTripsThroughJSON(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	v := 182.5
	run := AcceptanceRun{
		ID: "run-1", Card: card(), Team: "research", Status: RunPassed, StartedAt: t0, FinishedAt: &t1,
		Stages: []StageRun{{
			Name: "smoke", Type: StageSmoke, Status: StagePassed, Workloads: []string{"w-1"},
			Metrics:   []Metric{{Name: "p95_latency_ms", Value: v, Unit: "ms", Source: SourceWorkload}},
			Criteria:  []CriterionResult{{Expression: "p95_latency_ms <= 200", Metric: "p95_latency_ms", Op: "<=", Threshold: 200, Value: &v, Verdict: VerdictPass, Reason: "ok"}},
			Samples:   []Sample{{At: t0, Name: "latency_ms", Value: 12}},
			StartedAt: &t0, FinishedAt: &t1, Message: "m",
		}},
		Decision: &Decision{Decision: DecisionReserve, Note: "n", By: "ana", At: t1},
		Message:  "fine",
	}
	b, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var back AcceptanceRun
	if err := DecodeStrict(b, &back); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if diff := cmp.Diff(run, back); diff != "" {
		t.Errorf("(-sent +got):\n%s", diff)
	}
	var line MetricLine
	if err := DecodeStrict([]byte(`{"name":"p95_latency_ms","value":182,"unit":"ms"}`), &line); err != nil || line != (MetricLine{"p95_latency_ms", 182, "ms"}) {
		t.Errorf("metric line: got %+v, %v", line, err)
	}
}

// A port is a name or a number; a concurrency one number or a list, and
// either reads back as the list.
func TestLoadSpecDecodes(t *testing.T) {
	var l LoadSpec
	if err := DecodeStrict([]byte(`{"port": 8000, "protocol": "http", "concurrency": 16}`), &l); err != nil {
		t.Fatal(err)
	}
	if l.Port != "8000" || !cmp.Equal(l.Concurrency, Concurrency{16}) {
		t.Errorf("decoded %+v", l)
	}
	b, _ := json.Marshal(l)
	if !strings.Contains(string(b), `"concurrency":[16]`) || !strings.Contains(string(b), `"port":"8000"`) {
		t.Errorf("written back as %s", b)
	}
	if err := DecodeStrict([]byte(`{"port": "http", "protocol": "openai", "concurrency": [1, 8, 32], "count": 500}`), &l); err != nil {
		t.Fatal(err)
	}
	if l.Port != "http" || !cmp.Equal(l.Concurrency, Concurrency{1, 8, 32}) {
		t.Errorf("decoded %+v", l)
	}
	for _, bad := range []string{`{"concurrency": "many"}`, `{"port": 8000.5}`, `{"port": true}`} {
		if err := DecodeStrict([]byte(bad), &l); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}
