package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/jackc/pgx/v5/pgconn"
	sqlite "modernc.org/sqlite"
)

// SQLite result codes that mean the disk, not the request, failed
// (https://sqlite.org/rescode.html). Extended codes keep the primary code in
// their low byte.
const (
	sqliteIOErr      = 10   // SQLITE_IOERR and its extended codes
	sqliteFull       = 13   // SQLITE_FULL: "database or disk is full"
	sqliteIOErrShmSz = 4874 // SQLITE_IOERR_SHMSIZE: the WAL index could not grow
	sqliteForeignKey = 787  // SQLITE_CONSTRAINT_FOREIGNKEY
	sqliteUnique     = 2067 // SQLITE_CONSTRAINT_UNIQUE
)

// diskError is a write that failed because the disk did: kind is
// core.ErrNoSpace or core.ErrUnavailable, err what SQLite or the system said.
type diskError struct {
	kind, err error
	what      string
}

func (e *diskError) Error() string {
	return "the store cannot write (" + e.what + "): " + e.err.Error()
}
func (e *diskError) Unwrap() []error { return []error{e.kind, e.err} }

// storageError classifies err. A write that failed because the disk is full
// (SQLITE_FULL, ENOSPC, a WAL index that cannot grow) becomes a diskError of
// kind core.ErrNoSpace; one that failed with an I/O error, of kind
// core.ErrUnavailable. Anything else, and nil, is returned as it is.
func storageError(err error) error {
	var se *sqlite.Error
	switch {
	case err == nil || isStorage(err):
		return err
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT),
		errors.As(err, &se) && (se.Code()&0xff == sqliteFull || se.Code() == sqliteIOErrShmSz):
		return &diskError{kind: core.ErrNoSpace, err: err, what: core.ErrNoSpace.Error() + "; free space in the data directory"}
	case errors.Is(err, syscall.EIO), errors.As(err, &se) && se.Code()&0xff == sqliteIOErr:
		return &diskError{kind: core.ErrUnavailable, err: err, what: "I/O error on its disk"}
	}
	return pgError(err)
}

// isForeignKey reports whether err refused a row that names one that does
// not exist (a foreign key), on SQLite or PostgreSQL (23503).
func isForeignKey(err error) bool {
	if err == nil {
		return false // most calls: no error, and nothing for errors.As to allocate
	}
	var se *sqlite.Error
	var pe *pgconn.PgError
	return errors.Is(err, errNoTeam) || errors.As(err, &se) && se.Code() == sqliteForeignKey || errors.As(err, &pe) && pe.Code == "23503"
}

// errNoTeam and errIDTaken are what a deferred submit's row left out
// (pgdefer.go on PostgreSQL, sqlitedefer.go on SQLite) would have met: the
// team's foreign key, the ID's index (a repeated ID within one batch).
var (
	errNoTeam  = errors.New("no such team")
	errIDTaken = errors.New("the workload ID is taken")
)

// isIDTaken reports whether err is a workload's INSERT refused for an ID
// that another row has.
func isIDTaken(err error) bool {
	if err == nil {
		return false
	}
	var se *sqlite.Error
	var pe *pgconn.PgError
	// SQLite names the index's columns: "UNIQUE constraint failed:
	// workloads.id" ends there, where the idempotency index's names
	// workloads.owner and workloads.idem_key.
	return errors.Is(err, errIDTaken) || errors.As(err, &se) && se.Code() == sqliteUnique && strings.Contains(se.Error(), "failed: workloads.id (") ||
		errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "workloads_id_key"
}

// isStorage reports whether err is a diskError: the disk, not the request,
// failed.
func isStorage(err error) bool {
	var de *diskError
	return errors.As(err, &de)
}

// probeEvery bounds how often Writable tries a write while the store cannot
// write.
const probeEvery = time.Second

// noteWrite records the outcome of the batch seq (its place in the writer's
// order) for Writable: the storage error of a failed one, or nil after one
// that wrote. An outcome older than the last noted is dropped: the syncer
// acknowledges a batch after the writer may have failed the next one.
func (s *Store) noteWrite(err error, seq int64) {
	s.healthMu.Lock()
	if seq >= s.notedSeq {
		s.notedSeq, s.writeErr = seq, err
	}
	s.healthMu.Unlock()
}

// brokenSync is the failed fsync that stopped a SQLite store's writes
// (durable.go), or nil.
func (s *Store) brokenSync() error {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	return s.syncErr
}

// Readable reports whether the store can read its database: a query of
// the database itself, never answered from what is kept in memory
// (Options.Cache). Readiness probes call it.
func (s *Store) Readable(ctx context.Context) error {
	var n int
	return s.readRow(ctx, "SELECT count(*) FROM teams").Scan(&n)
}

// Writable reports whether the store can write: nil, or the error of the
// last write, when it failed because the disk is full (core.ErrNoSpace) or
// failing (core.ErrUnavailable). The condition holds until a write
// succeeds; while it holds, Writable tries a small write of its own (at most
// once every probeEvery) so that it clears once space returns even when
// nothing else writes. Readiness probes call it. After a failed fsync of the
// WAL it reports that failure until the server restarts (durable.go).
func (s *Store) Writable(ctx context.Context) error {
	if err := s.brokenSync(); err != nil {
		return err
	}
	s.healthMu.Lock()
	err := s.writeErr
	probe := err != nil && time.Since(s.probedAt) >= probeEvery
	if probe {
		s.probedAt = time.Now()
	}
	s.healthMu.Unlock()
	if !probe {
		return err
	}
	perr := s.do(ctx, func(tx *wtx) error {
		// Setting the schema version to what it is changes nothing but
		// still writes the database header: a page in the WAL, as a real
		// write needs.
		if s.pg != nil {
			_, err := tx.Exec("UPDATE gpufleet_schema SET version = version")
			return err
		}
		_, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", schemaVersion))
		return err
	})
	if isStorage(perr) || perr == nil {
		return perr
	}
	return err
}

// Classify returns err as a write would have failed with it when it says
// the store's disk or database, not the request, failed (of kind
// core.ErrNoSpace or core.ErrUnavailable), so that a read that failed for
// that reason is answered as such; any other err as it is.
func Classify(err error) error { return storageError(err) }
