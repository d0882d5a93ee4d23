package store

import (
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
)

// On PostgreSQL every statement is a round trip to the database, and a
// submit was four in the writer (a savepoint, its INSERT, its audit entry's
// INSERT, the savepoint's release): most of the writer's time, while the
// submits of a batch waited in turn. A submit without an idempotency key
// reads nothing it writes (its checks are the view's pending counts and the
// team's foreign key), and nothing else in its batch can know its new ID,
// so its rows are deferred instead: kept in the transaction (deferred) and
// written together, all of the batch's workloads and their audit entries
// in one statement, from arrays (unnest), before any write that is not a
// deferred submit runs and before the COMMIT (flush). Statements therefore
// run in the order of the writes, as before. The statement leaves out,
// rather than fails on, a row whose team does not exist or whose ID is
// taken (a failed statement would abort the whole transaction), and the
// submit of such a row fails alone, with the error its own INSERT would
// have met (insertError). SQLite defers the same rows and writes them its
// own way (sqlitedefer.go).

// deferred holds a batch's deferred rows.
type deferred struct {
	subs   []deferredSubmit
	audits []deferredAudit
}

// deferredSubmit is one submit's workload row, and which write of the
// batch made it (its place in batch.ops).
type deferredSubmit struct {
	op           int
	w            *core.Workload
	spec, status []byte
}

// deferredAudit is the audit entry of the write op of the batch.
type deferredAudit struct {
	op int
	e  *core.AuditEntry
}

func (d *deferred) empty() bool { return len(d.subs) == 0 && len(d.audits) == 0 }

// canDefer reports whether the write running may defer its rows: a
// deferred write (op.deferred).
func (tx *wtx) canDefer() bool { return tx.deferOK }

// deferSubmit keeps w's row, to be written by the next flush, which sets
// w.Seq; w is recorded as changed now, so that the writes after it in the
// batch count it (the pending bounds).
func (tx *wtx) deferSubmit(w *core.Workload, spec, status []byte) {
	tx.rows.subs = append(tx.rows.subs, deferredSubmit{op: tx.op, w: w, spec: spec, status: status})
	tx.deferredOp = true
	tx.changed = append(tx.changed, w)
}

// deferAudit keeps e, the audit entry of the running write, whose row it
// deferred, for the next flush.
func (tx *wtx) deferAudit(e *core.AuditEntry) {
	tx.rows.audits = append(tx.rows.audits, deferredAudit{op: tx.op, e: e})
}

// flushQuery writes a batch's deferred workloads and their audit entries
// in one statement, and returns each written workload's ID and seq. It
// cannot fail for a row: a workload whose team does not exist, or whose ID
// is taken, is left out (and its audit entry with it), as its ID's absence
// from the answer says; the rows are written in the order of the writes.
const flushQuery = `WITH w AS (
	INSERT INTO workloads (id, team, owner, phase, created_at, spec, status)
	SELECT r.id, r.team, r.owner, r.phase, r.created_at, r.spec, r.status
	FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bytea[], ?::bytea[]) WITH ORDINALITY
		AS r(id, team, owner, phase, created_at, spec, status, n)
	WHERE EXISTS (SELECT 1 FROM teams t WHERE t.name = r.team)
	ORDER BY r.n
	ON CONFLICT (id) DO NOTHING
	RETURNING id, seq
), a AS (
	INSERT INTO audit (time, user_name, role, action, method, path, object, team, status, message)
	SELECT x.time, x.user_name, x.role, x.action, x.method, x.path, x.object, x.team, x.status, x.message
	FROM unnest(?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::text[]) WITH ORDINALITY
		AS x(workload, time, user_name, role, action, method, path, object, team, status, message, n)
	WHERE x.workload IN (SELECT id FROM w)
	ORDER BY x.n
)
SELECT id, seq FROM w`

// flush writes the deferred rows (see above): on PostgreSQL in one
// statement, on SQLite as flushSQLite says. A write whose row was left out
// gets its own error in errs (indexed as batch.ops), the one its own
// INSERT would have given, and is no longer recorded as changed; the error
// returned is one that fails the whole batch (the database's, not one
// write's).
func (tx *wtx) flush(errs []error) error {
	if tx.rows.empty() {
		return nil
	}
	d := tx.rows
	tx.rows = deferred{}
	// Two writes of one ID (an ID maker that repeats itself): the later
	// is refused here, as the ID index would refuse it.
	seen := make(map[core.WorkloadID]bool, len(d.subs))
	subs := d.subs[:0:0]
	for _, sub := range d.subs {
		if seen[sub.w.ID] {
			tx.refuse(errs, sub, insertError(sub.w, errIDTaken))
			continue
		}
		seen[sub.w.ID] = true
		subs = append(subs, sub)
	}
	d.subs = subs
	if tx.s.pg == nil {
		return tx.flushSQLite(d, errs)
	}
	written, err := tx.flushAll(d)
	if err != nil {
		return err
	}
	if written == len(d.subs) {
		return nil
	}
	// Some were left out: those of teams that do not exist, and those
	// whose ID is taken.
	var teams []string
	for _, sub := range d.subs {
		if sub.w.Seq == 0 {
			teams = append(teams, string(sub.w.Team))
		}
	}
	rows, err := tx.Query("SELECT name FROM teams WHERE name = ANY(?::text[])", teams)
	if err != nil {
		return err
	}
	exists := map[core.TeamName]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		exists[core.TeamName(name)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, sub := range d.subs {
		switch {
		case sub.w.Seq != 0:
		case !exists[sub.w.Team]:
			tx.refuse(errs, sub, insertError(sub.w, errNoTeam))
		default:
			tx.refuse(errs, sub, insertError(sub.w, errIDTaken))
		}
	}
	return nil
}

// refuse fails the deferred write of sub with err: its row was not written.
func (tx *wtx) refuse(errs []error, sub deferredSubmit, err error) {
	errs[sub.op] = err
	tx.dropChanged(sub.w)
}

// flushError is err, which failed a flush, as it fails the batch.
func flushError(err error) error {
	if isStorage(err) {
		return err
	}
	return fmt.Errorf("write the deferred rows: %w", err)
}

// flushAll writes every deferred row in one statement (flushQuery) and
// sets the seq of each workload written; it returns how many were.
func (tx *wtx) flushAll(d deferred) (int, error) {
	m := len(d.subs)
	ids, teams, owners, phases := make([]string, m), make([]string, m), make([]string, m), make([]string, m)
	created := make([]int64, m)
	specs, statuses := make([][]byte, m), make([][]byte, m)
	byID := make(map[core.WorkloadID]*core.Workload, m)
	idOf := make(map[int]string, m) // write (op) → its workload's ID
	for i, s := range d.subs {
		w := s.w
		ids[i], teams[i], owners[i], phases[i], created[i], specs[i], statuses[i] = string(w.ID), string(w.Team), w.Owner, string(w.Status.Phase), unixNano(w.CreatedAt), s.spec, s.status
		byID[w.ID] = w
		idOf[s.op] = string(w.ID)
	}
	n := len(d.audits)
	wid, user, role, action, method, path, object, team, message := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	at, status := make([]int64, n), make([]int64, n)
	for i, a := range d.audits {
		e := a.e
		wid[i], at[i], user[i], role[i], action[i], method[i], path[i], object[i], team[i], status[i], message[i] = idOf[a.op], unixNano(e.Time), e.User, e.Role, e.Action, e.Method, e.Path, e.Object, e.Team, int64(e.Status), e.Message
	}
	rows, err := tx.Query(flushQuery, ids, teams, owners, phases, created, specs, statuses,
		wid, at, user, role, action, method, path, object, team, status, message)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return 0, err
		}
		if w := byID[core.WorkloadID(id)]; w != nil {
			w.Seq = seq
			got++
		}
	}
	return got, rows.Err()
}

// dropChanged takes w out of the changes recorded.
func (tx *wtx) dropChanged(w *core.Workload) {
	for i, c := range tx.changed {
		if c == w {
			tx.changed = append(tx.changed[:i], tx.changed[i+1:]...)
			clear(tx.latest)
			tx.indexed = 0
			return
		}
	}
}
