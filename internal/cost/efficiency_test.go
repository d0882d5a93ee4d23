package cost

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// ran is attempt n of workload w of team, from second from to second to,
// asking for milliCPU and memMiB, having used cpuSec CPU-seconds and peak
// bytes.
func ran(w, team string, n, from, to int, milliCPU, memMiB int64, cpuSec float64, peak int64) core.Attempt {
	return core.Attempt{Workload: core.WorkloadID(w), Team: core.TeamName(team), Number: n, Start: at(from), End: at(to), Phase: core.Succeeded,
		MilliCPU: milliCPU, MemoryMiB: memMiB, Used: core.HostUse{CPU: core.CPUTime(cpuSec), PeakMemoryBytes: peak}}
}

// Cost reports show what the attempts used of the CPU and memory they
// requested, beside money that stays on the requests: per workload, each
// one's figures; per team, their sums and shares; an attempt half in the
// window counts half; a workload whose use was not measured has none (not
// 0%); a member's total holds only its teams'.
func TestReportsShowEfficiencyBesideRequests(t *testing.T) {
	cpuPrice := perSecond("local")
	cpuPrice.CPUCoreHour = units(36) // 0.01 a CPU-second
	a, b, c, d := job("a", "vision", core.Succeeded, 1000), job("b", "vision", core.Succeeded, 2000), job("c", "vision", core.Succeeded, 1000), job("d", "nlp", core.Succeeded, 1000)
	withHost := func(x Interval, milliCPU int64) Interval { x.HostMilliCPU = milliCPU; return x }
	in := Input{
		From: t0, To: t0.Add(time.Hour), Now: t0.Add(time.Hour), Currency: "USD",
		Prices: []api.Price{cpuPrice},
		Pools:  []PoolGPUs{{"local", 4}},
		Intervals: []Interval{
			withHost(iv("a", "local", 0, 1000, 0, 1000), 2000),
			withHost(iv("b", "local", 1, 1000, -200, 2000), 1000),
			withHost(iv("c", "local", 2, 1000, 0, 1000), 1000),
			withHost(iv("d", "local", 3, 1000, 0, 1000), 4000),
		},
		Workloads: workloads(a, b, c, d),
	}
	before := mustReport(t, in, api.CostByWorkload, admin)
	in.Attempts = []core.Attempt{
		ran("a", "vision", 1, 0, 1000, 2000, 4096, 500, 1<<30), // 25% of 2000 CPU-s, 1 of 4 GiB
		// b ran 2000 s, 200 of them before the window: 90% of its
		// figures count.
		ran("b", "vision", 1, -200, 2000, 1000, 0, 1100, 3<<30),
		ran("c", "vision", 1, 0, 1000, 1000, 1024, 0, 0), // not measured
		ran("d", "nlp", 1, 0, 1000, 4000, 2048, 4000, 2<<30),
	}
	rep := mustReport(t, in, api.CostByWorkload, admin)
	opt := cmpopts.EquateApprox(0, 1e-9)

	f, i := func(v float64) *float64 { return &v }, func(v int64) *int64 { return &v }
	want := map[string]*api.Efficiency{
		"a": {MeasuredAttempts: 1, CPUSeconds: f(500), RequestedCPUSeconds: f(2000), CPUEfficiency: f(0.25), PeakMemoryBytes: i(1 << 30), MemoryEfficiency: f(0.25)},
		"b": {MeasuredAttempts: 1, CPUSeconds: f(1000), RequestedCPUSeconds: f(2000), CPUEfficiency: f(0.5), PeakMemoryBytes: i(3 << 30)},
		"c": nil,
		"d": {MeasuredAttempts: 1, CPUSeconds: f(4000), RequestedCPUSeconds: f(4000), CPUEfficiency: f(1), PeakMemoryBytes: i(2 << 30), MemoryEfficiency: f(1)},
	}
	for name, r := range rowsByName(rep) {
		if d := cmp.Diff(want[name], r.Efficiency, opt); d != "" {
			t.Errorf("workload %s's efficiency (-want +got):\n%s", name, d)
		}
		// Money stays on the requests.
		b := rowsByName(before)[name]
		b.Efficiency = r.Efficiency
		if d := cmp.Diff(b, r); d != "" {
			t.Errorf("workload %s's row changed beside its efficiency (-before +after):\n%s", name, d)
		}
	}
	// b's memory request is none: its peak counts, its share does not.
	wantTotal := &api.Efficiency{MeasuredAttempts: 3, CPUSeconds: f(5500), RequestedCPUSeconds: f(8000), CPUEfficiency: f(5500.0 / 8000),
		PeakMemoryBytes: i(3 << 30), MemoryEfficiency: f((1.0*1000 + 2.0*1000) / (4.0*1000 + 2.0*1000))}
	if d := cmp.Diff(wantTotal, rep.Total.Efficiency, opt); d != "" {
		t.Errorf("the total's efficiency (-want +got):\n%s", d)
	}

	byTeam := rowsByName(mustReport(t, in, api.CostByTeam, admin))
	if d := cmp.Diff(&api.Efficiency{MeasuredAttempts: 2, CPUSeconds: f(1500), RequestedCPUSeconds: f(4000), CPUEfficiency: f(1500.0 / 4000),
		PeakMemoryBytes: i(3 << 30), MemoryEfficiency: f(0.25)}, byTeam["vision"].Efficiency, opt); d != "" {
		t.Errorf("team vision's efficiency (-want +got):\n%s", d)
	}

	member := mustReport(t, in, api.CostByTeam, Visibility{Teams: map[core.TeamName]bool{"nlp": true}})
	if d := cmp.Diff(want["d"], member.Total.Efficiency, opt); d != "" {
		t.Errorf("a member of nlp sees in the total (-want +got):\n%s", d)
	}

	// A window that holds none of the attempts' time has no efficiency.
	in.From, in.To = t0.Add(2*time.Hour), t0.Add(3*time.Hour)
	if e := mustReport(t, in, api.CostByTeam, admin).Total.Efficiency; e != nil {
		t.Errorf("a window after the attempts: efficiency %+v, want none", e)
	}
}
