package reclaim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

var t0 = time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)

func notebook(id string, team core.TeamName, class string) *core.Workload {
	w := &core.Workload{ID: core.WorkloadID(id)}
	w.Kind, w.Team, w.Priority = core.KindNotebook, team, class
	w.Request.MilliGPU = 1000
	w.Status.Phase, w.Status.Attempts = core.Running, 1
	w.Status.Placement = []core.Assignment{{Node: "n", GPUIndex: 0, MilliGPU: 1000, MemoryMiB: 81920}}
	return w
}

func fractional(id string, shareMiB int64) *core.Workload {
	w := notebook(id, "research", "development")
	w.Kind = core.KindJob
	w.Request.MilliGPU = 250
	w.Status.Placement = []core.Assignment{{Node: "n", GPUIndex: 1, MilliGPU: 250, MemoryMiB: shareMiB}}
	return w
}

func sample(at time.Time, ws ...core.WorkloadSample) core.Sample {
	s := core.Sample{At: at, Workloads: map[core.WorkloadID]core.WorkloadSample{}}
	for _, w := range ws {
		if w.Attempt == 0 {
			w.Attempt = 1
		}
		s.Workloads[w.ID] = w
	}
	return s
}

var defaultRules = Rules{
	Idle:   []IdleRule{{Kind: core.KindNotebook, Threshold: 0.05, Timeout: time.Hour, Warning: 10 * time.Minute}},
	Memory: MemoryRule{Enabled: true},
}

// step is one sample fed to Decide: its time, the utilisation and memory
// of workload "a", and the reasons of the actions expected.
type step struct {
	at   time.Duration
	util float64
	mem  int64
	want []string // "Warn IdleWarning", "Stop Idle", ...
}

func run(t *testing.T, w *core.Workload, rules Rules, steps []step) {
	t.Helper()
	st := State{}
	for i, s := range steps {
		var acts []Action
		now := t0.Add(s.at)
		ws := core.WorkloadSample{ID: w.ID, Utilization: s.util, MemoryUsedMiB: s.mem}
		if len(w.Status.Placement) > 0 {
			a := w.Status.Placement[0]
			ws.PerGPUMemoryMiB = map[core.GPURef]int64{{Node: a.Node, Index: a.GPUIndex}: s.mem}
		}
		st, acts = Decide(st, Input{Now: now, Sample: sample(now, ws), Running: []*core.Workload{w}, Rules: rules})
		var got []string
		for _, a := range acts {
			kind := map[ActionKind]string{Warn: "Warn", Stop: "Stop"}[a.Kind]
			got = append(got, kind+" "+a.Reason)
			if a.Workload != w.ID || a.Attempt != w.Status.Attempts || a.Team != w.Team || a.Message == "" {
				t.Errorf("step %d: action %+v does not name the workload, attempt, team and a message", i, a)
			}
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d (t+%s, util %.2f, mem %d): actions (-want +got):\n%s", i, s.at, s.util, s.mem, diff)
		}
	}
}

func TestIdle(t *testing.T) {
	m := time.Minute
	cases := []struct {
		name  string
		w     *core.Workload
		rules Rules
		steps []step
	}{
		{"an idle notebook is warned ten minutes before and stopped after its timeout", notebook("a", "research", "development"), defaultRules, []step{
			{at: 0, util: 0.01},
			{at: 30 * m, util: 0},
			{at: 49 * m, util: 0.04},
			{at: 50 * m, util: 0.04, want: []string{"Warn IdleWarning"}},
			{at: 55 * m, util: 0.0},
			{at: 60 * m, util: 0.0, want: []string{"Stop Idle"}},
		}},
		{"use at the threshold ends the idle stretch, and a new one starts over", notebook("a", "research", "development"), defaultRules, []step{
			{at: 0, util: 0},
			{at: 50 * m, util: 0, want: []string{"Warn IdleWarning"}},
			{at: 55 * m, util: 0.05},
			{at: 60 * m, util: 0},
			{at: 109 * m, util: 0},
			{at: 110 * m, util: 0, want: []string{"Warn IdleWarning"}},
			{at: 120 * m, util: 0, want: []string{"Stop Idle"}},
		}},
		{"a stop comes only after a warning recorded at an earlier sample", notebook("a", "research", "development"),
			Rules{Idle: []IdleRule{{Kind: core.KindNotebook, Threshold: 0.05, Timeout: time.Hour}}}, []step{
				{at: 0, util: 0},
				{at: 60 * m, util: 0, want: []string{"Warn IdleWarning"}},
				{at: 61 * m, util: 0, want: []string{"Stop Idle"}},
			}},
		{"a warning as long as the timeout warns at the first idle sample", notebook("a", "research", "development"),
			Rules{Idle: []IdleRule{{Kind: core.KindNotebook, Threshold: 0.05, Timeout: 3 * time.Second, Warning: time.Hour}}}, []step{
				{at: 0, util: 0, want: []string{"Warn IdleWarning"}},
				{at: 2 * time.Second, util: 0},
				{at: 3 * time.Second, util: 0, want: []string{"Stop Idle"}},
			}},
		{"production is never reclaimed for idleness", notebook("a", "research", "production"), defaultRules, []step{
			{at: 0, util: 0},
			{at: 50 * m, util: 0},
			{at: 5 * time.Hour, util: 0},
		}},
		{"jobs are not reclaimed by default", func() *core.Workload { w := notebook("a", "research", "development"); w.Kind = core.KindJob; return w }(), defaultRules, []step{
			{at: 0, util: 0},
			{at: 5 * time.Hour, util: 0},
		}},
		{"a team rule wins over the kind rule", notebook("a", "research", "development"), Rules{Idle: []IdleRule{
			{Kind: core.KindNotebook, Threshold: 0.05, Timeout: time.Hour, Warning: 10 * m},
			{Team: "research", Threshold: 0.5, Timeout: 10 * m, Warning: 5 * m},
		}}, []step{
			{at: 0, util: 0.3},
			{at: 5 * m, util: 0.3, want: []string{"Warn IdleWarning"}},
			{at: 10 * m, util: 0.3, want: []string{"Stop Idle"}},
		}},
		{"a team rule with no timeout turns reclaim off for the team", notebook("a", "research", "development"), Rules{Idle: []IdleRule{
			{Kind: core.KindNotebook, Threshold: 0.05, Timeout: time.Hour, Warning: 10 * m},
			{Team: "research", Kind: core.KindNotebook},
		}}, []step{
			{at: 0, util: 0},
			{at: 5 * time.Hour, util: 0},
		}},
		{"another team's rule does not apply", notebook("a", "inference", "development"), Rules{Idle: []IdleRule{
			{Team: "research", Threshold: 0.5, Timeout: 10 * m, Warning: 5 * m},
		}}, []step{
			{at: 0, util: 0},
			{at: 5 * time.Hour, util: 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { run(t, c.w, c.rules, c.steps) })
	}
}

func TestMemory(t *testing.T) {
	cases := []struct {
		name  string
		w     *core.Workload
		rules Rules
		steps []step
	}{
		{"a fractional workload over its share is warned and stopped at once", fractional("a", 2048), defaultRules, []step{
			{at: 0, util: 0.9, mem: 2048},
			{at: time.Second, util: 0.9, mem: 2049, want: []string{"Warn GPUMemoryLimitWarning", "Stop GPUMemoryLimitExceeded"}},
		}},
		{"with a grace of two samples it is stopped at the third in a row", fractional("a", 2048),
			Rules{Memory: MemoryRule{Enabled: true, GraceSamples: 2}}, []step{
				{at: 0, util: 0.9, mem: 4000, want: []string{"Warn GPUMemoryLimitWarning"}},
				{at: 1 * time.Second, util: 0.9, mem: 4000},
				{at: 2 * time.Second, util: 0.9, mem: 100},
				{at: 3 * time.Second, util: 0.9, mem: 4000, want: []string{"Warn GPUMemoryLimitWarning"}},
				{at: 4 * time.Second, util: 0.9, mem: 4000},
				{at: 5 * time.Second, util: 0.9, mem: 4000, want: []string{"Stop GPUMemoryLimitExceeded"}},
			}},
		{"a whole-GPU workload may use all of it", func() *core.Workload { w := notebook("a", "r", "development"); w.Kind = core.KindJob; return w }(), defaultRules, []step{
			{at: 0, util: 0.9, mem: 90000},
		}},
		{"enforcement off", fractional("a", 2048), Rules{}, []step{
			{at: 0, util: 0.9, mem: 90000},
		}},
		{"production is held to its share too", func() *core.Workload { w := fractional("a", 1024); w.Priority = ProductionClass; return w }(), defaultRules, []step{
			{at: 0, util: 0.9, mem: 1025, want: []string{"Warn GPUMemoryLimitWarning", "Stop GPUMemoryLimitExceeded"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { run(t, c.w, c.rules, c.steps) })
	}
}

func TestMemoryMessageHasTheFigures(t *testing.T) {
	w := fractional("a", 2048)
	s := sample(t0, core.WorkloadSample{ID: "a", MemoryUsedMiB: 3000, PerGPUMemoryMiB: map[core.GPURef]int64{{Node: "n", Index: 1}: 3000}})
	_, acts := Decide(State{}, Input{Now: t0, Sample: s, Running: []*core.Workload{w}, Rules: defaultRules})
	if len(acts) != 2 {
		t.Fatalf("got %d actions, want 2", len(acts))
	}
	for _, want := range []string{"3000 MiB", "2048 MiB", "GPU 1"} {
		if !strings.Contains(acts[1].Message, want) {
			t.Errorf("message %q lacks %q", acts[1].Message, want)
		}
	}
}

func TestLeftAlone(t *testing.T) {
	rules := Rules{Idle: []IdleRule{{Kind: core.KindNotebook, Threshold: 0.05, Timeout: time.Second, Warning: time.Second}}, Memory: MemoryRule{Enabled: true}}
	idle := func(id string) core.WorkloadSample { return core.WorkloadSample{ID: core.WorkloadID(id), Attempt: 1} }
	t.Run("a workload being stopped gets no action", func(t *testing.T) {
		w := notebook("a", "r", "development")
		w.Status.StopRequested = "Cancelled"
		_, acts := Decide(State{}, Input{Now: t0, Sample: sample(t0, idle("a")), Running: []*core.Workload{w}, Rules: rules})
		if len(acts) != 0 {
			t.Errorf("got %v, want none", acts)
		}
	})
	t.Run("a workload without a sample keeps its state and gets no action", func(t *testing.T) {
		w := notebook("a", "r", "development")
		prev := State{"a": {Attempt: 1, IdleSince: t0, IdleWarned: true}}
		next, acts := Decide(prev, Input{Now: t0.Add(time.Hour), Sample: sample(t0), Running: []*core.Workload{w}, Rules: rules})
		if len(acts) != 0 {
			t.Errorf("got %v, want none", acts)
		}
		if diff := cmp.Diff(prev, next); diff != "" {
			t.Errorf("state changed (-want +got):\n%s", diff)
		}
	})
	t.Run("a sample of an earlier attempt is not this attempt's", func(t *testing.T) {
		w := notebook("a", "r", "development")
		w.Status.Attempts = 2
		_, acts := Decide(State{}, Input{Now: t0, Sample: sample(t0, idle("a")), Running: []*core.Workload{w}, Rules: rules})
		if len(acts) != 0 {
			t.Errorf("got %v, want none", acts)
		}
	})
	t.Run("a new attempt starts a new idle stretch", func(t *testing.T) {
		w := notebook("a", "r", "development")
		w.Status.Attempts = 2
		s := sample(t0, core.WorkloadSample{ID: "a", Attempt: 2})
		next, _ := Decide(State{"a": {Attempt: 1, IdleSince: t0.Add(-time.Hour), IdleWarned: true}}, Input{Now: t0, Sample: s, Running: []*core.Workload{w}, Rules: rules})
		if got := next["a"]; got.IdleSince != t0 || got.Attempt != 2 {
			t.Errorf("state %+v, want attempt 2 idle since %s", got, t0)
		}
	})
	t.Run("workloads no longer running are forgotten", func(t *testing.T) {
		next, _ := Decide(State{"gone": {Attempt: 1, IdleSince: t0}}, Input{Now: t0, Sample: sample(t0), Rules: rules})
		if len(next) != 0 {
			t.Errorf("state %v, want empty", next)
		}
	})
}

func TestDecideDoesNotChangeItsInput(t *testing.T) {
	w := notebook("a", "r", "development")
	prev := State{"a": {Attempt: 1, IdleSince: t0}}
	keep := State{"a": prev["a"]}
	Decide(prev, Input{Now: t0.Add(2 * time.Hour), Sample: sample(t0, core.WorkloadSample{ID: "a", Attempt: 1}), Running: []*core.Workload{w}, Rules: defaultRules})
	if diff := cmp.Diff(keep, prev); diff != "" {
		t.Errorf("prev changed (-want +got):\n%s", diff)
	}
}
