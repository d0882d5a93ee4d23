package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// On PostgreSQL the writer's transaction does, besides its writes' own
// statements, what a batch needs around them: the write lock and the last
// rev (to know whether another server wrote since), and at its end a
// notification and the last rev again. Each is sent in the round trip of a
// statement the transaction has anyway: the lock and the rev with its
// BEGIN, the notification and the rev with its COMMIT, as one simple query
// each (several statements in one message, one answer). pgWrite carries
// them between the writer and the connection (pgConn.BeginTx, pgTx.Commit).
type pgWrite struct {
	// async: the COMMIT does not wait for the flush (synchronous_commit
	// off for this transaction): the syncer's does (pgsync.go).
	async bool
	// rev is set at BEGIN, last at COMMIT: the last rev drawn
	// (lastRevQuery), under the lock.
	rev, last int64
	// notify, set before the COMMIT, is the payload of the notification
	// it sends; nil: none.
	notify *string
	// pid is the backend of the connection the transaction runs on: the
	// sender of its notifications (set at BEGIN).
	pid uint32
}

type pgWriteKey struct{}

// lastRevQuery is the last rev drawn: the sequence's last value once it
// has given one (0 before: its first value is not taken yet).
const lastRevQuery = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM workload_rev"

// BeginTx opens a transaction. The writer's (a context carrying a
// pgWrite) takes the write lock and reads the last rev in the same round
// trip.
func (c *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	pw, _ := ctx.Value(pgWriteKey{}).(*pgWrite)
	if pw == nil {
		return c.Conn.BeginTx(ctx, opts)
	}
	pc := c.Conn.Conn().PgConn()
	pw.pid = pc.PID()
	q := fmt.Sprintf("BEGIN; SELECT pg_advisory_xact_lock(%d); %s", writeLock, lastRevQuery)
	if pw.async {
		q += "; SET LOCAL synchronous_commit TO off"
	}
	res, err := pc.Exec(ctx, q).ReadAll()
	if err == nil {
		pw.rev, err = lastRev(res, 2)
	}
	if err != nil {
		c.end(ctx)
		return nil, err
	}
	return &pgTx{c: c, ctx: ctx, pw: pw}, nil
}

// end rolls back whatever transaction the connection is in (none: a
// warning, no error); a connection that cannot is bad.
func (c *pgConn) end(ctx context.Context) error {
	if _, err := c.Conn.Conn().PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		return driver.ErrBadConn
	}
	return nil
}

// lastRev reads lastRevQuery's answer, result i of res.
func lastRev(res []*pgconn.Result, i int) (int64, error) {
	if len(res) <= i || len(res[i].Rows) != 1 || len(res[i].Rows[0]) != 1 {
		return 0, errors.New("no last rev in the answer")
	}
	return strconv.ParseInt(string(res[i].Rows[0][0]), 10, 64)
}

// pgTx is the writer's transaction (pgConn.BeginTx).
type pgTx struct {
	c   *pgConn
	ctx context.Context
	pw  *pgWrite
}

// Commit commits, sending first the notification pw asks for and reading
// the last rev. A COMMIT that PostgreSQL turned into a rollback (the
// transaction had failed) is an error, as pgx's own.
func (t *pgTx) Commit() error {
	q := "COMMIT"
	if t.pw.notify != nil {
		// The channel and payloads are the store's constants: no
		// caller's text is spelled into the query.
		q = fmt.Sprintf("SELECT (%s) FROM pg_notify('%s', '%s'); COMMIT", lastRevQuery, notifyChannel, *t.pw.notify)
	}
	res, err := t.c.Conn.Conn().PgConn().Exec(t.ctx, q).ReadAll()
	if err == nil && t.pw.notify != nil {
		t.pw.last, err = lastRev(res, 0)
	}
	if err == nil && (len(res) == 0 || res[len(res)-1].CommandTag.String() != "COMMIT") {
		err = errors.New("commit unexpectedly resulted in rollback")
	}
	if err != nil {
		if bad := t.c.end(t.ctx); bad != nil {
			return errors.Join(err, bad)
		}
	}
	return err
}

// Rollback rolls the transaction back.
func (t *pgTx) Rollback() error { return t.c.end(t.ctx) }
