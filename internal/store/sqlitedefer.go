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
// closing), besides binding and inserting its rows (what that came to in
// BenchmarkSubmit's profile: docs/PERFORMANCE.md, "admissions on SQLite
// (issue 38 item 4), again"). A submit's rows without an idempotency key
// are therefore deferred as on PostgreSQL (pgdefer.go) and flushed with
// one INSERT of many rows per table (sqliteRows at a time), the
// workloads' and then their audit entries'. Such an INSERT fails as a
// whole when one row breaks a constraint (a team that does not exist, an
// ID taken): SQLite then takes back that statement alone, and its rows
// and those after them are written one INSERT each, so that each submit
// meets its own error (insertError) and the others are written; then the
// audit entries of the submits written.

// sqliteRows is the most rows one deferred INSERT writes: one prepared
// statement for each count up to it and each table.
const sqliteRows = 32

// sqliteConstraint is SQLITE_CONSTRAINT, the primary code of every
// constraint's failure: a statement failing with it took back only itself.
const sqliteConstraint = 19

// flushSQLite writes d's rows (see above).
func (tx *wtx) flushSQLite(d deferred, errs []error) error {
	n, err := tx.insertWorkloadRows(d.subs)
	if err != nil {
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqliteConstraint {
			return err
		}
		// The INSERT of the rows from n took back only itself.
		if err := tx.insertEach(d.subs[n:], errs); err != nil {
			return err
		}
	}
	// The audit entries of the submits written, in the writes' order.
	audits := d.audits[:0:0]
	for _, a := range d.audits {
		if errs[a.op] == nil {
			audits = append(audits, a)
		}
	}
	return tx.insertAuditRows(audits)
}

// insertWorkloadRows writes subs' workloads, sqliteRows at a time, and sets
// their Seq. It returns how many it wrote: when an INSERT fails, those
// before its rows.
func (tx *wtx) insertWorkloadRows(subs []deferredSubmit) (int, error) {
	args := make([]any, 0, 7*min(len(subs), sqliteRows))
	for done := 0; done < len(subs); {
		rows := subs[done:min(done+sqliteRows, len(subs))]
		args = args[:0]
		for _, sub := range rows {
			w := sub.w
			args = append(args, string(w.ID), string(w.Team), w.Owner, string(w.Status.Phase), unixNano(w.CreatedAt), sub.spec, sub.status)
		}
		res, err := tx.Exec(manyRows(&workloadRows, len(rows)), args...)
		if err != nil {
			return done, err
		}
		// SQLite inserts the rows of a VALUES list in its order, each
		// with a seq above every one before (AUTOINCREMENT): the last
		// row's is LastInsertId, and the others' run up to it.
		last, err := res.LastInsertId()
		if err != nil {
			return done, err
		}
		for i, sub := range rows {
			sub.w.Seq = last - int64(len(rows)-1-i)
		}
		done += len(rows)
	}
	return len(subs), nil
}

// insertAuditRows writes audits' entries, sqliteRows at a time.
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

// insertEach writes subs' workloads one INSERT each, in order: one whose
// INSERT is refused (insertError) fails its submit alone (errs).
func (tx *wtx) insertEach(subs []deferredSubmit, errs []error) error {
	for _, sub := range subs {
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
