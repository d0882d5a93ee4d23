package apiserver

import (
	"sync"
	"time"
)

// limiter is a token bucket per key (a token's hash, or a client address),
// kept as the generic cell rate algorithm: each key holds only the time at
// which its bucket will be full again ("theoretical arrival time", tat).
// A request adds one interval (1/rate) to it; it is refused when that
// would put tat more than burst intervals ahead of now, which is exactly a
// bucket of burst tokens refilled at rate per second.
//
// It is written here rather than taken from golang.org/x/time/rate: what is
// needed is Allow and the wait until the next request would pass, for many
// keys with the idle ones forgotten, which is these few lines; the library
// would still need the map and its sweeping around it, and one more module.
type limiter struct {
	interval time.Duration // 1/rate
	capacity time.Duration // burst × interval

	mu        sync.Mutex
	tat       map[string]time.Time
	lastSweep time.Time
}

// maxKeys bounds the buckets kept; beyond it the full ones are forgotten
// at once rather than at the next sweep.
const maxKeys = 100_000

func newLimiter(perSecond float64, burst int) *limiter {
	iv := time.Duration(float64(time.Second) / perSecond)
	if iv <= 0 {
		iv = 1
	}
	return &limiter{interval: iv, capacity: time.Duration(burst) * iv, tat: map[string]time.Time{}}
}

// allow takes one request from key's bucket. When the bucket is empty it
// returns false and how long until a request would pass.
func (l *limiter) allow(key string, now time.Time) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > time.Minute || len(l.tat) >= maxKeys {
		l.sweep(now)
	}
	tat := l.tat[key]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(l.interval)
	if ahead := next.Sub(now); ahead > l.capacity {
		return ahead - l.capacity, false
	}
	l.tat[key] = next
	return 0, true
}

// sweep forgets the buckets that are full again: a new one is the same.
func (l *limiter) sweep(now time.Time) {
	l.lastSweep = now
	for k, tat := range l.tat {
		if !tat.After(now) {
			delete(l.tat, k)
		}
	}
	if len(l.tat) >= maxKeys {
		// Every bucket is in use: more keys than any honest fleet has.
		// Start over rather than grow without bound; the cost is that
		// the callers in flight get a fresh burst.
		clear(l.tat)
	}
}
