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
			Criteria:  []CriterionResult{{Expression: "p95_latency_ms <= 200", Metric: "p95_latency_ms", Op: OpLE, Threshold: 200, Value: &v, Verdict: VerdictPass, Reason: "ok"}},
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

func TestAcceptanceCardValidate(t *testing.T) {
	c := card()
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("a good card: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		change func(c *AcceptanceCard)
		field  string
		says   string
	}{
		{"an unknown stage type", func(c *AcceptanceCard) { c.Stages[0].Type = "soak" }, "stages[0].type", "unknown stage type"},
		{"a criterion that does not parse", func(c *AcceptanceCard) { c.Stages[1].Criteria = []string{"ok", "x =< 1"} }, "stages[1].criteria[1]", "does not parse"},
		{"a failure stage without disrupt", func(c *AcceptanceCard) { c.Stages[1].Disrupt = "" }, "stages[1].disrupt", "needs a disruption"},
		{"an unknown disruption", func(c *AcceptanceCard) { c.Stages[1].Disrupt = "explode" }, "stages[1].disrupt", "unknown disruption"},
		{"disrupt on a smoke stage", func(c *AcceptanceCard) { c.Stages[0].Disrupt = DisruptStop }, "stages[0].disrupt", "only a failure stage"},
		{"a review stage with a workload", func(c *AcceptanceCard) { c.Stages[2].Workload = c.Stages[0].Workload }, "stages[2].workload", "runs nothing"},
		{"a review stage not last", func(c *AcceptanceCard) { c.Stages[1], c.Stages[2] = c.Stages[2], c.Stages[1] }, "stages[1].type", "must be the last"},
		{"a smoke stage without a workload", func(c *AcceptanceCard) { c.Stages[0].Workload = nil }, "stages[0].workload", "needs the workload"},
		{"duplicate stage names", func(c *AcceptanceCard) { c.Stages[1].Name = "smoke" }, "stages[1].name", "also the name of stages[0]"},
		{"a bad workload", func(c *AcceptanceCard) { c.Stages[0].Workload.Command = nil }, "stages[0].workload.command", "must not be empty"},
		{"too many workloads", func(c *AcceptanceCard) { c.Stages[0].Count = MaxStageCount + 1 }, "stages[0].count", "from 1 to"},
		{"a long disruption delay", func(c *AcceptanceCard) { c.Stages[1].DisruptAfterSeconds = MaxDisruptAfterSeconds + 1 }, "stages[1].disruptAfterSeconds", "from 1 to"},
		{"brief and briefFile", func(c *AcceptanceCard) { c.BriefFile = "brief.yaml" }, "briefFile", "not both"},
		{"no stages", func(c *AcceptanceCard) { c.Stages = nil }, "stages", "at least one"},
		{"only a review", func(c *AcceptanceCard) { c.Stages = c.Stages[2:] }, "stages", "runs something"},
		{"a bad name", func(c *AcceptanceCard) { c.Name = "LLM!" }, "name", "lowercase"},
		{"another kind", func(c *AcceptanceCard) { c.Kind = "WorkloadBrief" }, "kind", "must be AcceptanceCard"},
		{"a bad pool", func(c *AcceptanceCard) { c.Target.Pool = "a b" }, "target.pool", "not a pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := card()
			w := *c.Stages[0].Workload
			c.Stages[0].Workload = &w
			tc.change(&c)
			for _, fe := range c.Validate() {
				if fe.Field == tc.field && strings.Contains(fe.Problem, tc.says) {
					return
				}
			}
			t.Errorf("got %v, want %s: ...%s...", c.Validate(), tc.field, tc.says)
		})
	}
}

func TestStageDefaults(t *testing.T) {
	s := Stage{Type: StageFailure}
	if s.Workloads() != 1 || s.DisruptAfter() != 10*time.Second {
		t.Errorf("got %d workloads after %v, want 1 after 10s", s.Workloads(), s.DisruptAfter())
	}
}

func TestDecisionValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Decision
		want []string
	}{
		{"a decision with a note", Decision{Decision: DecisionReserve, Note: "p95 fine"}, nil},
		{"an unknown decision", Decision{Decision: "maybe"}, []string{"decision"}},
		{"a huge note", Decision{Decision: DecisionReject, Note: strings.Repeat("x", MaxDecisionNoteLen+1)}, []string{"note"}},
		{"who and when are the server's", Decision{Decision: DecisionScale, By: "me", At: time.Unix(1, 0)}, []string{"by", "at"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fe := range tc.d.Validate() {
				got = append(got, fe.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
