package sim

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

func TestCheckReplayPolicy(t *testing.T) {
	for _, p := range []string{ReplayGPUFleet, ReplayReservation} {
		if err := CheckReplayPolicy(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := CheckReplayPolicy("fgd"); err == nil || !strings.Contains(err.Error(), `"fgd"`) || !strings.Contains(err.Error(), ReplayReservation) {
		t.Errorf("fgd: %v, want an error naming it and the policies", err)
	}
}

func TestGPUNodes(t *testing.T) {
	cpu := core.Node{Name: "cpu"}
	nodes := []core.Node{node("a", 2), cpu, node("b", 1), node("c", 4)}
	names := func(ns []core.Node) (out []core.NodeName) {
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	if diff := cmp.Diff([]core.NodeName{"a", "cpu", "b", "c"}, names(GPUNodes(nodes, 0))); diff != "" {
		t.Errorf("max 0 keeps every node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]core.NodeName{"a", "b"}, names(GPUNodes(nodes, 2))); diff != "" {
		t.Errorf("max 2 keeps the first two GPU nodes (-want +got):\n%s", diff)
	}
}

func TestServerTrace(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	limit, none := int64(16000), int64(-1)
	nodes := []api.Node{{Name: "gpu1", Pool: "a", Region: "eu", Labels: map[string]string{"k": "v"}, CPU: 64000, MemoryMiB: 512000,
		GPUs: []api.GPU{{Index: 0, UUID: "GPU-0", Model: "H100", MemoryMiB: 81920, Domain: 1}, {Index: 1, UUID: "GPU-1", Model: "H100", MemoryMiB: 81920, Simulated: true}}}}
	teams := []api.Team{{Name: "research", GuaranteedMilliGPU: 8000, LimitMilliGPU: &limit, Weight: 2}, {Name: "vision"}, {Name: "speech", LimitMilliGPU: &none, Weight: 3}}
	ws := []api.Workload{
		{ID: "wl-2", Name: "running", Team: "vision", CreatedAt: t0.Add(time.Minute), Resources: api.Resources{GPUs: 2000}, Replicas: 2,
			Status: api.WorkloadStatus{Phase: api.PhaseRunning, StartedAt: at(50 * time.Minute)}},
		{ID: "wl-1", Name: "done", Team: "research", Priority: "training", CreatedAt: t0, Resources: api.Resources{GPUs: 250, CPU: 2000, MemoryMiB: 4096},
			Status: api.WorkloadStatus{Phase: api.PhaseSucceeded, StartedAt: at(2 * time.Minute), FinishedAt: at(5 * time.Minute)}},
		{ID: "wl-3", Team: "vision", CreatedAt: t0.Add(2 * time.Minute), Resources: api.Resources{GPUMemoryMiB: 20480, GPUModels: []string{"H100"}},
			NodeSelector: map[string]string{"k": "v"}, Status: api.WorkloadStatus{Phase: api.PhasePending}},
		{ID: "wl-4", Name: "capped", Team: "research", CreatedAt: t0.Add(3 * time.Minute), Resources: api.Resources{GPUs: 1000}, MaxRuntimeSeconds: 3600,
			Status: api.WorkloadStatus{Phase: api.PhasePending}},
	}
	got := ServerTrace("src", now, nodes, teams, ws)
	want := trace.Trace{
		Source: "src",
		Nodes: []core.Node{{Name: "gpu1", Pool: "a", Region: "eu", Labels: map[string]string{"k": "v"}, MilliCPU: 64000, MemoryMiB: 512000, Schedulable: true,
			GPUs: []core.GPU{{Index: 0, UUID: "GPU-0", Model: "H100", MemoryMiB: 81920, Domain: 1}, {Index: 1, UUID: "GPU-1", Model: "H100", MemoryMiB: 81920, Simulated: true}}}},
		Teams: []trace.Team{{Name: "research", Guaranteed: 8000, Limit: 16000, Weight: 2}, {Name: "vision", Limit: core.Unlimited, Weight: 1},
			{Name: "speech", Limit: core.Unlimited, Weight: 3}},
		Tasks: []trace.Task{
			// Running: the time it has run by now.
			{Name: "running", Team: "vision", Submitted: time.Minute, Runtime: 10 * time.Minute, Request: core.Request{MilliGPU: 2000, Replicas: 2}},
			{Name: "done", Team: "research", Priority: "training", Submitted: 0, Runtime: 3 * time.Minute,
				Request: core.Request{MilliGPU: 250, MilliCPU: 2000, MemoryMiB: 4096}},
			// No name: the ID; never started, no max runtime: unknown.
			{Name: "wl-3", Team: "vision", Submitted: 2 * time.Minute, Runtime: trace.UnknownRuntime,
				Request: core.Request{GPUMemoryMiB: 20480, GPUModels: []string{"H100"}, NodeSelector: map[string]string{"k": "v"}}},
			{Name: "capped", Team: "research", Submitted: 3 * time.Minute, Runtime: time.Hour, Request: core.Request{MilliGPU: 1000}},
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("ServerTrace (-want +got):\n%s", diff)
	}
}

// TestReplayPolicies replays one trace per policy: the results come in the
// order asked, each equal to a replay of its own, and the progress calls
// never overlap.
func TestReplayPolicies(t *testing.T) {
	cfg := ReplayConfig{Nodes: []core.Node{node("n1", 1)}}
	for i := range 40 {
		cfg.Tasks = append(cfg.Tasks, task(string(rune('a'+i%26))+string(rune('0'+i/26)), 250, float64(i), 30))
	}
	var inside, overlaps, calls atomic.Int32
	cfg.Progress = func(ReplayProgress) {
		calls.Add(1)
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(100 * time.Microsecond) // holds the call, so that one made meanwhile overlaps it
		inside.Add(-1)
	}
	policies := []string{ReplayReservation, ReplayGPUFleet}
	got, err := ReplayPolicies(context.Background(), cfg, policies)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Policy != ReplayReservation || got[1].Policy != ReplayGPUFleet {
		t.Fatalf("results %v, want one per policy in the order asked", got)
	}
	for i, p := range policies {
		c := cfg
		c.Policy, c.Progress = p, nil
		want := replay(t, c)
		if diff := cmp.Diff(figuresOf(want), figuresOf(got[i])); diff != "" {
			t.Errorf("%s differs from its own replay (-want +got):\n%s", p, diff)
		}
	}
	if calls.Load() == 0 || overlaps.Load() != 0 {
		t.Errorf("%d progress calls, %d overlapping; want some and none", calls.Load(), overlaps.Load())
	}

	_, err = ReplayPolicies(context.Background(), ReplayConfig{Nodes: []core.Node{{Name: "cpu"}}}, []string{ReplayGPUFleet})
	if err == nil || !strings.HasPrefix(err.Error(), "replay "+ReplayGPUFleet+": ") {
		t.Errorf("no GPUs: %v, want an error naming the policy", err)
	}
}

func TestCheckGuarantees(t *testing.T) {
	for _, ok := range []struct {
		teams int
		g     []float64
	}{{0, nil}, {3, nil}, {3, []float64{50, 30, 20}}, {2, []float64{0, 0}}} {
		if err := CheckGuarantees(ok.teams, ok.g); err != nil {
			t.Errorf("%d teams, %v: %v", ok.teams, ok.g, err)
		}
	}
	for _, bad := range []struct {
		teams int
		g     []float64
		want  string
	}{
		{0, []float64{100}, "need a number of teams"},
		{3, []float64{50, 50}, "2 values for 3 teams"},
		{2, []float64{-5, 50}, "-5% is negative"},
		{2, []float64{60, 50}, "add up to 110%, more than 100%"},
	} {
		if err := CheckGuarantees(bad.teams, bad.g); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%d teams, %v: %v, want an error saying %q", bad.teams, bad.g, err, bad.want)
		}
	}
}
