package control

import (
	"testing"
	"time"
)

func TestPacedIsBoundedByMaxPace(t *testing.T) {
	ran := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		took, want time.Duration // want: after ran
	}{
		{0, 0},
		{time.Millisecond, 8 * time.Millisecond},
		{100 * time.Millisecond, 800 * time.Millisecond},
		{125 * time.Millisecond, maxPace},
		{500 * time.Millisecond, maxPace},
		{10 * time.Second, maxPace}, // a 10 s cycle: a change waits 1 s, not 80
	} {
		l := &Loop{wake: wake{ran: ran, took: tt.took}}
		if got := l.paced().Sub(ran); got != tt.want {
			t.Errorf("after a cycle of %s, a change waits %s, want %s", tt.took, got, tt.want)
		}
	}
}

func TestPacedLessOnceDrained(t *testing.T) {
	ran := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		drained bool
		want    time.Duration
	}{
		{false, 80 * time.Millisecond},
		{true, 10 * time.Millisecond},
	} {
		l := &Loop{wake: wake{ran: ran, took: 10 * time.Millisecond, drained: tt.drained}}
		if got := l.paced().Sub(ran); got != tt.want {
			t.Errorf("after a cycle of 10ms (drained %t), a change waits %s, want %s", tt.drained, got, tt.want)
		}
	}
}

// PaceFactor and DrainedPaceFactor are paceFactor and drainedPaceFactor,
// for the tests outside the package.
const (
	PaceFactor        = paceFactor
	DrainedPaceFactor = drainedPaceFactor
)
