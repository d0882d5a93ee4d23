package apiserver

import (
	"fmt"
	"testing"
	"time"
)

// TestLimiterFullKeepsBusyBuckets floods the limiter with more keys than it
// keeps while one caller goes on asking beyond its rate: the flood may push
// out the buckets nobody uses, but never hand the busy caller a fresh burst
// (the hand-written limiter wiped every bucket at maxKeys).
func TestLimiterFullKeepsBusyBuckets(t *testing.T) {
	l := newLimiter(1, 1)
	now := fixtureStart
	if _, ok := l.allow("busy", now); !ok {
		t.Fatal("the first request refused")
	}
	for i := range maxKeys + 10 {
		l.allow(fmt.Sprintf("flood-%d", i), now)
		if i%1000 == 0 {
			if _, ok := l.allow("busy", now); ok {
				t.Fatalf("after %d other keys, the busy caller got a fresh burst", i)
			}
		}
	}
	if _, ok := l.allow("busy", now); ok {
		t.Fatal("after the flood, the busy caller got a fresh burst")
	}
	// The oldest keys of the flood went, the newest stay limited.
	if _, ok := l.allow(fmt.Sprintf("flood-%d", maxKeys+9), now); ok {
		t.Error("the newest key of the flood got a fresh burst")
	}
	if _, ok := l.allow("flood-0", now); !ok {
		t.Error("the least recently used key was kept beyond maxKeys")
	}
	// A second later the busy caller may go on.
	if _, ok := l.allow("busy", now.Add(time.Second)); !ok {
		t.Error("a second later the busy caller is still refused")
	}
}

// TestLimiterSweepKeepsBucketsInUse: the minute's sweep drops the buckets
// that are full again, and only those.
func TestLimiterSweepKeepsBucketsInUse(t *testing.T) {
	l := newLimiter(0.1, 2) // a token every 10 s
	now := fixtureStart
	l.allow("idle", now)
	l.allow("busy", now.Add(59*time.Second))
	l.allow("busy", now.Add(59*time.Second))
	// The sweep runs on the first request after a minute.
	l.allow("other", now.Add(61*time.Second))
	if n := l.len(); n != 2 {
		t.Errorf("%d buckets after the sweep, want 2 (busy and other; idle is full again)", n)
	}
	if wait, ok := l.allow("busy", now.Add(61*time.Second)); ok || wait != 8*time.Second {
		t.Errorf("busy after the sweep: ok %t wait %v, want refused for 8s (its bucket kept)", ok, wait)
	}
}
