package accept

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/api"
)

func card() api.AcceptanceCard {
	return api.AcceptanceCard{
		Kind: api.KindAcceptanceCard, Name: "llm", Team: "research",
		Brief:  &api.WorkloadBrief{Workload: api.BriefInference, Owner: "ml-platform", Targets: api.BriefTargets{P95LatencyMs: 200}},
		Target: api.CardTarget{Pool: "local", GPUModel: "H100"},
		Stages: []api.Stage{
			{Name: "smoke", Type: api.StageSmoke, Workload: &api.Workload{Resources: api.Resources{GPUs: 250}, Command: []string{"sh", "-c", "true"}}, Criteria: []string{"exit_code == 0"}},
			{Name: "failure", Type: api.StageFailure, Disrupt: api.DisruptRequeue, DisruptAfterSeconds: 20, Count: 2,
				Workload: &api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"python3", "serve.py"}}, Criteria: []string{"recovery_seconds <= 60"}},
			{Name: "review", Type: api.StageReview},
		},
	}
}

func TestCheckCard(t *testing.T) {
	c := card()
	if errs := CheckCard(&c); len(errs) != 0 {
		t.Fatalf("a good card: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		change func(c *api.AcceptanceCard)
		field  string
		says   string
	}{
		{"an unknown stage type", func(c *api.AcceptanceCard) { c.Stages[0].Type = "soak" }, "stages[0].type", "unknown stage type"},
		{"a criterion that does not parse", func(c *api.AcceptanceCard) { c.Stages[1].Criteria = []string{"ok", "x =< 1"} }, "stages[1].criteria[1]", "does not parse"},
		{"a failure stage without disrupt", func(c *api.AcceptanceCard) { c.Stages[1].Disrupt = "" }, "stages[1].disrupt", "needs a disruption"},
		{"an unknown disruption", func(c *api.AcceptanceCard) { c.Stages[1].Disrupt = "explode" }, "stages[1].disrupt", "unknown disruption"},
		{"disrupt on a smoke stage", func(c *api.AcceptanceCard) { c.Stages[0].Disrupt = api.DisruptStop }, "stages[0].disrupt", "only a failure stage"},
		{"a review stage with a workload", func(c *api.AcceptanceCard) { c.Stages[2].Workload = c.Stages[0].Workload }, "stages[2].workload", "runs nothing"},
		{"a review stage not last", func(c *api.AcceptanceCard) { c.Stages[1], c.Stages[2] = c.Stages[2], c.Stages[1] }, "stages[1].type", "must be the last"},
		{"a smoke stage without a workload", func(c *api.AcceptanceCard) { c.Stages[0].Workload = nil }, "stages[0].workload", "needs the workload"},
		{"duplicate stage names", func(c *api.AcceptanceCard) { c.Stages[1].Name = "smoke" }, "stages[1].name", "also the name of stages[0]"},
		{"a bad workload", func(c *api.AcceptanceCard) { c.Stages[0].Workload.Command = nil }, "stages[0].workload.command", "must not be empty"},
		{"too many workloads", func(c *api.AcceptanceCard) { c.Stages[0].Count = MaxStageCount + 1 }, "stages[0].count", "from 1 to"},
		{"a long disruption delay", func(c *api.AcceptanceCard) { c.Stages[1].DisruptAfterSeconds = MaxDisruptAfterSeconds + 1 }, "stages[1].disruptAfterSeconds", "from 1 to"},
		{"brief and briefFile", func(c *api.AcceptanceCard) { c.BriefFile = "brief.yaml" }, "briefFile", "not both"},
		{"no stages", func(c *api.AcceptanceCard) { c.Stages = nil }, "stages", "at least one"},
		{"only a review", func(c *api.AcceptanceCard) { c.Stages = c.Stages[2:] }, "stages", "runs something"},
		{"a bad name", func(c *api.AcceptanceCard) { c.Name = "LLM!" }, "name", "lowercase"},
		{"another kind", func(c *api.AcceptanceCard) { c.Kind = "WorkloadBrief" }, "kind", "must be AcceptanceCard"},
		{"a bad pool", func(c *api.AcceptanceCard) { c.Target.Pool = "a b" }, "target.pool", "not a pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := card()
			w := *c.Stages[0].Workload
			c.Stages[0].Workload = &w
			tc.change(&c)
			for _, fe := range CheckCard(&c) {
				if fe.Field == tc.field && strings.Contains(fe.Problem, tc.says) {
					return
				}
			}
			t.Errorf("got %v, want %s: ...%s...", CheckCard(&c), tc.field, tc.says)
		})
	}
}

func TestStageDefaults(t *testing.T) {
	s := api.Stage{Type: api.StageFailure}
	if StageWorkloads(s) != 1 || StageDisruptAfter(s) != 10*time.Second {
		t.Errorf("got %d workloads after %v, want 1 after 10s", StageWorkloads(s), StageDisruptAfter(s))
	}
}

func TestCheckDecision(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    api.Decision
		want []string
	}{
		{"a decision with a note", api.Decision{Decision: api.DecisionReserve, Note: "p95 fine"}, nil},
		{"an unknown decision", api.Decision{Decision: "maybe"}, []string{"decision"}},
		{"a huge note", api.Decision{Decision: api.DecisionReject, Note: strings.Repeat("x", MaxDecisionNoteLen+1)}, []string{"note"}},
		{"who and when are the server's", api.Decision{Decision: api.DecisionScale, By: "me", At: time.Unix(1, 0)}, []string{"by", "at"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fe := range CheckDecision(&tc.d) {
				got = append(got, fe.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// loadCard is card() with a load stage whose generator drives port http.
func loadCard() api.AcceptanceCard {
	c := card()
	load := api.Stage{Name: "load", Type: api.StageLoad,
		Workload: &api.Workload{Kind: api.KindService, Resources: api.Resources{GPUs: 1000}, Command: []string{"serve"}, Ports: []api.Port{{Name: "http", Port: 8000}}},
		Load: &api.LoadSpec{Port: "http", Protocol: api.ProtocolOpenAI, Requests: []json.RawMessage{json.RawMessage(`{"prompt":"hi","max_tokens":8}`)},
			Concurrency: api.Concurrency{1, 8}, Duration: "30s", Warmup: "5s"}}
	c.Stages = append(c.Stages[:2], load, c.Stages[2])
	return c
}

func TestCheckLoad(t *testing.T) {
	c := loadCard()
	if errs := CheckCard(&c); len(errs) != 0 {
		t.Fatalf("a good load card: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		change func(l *api.LoadSpec, s *api.Stage)
		field  string
		says   string
	}{
		{"a port not declared", func(l *api.LoadSpec, _ *api.Stage) { l.Port = "grpc" }, "stages[2].load.port", `"grpc" is not a port the stage's workload declares (it declares http 8000)`},
		{"a port by number", func(l *api.LoadSpec, _ *api.Stage) { l.Port = "8000" }, "", ""},
		{"no port", func(l *api.LoadSpec, _ *api.Stage) { l.Port = "" }, "stages[2].load.port", "is required"},
		{"an unknown protocol", func(l *api.LoadSpec, _ *api.Stage) { l.Protocol = "grpc" }, "stages[2].load.protocol", "unknown protocol \"grpc\": want one of openai, http"},
		{"concurrency above the bound", func(l *api.LoadSpec, _ *api.Stage) { l.Concurrency = api.Concurrency{MaxLoadConcurrency + 1} }, "stages[2].load.concurrency", "want from 1 to 1000"},
		{"a step twice", func(l *api.LoadSpec, _ *api.Stage) { l.Concurrency = api.Concurrency{4, 4} }, "stages[2].load.concurrency", "a step twice"},
		{"duration and count", func(l *api.LoadSpec, _ *api.Stage) { l.Count = 10 }, "stages[2].load.count", "not both"},
		{"a bad duration", func(l *api.LoadSpec, _ *api.Stage) { l.Duration = "2h" }, "stages[2].load.duration", "at most 1h0m0s"},
		{"requests and a file", func(l *api.LoadSpec, _ *api.Stage) { l.RequestsFile = "prompts/a.jsonl" }, "stages[2].load.requestsFile", "not both"},
		{"a file out of its volume", func(l *api.LoadSpec, _ *api.Stage) { l.Requests, l.RequestsFile = nil, "prompts/../../etc/passwd" }, "stages[2].load.requestsFile", "no '..'"},
		{"no requests for openai", func(l *api.LoadSpec, _ *api.Stage) { l.Requests = nil }, "stages[2].load.requests", "needs requests"},
		{"an openai request not an object", func(l *api.LoadSpec, _ *api.Stage) { l.Requests[0] = json.RawMessage(`"hi"`) }, "stages[2].load.requests[0]", "JSON object"},
		{"load on a smoke stage", func(l *api.LoadSpec, s *api.Stage) { s.Type = api.StageSmoke }, "stages[2].load", "only a load stage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadCard()
			st := &c.Stages[2]
			l := *st.Load
			l.Requests = append([]json.RawMessage(nil), l.Requests...)
			st.Load = &l
			tc.change(&l, st)
			errs := CheckCard(&c)
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

// The defaults of a load spec: one step at concurrency 1 of a minute, at
// the protocol's path; a count measures no time.
func TestLoadSpecDefaults(t *testing.T) {
	l := api.LoadSpec{Port: "8000", Protocol: api.ProtocolHTTP, Concurrency: api.Concurrency{16}}
	if !cmp.Equal(LoadSteps(&l), []int{16}) || LoadStepDuration(&l) != time.Minute || LoadPath(&l) != "/" {
		t.Errorf("%+v: steps %v, duration %v, path %q", l, LoadSteps(&l), LoadStepDuration(&l), LoadPath(&l))
	}
	l = api.LoadSpec{Port: "http", Protocol: api.ProtocolOpenAI, Count: 500, Warmup: "5s"}
	if !cmp.Equal(LoadSteps(&l), []int{1}) || LoadStepDuration(&l) != 0 || LoadWarmup(&l) != 5*time.Second || LoadPath(&l) != "/v1/completions" {
		t.Errorf("%+v: steps %v, duration %v, warm-up %v, path %q", l, LoadSteps(&l), LoadStepDuration(&l), LoadWarmup(&l), LoadPath(&l))
	}
}
