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

// loadCard is card() with a load stage whose generator drives port http.
func loadCard() AcceptanceCard {
	c := card()
	load := Stage{Name: "load", Type: StageLoad,
		Workload: &Workload{Kind: KindService, Resources: Resources{GPUs: 1000}, Command: []string{"serve"}, Ports: []Port{{Name: "http", Port: 8000}}},
		Load: &LoadSpec{Port: "http", Protocol: ProtocolOpenAI, Requests: []json.RawMessage{json.RawMessage(`{"prompt":"hi","max_tokens":8}`)},
			Concurrency: Concurrency{1, 8}, Duration: "30s", Warmup: "5s"}}
	c.Stages = append(c.Stages[:2], load, c.Stages[2])
	return c
}

func TestLoadSpecValidate(t *testing.T) {
	c := loadCard()
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("a good load card: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		change func(l *LoadSpec, s *Stage)
		field  string
		says   string
	}{
		{"a port not declared", func(l *LoadSpec, _ *Stage) { l.Port = "grpc" }, "stages[2].load.port", `"grpc" is not a port the stage's workload declares (it declares http 8000)`},
		{"a port by number", func(l *LoadSpec, _ *Stage) { l.Port = "8000" }, "", ""},
		{"no port", func(l *LoadSpec, _ *Stage) { l.Port = "" }, "stages[2].load.port", "is required"},
		{"an unknown protocol", func(l *LoadSpec, _ *Stage) { l.Protocol = "grpc" }, "stages[2].load.protocol", "unknown protocol \"grpc\": want one of openai, http"},
		{"concurrency above the bound", func(l *LoadSpec, _ *Stage) { l.Concurrency = Concurrency{MaxLoadConcurrency + 1} }, "stages[2].load.concurrency", "want from 1 to 1000"},
		{"a step twice", func(l *LoadSpec, _ *Stage) { l.Concurrency = Concurrency{4, 4} }, "stages[2].load.concurrency", "a step twice"},
		{"duration and count", func(l *LoadSpec, _ *Stage) { l.Count = 10 }, "stages[2].load.count", "not both"},
		{"a bad duration", func(l *LoadSpec, _ *Stage) { l.Duration = "2h" }, "stages[2].load.duration", "at most 1h0m0s"},
		{"requests and a file", func(l *LoadSpec, _ *Stage) { l.RequestsFile = "prompts/a.jsonl" }, "stages[2].load.requestsFile", "not both"},
		{"a file out of its volume", func(l *LoadSpec, _ *Stage) { l.Requests, l.RequestsFile = nil, "prompts/../../etc/passwd" }, "stages[2].load.requestsFile", "no '..'"},
		{"no requests for openai", func(l *LoadSpec, _ *Stage) { l.Requests = nil }, "stages[2].load.requests", "needs requests"},
		{"an openai request not an object", func(l *LoadSpec, _ *Stage) { l.Requests[0] = json.RawMessage(`"hi"`) }, "stages[2].load.requests[0]", "JSON object"},
		{"load on a smoke stage", func(l *LoadSpec, s *Stage) { s.Type = StageSmoke }, "stages[2].load", "only a load stage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadCard()
			st := &c.Stages[2]
			l := *st.Load
			l.Requests = append([]json.RawMessage(nil), l.Requests...)
			st.Load = &l
			tc.change(&l, st)
			errs := c.Validate()
			if tc.field == "" {
				if len(errs) != 0 {
					t.Errorf("got %v, want none", errs)
				}
				return
			}
			for _, fe := range errs {
				if fe.Field == tc.field && strings.Contains(fe.Problem, tc.says) {
					return
				}
			}
			t.Errorf("got %v, want %s: ...%s...", errs, tc.field, tc.says)
		})
	}
}

// A port is a name or a number; a concurrency one number or a list, and
// either reads back as the list; the defaults are one step of a minute.
func TestLoadSpecDecodes(t *testing.T) {
	var l LoadSpec
	if err := DecodeStrict([]byte(`{"port": 8000, "protocol": "http", "concurrency": 16}`), &l); err != nil {
		t.Fatal(err)
	}
	if l.Port != "8000" || !cmp.Equal(l.Steps(), []int{16}) || l.StepDuration() != time.Minute || l.RequestPath() != "/" {
		t.Errorf("decoded %+v: steps %v, duration %v, path %q", l, l.Steps(), l.StepDuration(), l.RequestPath())
	}
	b, _ := json.Marshal(l)
	if !strings.Contains(string(b), `"concurrency":[16]`) || !strings.Contains(string(b), `"port":"8000"`) {
		t.Errorf("written back as %s", b)
	}
	if err := DecodeStrict([]byte(`{"port": "http", "protocol": "openai", "concurrency": [1, 8, 32], "count": 500}`), &l); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(l.Steps(), []int{1, 8, 32}) || l.StepDuration() != 0 || l.RequestPath() != "/v1/completions" {
		t.Errorf("decoded %+v", l)
	}
	for _, bad := range []string{`{"concurrency": "many"}`, `{"port": 8000.5}`, `{"port": true}`} {
		if err := DecodeStrict([]byte(bad), &l); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

// A brief carries the model's revision and a data boundary; a bad egress
// or dependency names its field.
func TestBriefDataBoundary(t *testing.T) {
	b := WorkloadBrief{Workload: BriefInference, Model: ModelSpec{Name: "llama-3-8b", Revision: "8cde5ca8380496c9a6cc7ef3a8b46a0372a1d920"}, ContextLength: 4096, OutputTokens: 256,
		DataBoundary: &DataBoundary{Egress: EgressDeny, Dependencies: []string{"10.0.0.0/8", "huggingface.co:443", "192.0.2.7"}}}
	if fe := b.Validate(); len(fe) != 0 {
		t.Fatalf("a good brief: %v", fe)
	}
	b.Model.Revision, b.OutputTokens = "main branch", 8192
	b.DataBoundary = &DataBoundary{Egress: "sometimes", Dependencies: []string{"http://x"}}
	got := map[string]string{}
	for _, f := range b.Validate() {
		got[f.Field] = f.Problem
	}
	for _, field := range []string{"model.revision", "outputTokens", "dataBoundary.egress", "dataBoundary.dependencies[0]"} {
		if got[field] == "" {
			t.Errorf("no problem names %s (got %v)", field, got)
		}
	}
	w := Workload{Resources: Resources{GPUs: 1000}, Command: []string{"x"}, Network: &Network{Egress: "none", Allow: []string{"10.0.0.0/33"}}}
	got = map[string]string{}
	for _, f := range w.Validate() {
		got[f.Field] = f.Problem
	}
	if got["network.egress"] == "" || got["network.allow[0]"] == "" {
		t.Errorf("a bad network: %v", got)
	}
}
