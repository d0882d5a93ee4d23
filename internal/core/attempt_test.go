package core

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

var e0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// attempt ran [e0+from, e0+to) asking for milliCPU and memMiB, using cpu
// and peak bytes.
func attempt(from, to time.Duration, milliCPU, memMiB int64, cpu time.Duration, peak int64) Attempt {
	return Attempt{Workload: "wl-1", Number: 1, Start: e0.Add(from), End: e0.Add(to), MilliCPU: milliCPU, MemoryMiB: memMiB,
		Used: HostUse{CPU: cpu, PeakMemoryBytes: peak}}
}

// An attempt's efficiency is its use over its request × its time; a part
// of it counts in proportion; what was not measured, or not requested,
// adds nothing to the shares; several attempts weigh by their time.
func TestEfficiencyOfAttempts(t *testing.T) {
	cpuShare := func(e Efficiency) any {
		if s, ok := e.CPUShare(); ok {
			return math.Round(s*1e6) / 1e6
		}
		return "unknown"
	}
	memShare := func(e Efficiency) any {
		if s, ok := e.MemoryShare(); ok {
			return math.Round(s*1e6) / 1e6
		}
		return "unknown"
	}
	type want struct {
		Measured, CPUAttempts, MemoryAttempts int64
		CPUMicros, RequestedCPUMicros         int64
		Peak                                  int64
		CPUShare, MemoryShare                 any
	}
	for _, c := range []struct {
		name     string
		attempts []Attempt
		from, to time.Duration // the window; both 0: each attempt whole
		want     want
	}{
		{"one attempt: 120 CPU-s of 2 CPUs over 10 min, 1 GiB of 4 GiB",
			[]Attempt{attempt(0, 10*time.Minute, 2000, 4096, 120*time.Second, 1<<30)}, 0, 0,
			want{1, 1, 1, 120e6, 1200e6, 1 << 30, 0.1, 0.25}},
		{"half of it in the window counts half",
			[]Attempt{attempt(0, 10*time.Minute, 2000, 4096, 120*time.Second, 1<<30)}, 5 * time.Minute, time.Hour,
			want{1, 1, 1, 60e6, 600e6, 1 << 30, 0.1, 0.25}},
		{"outside the window: nothing",
			[]Attempt{attempt(0, 10*time.Minute, 2000, 4096, 120*time.Second, 1<<30)}, 10 * time.Minute, time.Hour,
			want{0, 0, 0, 0, 0, 0, "unknown", "unknown"}},
		{"not measured: nothing, never 0%",
			[]Attempt{attempt(0, 10*time.Minute, 2000, 4096, 0, 0)}, 0, 0,
			want{0, 0, 0, 0, 0, 0, "unknown", "unknown"}},
		{"no request: its use only",
			[]Attempt{attempt(0, 10*time.Minute, 0, 0, 30*time.Second, 5<<20)}, 0, 0,
			want{1, 1, 1, 30e6, 0, 5 << 20, "unknown", "unknown"}},
		{"memory measured, CPU not",
			[]Attempt{attempt(0, 10*time.Minute, 2000, 4096, 0, 2<<30)}, 0, 0,
			want{1, 0, 1, 0, 0, 2 << 30, "unknown", 0.5}},
		{"two attempts weigh by their time; the unmeasured one adds no request",
			[]Attempt{
				attempt(0, 10*time.Minute, 1000, 1024, 300*time.Second, 1<<30),                // 50% CPU, 100% memory
				attempt(10*time.Minute, 40*time.Minute, 1000, 1024, 180*time.Second, 256<<20), // 10% CPU, 25% memory
				attempt(40*time.Minute, 50*time.Minute, 1000, 1024, 0, 0),
				attempt(50*time.Minute, 60*time.Minute, 0, 0, 60*time.Second, 3<<30),
			}, 0, 0,
			want{3, 3, 3, 540e6, 2400e6, 3 << 30, 480.0 / 2400, (1.0*10 + 0.25*30) / 40}},
		{"an attempt that ran no time counts whole where it starts",
			[]Attempt{attempt(time.Minute, time.Minute, 1000, 1024, time.Second, 1<<20)}, 0, time.Hour,
			want{1, 1, 1, 1e6, 0, 1 << 20, "unknown", 0.000977}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e Efficiency
			for _, a := range c.attempts {
				if c.from == 0 && c.to == 0 {
					e.AddAll(a)
				} else {
					e.Add(a, e0.Add(c.from), e0.Add(c.to))
				}
			}
			got := want{e.Measured, e.CPUAttempts, e.MemoryAttempts, e.CPUMicros, e.RequestedCPUMicros, e.PeakMemoryBytes, cpuShare(e), memShare(e)}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			// Merging the attempts one by one gives the same sums.
			var m Efficiency
			for _, a := range c.attempts {
				var one Efficiency
				if c.from == 0 && c.to == 0 {
					one.AddAll(a)
				} else {
					one.Add(a, e0.Add(c.from), e0.Add(c.to))
				}
				m.Merge(one)
			}
			if d := cmp.Diff(e, m); d != "" {
				t.Errorf("merged one by one (-added +merged):\n%s", d)
			}
		})
	}
}

// CPU-seconds as an executor reports them become a duration, rounded;
// what is not a positive number is unknown.
func TestCPUTime(t *testing.T) {
	for in, want := range map[float64]time.Duration{
		0: 0, -1: 0, math.NaN(): 0, 1.5: 1500 * time.Millisecond, 123.4567891234: 123456789123 * time.Nanosecond,
		1e300: time.Duration(math.MaxInt64), math.Inf(1): time.Duration(math.MaxInt64),
	} {
		if got := CPUTime(in); got != want {
			t.Errorf("CPUTime(%v) = %v, want %v", in, got, want)
		}
	}
}

// Splitting a window in two splits an attempt's figures: the two parts
// add up to the whole window's within a CPU-microsecond of rounding per
// part, and the shares of each part are the attempt's own.
func TestEfficiencyPartsAddUp(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := rapid.Int64Range(0, 1e12).Draw(t, "start")
		run := rapid.Int64Range(1, 1e15).Draw(t, "run")
		a := Attempt{Start: e0.Add(time.Duration(start)), End: e0.Add(time.Duration(start + run)),
			MilliCPU: rapid.Int64Range(0, 1e6).Draw(t, "milliCPU"), MemoryMiB: rapid.Int64Range(0, 1<<22).Draw(t, "memMiB"),
			Used: HostUse{CPU: time.Duration(rapid.Int64Range(0, 1e17).Draw(t, "cpu")), PeakMemoryBytes: rapid.Int64Range(0, 1<<42).Draw(t, "peak")}}
		from := e0.Add(time.Duration(rapid.Int64Range(-1e12, start+run).Draw(t, "from")))
		to := from.Add(time.Duration(rapid.Int64Range(0, 2e15).Draw(t, "span")))
		mid := from.Add(time.Duration(rapid.Int64Range(0, int64(to.Sub(from))).Draw(t, "mid")))
		var whole, parts Efficiency
		whole.Add(a, from, to)
		for _, w := range [][2]time.Time{{from, mid}, {mid, to}} {
			var p Efficiency
			p.Add(a, w[0], w[1])
			if s, ok := p.CPUShare(); ok && a.Used.CPU >= time.Second && p.RequestedCPUMicros >= 1e6 {
				want := float64(a.Used.CPU/time.Microsecond) / (float64(a.MilliCPU) * a.Runtime().Seconds() / 1000 * 1e6)
				if math.Abs(s-want) > 1e-5*want+1e-5 {
					t.Fatalf("the CPU share of [%s, %s) is %v, the attempt's %v", w[0], w[1], s, want)
				}
			}
			parts.Merge(p)
		}
		if d := whole.CPUMicros - parts.CPUMicros; d < 0 || d > 2 {
			t.Fatalf("CPU: whole %d µs, parts %d µs", whole.CPUMicros, parts.CPUMicros)
		}
		if d := whole.RequestedCPUMicros - parts.RequestedCPUMicros; d < 0 || d > 2 {
			t.Fatalf("requested CPU: whole %d µs, parts %d µs", whole.RequestedCPUMicros, parts.RequestedCPUMicros)
		}
		if whole.PeakMemoryBytes != parts.PeakMemoryBytes && !(whole.Measured == 0 && parts.Measured == 0) {
			t.Fatalf("peak: whole %d, parts %d", whole.PeakMemoryBytes, parts.PeakMemoryBytes)
		}
		if w, p := whole.RequestedByteSeconds, parts.RequestedByteSeconds; math.Abs(w-p) > 1e-9*w {
			t.Fatalf("requested byte-seconds: whole %v, parts %v", w, p)
		}
	})
}
