package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// tinyTrace is a JSONL trace: one node with one GPU, four quarter-GPU tasks
// submitted together and running 100 s, a CPU-only task and one that never
// ran.
const tinyTrace = `{"kind":"header","format":"gpufleet-trace","version":1,"source":"tiny"}
{"kind":"node","name":"n1","gpuCount":1,"gpuModel":"H100","gpuMemoryMiB":81920}
{"kind":"task","name":"q0","submitted":0,"runtimeSeconds":100,"gpus":0.25}
{"kind":"task","name":"q1","submitted":0,"runtimeSeconds":100,"gpus":0.25}
{"kind":"task","name":"q2","submitted":0,"runtimeSeconds":100,"gpus":0.25}
{"kind":"task","name":"q3","submitted":0,"runtimeSeconds":100,"gpus":0.25}
{"kind":"task","name":"cpu","submitted":0,"runtimeSeconds":100,"gpus":0,"milliCPU":1000}
{"kind":"task","name":"pending","submitted":5,"gpus":1}
`

func writeTinyTrace(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.jsonl")
	if err := os.WriteFile(path, []byte(tinyTrace), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSimReplayJSON(t *testing.T) {
	got := runCLI(t, invocation{args: []string{"sim", "replay", "--trace", writeTinyTrace(t), "-o", "json"}})
	if got.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
	// The shape, as scripts see it: camelCase keys.
	var raw struct {
		Source string           `json:"source"`
		Tasks  int              `json:"tasks"`
		Runs   []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &raw); err != nil {
		t.Fatalf("%v\n%s", err, got.stdout)
	}
	if raw.Source != "tiny" || raw.Tasks != 6 || len(raw.Runs) != 2 {
		t.Fatalf("source %q, %d tasks, %d runs; want tiny, 6, 2", raw.Source, raw.Tasks, len(raw.Runs))
	}
	for _, key := range []string{"policy", "submitted", "completed", "neverStarted", "skippedCPUOnly", "skippedNoRuntime", "queueingSeconds",
		"meanAllocated", "meanRequested", "utilisation", "makespanSeconds", "preemptions", "teams", "cycles"} {
		if _, ok := raw.Runs[0][key]; !ok {
			t.Errorf("a run lacks the key %q: %v", key, raw.Runs[0])
		}
	}

	type run struct {
		Policy                           string
		Submitted, Completed             int
		SkippedCPUOnly, SkippedNoRuntime int
		Queueing                         struct{ P50, P95, P99 float64 } `json:"queueingSeconds"`
		MeanAllocated, MeanRequested     float64
		Makespan                         float64 `json:"makespanSeconds"`
	}
	var report struct{ Runs []run }
	if err := json.Unmarshal([]byte(got.stdout), &report); err != nil {
		t.Fatal(err)
	}
	q := func(p50, p95, p99 float64) struct{ P50, P95, P99 float64 } {
		return struct{ P50, P95, P99 float64 }{p50, p95, p99}
	}
	want := []run{
		{Policy: "gpufleet", Submitted: 4, Completed: 4, SkippedCPUOnly: 1, SkippedNoRuntime: 1, MeanAllocated: 1, MeanRequested: 1, Makespan: 100},
		{Policy: "reservation", Submitted: 4, Completed: 4, SkippedCPUOnly: 1, SkippedNoRuntime: 1, Queueing: q(100, 300, 300),
			MeanAllocated: 1, MeanRequested: 0.25, Makespan: 400},
	}
	if diff := cmp.Diff(want, report.Runs); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	if !strings.Contains(got.stderr, "replay gpufleet: done") || !strings.Contains(got.stderr, "replay reservation: done") {
		t.Errorf("stderr lacks the progress of each policy:\n%s", got.stderr)
	}
}

func TestSimReplayTable(t *testing.T) {
	got := runCLI(t, invocation{args: []string{"sim", "replay", "--trace", writeTinyTrace(t), "--teams", "2", "--guarantee", "50,50"}})
	if got.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
	for _, want := range []string{
		"cluster: 1 nodes, 1 GPUs; 6 tasks in the trace, 4 replayed; skipped 1 CPU-only, 1 that never ran (no runtime)",
		"POLICY       COMPLETED  NEVER-STARTED  QUEUE-P50  QUEUE-P95  QUEUE-P99  ALLOCATED  REQUESTED  PREEMPTIONS  MAKESPAN",
		"gpufleet     4/4        0              0s         0s         0s         100.0%     100.0%     0            1.7m",
		"reservation  4/4        0              1.7m       5.0m       5.0m       100.0%     25.0%      0            6.7m",
		"  gpufleet     " + strings.Repeat("█", 60),
		"POLICY       TEAM    GUARANTEED",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, got.stdout)
		}
	}
}

func TestSimReplayUsageErrors(t *testing.T) {
	path := writeTinyTrace(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no trace", nil, "give one trace"},
		{"two traces", []string{"--trace", path, "--from-server"}, "give one trace"},
		{"nodes without pods", []string{"--nodes", "n.csv"}, "--nodes and --pods go together"},
		{"unknown policy", []string{"--trace", path, "--policy", "fgd"}, `--policy "fgd"`},
		{"guarantee without teams", []string{"--trace", path, "--guarantee", "50,50"}, "--guarantee needs --teams"},
		{"guarantees for other teams", []string{"--trace", path, "--teams", "3", "--guarantee", "50,50"}, "2 values for 3 teams"},
		{"guarantees above 100%", []string{"--trace", path, "--teams", "2", "--guarantee", "60,50"}, "add up to 110%"},
		{"negative limit", []string{"--trace", path, "--limit", "-1"}, "--limit -1"},
		{"unknown output", []string{"--trace", path, "-o", "yaml"}, `-o "yaml"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runCLI(t, invocation{args: append([]string{"sim", "replay"}, tc.args...)})
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", got.code, got.stderr, tc.want)
			}
		})
	}
	t.Run("a bad trace names its line", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.jsonl")
		os.WriteFile(bad, []byte(`{"kind":"node","name":"n1","gpuCount":1,"gpuModel":"T4"}`+"\n"+`{"kind":"task","submitted":0,"gpus":1.5}`+"\n"), 0o644)
		got := runCLI(t, invocation{args: []string{"sim", "replay", "--trace", bad}})
		if got.code != 1 || !strings.Contains(got.stderr, "line 2: task") || !strings.Contains(got.stderr, `field "gpus"`) {
			t.Errorf("exit %d, stderr %q; want 1 and the line and field", got.code, got.stderr)
		}
	})
}

func TestSimExportOpenb(t *testing.T) {
	// The packing tests' synthetic openb trace.
	out := filepath.Join(t.TempDir(), "openb.jsonl")
	got := runCLI(t, invocation{args: []string{"sim", "export", "--nodes", simNodes, "--pods", simPods, "--out", out}})
	if got.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := readTrace(simNodes, "--nodes", trace.ReadNodes)
	pods, _ := readTrace(simPods, "--pods", trace.ReadPods)
	if diff := cmp.Diff(nodes, tr.Nodes); diff != "" {
		t.Errorf("nodes read back (-csv +jsonl):\n%s", diff)
	}
	if diff := cmp.Diff(trace.FromPods(pods), tr.Tasks); diff != "" {
		t.Errorf("tasks read back (-csv +jsonl):\n%s", diff)
	}
	if want := "wrote 20 nodes, 0 teams and 200 tasks to " + out; !strings.Contains(got.stderr, want) {
		t.Errorf("stderr %q lacks %q", got.stderr, want)
	}
}

func TestSimExportFromServer(t *testing.T) {
	// Each workload is submitted a minute after the one before, from
	// testNow − 10m: done runs from −8m to −5m, running (a gang of 4 GPUs)
	// starts when done has freed gpu1, waiting and capped stay pending
	// (gpu1 is full, and capped asks for an A10: gpu2 takes no work).
	f := newTestServer(t)
	f.submitAt(aliceToken, testNow.Add(-10*time.Minute), api.Workload{Name: "done", Team: "research", Priority: "training", Resources: api.Resources{GPUs: 250, CPU: 2000, MemoryMiB: 4096}, Command: []string{"sleep"}})
	f.submitAt(adminToken, testNow.Add(-9*time.Minute), api.Workload{Name: "running", Team: "vision", Resources: api.Resources{GPUs: 2000}, Replicas: 2, Command: []string{"sleep"}})
	f.setNow(testNow.Add(-8 * time.Minute))
	f.step() // done starts; running does not fit beside it
	f.submitAt(adminToken, testNow.Add(-8*time.Minute), api.Workload{Name: "waiting", Team: "vision", Resources: api.Resources{GPUMemoryMiB: 20480, GPUModels: []string{"H100"}}, Command: []string{"sleep"}})
	f.submitAt(aliceToken, testNow.Add(-7*time.Minute), api.Workload{Name: "capped", Team: "research", Resources: api.Resources{GPUs: 1000, GPUModels: []string{"A10"}}, MaxRuntimeSeconds: 3600, Command: []string{"sleep"}})
	f.setNow(testNow.Add(-5 * time.Minute))
	f.ex.Finish("wl-1", 1, 0)
	f.step() // done has succeeded, running starts
	f.setNow(testNow)
	for id, phase := range map[string]string{"wl-1": api.PhaseSucceeded, "wl-2": api.PhaseRunning, "wl-3": api.PhasePending, "wl-4": api.PhasePending} {
		if w, err := f.admin().GetWorkload(context.Background(), id); err != nil || w.Status.Phase != phase {
			t.Fatalf("%s: %v, %v; want %s", id, w, err, phase)
		}
	}

	got := runCLI(t, invocation{args: []string{"sim", "export", "--from-server"}, vars: f.vars(t, adminToken)})
	if got.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
	tr, err := trace.ReadJSONL(strings.NewReader(got.stdout))
	if err != nil {
		t.Fatalf("%v\n%s", err, got.stdout)
	}
	if !strings.HasPrefix(tr.Source, "gpufleet server "+f.URL) {
		t.Errorf("source %q, want it to name the server", tr.Source)
	}
	var nodes []string
	for _, n := range tr.Nodes {
		nodes = append(nodes, string(n.Name)+":"+n.GPUs[0].Model+"+"+n.GPUs[len(n.GPUs)-1].Model)
	}
	if diff := cmp.Diff([]string{"gpu1:H100+H100", "gpu2:A10+L4"}, nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	wantTeams := []trace.Team{{Name: "research", Guaranteed: 8000, Limit: 16000, Weight: 2}, {Name: "vision", Limit: core.Unlimited, Weight: 1}}
	if diff := cmp.Diff(wantTeams, tr.Teams); diff != "" {
		t.Errorf("teams (-want +got):\n%s", diff)
	}
	// The trace starts at the first submission; the server gives each
	// workload the default class, training.
	wantTasks := []trace.Task{
		{Name: "done", Team: "research", Priority: "training", Submitted: 0, Runtime: 3 * time.Minute,
			Request: core.Request{MilliGPU: 250, MilliCPU: 2000, MemoryMiB: 4096}},
		{Name: "running", Team: "vision", Priority: "training", Submitted: time.Minute, Runtime: 5 * time.Minute, Request: core.Request{MilliGPU: 2000, Replicas: 2}},
		{Name: "waiting", Team: "vision", Priority: "training", Submitted: 2 * time.Minute, Runtime: trace.UnknownRuntime,
			Request: core.Request{GPUMemoryMiB: 20480, GPUModels: []string{"H100"}}},
		{Name: "capped", Team: "research", Priority: "training", Submitted: 3 * time.Minute, Runtime: time.Hour, Request: core.Request{MilliGPU: 1000, GPUModels: []string{"A10"}}},
	}
	if diff := cmp.Diff(wantTasks, tr.Tasks); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}

	// The same snapshot replays.
	got = runCLI(t, invocation{args: []string{"sim", "replay", "--from-server", "--policy", "gpufleet", "-o", "json"}, vars: f.vars(t, adminToken)})
	if got.code != 0 {
		t.Fatalf("replay --from-server: exit %d, stderr:\n%s", got.code, got.stderr)
	}
	var report struct {
		Runs []struct{ Submitted, Completed, SkippedNoRuntime int }
	}
	if err := json.Unmarshal([]byte(got.stdout), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Runs) != 1 || report.Runs[0].Submitted != 3 || report.Runs[0].Completed != 3 || report.Runs[0].SkippedNoRuntime != 1 {
		t.Errorf("replay of the snapshot: %+v, want 3 submitted and completed, 1 skipped (no runtime)", report.Runs)
	}
}

// replayCost is the cost of a run in sim replay's -o json.
type replayCost struct {
	Currency             string
	Total                quantity.Money
	IdleCost             quantity.Money
	CompletedTasks       int64
	CostPerCompletedTask *quantity.Money
	ByTeam               []struct {
		Name      string
		TotalCost quantity.Money
	}
}

func TestSimReplayCostOnDemand(t *testing.T) {
	// At 3600 per GPU-hour, one per GPU-second: gpufleet holds 4 × ¼ GPU
	// × 100 s, the reservation baseline 4 whole GPUs × 100 s.
	got := runCLI(t, invocation{args: []string{"sim", "replay", "--trace", writeTinyTrace(t), "--price-on-demand", "3600", "-o", "json"}})
	if got.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
	var report struct {
		Runs []struct {
			Policy string
			Cost   *replayCost
		}
	}
	if err := json.Unmarshal([]byte(got.stdout), &report); err != nil {
		t.Fatalf("%v\n%s", err, got.stdout)
	}
	per := func(m quantity.Money) *quantity.Money { return &m }
	row := func(name string, m quantity.Money) struct {
		Name      string
		TotalCost quantity.Money
	} {
		return struct {
			Name      string
			TotalCost quantity.Money
		}{name, m}
	}
	unit := quantity.MoneyUnit
	want := []struct {
		Policy string
		Cost   *replayCost
	}{
		{"gpufleet", &replayCost{Currency: "USD", Total: 100 * unit, CompletedTasks: 4, CostPerCompletedTask: per(25 * unit), ByTeam: []struct {
			Name      string
			TotalCost quantity.Money
		}{row("default", 100*unit)}}},
		{"reservation", &replayCost{Currency: "USD", Total: 400 * unit, CompletedTasks: 4, CostPerCompletedTask: per(100 * unit), ByTeam: []struct {
			Name      string
			TotalCost quantity.Money
		}{row("default", 400*unit)}}},
	}
	if diff := cmp.Diff(want, report.Runs); diff != "" {
		t.Errorf("costs (-want +got):\n%s", diff)
	}

	// The table: a cost line per policy, and each team's cost.
	got = runCLI(t, invocation{args: []string{"sim", "replay", "--trace", writeTinyTrace(t), "--price-on-demand", "3600", "--teams", "2", "--guarantee", "50,50"}})
	if got.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
	for _, want := range []string{
		"cost in USD, from the first submission to the last completion:",
		"POLICY       TOTAL   PER-COMPLETED-TASK  COMPLETED  GPU-HOURS  IDLE  IDLE-SHARE",
		"gpufleet     100.00  25.00               4          0.028      0.00  0.0%",
		"reservation  400.00  100.00              4          0.111      0.00  0.0%",
		"QUEUE-P99  COST",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, got.stdout)
		}
	}
	// Without prices, no cost.
	got = runCLI(t, invocation{args: []string{"sim", "replay", "--trace", writeTinyTrace(t)}})
	if got.code != 0 || strings.Contains(got.stdout, "cost in") || strings.Contains(got.stdout, "COST") {
		t.Errorf("exit %d; a replay without prices shows a cost:\n%s", got.code, got.stdout)
	}
}

func TestSimReplayCostOwnedFromFile(t *testing.T) {
	// Two owned GPUs, billed held or not at one per GPU-second. gpufleet
	// runs the four quarter-GPU tasks together, 0-100 s: 200 billed, 100
	// held, 100 idle. The reservation baseline runs them two at a time on
	// whole GPUs, 0-200 s: 400 billed, all held.
	dir := t.TempDir()
	tr := filepath.Join(dir, "two.jsonl")
	body := `{"kind":"header","format":"gpufleet-trace","version":1,"source":"two"}
{"kind":"node","name":"n1","gpuCount":2,"gpuModel":"H100","gpuMemoryMiB":81920}
{"kind":"task","name":"q0","submitted":0,"runtimeSeconds":100,"gpus":0.25}
{"kind":"task","name":"q1","submitted":0,"runtimeSeconds":100,"gpus":0.25}
{"kind":"task","name":"q2","submitted":0,"runtimeSeconds":100,"gpus":0.25}
{"kind":"task","name":"q3","submitted":0,"runtimeSeconds":100,"gpus":0.25}
`
	prices := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(tr, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prices, []byte("- pool: local\n  kind: owned\n  perGPUHour: 3600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, invocation{args: []string{"sim", "replay", "--trace", tr, "--prices", prices, "--currency", "EUR"}})
	if got.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", got.code, got.stderr)
	}
	for _, want := range []string{
		"cost in EUR, from the first submission to the last completion:",
		"gpufleet     200.00  50.00               4          0.028      100.00  50.0%",
		"reservation  400.00  100.00              4          0.111      0.00    0.0%",
	} {
		if !strings.Contains(got.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, got.stdout)
		}
	}
	if strings.Contains(got.stderr, "no price names") {
		t.Errorf("stderr warns of an unpriced pool:\n%s", got.stderr)
	}

	// What 'gpufleet get prices -o yaml' writes serves too, with its
	// currency unless --currency names one.
	if err := os.WriteFile(prices, []byte("currency: GBP\nitems:\n- pool: local\n  kind: on-demand\n  rate: 3600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for currency, args := range map[string][]string{"GBP": nil, "CHF": {"--currency", "CHF"}} {
		got = runCLI(t, invocation{args: append([]string{"sim", "replay", "--trace", tr, "--prices", prices, "--policy", "gpufleet"}, args...)})
		if want := "cost in " + currency + ","; got.code != 0 || !strings.Contains(got.stdout, want) || !strings.Contains(got.stdout, "gpufleet  100.00  25.00") {
			t.Errorf("get prices' output, %v: exit %d, stderr %q; want 0, %q and a cost of 100:\n%s", args, got.code, got.stderr, want, got.stdout)
		}
	}

	// A price of another pool leaves the nodes' pool unpriced: it says so.
	if err := os.WriteFile(prices, []byte("- pool: a100\n  kind: on-demand\n  rate: 2.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = runCLI(t, invocation{args: []string{"sim", "replay", "--trace", tr, "--prices", prices, "--policy", "gpufleet"}})
	if got.code != 0 || !strings.Contains(got.stderr, "no price names pool local of the nodes") || !strings.Contains(got.stdout, "gpufleet  0.00") {
		t.Errorf("exit %d, stderr %q; want 0 and a warning about pool local, and a cost of 0:\n%s", got.code, got.stderr, got.stdout)
	}
}

func TestSimReplayCostErrors(t *testing.T) {
	path := writeTinyTrace(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"both price flags", []string{"--price-on-demand", "2", "--prices", "p.yaml"}, 2, "--price-on-demand and --prices: give one"},
		{"currency without prices", []string{"--currency", "EUR"}, 2, "--currency needs --price-on-demand or --prices"},
		{"unknown currency", []string{"--price-on-demand", "2", "--currency", "XYZ"}, 2, `--currency "XYZ"`},
		{"rate not a number", []string{"--price-on-demand", "two"}, 2, `--price-on-demand "two"`},
		{"rate zero", []string{"--price-on-demand", "0"}, 2, "must be positive"},
		{"no prices file", []string{"--prices", filepath.Join(dir, "missing.yaml")}, 1, "--prices: open"},
		{"not a list", []string{"--prices", write("map.yaml", "pool: local\n")}, 1, "want a YAML list of prices"},
		{"bad currency in the file", []string{"--prices", write("cur.yaml", "currency: dollars\nitems:\n- pool: local\n  kind: on-demand\n  rate: 1\n")}, 1, `currency "dollars"`},
		{"unknown field", []string{"--prices", write("typo.yaml", "- pool: local\n  kind: on-demand\n  rat: 2\n")}, 1, `unknown field "rat"`},
		{"invalid price", []string{"--prices", write("bad.yaml", "- pool: local\n  kind: on-demand\n")}, 1, "prices[0].rate: is required"},
		{"empty", []string{"--prices", write("empty.yaml", "[]\n")}, 1, "no prices"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runCLI(t, invocation{args: append([]string{"sim", "replay", "--trace", path}, tc.args...)})
			if got.code != tc.code || !strings.Contains(got.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", got.code, got.stderr, tc.code, tc.want)
			}
		})
	}
}
