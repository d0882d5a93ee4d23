package cli

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// The cost table shows each row's efficiency beside its cost, "-" where
// nothing was measured (never 0%), and the CSV its exact values; a report
// with nothing measured has no such columns.
func TestCostReportShowsEfficiency(t *testing.T) {
	fl, in := func(v float64) *float64 { return &v }, func(v int64) *int64 { return &v }
	rep := &api.CostReport{Currency: "USD", By: api.CostByWorkload, From: testNow, To: testNow.Add(time.Hour), Items: []api.CostRow{
		{Name: "wl-1", WorkloadName: "sized", TotalCost: 2 * quantity.MoneyUnit, Efficiency: &api.Efficiency{MeasuredAttempts: 1, CPUSeconds: fl(120), RequestedCPUSeconds: fl(1200),
			CPUEfficiency: fl(0.1), PeakMemoryBytes: in(1288490189), MemoryEfficiency: fl(0.3)}},
		{Name: "wl-2", WorkloadName: "unsized", TotalCost: quantity.MoneyUnit, Efficiency: &api.Efficiency{MeasuredAttempts: 1, CPUSeconds: fl(30), PeakMemoryBytes: in(5 << 20)}},
		{Name: "wl-3", WorkloadName: "unmeasured", TotalCost: quantity.MoneyUnit},
	}}
	rep.Total = api.CostRow{TotalCost: 4 * quantity.MoneyUnit, Efficiency: &api.Efficiency{MeasuredAttempts: 2, CPUSeconds: fl(150), RequestedCPUSeconds: fl(1200),
		CPUEfficiency: fl(0.1), PeakMemoryBytes: in(1288490189), MemoryEfficiency: fl(0.3)}}
	var out bytes.Buffer
	if err := printCostTable(&env{stdout: &out}, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	head := strings.Fields(lines[1])
	if !slices.Equal(head[len(head)-4:], []string{"CPU-SECONDS-USED", "CPU-EFFICIENCY", "PEAK-MEMORY", "MEMORY-EFFICIENCY"}) {
		t.Fatalf("header %q", head)
	}
	for _, want := range [][]string{{"wl-1", "120.0", "10%", "1.2GiB", "30%"}, {"wl-2", "30.0", "-", "5MiB", "-"}, {"wl-3", "-", "-", "-", "-"}, {"TOTAL", "150.0", "10%", "1.2GiB", "30%"}} {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, want[0]+" ") })
		if i < 0 {
			t.Fatalf("no row %s in\n%s", want[0], out.String())
		}
		f := strings.Fields(lines[i])
		if got := append([]string{f[0]}, f[len(f)-4:]...); !slices.Equal(got, want) {
			t.Errorf("row %s ends %q, want %q", want[0], got, want)
		}
	}

	out.Reset()
	if err := printCostCSV(&out, rep); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := func(r []string, name string) string { return r[slices.Index(recs[0], name)] }
	for i, want := range [][]string{{"1", "120", "1200", "0.1", "1288490189", "0.3"}, {"1", "30", "", "", "5242880", ""}, {"0", "", "", "", "", ""}} {
		var got []string
		for _, n := range []string{"measuredAttempts", "cpuSeconds", "requestedCPUSeconds", "cpuEfficiency", "peakMemoryBytes", "memoryEfficiency"} {
			got = append(got, col(recs[i+1], "efficiency."+n))
		}
		if !slices.Equal(got, want) {
			t.Errorf("CSV row %s: efficiency %q, want %q", recs[i+1][0], got, want)
		}
	}

	for i := range rep.Items {
		rep.Items[i].Efficiency = nil
	}
	rep.Total.Efficiency = nil
	out.Reset()
	if err := printCostTable(&env{stdout: &out}, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "EFFICIENCY") {
		t.Errorf("a report with nothing measured shows efficiency columns:\n%s", out.String())
	}
}
