package accept

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

const goodCard = `kind: AcceptanceCard
name: llm-serving-h100
team: research
brief: {workload: inference, owner: ml-platform, targets: {p95LatencyMs: 200}}
target: {pool: local, gpuModel: H100}
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: "0.25"}, command: [sh, -c, "python3 smoke.py"]}
    criteria: ["exit_code == 0"]
  - name: load
    type: load
    count: 2
    workload: {resources: {gpus: 1}, command: [python3, load.py]}
    criteria: [p95_latency_ms <= 200, "memory_headroom_ratio >= 0.1"]
  - name: failure
    type: failure
    disrupt: requeue          # requeue | stop | drain
    workload: {resources: {gpus: "1"}, command: [python3, serve.py]}
    criteria: ["recovery_seconds <= 60"]
  - name: review
    type: review
`

func TestParseCardReadsEveryStageType(t *testing.T) {
	c, err := ParseCard([]byte(goodCard))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(c.Stages), 4; got != want {
		t.Fatalf("stages: got %d, want %d", got, want)
	}
	s := c.Stages[1]
	if s.Workload == nil || s.Workload.Resources.GPUs != 1000 || StageWorkloads(s) != 2 {
		t.Errorf("load stage: got %+v", s)
	}
	if diff := cmp.Diff([]string{"p95_latency_ms <= 200", "memory_headroom_ratio >= 0.1"}, s.Criteria); diff != "" {
		t.Errorf("criteria (-want +got):\n%s", diff)
	}
	if c.Stages[2].Disrupt != api.DisruptRequeue || StageDisruptAfter(c.Stages[2]).Seconds() != DefaultDisruptAfterSecs {
		t.Errorf("failure stage: got %+v", c.Stages[2])
	}
	if tg := TargetsOf(c.Brief); tg.P95LatencyMs != 200 {
		t.Errorf("targets of the brief: got %+v", tg)
	}
	if c.Target != (api.CardTarget{Pool: "local", GPUModel: "H100"}) {
		t.Errorf("target: got %+v", c.Target)
	}
}

func TestParseCardReadsJSON(t *testing.T) {
	js := `{"kind":"AcceptanceCard","name":"j","stages":[
  {"name":"smoke","type":"smoke","workload":{"resources":{"gpus":0.5},"command":["true"]}}
]}`
	c, err := ParseCard([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if c.Stages[0].Workload.Resources.GPUs != 500 {
		t.Errorf("gpus: got %v", c.Stages[0].Workload.Resources.GPUs)
	}
}

// problems parses a card that must fail and returns its problems.
func problems(t *testing.T, card string) []LineError {
	t.Helper()
	c, err := ParseCard([]byte(card))
	if err == nil {
		t.Fatalf("parsed %+v, want an error", c)
	}
	var ce *CardError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %v, want a *CardError", err, err)
	}
	return ce.Problems
}

func TestParseCardNamesFieldAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, card string
		want       LineError // one of the problems; Problem is a substring
	}{
		{"a criterion that does not parse", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: [x]}
    criteria:
      - exit_code == 0
      - exit_code = 0
`, LineError{"stages[0].criteria[1]", 9, "does not parse"}},
		{"an unknown stage type", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: [x]}
  - name: soak
    type: soak
    workload: {resources: {gpus: 1}, command: [x]}
`, LineError{"stages[1].type", 8, `unknown stage type "soak"`}},
		{"an unknown field", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    timeout: 5
    workload: {resources: {gpus: 1}, command: [x]}
`, LineError{"stages[0].timeout", 6, "unknown field"}},
		{"an unknown field inside the workload", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload:
      resources: {gpus: 1, tpus: 2}
      command: [x]
`, LineError{"stages[0].workload.resources.tpus", 7, "unknown field"}},
		{"a failure stage without disrupt", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: [x]}
  - name: chaos
    type: failure
    workload: {resources: {gpus: 1}, command: [x]}
`, LineError{"stages[1].disrupt", 7, "needs a disruption"}},
		{"a review stage with a workload", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: [x]}
  - name: review
    type: review
    workload: {resources: {gpus: 1}, command: [x]}
`, LineError{"stages[1].workload", 9, "runs nothing"}},
		{"duplicate stage names", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: [x]}
  - name: smoke
    type: load
    workload: {resources: {gpus: 1}, command: [x]}
`, LineError{"stages[1].name", 7, "also the name of stages[0]"}},
		{"a wrong JSON type", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: x}
`, LineError{"stages[0].workload.command", 6, "must be an array of strings"}},
		{"a quantity that does not parse", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload:
      resources: {gpus: lots}
      command: [x]
`, LineError{"stages[0].workload.resources.gpus", 7, "lots"}},
		{"a workload spec problem", `kind: AcceptanceCard
name: c
stages:
  - name: smoke
    type: smoke
    workload:
      resources: {gpus: 1}
      command: [x]
      env: {GPUFLEET_METRICS_FILE: /tmp/x}
`, LineError{"stages[0].workload.env.GPUFLEET_METRICS_FILE", 9, "set by the platform"}},
		{"a brief with an unknown precision", `kind: AcceptanceCard
name: c
brief:
  workload: inference
  precision: fp7
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: [x]}
`, LineError{"brief.precision", 5, `"fp7" is not a precision`}},
		{"a brief with an unknown field", `kind: AcceptanceCard
name: c
brief: {workload: inference, targets: {p99LatencyMs: 5}}
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: 1}, command: [x]}
`, LineError{"brief.targets.p99LatencyMs", 3, "unknown field"}},
		{"a key given twice", `kind: AcceptanceCard
name: c
name: d
stages: []
`, LineError{"name", 3, "given twice"}},
		{"malformed YAML", `kind: AcceptanceCard
name: c
stages: [
`, LineError{"", 3, "malformed"}},
		{"malformed JSON", `{"kind": "AcceptanceCard",
 "name": "c",,
}`, LineError{"", 2, "malformed"}},
		{"a missing kind", `name: c
stages: []
`, LineError{"kind", 1, "missing"}},
		{"another kind", `kind: WorkloadBrief
workload: inference
`, LineError{"kind", 1, "must be AcceptanceCard"}},
		{"an alias", `kind: AcceptanceCard
name: &n c
team: *n
stages: []
`, LineError{"team", 3, "aliases"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, tc.card)
			for _, p := range got {
				if p.Field == tc.want.Field && p.Line == tc.want.Line && strings.Contains(p.Problem, tc.want.Problem) {
					return
				}
			}
			t.Errorf("got %v, want a problem %v", got, tc.want)
		})
	}
}

func TestParseCardReportsEveryProblemOnce(t *testing.T) {
	got := problems(t, `kind: AcceptanceCard
name: c
stages:
  - name: a
    type: smok
    workload: {resources: {gpus: nope}, command: [x]}
    criteria: [5, "x >"]
`)
	var fields []string
	for _, p := range got {
		fields = append(fields, p.Field)
	}
	want := []string{"stages[0].type", "stages[0].workload.resources.gpus", "stages[0].criteria[0]", "stages[0].criteria[1]"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s\n%v", diff, got)
	}
}

func TestCardErrorAsFieldErrors(t *testing.T) {
	e := &CardError{[]LineError{{Field: "stages[0].type", Line: 5, Problem: "unknown"}, {Problem: "empty"}}}
	want := api.FieldErrors{{Field: "stages[0].type", Problem: "line 5: unknown"}, {Field: "card", Problem: "empty"}}
	if diff := cmp.Diff(want, e.FieldErrors()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got, want := e.Error(), "acceptance card: line 5: stages[0].type: unknown; empty"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseCardRefusesAHugeFile(t *testing.T) {
	b := []byte("kind: AcceptanceCard\nname: " + strings.Repeat("a", MaxCardBytes))
	if _, err := ParseCard(b); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("got %v, want a size error", err)
	}
}
