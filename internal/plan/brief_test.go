package plan

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// TestBriefValidate: the brief is valid; a brief with several
// problems gets all of them, each naming its field.
func TestCheckBrief(t *testing.T) {
	var b api.WorkloadBrief
	if err := api.DecodeStrict([]byte(`{"kind":"WorkloadBrief","workload":"inference","model":{"name":"llama-3-8b"},"precision":"bf16",
		"contextLength":8192,"concurrency":16,"targets":{"p95LatencyMs":200},"residency":["eu-west"],"owner":"ml-platform"}`), &b); err != nil {
		t.Fatal(err)
	}
	if fe := CheckBrief(&b); len(fe) != 0 {
		t.Errorf("the issue's brief: %v", fe)
	}
	bad := api.WorkloadBrief{Kind: "Card", Workload: "serve", Precision: "fp12", ContextLength: -1,
		Model: api.ModelSpec{Parameters: 10_000_000_000_001, KVHeads: -8}, Residency: []string{"eu west"}, ExpectedDuration: "-1h", Owner: "ML Platform"}
	got := map[string]string{}
	for _, f := range CheckBrief(&bad) {
		got[f.Field] = f.Problem
	}
	for _, field := range []string{"kind", "workload", "precision", "contextLength", "model.parameters", "model.kvHeads", "residency[0]", "expectedDuration", "owner"} {
		if got[field] == "" {
			t.Errorf("no problem names %s (got %v)", field, got)
		}
	}
	if p := got["precision"]; !strings.Contains(p, "fp32, bf16, fp16, fp8, int8, int4") {
		t.Errorf("precision: %q does not list the precisions", p)
	}
}

// A brief carries the model's revision and a data boundary; a bad egress
// or dependency names its field.
func TestBriefDataBoundary(t *testing.T) {
	b := api.WorkloadBrief{Workload: api.BriefInference, Model: api.ModelSpec{Name: "llama-3-8b", Revision: "8cde5ca8380496c9a6cc7ef3a8b46a0372a1d920"}, ContextLength: 4096, OutputTokens: 256,
		DataBoundary: &api.DataBoundary{Egress: api.EgressDeny, Dependencies: []string{"10.0.0.0/8", "huggingface.co:443", "192.0.2.7"}}}
	if fe := CheckBrief(&b); len(fe) != 0 {
		t.Fatalf("a good brief: %v", fe)
	}
	b.Model.Revision, b.OutputTokens = "main branch", 8192
	b.DataBoundary = &api.DataBoundary{Egress: "sometimes", Dependencies: []string{"http://x"}}
	got := map[string]string{}
	for _, f := range CheckBrief(&b) {
		got[f.Field] = f.Problem
	}
	for _, field := range []string{"model.revision", "outputTokens", "dataBoundary.egress", "dataBoundary.dependencies[0]"} {
		if got[field] == "" {
			t.Errorf("no problem names %s (got %v)", field, got)
		}
	}
}
