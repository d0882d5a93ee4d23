package api

import (
	"strings"
	"testing"
)

// TestBriefValidate: the brief is valid; a brief with several
// problems gets all of them, each naming its field.
func TestBriefValidate(t *testing.T) {
	var b WorkloadBrief
	if err := DecodeStrict([]byte(`{"kind":"WorkloadBrief","workload":"inference","model":{"name":"llama-3-8b"},"precision":"bf16",
		"contextLength":8192,"concurrency":16,"targets":{"p95LatencyMs":200},"residency":["eu-west"],"owner":"ml-platform"}`), &b); err != nil {
		t.Fatal(err)
	}
	if fe := b.Validate(); len(fe) != 0 {
		t.Errorf("the issue's brief: %v", fe)
	}
	bad := WorkloadBrief{Kind: "Card", Workload: "serve", Precision: "fp12", ContextLength: -1,
		Model: ModelSpec{Parameters: 10_000_000_000_001, KVHeads: -8}, Residency: []string{"eu west"}, ExpectedDuration: "-1h", Owner: "ML Platform"}
	got := map[string]string{}
	for _, f := range bad.Validate() {
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
