package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// node is a node with gpus 80 GiB H100s.
func node(name string, gpus int) core.Node {
	n := core.Node{Name: core.NodeName(name), Schedulable: true}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: "H100", MemoryMiB: 81920})
	}
	return n
}

// task asks for milli-GPU, submitted at sec seconds, running for run
// seconds.
func task(name string, milli int64, sec, run float64) trace.Task {
	return trace.Task{Name: name, Submitted: time.Duration(sec * float64(time.Second)), Runtime: time.Duration(run * float64(time.Second)),
		Request: core.Request{MilliGPU: milli}}
}

func replay(t *testing.T, cfg ReplayConfig) ReplayResult {
	t.Helper()
	res, err := Replay(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// figures are the parts of a result a test checks by hand.
type figures struct {
	Submitted, Completed, NeverStarted int
	Queueing                           Delays
	MeanAllocated, MeanRequested       float64
	Makespan                           float64
	Preemptions                        int
}

func figuresOf(r ReplayResult) figures {
	return figures{r.Submitted, r.Completed, r.NeverStarted, r.Queueing, r.MeanAllocated, r.MeanRequested, r.Makespan, r.Preemptions}
}

var approx = cmpopts.EquateApprox(0, 1e-9)

func TestReplayQueuesOnOneGPU(t *testing.T) {
	// One GPU, three one-GPU tasks: the first runs 0-100, the second waits
	// from 10 to 100 and runs to 150, the third waits from 20 to 150.
	res := replay(t, ReplayConfig{
		Nodes: []core.Node{node("n1", 1)},
		Tasks: []trace.Task{task("a", 1000, 0, 100), task("b", 1000, 10, 50), task("c", 1000, 20, 30)},
	})
	want := figures{
		Submitted: 3, Completed: 3,
		Queueing:      Delays{P50: 90, P95: 130, P99: 130, Mean: 220.0 / 3, Max: 130},
		MeanAllocated: 1, MeanRequested: 1,
		Makespan: 180,
	}
	if diff := cmp.Diff(want, figuresOf(res), approx); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := len(res.Utilisation); got != 200 {
		t.Errorf("%d utilisation samples, want 200", got)
	}
	for _, s := range res.Utilisation {
		if s.Allocated < 1-1e-9 || s.Allocated > 1+1e-9 {
			t.Errorf("sample at %gs: allocated %g, want 1 (the GPU is never idle)", s.Start, s.Allocated)
			break
		}
	}
	if diff := cmp.Diff([]ReplayTeam{{Name: "default", Guaranteed: 1, Submitted: 3, Completed: 3, GPUHours: 0.05, MeanShare: 1,
		Queueing: res.Queueing}}, res.Teams, approx); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
}

func TestReplaySharingBeatsReservation(t *testing.T) {
	// Four quarter-GPU tasks on one GPU: gpufleet runs them together;
	// the reservation baseline gives each a whole GPU, one after another.
	cfg := ReplayConfig{Nodes: []core.Node{node("n1", 1)}}
	for i := range 4 {
		cfg.Tasks = append(cfg.Tasks, task(fmt.Sprintf("q%d", i), 250, 0, 100))
	}
	tests := []struct {
		policy string
		want   figures
	}{
		{ReplayGPUFleet, figures{Submitted: 4, Completed: 4, MeanAllocated: 1, MeanRequested: 1, Makespan: 100}},
		{ReplayReservation, figures{Submitted: 4, Completed: 4, MeanAllocated: 1, MeanRequested: 0.25, Makespan: 400,
			Queueing: Delays{P50: 100, P95: 300, P99: 300, Mean: 150, Max: 300}}},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			c := cfg
			c.Policy = tc.policy
			res := replay(t, c)
			if diff := cmp.Diff(tc.want, figuresOf(res), approx); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReplaySkipsWhatItCannotReplay(t *testing.T) {
	cpu := task("cpu", 0, 0, 10)
	cpu.Request.MilliCPU = 1000
	pending := task("never-ran", 1000, 0, 0)
	pending.Runtime = trace.UnknownRuntime
	res := replay(t, ReplayConfig{
		Nodes: []core.Node{node("n1", 1)},
		// Out of order on purpose: the replay sorts by submission time, and
		// the limit keeps the earliest.
		Tasks: []trace.Task{task("late", 1000, 50, 10), cpu, pending, task("too-big", 2000, 0, 10), task("early", 1000, 0, 10)},
		Limit: 2,
	})
	got := struct{ Submitted, NeverStarted, CPUOnly, NoRuntime, Limit int }{
		res.Submitted, res.NeverStarted, res.SkippedCPUOnly, res.SkippedNoRuntime, res.SkippedLimit}
	// too-big (two GPUs on a one-GPU node) never starts; late is past the
	// limit.
	want := struct{ Submitted, NeverStarted, CPUOnly, NoRuntime, Limit int }{2, 1, 1, 1, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if res.Completed != 1 || res.Makespan != 10 {
		t.Errorf("completed %d tasks with makespan %gs, want 1 (early) and 10s", res.Completed, res.Makespan)
	}
}

func TestReplayReclaimsAGuarantee(t *testing.T) {
	// Team a borrows team b's GPU; when b's task arrives at 400s it takes
	// its guarantee back at once by preempting one of a's tasks, which
	// starts again from the beginning when b's task ends at 500s.
	res := replay(t, ReplayConfig{
		Nodes:      []core.Node{node("n1", 2)},
		TraceTeams: []trace.Team{{Name: "a", Guaranteed: 1000, Limit: core.Unlimited, Weight: 1}, {Name: "b", Guaranteed: 1000, Limit: core.Unlimited, Weight: 1}},
		Tasks: []trace.Task{
			{Name: "a1", Team: "a", Runtime: 1000 * time.Second, Request: core.Request{MilliGPU: 1000}},
			{Name: "a2", Team: "a", Runtime: 1000 * time.Second, Request: core.Request{MilliGPU: 1000}},
			{Name: "b1", Team: "b", Submitted: 400 * time.Second, Runtime: 100 * time.Second, Request: core.Request{MilliGPU: 1000}},
		},
	})
	want := figures{Submitted: 3, Completed: 3, Preemptions: 1, Makespan: 1500,
		// a: 1000 + 400 + 1000 GPU-seconds; b: 100; over 1500 s of 2 GPUs.
		MeanAllocated: 2500.0 / 3000, MeanRequested: 2500.0 / 3000}
	if diff := cmp.Diff(want, figuresOf(res), approx); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	wantTeams := []ReplayTeam{
		{Name: "a", Guaranteed: 0.5, Submitted: 2, Completed: 2, GPUHours: 2400.0 / 3600, MeanShare: 2400.0 / 3000, Preemptions: 1},
		{Name: "b", Guaranteed: 0.5, Submitted: 1, Completed: 1, GPUHours: 100.0 / 3600, MeanShare: 100.0 / 3000},
	}
	if diff := cmp.Diff(wantTeams, res.Teams, approx); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
}

func TestReplayTeamsAreDrawnWithTheSeed(t *testing.T) {
	cfg := ReplayConfig{Nodes: []core.Node{node("n1", 4), node("n2", 4)}, Teams: 3, Guarantees: []float64{50, 30, 20}, Seed: 7}
	for i := range 60 {
		cfg.Tasks = append(cfg.Tasks, task(fmt.Sprintf("t%d", i), []int64{250, 500, 1000, 2000}[i%4], float64(i*30), float64(100+i%7*50)))
	}
	first := replay(t, cfg)
	again := replay(t, cfg)
	if diff := cmp.Diff(first, again, cmpopts.IgnoreFields(ReplayResult{}, "Seconds")); diff != "" {
		t.Errorf("the same seed gives another replay (-first +again):\n%s", diff)
	}
	var guaranteed []float64
	submitted := 0
	for _, tm := range first.Teams {
		guaranteed = append(guaranteed, tm.Guaranteed)
		submitted += tm.Submitted
	}
	if diff := cmp.Diff([]float64{0.5, 0.3, 0.2}, guaranteed, approx); diff != "" {
		t.Errorf("guarantees (-want +got):\n%s", diff)
	}
	if submitted != 60 {
		t.Errorf("the teams submitted %d tasks, want all 60", submitted)
	}

	perTeam := func(cfg ReplayConfig) []core.TeamName {
		_, teamOf, err := replayTeams(cfg, 8000, cfg.Tasks)
		if err != nil {
			t.Fatal(err)
		}
		return teamOf
	}
	other := cfg
	other.Seed = 8
	if a, b := perTeam(cfg), perTeam(other); cmp.Equal(a, b) {
		t.Errorf("seeds 7 and 8 assign the tasks to the same teams: %v", a)
	}
	if a, b := perTeam(cfg), perTeam(cfg); !cmp.Equal(a, b) {
		t.Errorf("seed 7 assigns the tasks differently on a second draw:\n%v\n%v", a, b)
	}
}

func TestReplayTeamsFromTheTrace(t *testing.T) {
	// Teams with a quota keep it; teams that tasks name without one, and
	// "default" for tasks with no team, share the rest equally.
	cfg := ReplayConfig{
		TraceTeams: []trace.Team{{Name: "vision", Guaranteed: 4000, Limit: 6000, Weight: 2}},
		Tasks: []trace.Task{
			{Name: "x", Team: "vision"}, {Name: "y", Team: "nlp"}, {Name: "z"},
		},
	}
	teams, teamOf, err := replayTeams(cfg, 10000, cfg.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Team{
		{Name: "default", Guaranteed: 3000, Limit: core.Unlimited, Weight: 1, CreatedAt: ReplayEpoch},
		{Name: "nlp", Guaranteed: 3000, Limit: core.Unlimited, Weight: 1, CreatedAt: ReplayEpoch},
		{Name: "vision", Guaranteed: 4000, Limit: 6000, Weight: 2, CreatedAt: ReplayEpoch},
	}
	if diff := cmp.Diff(want, teams); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]core.TeamName{"vision", "nlp", "default"}, teamOf); diff != "" {
		t.Errorf("team of each task (-want +got):\n%s", diff)
	}
}

func TestReplayRefusesBadConfigs(t *testing.T) {
	nodes := []core.Node{node("n1", 1)}
	tasks := []trace.Task{task("a", 1000, 0, 10)}
	prod := task("p", 1000, 0, 10)
	prod.Priority = "urgent"
	tests := []struct {
		name string
		cfg  ReplayConfig
	}{
		{"unknown policy", ReplayConfig{Nodes: nodes, Tasks: tasks, Policy: "fgd"}},
		{"no GPUs", ReplayConfig{Nodes: []core.Node{node("cpu", 0)}, Tasks: tasks}},
		{"guarantees without teams", ReplayConfig{Nodes: nodes, Tasks: tasks, Guarantees: []float64{100}}},
		{"guarantees for other teams", ReplayConfig{Nodes: nodes, Tasks: tasks, Teams: 2, Guarantees: []float64{100}}},
		{"guarantees above the capacity", ReplayConfig{Nodes: nodes, Tasks: tasks, Teams: 2, Guarantees: []float64{60, 50}}},
		{"unknown priority class", ReplayConfig{Nodes: nodes, Tasks: []trace.Task{prod}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Replay(context.Background(), tc.cfg); err == nil {
				t.Error("accepted")
			}
		})
	}
}
