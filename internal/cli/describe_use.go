package cli

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// maxDescribedAttempts bounds the attempts describe shows: the latest
// ones (-o json has them all).
const maxDescribedAttempts = 5

// describeAttempts writes the "Resource use" section: each ended attempt's
// CPU time and peak memory beside its request, the running attempt's
// (measured when it ends), and the totals of several. Nothing when no
// attempt ended.
func describeAttempts(kv func(int, string, string), section func(string), s api.WorkloadStatus, list *api.AttemptList) {
	if list == nil || len(list.Items) == 0 {
		return
	}
	section("Resource use")
	items := list.Items
	if n := len(items) - maxDescribedAttempts; n > 0 {
		kv(1, "Earlier", fmt.Sprintf("%d attempts (-o json lists them)", n))
		items = items[n:]
	}
	for _, a := range items {
		run := runtimeOf(a.RuntimeSeconds)
		kv(1, "Attempt "+strconv.Itoa(a.Attempt), fmt.Sprintf("%s after %s, started %s", endedAs(a.Phase, a.Reason), run, a.StartedAt.UTC().Format(time.RFC3339)))
		kv(2, "CPU", cpuUse(a.Efficiency, a.CPU, run))
		kv(2, "Memory", memoryUse(a.Efficiency, a.MemoryMiB))
	}
	if last := list.Items[len(list.Items)-1]; s.Phase == api.PhaseRunning && s.Attempts > last.Attempt {
		kv(1, "Attempt "+strconv.Itoa(s.Attempts), "running: its CPU and memory are measured when it ends")
	}
	if len(list.Items) < 2 {
		return
	}
	t := list.Total
	kv(1, "Total", fmt.Sprintf("%d attempts ended, %d measured", len(list.Items), t.MeasuredAttempts))
	cpu := "not measured"
	switch {
	case t.CPUSeconds == nil:
	case t.CPUEfficiency == nil:
		cpu = cpuSeconds(*t.CPUSeconds) + " (no CPU request)"
	default:
		cpu = fmt.Sprintf("%s of %s requested: %s used", cpuSeconds(*t.CPUSeconds), cpuSeconds(*t.RequestedCPUSeconds), formatShare(*t.CPUEfficiency))
	}
	kv(2, "CPU", cpu)
	mem := "not measured"
	switch {
	case t.PeakMemoryBytes == nil:
	case t.MemoryEfficiency == nil:
		mem = "highest peak " + formatBytes(*t.PeakMemoryBytes) + " (no memory request)"
	default:
		mem = fmt.Sprintf("highest peak %s; peaks were %s of the request, weighted by runtime", formatBytes(*t.PeakMemoryBytes), formatShare(*t.MemoryEfficiency))
	}
	kv(2, "Memory", mem)
}

// cpuUse is one attempt's CPU time beside its request over its runtime:
// "123.4 CPU-seconds over 10m0s of 2 CPUs requested: 10% used".
func cpuUse(e api.Efficiency, cpu quantity.Milli, run time.Duration) string {
	switch {
	case e.CPUSeconds == nil:
		return "not measured"
	case e.CPUEfficiency == nil:
		avg := ""
		if run > 0 {
			avg = ", " + strconv.FormatFloat(*e.CPUSeconds/run.Seconds(), 'f', 2, 64) + " CPUs on average"
		}
		return fmt.Sprintf("%s over %s%s (no CPU request)", cpuSeconds(*e.CPUSeconds), run, avg)
	}
	return fmt.Sprintf("%s over %s of %s requested: %s used", cpuSeconds(*e.CPUSeconds), run, cpuCount(cpu), formatShare(*e.CPUEfficiency))
}

// memoryUse is one attempt's peak memory beside its request: "peak 1.2GiB
// of 4GiB requested: 30%".
func memoryUse(e api.Efficiency, memMiB int64) string {
	switch {
	case e.PeakMemoryBytes == nil:
		return "not measured"
	case e.MemoryEfficiency == nil:
		return "peak " + formatBytes(*e.PeakMemoryBytes) + " (no memory request)"
	}
	return fmt.Sprintf("peak %s of %s requested: %s", formatBytes(*e.PeakMemoryBytes), formatBytes(memMiB<<20), formatShare(*e.MemoryEfficiency))
}

// endedAs is how an attempt ended: "Failed (OOMKilled)".
func endedAs(phase, reason string) string {
	if reason == "" || reason == phase {
		return phase
	}
	return phase + " (" + reason + ")"
}

// runtimeOf is a runtime in seconds as a duration, to the second (to the
// millisecond below one).
func runtimeOf(sec float64) time.Duration {
	d := time.Duration(sec * float64(time.Second))
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// cpuSeconds writes CPU time: "123.4 CPU-seconds" (cpuNumber).
func cpuSeconds(s float64) string { return cpuNumber(s) + " CPU-seconds" }

// cpuNumber writes a number of CPU-seconds with one decimal, two below
// 10, and one too small for that as "<0.01", never 0.
func cpuNumber(s float64) string {
	switch {
	case s > 0 && s < 0.005:
		return "<0.01"
	case s < 10:
		return strconv.FormatFloat(s, 'f', 2, 64)
	}
	return strconv.FormatFloat(s, 'f', 1, 64)
}

// cpuCount writes a CPU request: "1 CPU", "2 CPUs", "0.5 CPUs".
func cpuCount(m quantity.Milli) string {
	if m == 1000 {
		return "1 CPU"
	}
	return m.String() + " CPUs"
}

// formatShare writes a share as a percentage with at most one decimal,
// and a share too small to show as such as "<0.1%", never "0%": 0.1 →
// "10%", 0.0004 → "<0.1%".
func formatShare(f float64) string {
	if f > 0 && f < 0.0005 {
		return "<0.1%"
	}
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}
