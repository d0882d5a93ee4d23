package app

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
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
// live heap. GOGC set in the environment is the operator's choice and is
// left alone (GOGC=100 turns the floor off).

// heapFloor is the least heap the collector lets grow before collecting.
const heapFloor = 256 << 20

// heapFloorEvery is how often the floor is fitted to the live heap.
const heapFloorEvery = time.Second

var heapFloorOnce sync.Once

// keepHeapFloor starts, once per process and unless GOGC is set, the
// goroutine that keeps the heap floor. It runs as long as the process: the
// setting is the process's.
func keepHeapFloor() {
	if os.Getenv("GOGC") != "" {
		return
	}
	heapFloorOnce.Do(func() {
		go func() {
			live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			pct := 100
			for {
				metrics.Read(live)
				if p := floorPercent(live[0].Value.Uint64(), heapFloor); p != pct {
					debug.SetGCPercent(p)
					pct = p
				}
				time.Sleep(heapFloorEvery)
			}
		}()
	})
}

// floorPercent is the GOGC that lets a heap whose live part is live bytes
// grow to floor before a collection: never under 100, the default, and
// changed in steps of 25% (of live) so that a live heap that moves a
// little changes nothing.
func floorPercent(live, floor uint64) int {
	const step = 25
	if live == 0 || live >= floor/2 {
		return 100
	}
	// floor = live × (1 + p/100)
	p := int((floor-live)*100/live) / step * step
	return max(100, min(p, 10000))
}
