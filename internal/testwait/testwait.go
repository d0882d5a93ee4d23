// Package testwait is how a test waits for a state that only polling can
// see: one behind the HTTP API (which has no watch), a process's, a file's,
// a Kubernetes API server's. Where the code under test signals the state
// (a channel, a hook, the store's Changed, a log that streams, or
// synctest.Wait in a bubble), a test waits on that instead.
package testwait

import (
	"testing"
	"time"
)

// First and Most bound the interval between two checks: the first comes
// First after the one that failed, each later one twice as long after,
// up to Most.
const (
	First = time.Millisecond
	Most  = 100 * time.Millisecond
)

// Until checks cond until it reports done, and returns then. Once timeout
// has passed it fails tb with what it waited for and what cond last saw.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() (done bool, saw string)) {
	tb.Helper()
	if saw, ok := Within(timeout, cond); !ok {
		tb.Fatalf("waited %s for %s: %s", timeout, what, saw)
	}
}

// Within checks cond until it reports done or timeout has passed, and
// reports whether it was done, and what cond last saw.
func Within(timeout time.Duration, cond func() (done bool, saw string)) (string, bool) {
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for next := First; ; next = min(2*next, Most) {
		<-timer.C
		done, saw := cond()
		if done {
			return saw, true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return saw, false
		}
		timer.Reset(min(next, left))
	}
}
