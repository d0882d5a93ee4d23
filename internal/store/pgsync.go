package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/jackc/pgx/v5"
)

// On PostgreSQL the writer's COMMIT returned only once the database had
// flushed the commit to its disk (synchronous_commit), and the write lock
// is held until then: the writer waited for every flush, and the writes
// that arrived meanwhile for the next. It now commits without waiting
// (synchronous_commit off for its transactions alone: the commit is in the
// database's log, visible, not yet on disk) and hands the batch to the
// syncer, which acknowledges its writes once a commit of its own, made
// with the server's own synchronous_commit, has returned: the log is
// flushed in order, so that commit's flush, which comes after the batch's
// commit record, is the batch's too (and a synchronous standby's, where
// the deployment asks for one). While the syncer waits for one flush the
// writer runs the next batches, and one flush acknowledges all that
// committed before it, as the SQLite store's syncer does (durable.go).
//
// The syncer's commit is a transaction of its own that writes to the log
// (a transaction that writes nothing, or only draws an ID, commits without
// a flush): it rewrites the schema version's row as it is. It runs on a
// connection of its own. When that commit
// fails, the batches it was to make durable are committed but may not be
// on disk (a database that crashed loses them): their writes fail, as
// unavailable, and none is acknowledged. A connection is never asked to
// flush a batch committed before it was made (pgSync.since): after a crash
// and a restart it would answer that all is flushed. Its first is made
// when the store opens, before any write.

// pgSync is the PostgreSQL store's syncer: its queue, its connection, and
// the commits it may flush: those counted (Store.commits) after since,
// the count when the connection was made.
type pgSync struct {
	batches chan *batch
	conn    *pgx.Conn
	since   int64
}

// connect makes the syncer's connection.
func (p *pgSync) connect(ctx context.Context, cfg *pgx.ConnConfig, commits int64) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err
	}
	p.conn, p.since = conn, commits
	return nil
}

// pgFlush is the syncer's commit: a transaction that wrote to the log
// flushes it up to its commit record before it returns.
const pgFlush = "UPDATE gpufleet_schema SET version = version"

// pgSyncer acknowledges the batches the writer committed once a flush of
// its own has made them durable. It stops when the writer closes batches,
// after the last one.
func (s *Store) pgSyncer(cfg *pgx.ConnConfig) {
	defer s.wg.Done()
	ctx := context.Background()
	p := s.pgSync
	defer func() {
		if p.conn != nil {
			p.conn.Close(ctx)
		}
	}()
	for b := range s.pgSync.batches {
		bs := []*batch{b}
	more:
		for len(bs) < cap(s.pgSync.batches) {
			select {
			case b, ok := <-s.pgSync.batches:
				if !ok {
					break more
				}
				bs = append(bs, b)
			default:
				break more
			}
		}
		var err error
		if p.conn == nil {
			// The count first: a batch counted before the connection
			// is made is not flushed by it.
			err = p.connect(ctx, cfg, s.commits.Load())
		}
		if err == nil {
			_, err = p.conn.Exec(ctx, pgFlush)
		}
		if err != nil && p.conn != nil {
			p.conn.Close(ctx)
			p.conn = nil
		}
		for _, b := range bs {
			switch {
			case err != nil:
				b.failCommitted(flushFailed(err))
			case b.commit <= p.since:
				b.failCommitted(flushFailed(errors.New("committed before the connection that would flush it was made")))
			case b.wrote:
				s.noteWrite(nil, b.seq)
			}
			b.acknowledge()
		}
	}
}

// flushFailed is the error of the writes of batches committed whose flush
// failed: unavailable, as the database is.
func flushFailed(err error) error {
	err = fmt.Errorf("the database did not confirm that the write reached its disk (it may be lost): %w", err)
	if de := pgError(err); isStorage(de) {
		return de
	}
	return &diskError{kind: core.ErrUnavailable, err: err, what: "the database is unavailable"}
}

// failCommitted fails every write of a committed batch with err (a refusal
// keeps its own error: it wrote nothing).
func (b *batch) failCommitted(err error) {
	b.s.noteWrite(err, b.seq)
	for i, e := range b.errs {
		if e == nil {
			b.errs[i] = err
		}
	}
}
