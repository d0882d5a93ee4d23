package cli

import (
	"context"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// requireCgroups skips a test where the live server's node measures no
// attempt (no cgroups: not root), unless GPUFLEET_REQUIRE_ISOLATION=1
// (CI) makes that a failure.
func requireCgroups(t *testing.T, s *liveServer) {
	t.Helper()
	requireIsolationOf(t, s, "cgroup")
}

// requireIsolationOf skips the test (fails it where isolation is
// required) unless the server's node confines tasks with what (a word of
// its isolation: "cgroup", "network namespaces").
func requireIsolationOf(t *testing.T, s *liveServer, what string) {
	t.Helper()
	nodes, err := api.NewClient(s.addr, s.admin).Nodes(context.Background())
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	if iso := nodes[0].Isolation; !strings.Contains(iso, what) {
		if os.Getenv("GPUFLEET_REQUIRE_ISOLATION") == "1" {
			t.Fatalf("isolation is required (GPUFLEET_REQUIRE_ISOLATION=1) but the node says %q", iso)
		}
		t.Skipf("this machine gives tasks no %s: %s", what, iso)
	}
}

// Real jobs on the local executor, each attempt in its cgroup: a busy
// loop's CPU-seconds and an allocation's peak memory reach describe,
// beside their requests, and the cost report's rows as efficiency, while
// the host cost stays what the requests bill.
func TestLiveResourceUseOfRealJobs(t *testing.T) {
	s := startLiveServer(t)
	requireCgroups(t, s)
	// One unit per GPU-second and per CPU-second requested.
	set := strings.Fields(s.must(t, "set", "price", "local", "--on-demand", "3600", "--cpu-core-hour", "3600"))
	from, err := time.Parse(time.RFC3339, set[len(set)-1])
	if err != nil {
		t.Fatalf("set price: no time it applies from: %v", err)
	}
	// The jobs start once the price applies: what it is under test.
	time.Sleep(time.Until(from))

	busy := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.25", "--cpu", "2", "--memory", "256Mi", "--", "/usr/bin/python3", "-c",
		"import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass"))
	alloc := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.25", "--memory", "512Mi", "--", "/usr/bin/python3", "-c",
		"import time\nb = b'\\x01' * (200 << 20)\ntime.sleep(0.3)\nprint(len(b))"))
	runtime := map[string]float64{}
	for _, id := range []string{busy, alloc} {
		s.run(t, s.admin, "wait", id)
		var w api.Workload
		mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
		if w.Status.Phase != api.PhaseSucceeded || w.Status.StartedAt == nil || w.Status.FinishedAt == nil {
			t.Fatalf("%s ended %s (%s), want Succeeded", id, w.Status.Phase, w.Status.Message)
		}
		runtime[id] = w.Status.FinishedAt.Sub(*w.Status.StartedAt).Seconds()
	}

	// describe: the busy loop used about 1.5 of its 2 CPUs × runtime.
	d := s.must(t, "describe", busy)
	m := regexp.MustCompile(`(?m)^\s+CPU:\s+([0-9.]+) CPU-seconds over (\S+) of 2 CPUs requested: ([0-9.]+)% used$`).FindStringSubmatch(d)
	if m == nil {
		t.Fatalf("describe %s shows no CPU use beside its request:\n%s", busy, d)
	}
	cpu, _ := strconv.ParseFloat(m[1], 64)
	pct, _ := strconv.ParseFloat(m[3], 64)
	if cpu < 1.4 || cpu > 2*runtime[busy]+0.5 || pct <= 0 || math.Abs(pct-100*cpu/(2*runtime[busy])) > 5 {
		t.Errorf("describe %s: %s CPU-seconds, %s%% of 2 CPUs over %.2f s; want 1.5 CPU-seconds and their share:\n%s", busy, m[1], m[3], runtime[busy], d)
	}
	if !regexp.MustCompile(`(?m)^\s+Memory:\s+peak [0-9.]+[KM]iB of 256MiB requested: [0-9.]+%$`).MatchString(d) {
		t.Errorf("describe %s shows no peak memory beside its request:\n%s", busy, d)
	}
	d = s.must(t, "describe", alloc)
	m = regexp.MustCompile(`(?m)^\s+Memory:\s+peak ([0-9.]+)MiB of 512MiB requested: ([0-9.]+)%$`).FindStringSubmatch(d)
	if m == nil {
		t.Fatalf("describe %s shows no peak memory beside its request:\n%s", alloc, d)
	}
	if peak, _ := strconv.ParseFloat(m[1], 64); peak < 200 || peak > 512 {
		t.Errorf("describe %s: peak %s MiB, want the 200 MiB it allocated and less than its limit:\n%s", alloc, m[1], d)
	}
	if !regexp.MustCompile(`(?m)^\s+CPU:\s+[0-9.]+ CPU-seconds over \S+, [0-9.]+ CPUs on average \(no CPU request\)$`).MatchString(d) {
		t.Errorf("describe %s, which requested no CPU, does not say what it used alone:\n%s", alloc, d)
	}

	// The cost report: the same figures as efficiency; the host cost
	// still bills 2 CPUs over the whole runtime.
	var rep api.CostReport
	mustJSON(t, s.must(t, "cost", "report", "--by", "workload", "--since", "1h", "-o", "json"), &rep)
	rows := rowsOf(rep)
	b, a := rows[busy], rows[alloc]
	if e := b.Efficiency; e == nil || e.MeasuredAttempts != 1 || e.CPUSeconds == nil || e.RequestedCPUSeconds == nil || e.CPUEfficiency == nil ||
		*e.CPUSeconds < 1.4 || math.Abs(*e.RequestedCPUSeconds-2*runtime[busy]) > 0.1 || math.Abs(*e.CPUEfficiency - *e.CPUSeconds / *e.RequestedCPUSeconds) > 1e-9 {
		t.Errorf("%s's row: efficiency %s, want about 1.5 of %.2f CPU-seconds requested", busy, efficiencyString(b.Efficiency), 2*runtime[busy])
	}
	if got := float64(b.HostCost) / float64(quantity.MoneyUnit); math.Abs(got-2*runtime[busy]) > 0.1 {
		t.Errorf("%s's host cost is %v, want its request billed: 2 CPUs × %.2f s", busy, got, runtime[busy])
	}
	if e := a.Efficiency; e == nil || e.PeakMemoryBytes == nil || e.MemoryEfficiency == nil || *e.PeakMemoryBytes < 200<<20 ||
		math.Abs(*e.MemoryEfficiency-float64(*e.PeakMemoryBytes)/(512<<20)) > 1e-9 || e.CPUEfficiency != nil {
		t.Errorf("%s's row: efficiency %s, want its peak of 200 MiB over 512 MiB and no CPU share", alloc, efficiencyString(a.Efficiency))
	}
	table := s.must(t, "cost", "report", "--by", "workload", "--since", "1h")
	if !strings.Contains(table, "CPU-EFFICIENCY") || !regexp.MustCompile(`(?m)^`+busy+` .* [0-9.]+% +[0-9.]+[KM]iB +[0-9.]+%$`).MatchString(table) {
		t.Errorf("the cost table shows no efficiency for %s:\n%s", busy, table)
	}
}

func rowsOf(rep api.CostReport) map[string]api.CostRow {
	m := map[string]api.CostRow{}
	for _, r := range rep.Items {
		m[r.Name] = r
	}
	return m
}

// efficiencyString writes an efficiency's figures, for messages.
func efficiencyString(e *api.Efficiency) string {
	if e == nil {
		return "none"
	}
	f := func(v *float64) string {
		if v == nil {
			return "null"
		}
		return strconv.FormatFloat(*v, 'g', 6, 64)
	}
	peak := "null"
	if e.PeakMemoryBytes != nil {
		peak = strconv.FormatInt(*e.PeakMemoryBytes, 10)
	}
	return "{measured " + strconv.FormatInt(e.MeasuredAttempts, 10) + ", cpu " + f(e.CPUSeconds) + " of " + f(e.RequestedCPUSeconds) + " (" + f(e.CPUEfficiency) +
		"), peak " + peak + " (" + f(e.MemoryEfficiency) + ")}"
}
