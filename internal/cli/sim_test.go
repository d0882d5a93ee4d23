package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/internal/sim"
	"github.com/gpufleet/gpufleet/internal/sim/plot"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// The synthetic trace: 20 nodes (124 GPUs, two CPU-only nodes) and 200 pods
// (fractions, whole GPUs, 8-GPU pods, CPU-only pods, some with gpu_spec)
// asking for about 85% of the GPUs.
const (
	simNodes = "../sim/testdata/nodes.csv"
	simPods  = "../sim/testdata/pods.csv"
)

// realTrace is the Alibaba trace, when this checkout sits beside it.
const realTrace = "../../../shared/traces/alibaba-gpu-v2023"

// runPacking runs 'gpufleet sim packing' on the synthetic trace with args.
func runPackingCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, invocation{args: append([]string{"sim", "packing", "--nodes", simNodes, "--pods", simPods}, args...), plot: plot.Allocation})
}

// TestPlotNeedsGPUFleetSim: gpufleet's own binary links no plotting
// library, and says where --plot is drawn.
func TestPlotNeedsGPUFleetSim(t *testing.T) {
	got := runCLI(t, invocation{args: []string{"sim", "packing", "--nodes", simNodes, "--pods", simPods, "--seed", "1", "--plot", filepath.Join(t.TempDir(), "a.svg")}})
	if got.code != 2 || !strings.Contains(got.stderr, "gpufleet-sim") {
		t.Errorf("sim packing --plot in gpufleet: code %d, %q; want 2 naming gpufleet-sim", got.code, got.stderr)
	}
}

// packingJSON runs with -o json and decodes the answer.
func packingJSON(t *testing.T, args ...string) packingReport {
	t.Helper()
	got := runPackingCLI(t, append(args, "-o", "json")...)
	if got.code != 0 {
		t.Fatalf("code %d: %s", got.code, got.stderr)
	}
	var rep packingReport
	if err := json.Unmarshal([]byte(got.stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, got.stdout)
	}
	return rep
}

func TestSimPackingJSON(t *testing.T) {
	got := runPackingCLI(t, "--policy", "gpufleet", "--policy", "random,bestfit", "--seed", "1,5-6", "-o", "json")
	if got.code != 0 {
		t.Fatalf("code %d: %s", got.code, got.stderr)
	}

	// The field names are the contract with scripts.
	var raw struct {
		Runs    []map[string]json.RawMessage `json:"runs"`
		Summary []map[string]json.RawMessage `json:"summary"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &raw); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, got.stdout)
	}
	if len(raw.Runs) != 9 {
		t.Fatalf("%d runs, want 3 policies × 3 seeds = 9", len(raw.Runs))
	}
	for _, k := range []string{"policy", "seed", "order", "pods", "seconds", "firstFailureArrived", "points"} {
		if _, ok := raw.Runs[0][k]; !ok {
			t.Errorf("run lacks %q: %v", k, raw.Runs[0])
		}
	}
	if _, ok := raw.Runs[0]["curve"]; ok {
		t.Errorf("run carries its curve without --curve")
	}
	var point map[string]json.RawMessage
	var points []json.RawMessage
	json.Unmarshal(raw.Runs[0]["points"], &points)
	json.Unmarshal(points[0], &point)
	for _, k := range []string{"arrived", "allocation", "stranded", "failedPods"} {
		if _, ok := point[k]; !ok {
			t.Errorf("point lacks %q: %s", k, points[0])
		}
	}
	for _, k := range []string{"policy", "levels", "firstFailureArrived"} {
		if _, ok := raw.Summary[0][k]; !ok {
			t.Errorf("summary lacks %q: %v", k, raw.Summary[0])
		}
	}

	var rep packingReport
	json.Unmarshal([]byte(got.stdout), &rep)
	type key struct {
		Policy string
		Seed   int64
	}
	var keys []key
	for _, r := range rep.Runs {
		keys = append(keys, key{r.Policy, r.Seed})
		if r.Pods == 0 || r.CapacityGPUs != 124 || len(r.Points) != len(sim.DefaultReport) {
			t.Errorf("%s seed %d: %d pods, %d GPUs, %d points; want some pods, 124 GPUs, %d points",
				r.Policy, r.Seed, r.Pods, r.CapacityGPUs, len(r.Points), len(sim.DefaultReport))
		}
		for i, p := range r.Points {
			if p.Arrived != sim.DefaultReport[i] || p.ArrivedExact < p.Arrived || p.Allocation > p.ArrivedExact || p.Allocation <= 0 {
				t.Errorf("%s seed %d point %d: %+v, want arrived = %g ≤ arrivedExact ≥ allocation > 0", r.Policy, r.Seed, i, p, sim.DefaultReport[i])
			}
		}
	}
	// Policies in the order of sim.Policies, whatever the flags' order.
	wantKeys := []key{{"gpufleet", 1}, {"gpufleet", 5}, {"gpufleet", 6}, {"bestfit", 1}, {"bestfit", 5}, {"bestfit", 6}, {"random", 1}, {"random", 5}, {"random", 6}}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sim.Summarize(rep.Runs), rep.Summary, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("summary is not Summarize(runs) (-want +got):\n%s", diff)
	}
	if strings.Contains(got.stdout, "sim packing:") || !strings.Contains(got.stderr, "9/9 runs done") {
		t.Errorf("progress should go to stderr only; stderr:\n%s", got.stderr)
	}
}

func TestSimPackingCurveFlag(t *testing.T) {
	rep := packingJSON(t, "--policy", "gpufleet", "--seed", "1", "--curve")
	if n := len(rep.Runs[0].Curve); n < 129 {
		t.Errorf("--curve gave %d curve points, want one per 1%% up to 130%%", n)
	}
}

func TestSimPackingSeedsDiffer(t *testing.T) {
	rep := packingJSON(t, "--policy", "random", "--seed", "1,2")
	a, b := rep.Runs[0], rep.Runs[1]
	if cmp.Equal(a.Points, b.Points) {
		t.Errorf("seeds 1 and 2 of random gave the same points: %+v", a.Points)
	}
	again := packingJSON(t, "--policy", "random", "--seed", "1")
	if diff := cmp.Diff(a.Points, again.Runs[0].Points); diff != "" {
		t.Errorf("seed 1 of random is not reproducible (-first +second):\n%s", diff)
	}
}

func TestSimPackingInflate(t *testing.T) {
	pods := map[string]int{}
	for _, inflate := range []string{"0.5", "1", "1.3", "2"} {
		rep := packingJSON(t, "--policy", "firstfit", "--seed", "7", "--inflate", inflate, "--report", "0.5")
		pods[inflate] = rep.Runs[0].Pods
	}
	// The trace asks for about 85% of the GPUs: half is a cut, above that
	// copies are drawn, more the higher the target.
	if !(pods["0.5"] < 200 && pods["1"] > 200 && pods["1"] < pods["1.3"] && pods["1.3"] < pods["2"]) {
		t.Errorf("pods by --inflate %v, want fewer than 200 at 0.5 and more at each step above", pods)
	}
}

// --order file places the file's 200 pods, each once, whatever the seed:
// no shuffle, no copies; --inflate only ends the run early.
func TestSimPackingOrderFile(t *testing.T) {
	rep := packingJSON(t, "--policy", "firstfit,bestfit", "--seed", "7,8", "--order", "file", "--report", "0.5")
	for _, r := range rep.Runs {
		if r.Pods != 200 || r.Order != sim.OrderFile || r.Placed+r.Failed != 200 {
			t.Errorf("%s seed %d: %d pods (%d placed, %d failed), order %q; want the file's 200 in order file", r.Policy, r.Seed, r.Pods, r.Placed, r.Failed, r.Order)
		}
	}
	ignoreSeed := cmpopts.IgnoreFields(sim.PackingRun{}, "Seconds", "Seed")
	if diff := cmp.Diff(rep.Runs[0], rep.Runs[1], ignoreSeed); diff != "" {
		t.Errorf("seeds 7 and 8 differ in the file's order (-7 +8):\n%s", diff)
	}
	cut := packingJSON(t, "--policy", "firstfit", "--seed", "7", "--order", "file", "--inflate", "0.5", "--report", "0.5")
	if n := cut.Runs[0].Pods; n >= 200 || n == 0 {
		t.Errorf("--inflate 0.5 in the file's order: %d pods; want a prefix of the 200", n)
	}
	shuffled := packingJSON(t, "--policy", "firstfit", "--seed", "7", "--report", "0.5")
	if r := shuffled.Runs[0]; r.Order != sim.OrderShuffle || r.Pods <= 200 {
		t.Errorf("the default order: %q with %d pods; want shuffle with copies above 200", r.Order, r.Pods)
	}
	table := runPackingCLI(t, "--policy", "firstfit", "--seed", "7", "--order", "file", "--report", "0.5")
	if table.code != 0 || !strings.Contains(table.stdout, "in the file's order") {
		t.Errorf("code %d; the table's head does not say the order:\n%s", table.code, table.stdout)
	}
}

// --order authors places the FGD authors' sequence for each seed
// (sim.AuthorsOrder), says so in the table's head, and gives their figure
// at whole-percent levels.
func TestSimPackingOrderAuthors(t *testing.T) {
	rep := packingJSON(t, "--policy", "firstfit,bestfit", "--seed", "7,8", "--order", "authors", "--report", "0.4,0.45,0.5,0.52,0.555")
	fh, err := os.Open(simPods)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	pods, err := trace.ReadPods(fh)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		seq, err := sim.AuthorsOrder(pods, r.Seed, 1.3, int64(r.CapacityGPUs)*1000)
		if err != nil {
			t.Fatal(err)
		}
		if r.Order != sim.OrderAuthors || r.Pods != len(seq) || r.Placed+r.Failed != len(seq) {
			t.Errorf("%s seed %d: order %q, %d pods (%d placed, %d failed); want authors with their %d", r.Policy, r.Seed, r.Order, r.Pods, r.Placed, r.Failed, len(seq))
		}
		// Their figure needs a pod arriving within a percent of the level:
		// some of these whole levels have one, 55.5% is none.
		whole := 0
		for i, p := range r.Points {
			if i < 4 && p.AuthorsAllocation != nil {
				whole++
			}
		}
		if len(r.Points) != 5 || whole == 0 || r.Points[4].AuthorsAllocation != nil {
			t.Errorf("%s seed %d: %d points, authorsAllocation at %d whole levels (%+v); want 5, some, none at 55.5%%", r.Policy, r.Seed, len(r.Points), whole, r.Points)
		}
	}
	if rep.Runs[0].Pods == rep.Runs[1].Pods && rep.Runs[0].Points[0].Allocation == rep.Runs[1].Points[0].Allocation {
		t.Errorf("seeds 7 and 8 look alike in the authors' order: %+v", rep.Runs[:2])
	}
	table := runPackingCLI(t, "--policy", "firstfit", "--seed", "7", "--order", "authors", "--report", "0.5")
	if table.code != 0 || !strings.Contains(table.stdout, "in the FGD authors' order") {
		t.Errorf("code %d; the table's head does not say the order:\n%s", table.code, table.stdout)
	}
}

func TestSimPackingParallelIsDeterministic(t *testing.T) {
	args := []string{"--policy", "gpufleet,fgd,random", "--seed", "1-3"}
	one := packingJSON(t, append(args, "--parallel", "1")...)
	many := packingJSON(t, append(args, "--parallel", "5")...)
	ignoreTime := cmpopts.IgnoreFields(sim.PackingRun{}, "Seconds")
	if diff := cmp.Diff(one.Runs, many.Runs, ignoreTime); diff != "" {
		t.Errorf("--parallel 5 differs from --parallel 1 (-1 +5):\n%s", diff)
	}
}

func TestSimPackingTable(t *testing.T) {
	args := []string{"--seed", "3,4"}
	got := runPackingCLI(t, args...)
	if got.code != 0 {
		t.Fatalf("code %d: %s", got.code, got.stderr)
	}
	for _, p := range sim.Policies() {
		if !strings.Contains(got.stdout, "  "+p+" ") {
			t.Errorf("table lacks policy %s:\n%s", p, got.stdout)
		}
	}
	for _, s := range []string{"ALLOCATION", "BOUND", "STRANDED", "FAILED PODS", "FIRST FAILURE AT", "80%", "120%", "20 runs: 10 policies × seeds 3,4"} {
		if !strings.Contains(got.stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, got.stdout)
		}
	}
	// Every point has its sequence's bound, the same for every policy of
	// a seed and never below the allocation.
	rep := packingJSON(t, args...)
	bounds := map[[2]int64]float64{}
	for _, r := range rep.Runs {
		for i, p := range r.Points {
			if p.Bound == nil || *p.Bound+1e-9 < p.Allocation {
				t.Fatalf("%s seed %d point %d: bound %v, allocation %g", r.Policy, r.Seed, i, p.Bound, p.Allocation)
			}
			k := [2]int64{r.Seed, int64(i)}
			if b, ok := bounds[k]; ok && b != *p.Bound {
				t.Errorf("seed %d point %d: bound %g for %s, %g for another policy", r.Seed, i, *p.Bound, r.Policy, b)
			}
			bounds[k] = *p.Bound
		}
	}
	// The comparison is computed from the runs.
	c, ok := sim.Compare(rep.Summary, sim.PolicyGPUFleet, sim.PolicyReservation)
	if !ok {
		t.Fatal("no comparison between gpufleet and reservation")
	}
	want := fmt.Sprintf("sharing (gpufleet) serves %.2f× the GPU demand of whole-GPU reservation at 120%% arrived", c.Ratio)
	if !strings.Contains(got.stdout, want) {
		t.Errorf("table lacks %q:\n%s", want, got.stdout)
	}
}

func TestSimPackingTableWithoutReservation(t *testing.T) {
	got := runPackingCLI(t, "--policy", "gpufleet", "--seed", "1")
	if got.code != 0 || strings.Contains(got.stdout, "sharing") {
		t.Errorf("code %d; a comparison without reservation:\n%s", got.code, got.stdout)
	}
}

func TestSimPackingPlot(t *testing.T) {
	tests := []struct {
		file  string
		magic []string
	}{
		{"alloc.svg", []string{"<?xml", "<svg"}},
		{"alloc.png", []string{"\x89PNG\r\n\x1a\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			got := runPackingCLI(t, "--policy", "gpufleet,reservation", "--seed", "1-2", "--plot", path, "-o", "json")
			if got.code != 0 {
				t.Fatalf("code %d: %s", got.code, got.stderr)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ok := false
			for _, m := range tt.magic {
				ok = ok || bytes.HasPrefix(b, []byte(m))
			}
			if !ok {
				t.Errorf("%s starts %q, want one of %q", tt.file, b[:min(20, len(b))], tt.magic)
			}
			// The curve feeds the plot but stays out of the JSON.
			if strings.Contains(got.stdout, `"curve"`) {
				t.Errorf("JSON carries curves without --curve")
			}
		})
	}
}

func TestSimPackingUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"an unknown policy", []string{"--nodes", simNodes, "--pods", simPods, "--policy", "gpufleet,nope"},
			`--policy "nope": want one of gpufleet, fgd, fgd-online, firstfit, bestfit, bestfit-gpu, random, dotproduct, gpupacking, reservation`},
		{"an unknown order", []string{"--nodes", simNodes, "--pods", simPods, "--order", "sorted"}, `--order "sorted": want one of shuffle, file, authors`},
		{"no --nodes", []string{"--pods", simPods}, "--nodes is required"},
		{"no --pods", []string{"--nodes", simNodes}, "--pods is required"},
		{"a seed that is no number", []string{"--nodes", simNodes, "--pods", simPods, "--seed", "x"}, `--seed "x"`},
		{"a backwards seed range", []string{"--nodes", simNodes, "--pods", simPods, "--seed", "51-42"}, `--seed "51-42"`},
		{"a zero inflate", []string{"--nodes", simNodes, "--pods", simPods, "--inflate", "0"}, "--inflate 0"},
		{"an inflate that is no number", []string{"--nodes", simNodes, "--pods", simPods, "--inflate", "lots"}, "--inflate"},
		{"a report level above the inflate", []string{"--nodes", simNodes, "--pods", simPods, "--report", "0.9,1.5"}, "--report 1.5"},
		{"a plot in an unknown format", []string{"--nodes", simNodes, "--pods", simPods, "--plot", "x.pdf"}, "--plot x.pdf: want a file name ending in .svg or .png"},
		{"no workers", []string{"--nodes", simNodes, "--pods", simPods, "--parallel", "0"}, "--parallel 0"},
		{"an unknown output", []string{"--nodes", simNodes, "--pods", simPods, "-o", "yaml"}, `-o "yaml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, invocation{args: append([]string{"sim", "packing"}, tt.args...)})
			if got.code != 2 {
				t.Errorf("code %d, want 2; stderr:\n%s", got.code, got.stderr)
			}
			if !strings.Contains(got.stderr, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, got.stderr)
			}
			if got.stdout != "" {
				t.Errorf("stdout: %s", got.stdout)
			}
		})
	}
}

func TestSimPackingFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("sn,cpu_milli\nx,1\n"), 0o644)
	noGPUs := filepath.Join(dir, "cpu.csv")
	os.WriteFile(noGPUs, []byte("sn,cpu_milli,memory_mib,gpu,model\ncpu-0,32000,131072,0,\n"), 0o644)
	missing := filepath.Join(dir, "missing.csv")
	tests := []struct {
		name        string
		nodes, pods string
		want        []string
	}{
		{"a missing node list", missing, simPods, []string{"--nodes", "missing.csv"}},
		{"a missing pod list", simNodes, missing, []string{"--pods", "missing.csv"}},
		{"a node list without its columns", bad, simPods, []string{"--nodes", "bad.csv", `lacks column "memory_mib"`}},
		{"a pod list that is a node list", simNodes, simNodes, []string{"--pods", "nodes.csv", "lacks column"}},
		{"a node list without GPUs", noGPUs, simPods, []string{"--nodes", "cpu.csv", "no GPUs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, invocation{args: []string{"sim", "packing", "--nodes", tt.nodes, "--pods", tt.pods}})
			if got.code != 1 {
				t.Errorf("code %d, want 1; stderr:\n%s", got.code, got.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, got.stderr)
				}
			}
		})
	}
}

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []int64
	}{
		{"the paper's range", []string{"42-51"}, []int64{42, 43, 44, 45, 46, 47, 48, 49, 50, 51}},
		{"a list and a range, each seed once", []string{"3", "1-2", "2"}, []int64{3, 1, 2}},
		{"a one-seed range", []string{"7-7"}, []int64{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSeeds(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("seeds (-want +got):\n%s", diff)
			}
		})
	}
	for _, in := range []string{"", "-3", "1-", "a-b", "5-4", "0-20000"} {
		if _, err := parseSeeds([]string{in}); err == nil {
			t.Errorf("parseSeeds(%q) succeeded, want an error", in)
		}
	}
}

func TestFormatSeeds(t *testing.T) {
	tests := []struct {
		in   []int64
		want string
	}{
		{[]int64{42, 43, 44, 45}, "42-45"},
		{[]int64{1, 3, 5, 6, 7}, "1,3,5-7"},
		{[]int64{1, 2}, "1,2"},
		{[]int64{9}, "9"},
	}
	for _, tt := range tests {
		if got := formatSeeds(tt.in); got != tt.want {
			t.Errorf("formatSeeds(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestProgressOnATerminalRedrawsOneLine(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, now: func() time.Time { return testNow }, tty: true, total: 4, began: testNow, inflight: map[int]float64{}}
	p.start(0, "gpufleet seed 42")
	p.advance(0, 500, 1000)
	p.mu.Lock()
	p.draw()
	p.mu.Unlock()
	p.finish(0, "gpufleet seed 42")
	out := buf.String()
	if strings.Contains(out, "\n") {
		t.Errorf("a terminal bar wrote a newline: %q", out)
	}
	for _, want := range []string{"\r[===>", "0/4 runs  gpufleet seed 42", "\r[=======>", "1/4 runs"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar lacks %q: %q", want, out)
		}
	}
}

// TestSimPackingRealTrace runs the production policy and best fit on the
// Alibaba trace, when it is there: sharing must place at least as much GPU
// demand as best fit once all of it has arrived.
func TestSimPackingRealTrace(t *testing.T) {
	nodes := filepath.Join(realTrace, "openb_node_list_gpu_node.csv")
	pods := filepath.Join(realTrace, "openb_pod_list_default.csv")
	if _, err := os.Stat(pods); err != nil {
		t.Skipf("no Alibaba trace beside the checkout: %v", err)
	}
	if testing.Short() {
		t.Skip("a few seconds on the real trace")
	}
	got := runCLI(t, invocation{args: []string{"sim", "packing", "--nodes", nodes, "--pods", pods,
		"--policy", "gpufleet,bestfit", "--seed", "42", "--report", "1", "-o", "json"}})
	if got.code != 0 {
		t.Fatalf("code %d: %s", got.code, got.stderr)
	}
	var rep packingReport
	if err := json.Unmarshal([]byte(got.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	alloc := map[string]float64{}
	for _, r := range rep.Runs {
		alloc[r.Policy] = r.Points[0].Allocation
	}
	if alloc["gpufleet"] < alloc["bestfit"] || alloc["gpufleet"] == 0 {
		t.Errorf("allocation at 100%% arrived: gpufleet %.4f, bestfit %.4f; want gpufleet ≥ bestfit", alloc["gpufleet"], alloc["bestfit"])
	}
}
