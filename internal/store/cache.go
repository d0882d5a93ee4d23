package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// cache holds rows decoded once and kept between the writes that change
// them (Options.Cache), so that the reads every cycle and every request
// make (Snapshot's nodes and teams, the submitter's team) decode no rows.
//
// The writer forgets it for every batch that writes such a row, before the
// commit and again after it, before any acknowledgement or Changed: a read
// that began before the commit and ends after the first forget finds the
// generation moved and does not keep the old rows it read.
//
// On PostgreSQL other servers write the rows too: there the teams are kept
// while the store listens to the database's notifications, whose payload
// names what a commit changed (listen forgets the cache on "teams", and
// while it is not connected suspends it), and for at most ttl, a bound for
// the commits of servers that name nothing.
type cache[T any] struct {
	on        bool
	ttl       time.Duration // 0: none
	suspended atomic.Bool   // read through, keep nothing
	mu        sync.Mutex
	rows      []T // nil: not filled
	gen       uint64
	filled    time.Time
}

// get returns the kept rows, filling them with read when none are kept;
// without Options.Cache it returns what read reads. The rows may be
// shared: callers hand out copies.
func (c *cache[T]) get(read func() ([]T, error)) ([]T, error) {
	if !c.on || c.suspended.Load() {
		return read()
	}
	c.mu.Lock()
	rows, gen, filled := c.rows, c.gen, c.filled
	c.mu.Unlock()
	if rows != nil && (c.ttl == 0 || time.Since(filled) < c.ttl) {
		return rows, nil
	}
	start := time.Now()
	rows, err := read()
	if err != nil {
		return nil, err
	}
	if rows == nil {
		rows = []T{} // filled, with none
	}
	c.mu.Lock()
	if c.gen == gen && !c.suspended.Load() {
		c.rows, c.filled = rows, start
	}
	c.mu.Unlock()
	return rows, nil
}

// keeps reports whether the rows are kept now (not on, or suspended: every
// get reads them all, and a caller after one row had better read that one).
func (c *cache[T]) keeps() bool { return c.on && !c.suspended.Load() }

// suspend stops keeping rows (on), or starts again (off); either way what
// is kept is forgotten.
func (c *cache[T]) suspend(on bool) {
	c.suspended.Store(on)
	c.forget()
}

// forget drops the kept rows.
func (c *cache[T]) forget() {
	c.mu.Lock()
	c.rows = nil
	c.gen++
	c.mu.Unlock()
}

// generation counts the forgets: it changes with every write of the rows.
func (c *cache[T]) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}
