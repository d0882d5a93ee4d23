package app

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestFloorPercent: the GOGC that lets the heap reach the floor, the
// goal counting the roots as Go does, never under 100 nor over 1000, in
// steps, and 100 once the live heap is half the floor.
func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		live, roots uint64
		want        int
	}{
		{0, 0, 100},                         // nothing measured yet
		{1 * mib, 0, 1000},                  // capped: 25,500% would be
		{2 * mib, 4 * mib, 1000},            // roots count: 4,233%, capped
		{25 * mib, 0, 900},                  // 924%, down to a step
		{25 * mib, 25 * mib, 450},           // the roots halve it: 462%
		{64 * mib, 0, 300},                  // 256/64 = 4: 300%
		{100 * mib, 0, 150},                 // 156%, down to 150
		{127 * mib, 0, 100},                 // 101%, down to 100
		{128 * mib, 0, 100},                 // half the floor: the default
		{2048 * mib, 0, 100},                // a large heap: the default
		{heapFloor / 3, 0, 200},             // 3 × live: 200%
		{heapFloor/3 + mib, 0, 175},         // a little more live: the step below
		{heapFloor / 3, heapFloor / 3, 100}, // the roots as big: 100%
	} {
		got := floorPercent(tt.live, tt.roots, heapFloor)
		if got != tt.want {
			t.Errorf("floorPercent(%d MiB, roots %d MiB) = %d, want %d", tt.live/mib, tt.roots/mib, got, tt.want)
		}
		if goal := tt.live + (tt.live+tt.roots)*uint64(got)/100; tt.live > 0 && got > 100 && goal > heapFloor {
			t.Errorf("floorPercent(%d MiB, roots %d MiB) = %d: a goal of %d MiB, over the floor", tt.live/mib, tt.roots/mib, got, goal/mib)
		}
	}
}

// TestFloorUnderLimits: a memory limit keeps the floor at a quarter of it,
// and a small one turns it off.
func TestFloorUnderLimits(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		goLimit int64
		cgroup  uint64
		want    uint64
	}{
		{math.MaxInt64, 0, heapFloor},          // no limit
		{math.MaxInt64, 8192 * mib, heapFloor}, // a large container
		{512 * mib, 0, 128 * mib},              // GOMEMLIMIT=512MiB
		{math.MaxInt64, 512 * mib, 128 * mib},  // a 512 MiB container
		{1024 * mib, 400 * mib, 100 * mib},     // the smaller wins
		{math.MaxInt64, 200 * mib, 0},          // a quarter under 64 MiB: off
	} {
		if got := floorUnder(heapFloor, tt.goLimit, tt.cgroup); got != tt.want {
			t.Errorf("floorUnder(GOMEMLIMIT %d, cgroup %d) = %d MiB, want %d MiB", tt.goLimit, tt.cgroup, got/mib, tt.want/mib)
		}
	}
}

// TestHeapFloorLeavesGOGCAlone: the floor raises GOGC in a process started
// without GOGC, and leaves an operator's GOGC as set (here 100, the
// default, so that only the floor could change it). Each case runs in a
// process of its own, keepHeapFloor being once per process.
func TestHeapFloorLeavesGOGCAlone(t *testing.T) {
	if os.Getenv(heapFloorChild) != "" {
		t.Skip("the child process runs TestHeapFloorChild")
	}
	for _, c := range []struct {
		gogc   string // "" unset
		raised bool
	}{{"", true}, {"100", false}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestHeapFloorChild$", "-test.v")
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOGC=") }), heapFloorChild+"=1")
		if c.gogc != "" {
			cmd.Env = append(cmd.Env, "GOGC="+c.gogc)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("GOGC=%q: child: %v\n%s", c.gogc, err, out)
		}
		m := regexp.MustCompile(`gogc=(\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("GOGC=%q: child said no gogc:\n%s", c.gogc, out)
		}
		got, _ := strconv.Atoi(string(m[1]))
		if raised := got > 100; raised != c.raised {
			t.Errorf("GOGC=%q: the collector's percent is %d after keepHeapFloor, want raised %v", c.gogc, got, c.raised)
		}
	}
}

// heapFloorChild, set, makes TestHeapFloorChild run.
const heapFloorChild = "GPUFLEET_TEST_HEAP_FLOOR_CHILD"

// TestHeapFloorChild is TestHeapFloorLeavesGOGCAlone's child: it measures
// the live heap (a collection), starts the floor, and prints the
// collector's percent once the floor has raised it, or after a while in
// which it would have (its first fit is at once).
func TestHeapFloorChild(t *testing.T) {
	if os.Getenv(heapFloorChild) == "" {
		t.Skip("run by TestHeapFloorLeavesGOGCAlone")
	}
	runtime.GC()
	keepHeapFloor()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	// A percent left alone changes at no moment: the wait for a change
	// ends after 500 ms without one.
	testwait.Within(500*time.Millisecond, func() (bool, string) {
		metrics.Read(s)
		return s[0].Value.Uint64() != 100, ""
	})
	fmt.Printf("gogc=%d\n", s[0].Value.Uint64())
}
