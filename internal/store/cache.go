package store

import "sync"

// cache holds rows decoded once and kept between the writes that change
// them (Options.Cache), so that the reads every cycle and every request
// make (Snapshot's nodes and teams, the submitter's team) decode no rows.
//
// The writer forgets it for every batch that writes such a row, before the
// commit and again after it, before any acknowledgement or Changed: a read
// that began before the commit and ends after the first forget finds the
// generation moved and does not keep the old rows it read.
type cache[T any] struct {
	on   bool
	mu   sync.Mutex
	rows []T // nil: not filled
	gen  uint64
}

// get returns the kept rows, filling them with read when none are kept;
// without Options.Cache it returns what read reads. The rows may be
// shared: callers hand out copies.
func (c *cache[T]) get(read func() ([]T, error)) ([]T, error) {
	if !c.on {
		return read()
	}
	c.mu.Lock()
	rows, gen := c.rows, c.gen
	c.mu.Unlock()
	if rows != nil {
		return rows, nil
	}
	rows, err := read()
	if err != nil {
		return nil, err
	}
	if rows == nil {
		rows = []T{} // filled, with none
	}
	c.mu.Lock()
	if c.gen == gen {
		c.rows = rows
	}
	c.mu.Unlock()
	return rows, nil
}

// forget drops the kept rows.
func (c *cache[T]) forget() {
	c.mu.Lock()
	c.rows = nil
	c.gen++
	c.mu.Unlock()
}
