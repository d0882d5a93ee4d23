package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/usage"
)

// TestWorkloadUsageHistory: GET /workloads/{id}/usage answers the
// workload's samples from the tracker, within ?window=, to whoever may read
// the workload; others get the workload's 404, and a bad window a 400
// naming it.
func TestWorkloadUsageHistory(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	tr := usage.NewTracker(10*time.Second, time.Hour)
	srv := httptest.NewServer(New(Options{Store: f.st, Logs: noLogs{}, Usage: tr, Now: f.clock, OpenAPI: api.OpenAPI, DefaultTeam: "research"}))
	t.Cleanup(srv.Close)
	f.srv = srv
	var w api.Workload
	f.must("member", "POST", "/api/v1/workloads", `{"team":"research","command":["sleep","60"],"resources":{"gpus":1}}`, http.StatusCreated, &w)
	now := f.clock()
	for i := range 3 {
		at := now.Add(time.Duration(i-2) * 10 * time.Minute)
		tr.Record(core.Sample{At: at, Workloads: map[core.WorkloadID]core.WorkloadSample{
			core.WorkloadID(w.ID): {ID: core.WorkloadID(w.ID), Attempt: 1, Utilization: 0.25 * float64(i+1), MemoryUsedMiB: 1024 * int64(i+1)},
			"other":               {ID: "other", Attempt: 1, Utilization: 1},
		}}, core.UsagePoint{Time: at}, nil)
	}
	var got api.WorkloadUsageHistory
	f.must("viewer", "GET", "/api/v1/workloads/"+w.ID+"/usage?window=15m", "", http.StatusOK, &got)
	want := api.WorkloadUsageHistory{IntervalSeconds: 10, Points: []api.WorkloadUsagePoint{
		{Time: now.Add(-10 * time.Minute).UTC(), Attempt: 1, GPUUtilization: 0.5, GPUMemoryUsedMiB: 2048},
		{Time: now.UTC(), Attempt: 1, GPUUtilization: 0.75, GPUMemoryUsedMiB: 3072},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the last 15 minutes (-want +got):\n%s", diff)
	}
	f.must("member", "GET", "/api/v1/workloads/"+w.ID+"/usage", "", http.StatusOK, &got)
	if len(got.Points) != 3 {
		t.Errorf("the default window (1h) holds %d points, want 3", len(got.Points))
	}
	// The client says the same.
	c := api.NewClient(strings.TrimPrefix(srv.URL, "http://"), f.token["admin"])
	h, err := c.WorkloadUsage(context.Background(), w.ID, 15*time.Minute)
	if err != nil || len(h.Points) != 2 {
		t.Errorf("client: %+v, %v; want 2 points", h, err)
	}
	if a := f.do("bob", "GET", "/api/v1/workloads/"+w.ID+"/usage", ""); a.status != http.StatusNotFound {
		t.Errorf("bob (vision) reads research's workload usage: %d %s, want 404", a.status, a.body)
	}
	if a := f.do("viewer", "GET", "/api/v1/workloads/wl-nosuch/usage", ""); a.status != http.StatusNotFound {
		t.Errorf("no such workload: %d %s, want 404", a.status, a.body)
	}
	for _, win := range []string{"banana", "48h", "0"} {
		if a := f.do("viewer", "GET", "/api/v1/workloads/"+w.ID+"/usage?window="+win, ""); a.status != http.StatusBadRequest || !strings.Contains(a.body, `"field":"window"`) {
			t.Errorf("window=%s: %d %s, want 400 naming window", win, a.status, a.body)
		}
	}
	// A workload never sampled: no points, and an empty list, not null.
	var w2 api.Workload
	f.must("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &w2)
	if a := f.do("member", "GET", "/api/v1/workloads/"+w2.ID+"/usage", ""); a.status != http.StatusOK || !strings.Contains(a.body, `"points":[]`) {
		t.Errorf("a workload never sampled: %d %s, want 200 with no points", a.status, a.body)
	}
}
