package app

import "testing"

// TestFloorPercent: the GOGC that lets the heap reach the floor, never
// under 100, in steps, and 100 once the live heap is half the floor.
func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		live uint64
		want int
	}{
		{0, 100},                 // nothing measured yet
		{1 * mib, 10000},         // capped: 25,500% would be
		{25 * mib, 900},          // 256/25 = 10.24: 924%, down to a step
		{64 * mib, 300},          // 256/64 = 4: 300%
		{100 * mib, 150},         // 256/100: 156%, down to 150
		{127 * mib, 100},         // 101%, down to 100
		{128 * mib, 100},         // half the floor: the default
		{2048 * mib, 100},        // a large heap: the default
		{heapFloor - 1, 100},     // just under the floor
		{heapFloor / 3, 200},     // 3 × live: 200%
		{heapFloor/3 + mib, 175}, // a little more live: the step below
	} {
		got := floorPercent(tt.live, heapFloor)
		if got != tt.want {
			t.Errorf("floorPercent(%d MiB) = %d, want %d", tt.live/mib, got, tt.want)
		}
		if goal := tt.live + tt.live*uint64(got)/100; tt.live > 0 && got > 100 && got < 10000 && goal > heapFloor {
			t.Errorf("floorPercent(%d MiB) = %d: a goal of %d MiB, over the floor", tt.live/mib, got, goal/mib)
		}
	}
}
