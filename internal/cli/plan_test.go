package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/spec"
)

// issueBriefYAML is issue 18's check as a file: 8B parameters, 32
// layers, 8 KV heads of dimension 128, bf16, context 8192, concurrency 16.
const issueBriefYAML = `kind: WorkloadBrief
workload: inference
model: {parameters: 8.03e9, layers: 32, kvHeads: 8, headDim: 128, hidden: 4096}
precision: bf16
contextLength: 8192
concurrency: 16
targets: {p95LatencyMs: 200}
owner: ml-platform
`

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanOnH100s: on the live server's simulated 4 × H100-80GB, the
// issue's brief gets a fraction or one GPU, by file or by flags; the table
// shows the formulas; --spec is a spec 'submit -f' accepts; --card a card
// that validates.
func TestPlanOnH100s(t *testing.T) {
	s := startLiveServer(t)
	brief := writeFile(t, "brief.yaml", issueBriefYAML)

	r := s.run(t, s.admin, "plan", "-f", brief, "-o", "json")
	var p api.Plan
	mustJSON(t, r.stdout, &p)
	best := plan.Best(&p)
	if r.code != 0 || best == nil || (best.Scope != api.ScopeFraction && best.Scope != api.ScopeGPU) {
		t.Fatalf("exit %d, best %+v, verdict %q: want a fraction or one GPU (%s)", r.code, best, p.Verdict, r.stderr)
	}
	if p.Memory.KVCacheBytes != 2*32*8*128*2*8192*16 || p.Memory.WeightsBytes != 16_060_000_000 {
		t.Errorf("memory %+v", p.Memory)
	}

	r = s.run(t, s.admin, "plan", "--model", "llama-3-8b", "--context", "8192", "--concurrency", "16")
	for _, want := range []string{"kv cache", "2 × 32 layers × 8 KV heads × 128 head dim × 2 bytes × 8192 tokens × 16 sequences", "SCOPE", "verdict: fits", "needs: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}

	r = s.run(t, s.admin, "plan", "-f", brief, "--spec")
	w, err := decodeWorkloadFile([]byte(r.stdout))
	if r.code != 0 || err != nil {
		t.Fatalf("--spec: exit %d %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if fe := spec.CheckWorkload(w); len(fe) > 0 || w.Resources.GPUs.String() != best.GPUs || w.Kind != api.KindService {
		t.Errorf("--spec %+v: %v; want %s GPUs as a service", w, fe, best.GPUs)
	}
	spec := writeFile(t, "spec.yaml", r.stdout)
	if r := s.run(t, s.admin, "submit", "-f", spec, "--team", "default"); r.code != 0 {
		if r2 := s.run(t, s.admin, "submit", "-f", spec); r2.code != 0 {
			t.Errorf("submit -f of --spec: exit %d %s / %s", r2.code, r.stderr, r2.stderr)
		}
	}

	r = s.run(t, s.admin, "plan", "-f", brief, "--card")
	var card api.AcceptanceCard
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &card); err != nil || r.code != 0 {
		t.Fatalf("--card: exit %d %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if fe := accept.CheckCard(&card); len(fe) > 0 || len(card.Stages) != 5 || !strings.Contains(strings.Join(card.Stages[2].Criteria, ";"), "p95_latency_ms <= 200") {
		t.Errorf("--card %+v: %v", card, fe)
	}
}

// TestPlanOnA10s: on 4 × A10-24GB the issue's brief needs more than one
// GPU.
func TestPlanOnA10s(t *testing.T) {
	s := startLiveServerWith(t, func(c *config.Config) { c.FakeGPUs = "4xA10-24GB" })
	r := s.run(t, s.admin, "plan", "-f", writeFile(t, "brief.yaml", issueBriefYAML))
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: needs more than one GPU") {
		t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPlanBadBriefs: a bad brief is a usage error naming the field and,
// in a file, its line; nothing is sent.
func TestPlanBadBriefs(t *testing.T) {
	tests := []struct {
		name, file string
		args       []string
		want       string
	}{
		{"unknown precision, with its line", "workload: inference\nmodel: {name: llama-3-8b}\nprecision: fp12\ncontextLength: 8\n", nil, "brief.yaml:3: precision: \"fp12\" is not a precision"},
		{"absurd size, with its line", "workload: inference\nmodel:\n  name: x\n  parameters: 2e13\ncontextLength: 8\n", nil, "brief.yaml:4: model.parameters: must be from 1 to 10000000000000"},
		{"unknown kind", "kind: Brief\nworkload: inference\nmodel: {name: llama-3-8b}\ncontextLength: 8\n", nil, "brief.yaml:1: kind"},
		{"unknown field", "workload: inference\ncolour: red\n", nil, `unknown field "colour"`},
		{"a bad flag value", "", []string{"--model", "llama-3-8b", "--context", "8", "--workload", "serving"}, "workload: \"serving\" is not a workload kind"},
		{"both outputs", "", []string{"--model", "llama-3-8b", "--spec", "--card"}, "not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"plan"}, tc.args...)
			if tc.file != "" {
				args = append(args, "-f", writeFile(t, "brief.yaml", tc.file))
			}
			r := runCLI(t, invocation{args: args, vars: map[string]string{"GPUFLEET_ADDR": "127.0.0.1:1"}})
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

// TestPlanSpecCarriesTheBrief: --spec's workload keeps the brief's
// residency and owner, and asks for the candidate's GPUs, model, pool and
// replicas.
func TestPlanSpecCarriesTheBrief(t *testing.T) {
	p := &api.Plan{Brief: api.WorkloadBrief{Workload: api.BriefTraining, Model: api.ModelSpec{Name: "llama-3-70b"}, Residency: []string{"eu-west"}, Owner: "ml-platform"}}
	c := &api.PlanCandidate{Scope: api.ScopeNodes, GPUs: "8", Replicas: 2, GPUModel: "H100", Pool: "eu"}
	w := planSpec(p, c)
	if fe := spec.CheckWorkload(w); len(fe) > 0 {
		t.Fatalf("spec %+v: %v", w, fe)
	}
	if w.Name != "llama-3-70b-training" || w.Kind != api.KindJob || w.Resources.GPUs != 8000 || w.Replicas != 2 ||
		w.NodeSelector[poolLabel] != "eu" || len(w.Residency) != 1 || w.Residency[0] != "eu-west" || w.Labels["owner"] != "ml-platform" {
		t.Errorf("spec %+v", w)
	}
}
