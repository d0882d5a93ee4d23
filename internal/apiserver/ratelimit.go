package apiserver

import (
	"container/list"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter keeps a token bucket (golang.org/x/time/rate) per key: a token's
// hash, or a client address. Buckets live in a map bounded by maxKeys: past
// it the least recently used bucket is dropped, one for each new key, so a
// flood of new keys pushes out only the buckets that have waited longest,
// never hands the callers in flight a fresh burst. Every minute the buckets
// that are full again are dropped too: a new one is the same. Times come
// from the caller (the server's clock), never from the library's own.
type limiter struct {
	limit rate.Limit
	burst int
	max   int // buckets kept at most

	mu        sync.Mutex
	keys      map[string]*list.Element // → *bucket, in lru
	lru       *list.List               // front: the most recently used
	lastSweep time.Time
}

type bucket struct {
	key string
	lim *rate.Limiter
}

// maxKeys bounds the buckets kept.
const maxKeys = 100_000

// sweepEvery is how often the full buckets are dropped.
const sweepEvery = time.Minute

func newLimiter(perSecond float64, burst int) *limiter {
	return &limiter{limit: rate.Limit(perSecond), burst: max(1, burst), max: maxKeys, keys: map[string]*list.Element{}, lru: list.New()}
}

// allow takes one request from key's bucket. When the bucket is empty it
// returns false and how long until a request would pass; the refused
// request takes nothing.
func (l *limiter) allow(key string, now time.Time) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > sweepEvery {
		l.sweep(now)
	}
	var b *bucket
	if e, found := l.keys[key]; found {
		l.lru.MoveToFront(e)
		b = e.Value.(*bucket)
	} else {
		b = &bucket{key: key, lim: rate.NewLimiter(l.limit, l.burst)}
		l.keys[key] = l.lru.PushFront(b)
		for l.lru.Len() > l.max {
			l.drop(l.lru.Back())
		}
	}
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Second, false // no burst at all: cannot happen, burst ≥ 1
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// sweep drops the buckets that are full again.
func (l *limiter) sweep(now time.Time) {
	l.lastSweep = now
	for e := l.lru.Back(); e != nil; {
		prev := e.Prev()
		if b := e.Value.(*bucket); b.lim.TokensAt(now) >= float64(l.burst) {
			l.drop(e)
		}
		e = prev
	}
}

func (l *limiter) drop(e *list.Element) {
	delete(l.keys, e.Value.(*bucket).key)
	l.lru.Remove(e)
}

// len is the number of buckets kept.
func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
