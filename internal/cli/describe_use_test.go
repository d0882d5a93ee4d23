package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// resourceUse is the "Resource use" section of a description, each line
// with its runs of spaces made one.
func resourceUse(t *testing.T, desc string) []string {
	t.Helper()
	i := strings.Index(desc, "Resource use:")
	if i < 0 {
		return nil
	}
	var out []string
	for _, l := range strings.Split(desc[i:], "\n")[1:] {
		if !strings.HasPrefix(l, "  ") {
			break
		}
		out = append(out, regexp.MustCompile(` {2,}`).ReplaceAllString(strings.TrimSpace(l), " "))
	}
	return out
}

// describe shows, for each attempt that ended, the CPU time it used beside
// its CPU request over its runtime and its peak memory beside its memory
// request; what was not measured says so, never 0%; with no request, what
// it used alone. -o json carries the same figures.
func TestDescribeShowsResourceUseBesideRequests(t *testing.T) {
	f := newTestServer(t)
	f.submit(
		api.Workload{Name: "sized", Resources: api.Resources{GPUs: 1000, CPU: 2000, MemoryMiB: 4096}, Command: []string{"sleep"}},
		api.Workload{Name: "unmeasured", Resources: api.Resources{GPUs: 1000, CPU: 1000, MemoryMiB: 1024}, Command: []string{"sleep"}},
		api.Workload{Name: "unsized", Resources: api.Resources{GPUs: 1000}, Command: []string{"sleep"}},
	)
	f.step() // all three start at testNow
	f.setNow(testNow.Add(10 * time.Minute))
	if !f.ex.Use("wl-1", 1, 120, 1288490189) || !f.ex.Use("wl-3", 1, 300, 5<<20) {
		t.Fatal("the tasks are not running")
	}
	for _, id := range []core.WorkloadID{"wl-1", "wl-2", "wl-3"} {
		f.ex.Finish(id, 1, 0)
	}
	f.step()

	for id, want := range map[string][]string{
		"wl-1": {
			"Attempt 1: Succeeded (Completed) after 10m0s, started 2025-06-01T12:00:00Z",
			"CPU: 120.0 CPU-seconds over 10m0s of 2 CPUs requested: 10% used",
			"Memory: peak 1.2GiB of 4GiB requested: 30%",
		},
		"wl-2": {
			"Attempt 1: Succeeded (Completed) after 10m0s, started 2025-06-01T12:00:00Z",
			"CPU: not measured",
			"Memory: not measured",
		},
		"wl-3": {
			"Attempt 1: Succeeded (Completed) after 10m0s, started 2025-06-01T12:00:00Z",
			"CPU: 300.0 CPU-seconds over 10m0s, 0.50 CPUs on average (no CPU request)",
			"Memory: peak 5MiB (no memory request)",
		},
	} {
		got := f.run(t, "describe", id)
		if got.code != 0 {
			t.Fatalf("describe %s: %+v", id, got)
		}
		if d := cmp.Diff(want, resourceUse(t, got.stdout)); d != "" {
			t.Errorf("describe %s, resource use (-want +got):\n%s", id, d)
		}
		if strings.Contains(got.stdout, " 0%") {
			t.Errorf("describe %s shows 0%%:\n%s", id, got.stdout)
		}
	}

	var d struct {
		Attempts api.AttemptList `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(f.run(t, "describe", "wl-1", "-o", "json").stdout), &d); err != nil {
		t.Fatal(err)
	}
	fl, in := func(v float64) *float64 { return &v }, func(v int64) *int64 { return &v }
	eff := api.Efficiency{MeasuredAttempts: 1, CPUSeconds: fl(120), RequestedCPUSeconds: fl(1200), CPUEfficiency: fl(0.1),
		PeakMemoryBytes: in(1288490189), MemoryEfficiency: fl(1288490189.0 / (4 << 30))}
	want := api.AttemptList{Items: []api.Attempt{{Attempt: 1, StartedAt: testNow, FinishedAt: testNow.Add(10 * time.Minute), RuntimeSeconds: 600,
		Phase: "Succeeded", Reason: "Completed", CPU: 2000, MemoryMiB: 4096, Efficiency: eff}}, Total: eff}
	if diff := cmp.Diff(want, d.Attempts); diff != "" {
		t.Errorf("describe -o json's attempts (-want +got):\n%s", diff)
	}
	var unmeasured struct {
		Attempts map[string]any `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(f.run(t, "describe", "wl-2", "-o", "json").stdout), &unmeasured); err != nil {
		t.Fatal(err)
	}
	if total := unmeasured.Attempts["total"].(map[string]any); total["cpuSeconds"] != nil || total["cpuEfficiency"] != nil || total["memoryEfficiency"] != nil {
		t.Errorf("an unmeasured workload's total: %v, want null figures", total)
	}
}

// With several attempts, describe shows the latest ones, the running one,
// and their totals.
func TestDescribeTotalsSeveralAttempts(t *testing.T) {
	fl, in := func(v float64) *float64 { return &v }, func(v int64) *int64 { return &v }
	var items []api.Attempt
	for n := 1; n <= 7; n++ {
		items = append(items, api.Attempt{Attempt: n, StartedAt: testNow.Add(time.Duration(n) * time.Hour), RuntimeSeconds: 0.25, Phase: "Failed", Reason: "OOMKilled",
			CPU: 500, MemoryMiB: 256, Efficiency: api.Efficiency{MeasuredAttempts: 1, CPUSeconds: fl(0.05), RequestedCPUSeconds: fl(0.125), CPUEfficiency: fl(0.4),
				PeakMemoryBytes: in(256 << 20), MemoryEfficiency: fl(1)}})
	}
	list := &api.AttemptList{Items: items, Total: api.Efficiency{MeasuredAttempts: 7, CPUSeconds: fl(0.35), RequestedCPUSeconds: fl(0.875), CPUEfficiency: fl(0.4),
		PeakMemoryBytes: in(256 << 20), MemoryEfficiency: fl(0.99999)}}
	var out bytes.Buffer
	tw := newTabWriter(&out)
	kv := func(indent int, key, val string) {
		tw.Write([]byte(strings.Repeat("  ", indent) + key + ":\t" + val + "\n"))
	}
	section := func(title string) { tw.Write([]byte(title + ":\t\n")) }
	describeAttempts(kv, section, api.WorkloadStatus{Phase: api.PhaseRunning, Attempts: 8}, list)
	tw.Flush()
	want := []string{
		"Earlier: 2 attempts (-o json lists them)",
		"Attempt 3: Failed (OOMKilled) after 250ms, started 2025-06-01T15:00:00Z",
		"CPU: 0.05 CPU-seconds over 250ms of 0.5 CPUs requested: 40% used",
		"Memory: peak 256MiB of 256MiB requested: 100%",
		"Attempt 4: Failed (OOMKilled) after 250ms, started 2025-06-01T16:00:00Z",
		"CPU: 0.05 CPU-seconds over 250ms of 0.5 CPUs requested: 40% used",
		"Memory: peak 256MiB of 256MiB requested: 100%",
		"Attempt 5: Failed (OOMKilled) after 250ms, started 2025-06-01T17:00:00Z",
		"CPU: 0.05 CPU-seconds over 250ms of 0.5 CPUs requested: 40% used",
		"Memory: peak 256MiB of 256MiB requested: 100%",
		"Attempt 6: Failed (OOMKilled) after 250ms, started 2025-06-01T18:00:00Z",
		"CPU: 0.05 CPU-seconds over 250ms of 0.5 CPUs requested: 40% used",
		"Memory: peak 256MiB of 256MiB requested: 100%",
		"Attempt 7: Failed (OOMKilled) after 250ms, started 2025-06-01T19:00:00Z",
		"CPU: 0.05 CPU-seconds over 250ms of 0.5 CPUs requested: 40% used",
		"Memory: peak 256MiB of 256MiB requested: 100%",
		"Attempt 8: running: its CPU and memory are measured when it ends",
		"Total: 7 attempts ended, 7 measured",
		"CPU: 0.35 CPU-seconds of 0.88 CPU-seconds requested: 40% used",
		"Memory: highest peak 256MiB; peaks were 100% of the request, weighted by runtime",
	}
	if d := cmp.Diff(want, resourceUse(t, out.String())); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// A share is never shown as 0% when something was used.
func TestFormatShare(t *testing.T) {
	for in, want := range map[float64]string{0.1: "10%", 0.1234: "12.3%", 0.0004: "<0.1%", 0.0006: "0.1%", 1.5: "150%", 0: "0%"} {
		if got := formatShare(in); got != want {
			t.Errorf("formatShare(%v) = %q, want %q", in, got, want)
		}
	}
}
