package app

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The collector's heap floor.
//
// Go collects when the heap has grown by GOGC percent (100) over what the
// last collection found live. A server's live heap is small, a few tens of
// MB with tens of thousands of active workloads, and every request makes
// garbage (HTTP, JSON, the writer's rows): under a flood of 8,000 submits a
// second the server collected 16 times a second, for 7% of the CPU
// (GODEBUG=gctrace=1, BenchmarkSubmit). So while the live heap is small the
// server raises GOGC until the heap may reach heapFloor before a
// collection, as Uber's GOGC tuner does; once the live heap is past half
// the floor GOGC is 100 again, so a large store's memory is what it was.
// What it costs is memory: up to heapFloor (256 MiB) however small the
// live heap, and never more than a quarter of a memory limit (GOMEMLIMIT,
// the cgroup's memory.max), none under 256 MiB of limit. GOGC set in the
// environment is the operator's choice and is left alone (GOGC=100 turns
// the floor off).

// heapFloor is the least heap the collector lets grow before collecting.
const heapFloor = 256 << 20

// heapFloorEvery is how often the floor is fitted to the live heap.
const heapFloorEvery = time.Second

var heapFloorOnce sync.Once

// keepHeapFloor starts, once per process and unless GOGC is set, the
// goroutine that keeps the heap floor. It runs as long as the process: the
// setting is the process's (in tests, the clients' garbage in the same
// process is collected less often too).
func keepHeapFloor() {
	if os.Getenv("GOGC") != "" {
		return
	}
	heapFloorOnce.Do(func() {
		floor := floorUnder(uint64(heapFloor), debug.SetMemoryLimit(-1), cgroupMemoryMax())
		if floor == 0 {
			return
		}
		go func() {
			m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
			pct := 100
			for {
				metrics.Read(m)
				roots := m[1].Value.Uint64() + m[2].Value.Uint64()
				if p := floorPercent(m[0].Value.Uint64(), roots, floor); p != pct {
					debug.SetGCPercent(p)
					pct = p
				}
				time.Sleep(heapFloorEvery)
			}
		}()
	})
}

// floorUnder is the floor to keep under a memory limit (GOMEMLIMIT, or the
// cgroup's memory.max; math.MaxInt64 or 0 for none): at most a quarter of
// the smaller, so that a small container is not filled by garbage; 0 (no
// floor) when that is under 64 MiB.
func floorUnder(floor uint64, goLimit int64, cgroup uint64) uint64 {
	for _, l := range []uint64{uint64(max(goLimit, 0)), cgroup} {
		if l > 0 && l < math.MaxInt64 {
			floor = min(floor, l/4)
		}
	}
	if floor < 64<<20 {
		return 0
	}
	return floor
}

// cgroupMemoryMax reads the cgroup v2 memory limit of the process; 0 when
// there is none or it cannot be read.
func cgroupMemoryMax() uint64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil { // "max"
		return 0
	}
	return n
}

// floorPercent is the GOGC that lets a heap whose live part is live bytes,
// with roots bytes of stacks and globals, grow to floor before a
// collection: Go's heap goal is live + (live + roots) × GOGC/100. Never
// under 100, the default, at most 1000, and changed in steps of 25 so
// that a live heap that moves a little changes nothing.
func floorPercent(live, roots, floor uint64) int {
	const step = 25
	if live == 0 || live >= floor/2 {
		return 100
	}
	p := int((floor-live)*100/(live+roots)) / step * step
	return max(100, min(p, 1000))
}
