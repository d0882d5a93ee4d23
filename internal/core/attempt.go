package core

import (
	"math"
	"math/bits"
	"time"
)

// HostUse is what one attempt used of its host, as its executor measured
// it (the local executor: the attempt's cgroup): its CPU time and its peak
// memory. A zero figure is unknown: an executor that measures nothing, or
// a machine without cgroups.
type HostUse struct {
	CPU             time.Duration
	PeakMemoryBytes int64
}

// Measured reports whether any figure is known.
func (u HostUse) Measured() bool { return u.CPU > 0 || u.PeakMemoryBytes > 0 }

// CPUTime converts CPU-seconds, as an executor reports them, to a
// duration: rounded to the nanosecond, 0 for what is not a positive
// number, capped where a duration ends.
func CPUTime(seconds float64) time.Duration {
	switch {
	case !(seconds > 0): // NaN too
		return 0
	case seconds >= float64(math.MaxInt64)/1e9:
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(seconds * 1e9))
}

// Attempt is one attempt of a workload that ended, recorded with its end:
// when it ran, how it ended (the phase it ended in: Succeeded, Failed,
// Cancelled, or Preempted and Lost for an attempt that was requeued), what
// it requested of its host (all replicas together, as its limits are set)
// and what it used.
type Attempt struct {
	Workload   WorkloadID
	Team       TeamName
	Number     int
	Start, End time.Time
	Phase      Phase
	Reason     string
	// MilliCPU and MemoryMiB are the attempt's request, all replicas; 0
	// is none.
	MilliCPU  int64
	MemoryMiB int64
	Used      HostUse
}

// Runtime is how long the attempt ran.
func (a Attempt) Runtime() time.Duration { return max(0, a.End.Sub(a.Start)) }

// Efficiency sums what attempts used of the host CPU and memory they
// requested (what a host is billed on), each attempt over a part of its
// run, in proportion to its time there: all of it for a workload's
// attempts, the part inside the window for a cost report (an attempt's
// use is measured once, at its end, so the part is assumed to use its
// share evenly). Only measured figures count: an attempt whose CPU time is
// unknown adds nothing to the CPU sums, nor its request, so that what was
// not measured never reads as unused.
type Efficiency struct {
	// Measured counts the attempts with a part here whose use was
	// measured; CPUAttempts and MemoryAttempts those whose CPU time, and
	// peak memory, were.
	Measured, CPUAttempts, MemoryAttempts int64
	// CPUMicros is the CPU time used, in CPU-microseconds; of it,
	// RequestedUsedMicros is that of the attempts that requested CPU, and
	// RequestedCPUMicros what they requested: their CPU request × their
	// time.
	CPUMicros, RequestedUsedMicros, RequestedCPUMicros int64
	// PeakMemoryBytes is the highest peak of one attempt. PeakByteSeconds
	// and RequestedByteSeconds are, over the attempts that requested
	// memory, their peaks and their requests, each × its time.
	PeakMemoryBytes                       int64
	PeakByteSeconds, RequestedByteSeconds float64
}

// AddAll adds the whole of an attempt.
func (e *Efficiency) AddAll(a Attempt) { e.Add(a, a.Start, a.End) }

// Add adds the part of attempt a inside [from, to). An attempt that ran
// no time counts whole where its start is inside.
func (e *Efficiency) Add(a Attempt, from, to time.Time) {
	if !a.Used.Measured() {
		return
	}
	run := a.Runtime()
	part := overlap(a.Start, a.End, from, to)
	switch {
	case run == 0 && !a.Start.Before(from) && a.Start.Before(to):
		part, run = 1, 1
	case part <= 0:
		return
	}
	e.Measured++
	if a.Used.CPU > 0 {
		e.CPUAttempts++
		used := mulDiv(uint64(a.Used.CPU/time.Microsecond), uint64(part), uint64(run))
		e.CPUMicros = addCapped(e.CPUMicros, used)
		if a.MilliCPU > 0 {
			e.RequestedUsedMicros = addCapped(e.RequestedUsedMicros, used)
			e.RequestedCPUMicros = addCapped(e.RequestedCPUMicros, mulDiv(uint64(a.MilliCPU), uint64(part), 1e6))
		}
	}
	if a.Used.PeakMemoryBytes > 0 {
		e.MemoryAttempts++
		e.PeakMemoryBytes = max(e.PeakMemoryBytes, a.Used.PeakMemoryBytes)
		if a.MemoryMiB > 0 {
			s := part.Seconds()
			e.PeakByteSeconds += float64(a.Used.PeakMemoryBytes) * s
			e.RequestedByteSeconds += float64(a.MemoryMiB) * (1 << 20) * s
		}
	}
}

// Merge adds o's sums to e's.
func (e *Efficiency) Merge(o Efficiency) {
	e.Measured += o.Measured
	e.CPUAttempts += o.CPUAttempts
	e.MemoryAttempts += o.MemoryAttempts
	e.CPUMicros = addCapped(e.CPUMicros, o.CPUMicros)
	e.RequestedUsedMicros = addCapped(e.RequestedUsedMicros, o.RequestedUsedMicros)
	e.RequestedCPUMicros = addCapped(e.RequestedCPUMicros, o.RequestedCPUMicros)
	e.PeakMemoryBytes = max(e.PeakMemoryBytes, o.PeakMemoryBytes)
	e.PeakByteSeconds += o.PeakByteSeconds
	e.RequestedByteSeconds += o.RequestedByteSeconds
}

// CPUShare is the share of the requested CPU time that was used (0.1 is
// 10%; above 1 where a task used more than it asked for, which a limit
// set from its request allows only in bursts); ok is false when nothing
// measured requested CPU.
func (e Efficiency) CPUShare() (share float64, ok bool) {
	if e.RequestedCPUMicros <= 0 {
		return 0, false
	}
	return float64(e.RequestedUsedMicros) / float64(e.RequestedCPUMicros), true
}

// MemoryShare is the peak memory over the requested memory, weighted by
// time (one attempt: its peak / its request); ok is false when nothing
// measured requested memory.
func (e Efficiency) MemoryShare() (share float64, ok bool) {
	if e.RequestedByteSeconds <= 0 {
		return 0, false
	}
	return e.PeakByteSeconds / e.RequestedByteSeconds, true
}

// mulDiv is a × b / c in 128 bits, rounded down, capped at the largest
// int64.
func mulDiv(a, b, c uint64) int64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, c)
	return int64(min(q, math.MaxInt64))
}

// addCapped adds two non-negative numbers, capped at the largest int64.
func addCapped(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// overlap is how long [a, b) and [from, to) share.
func overlap(a, b, from, to time.Time) time.Duration {
	if from.After(a) {
		a = from
	}
	if to.Before(b) {
		b = to
	}
	return max(0, b.Sub(a))
}
