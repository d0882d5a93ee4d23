package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// gpuUse answers every GPU with the same sample.
type gpuUse struct{}

func (gpuUse) Workload(core.WorkloadID, int) (core.WorkloadSample, time.Time, *time.Time, bool) {
	return core.WorkloadSample{}, time.Time{}, nil, false
}
func (gpuUse) GPU(n core.NodeName, i int) (core.GPUSample, bool) {
	return core.GPUSample{Node: n, Index: i, Utilization: 0.7, MemoryUsedMiB: 1000}, true
}
func (gpuUse) History(time.Duration, time.Time) []core.UsagePoint { return nil }
func (gpuUse) Interval() time.Duration                            { return time.Second }
func (gpuUse) WorkloadHistory(core.WorkloadID, time.Duration, time.Time) []core.WorkloadUsagePoint {
	return nil
}

// TestNodesHideOtherTeamsGPUUse: a GPU's sampled use is shown to admins and
// to callers who can see every workload on it; a GPU holding another
// team's workload shows its health only.
func TestNodesHideOtherTeamsGPUUse(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	ctx := context.Background()
	if err := f.st.PutNode(ctx, core.Node{Name: "n1", Schedulable: true, GPUs: []core.GPU{
		{Index: 0, UUID: "GPU-0", Model: "H100", MemoryMiB: 81920},
		{Index: 1, UUID: "GPU-1", Model: "H100", MemoryMiB: 81920},
		{Index: 2, UUID: "GPU-2", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	var mine, theirs api.Workload
	f.must("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &mine)
	f.must("bob", "POST", "/api/v1/workloads", `{"team":"vision","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &theirs)
	plan := core.Plan{Placements: []core.Placement{
		{Workload: core.WorkloadID(mine.ID), Assignments: []core.Assignment{{Node: "n1", GPUIndex: 0, GPUUUID: "GPU-0", MilliGPU: 1000, MemoryMiB: 81920}}},
		{Workload: core.WorkloadID(theirs.ID), Assignments: []core.Assignment{{Node: "n1", GPUIndex: 1, GPUUUID: "GPU-1", MilliGPU: 1000, MemoryMiB: 81920}}}}}
	if res, err := f.st.ApplyPlan(ctx, plan, f.clock()); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("place: %v %v", err, res)
	}
	srv := httptest.NewServer(New(Options{Store: f.st, Logs: noLogs{}, Usage: gpuUse{}, Now: f.clock, OpenAPI: api.OpenAPI, DefaultTeam: "research"}))
	defer srv.Close()
	f.srv = srv
	seen := func(who string) []bool {
		var nodes api.List[api.Node]
		f.must(who, "GET", "/api/v1/nodes", "", http.StatusOK, &nodes)
		var out []bool
		for _, g := range nodes.Items[0].GPUs {
			if !g.Healthy {
				t.Errorf("%s: GPU %d unhealthy", who, g.Index)
			}
			out = append(out, g.Utilization != nil && g.MemoryUsedMiB != nil)
		}
		return out
	}
	for who, want := range map[string][]bool{
		"admin":  {true, true, true},
		"member": {true, false, true}, // research: GPU 1 holds vision's workload
		"bob":    {false, true, true}, // vision
	} {
		if diff := cmp.Diff(want, seen(who)); diff != "" {
			t.Errorf("%s: GPUs whose use is shown (-want +got):\n%s", who, diff)
		}
	}
}
