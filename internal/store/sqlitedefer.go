package store

import (
	"errors"
	"strings"
	"sync"

	sqlite "modernc.org/sqlite"
)

// On SQLite a statement costs no round trip, but each one the writer runs
// has work of its own in database/sql, the driver and SQLite (opening
// cursors on the table and each of its indexes, stepping, resetting,
// closing), besides binding and inserting its rows: a submit's two
// INSERTs, one row each, were about 18 µs of its CPU (docs/PERFORMANCE.md).
// A submit's rows without an idempotency key are therefore deferred as on
// PostgreSQL (pgdefer.go) and flushed with one INSERT of many rows per
// table (sqliteRows at a time), the workloads' and then their audit
// entries'. Such an INSERT fails as a whole when one row breaks a
// constraint (a team that does not exist, an ID taken): SQLite then takes
// back that statement alone, and the rows are written again one INSERT
// each, as before, so that each submit meets its own error (insertError)
// and the others are written.

// sqliteRows is the most rows one deferred INSERT writes: one prepared
// statement for each count up to it and each table.
const sqliteRows = 32

// sqliteConstraint is SQLITE_CONSTRAINT, the primary code of every
// constraint's failure: a statement failing with it took back only itself.
const sqliteConstraint = 19

// flushSQLite writes d's rows (see above).
func (tx *wtx) flushSQLite(d deferred, errs []error) error {
	err := tx.insertWorkloadRows(d.subs)
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqliteConstraint {
		return tx.flushEach(d, errs)
	}
	if err != nil {
		return err
	}
	return tx.insertAuditRows(d.audits)
}

// insertWorkloadRows writes subs' workloads and sets their Seq: all or
// none of them.
func (tx *wtx) insertWorkloadRows(subs []deferredSubmit) error {
	args := make([]any, 0, 7*min(len(subs), sqliteRows))
	for len(subs) > 0 {
		n := min(len(subs), sqliteRows)
		args = args[:0]
		for _, sub := range subs[:n] {
			w := sub.w
			args = append(args, string(w.ID), string(w.Team), w.Owner, string(w.Status.Phase), unixNano(w.CreatedAt), sub.spec, sub.status)
		}
		res, err := tx.Exec(manyRows(&workloadRows, n), args...)
		if err != nil {
			return err
		}
		// SQLite inserts the rows of a VALUES list in its order, each
		// with a seq above every one before (AUTOINCREMENT): the last
		// row's is LastInsertId, and the others' run up to it.
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		for i, sub := range subs[:n] {
			sub.w.Seq = last - int64(n-1-i)
		}
		subs = subs[n:]
	}
	return nil
}

// insertAuditRows writes audits' entries.
func (tx *wtx) insertAuditRows(audits []deferredAudit) error {
	args := make([]any, 0, 10*min(len(audits), sqliteRows))
	for len(audits) > 0 {
		n := min(len(audits), sqliteRows)
		args = args[:0]
		for _, a := range audits[:n] {
			e := a.e
			args = append(args, unixNano(e.Time), e.User, e.Role, e.Action, e.Method, e.Path, e.Object, e.Team, e.Status, e.Message)
		}
		if _, err := tx.Exec(manyRows(&auditRows, n), args...); err != nil {
			return err
		}
		audits = audits[n:]
	}
	return nil
}

// flushEach writes d's rows one INSERT each, in order: a workload whose
// INSERT is refused (insertError) fails its submit alone, and its audit
// entry is not written.
func (tx *wtx) flushEach(d deferred, errs []error) error {
	audits := map[int][]deferredAudit{}
	for _, a := range d.audits {
		audits[a.op] = append(audits[a.op], a)
	}
	for _, sub := range d.subs {
		w := sub.w
		seq, err := tx.insert(insertWorkload, "seq", string(w.ID), string(w.Team), w.Owner, string(w.Status.Phase), unixNano(w.CreatedAt), nil, nil, sub.spec, sub.status)
		if err = insertError(w, err); err != nil {
			if !isRefusal(err) {
				return err
			}
			tx.refuse(errs, sub, err)
			continue
		}
		w.Seq = seq
		for _, a := range audits[sub.op] {
			if err := insertAudit(tx, a.e); err != nil {
				return err
			}
		}
	}
	return nil
}

// rowsQuery is an INSERT of many rows into one table, spelled once for
// each count of rows.
type rowsQuery struct {
	head, row string
	mu        sync.Mutex
	of        [sqliteRows + 1]string
}

var (
	workloadRows = rowsQuery{head: "INSERT INTO workloads (id, team, owner, phase, created_at, spec, status) VALUES ", row: "(?, ?, ?, ?, ?, ?, ?)"}
	auditRows    = rowsQuery{head: "INSERT INTO audit (time, user_name, role, action, method, path, object, team, status, message) VALUES ", row: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"}
)

// manyRows returns q's INSERT of n rows (1 ≤ n ≤ sqliteRows).
func manyRows(q *rowsQuery, n int) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.of[n] == "" {
		var b strings.Builder
		b.WriteString(q.head)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(q.row)
		}
		q.of[n] = b.String()
	}
	return q.of[n]
}
