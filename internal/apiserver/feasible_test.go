package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestSubmitRefusesWhatCanNeverRun: on a fleet of 80 GB H100s and A10s, a
// request no node could hold even empty is a 400 that names the field and
// the biggest that fits, and "replicas": 0 is a 400 (issue 13).
func TestSubmitRefusesWhatCanNeverRun(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	ctx := context.Background()
	for _, n := range []struct {
		name, model string
		mib         int64
	}{{"h", "NVIDIA H100 80GB HBM3", 81920}, {"a", "NVIDIA A10", 24576}} {
		node := core.Node{Name: core.NodeName(n.name), Schedulable: true}
		for i := range 4 {
			node.GPUs = append(node.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", n.name, i), Model: n.model, MemoryMiB: n.mib})
		}
		if err := f.st.PutNode(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, body string
		field      string // "" for accepted
		problem    string // a substring of the problem
	}{
		{"a whole node", `"resources":{"gpus":4}`, "", ""},
		{"a gang across both nodes", `"resources":{"gpus":4},"replicas":2`, "", ""},
		{"200 GiB on 80 GB GPUs", `"resources":{"gpuMemoryMiB":204800}`, "resources.gpuMemoryMiB", "the biggest has 81920 MiB"},
		{"a model the fleet lacks", `"resources":{"gpus":1,"gpuModels":["B200"]}`, "resources.gpuModels", "no node has a GPU of model B200"},
		{"8 GPUs on 4-GPU nodes", `"resources":{"gpus":8}`, "resources.gpus", "the biggest node has 4"},
		{"more whole A10s than there are", `"resources":{"gpuMemoryMiB":24576,"gpuModels":["A10"]},"replicas":5`, "replicas", "at most 4"},
		{"no replicas", `"resources":{"gpus":1},"replicas":0`, "replicas", "must be from 1"},
		// encoding/json matches keys case-insensitively and through
		// escapes: these are "replicas" too.
		{"no Replicas", `"resources":{"gpus":1},"Replicas":0`, "replicas", "must be from 1"},
		{"no replicas, escaped", `"resources":{"gpus":1},"\u0072eplicas":0`, "replicas", "must be from 1"},
		{"no replicas, long s", `"resources":{"gpus":1},"replicaſ":0`, "replicas", "must be from 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.do("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],`+tt.body+`}`)
			if tt.field == "" {
				if a.status != http.StatusCreated {
					t.Fatalf("answer %d %s, want 201", a.status, a.body)
				}
				return
			}
			if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"`+tt.field+`"`) || !strings.Contains(a.body, tt.problem) {
				t.Errorf("answer %d %s, want 400 naming %s with %q", a.status, a.body, tt.field, tt.problem)
			}
		})
	}
}
