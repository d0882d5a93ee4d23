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
// written together, all of the batch's workloads in one INSERT and their
// audit entries in the same statement, from arrays (unnest), before any
// write that is not a deferred submit runs and before the COMMIT (flush).
// Statements therefore run in the order of the writes, as before. When
// that INSERT fails (a team deleted, a workload ID taken), it is rolled
// back to its savepoint and the rows are written again one at a time, each
// under its own savepoint, so that only the submit whose row fails fails,
// with the error its own INSERT gives (as CreateWorkload's would).

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
// deferrable write (op.deferrable) on PostgreSQL.
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

// flushQuery writes a batch's deferred workloads and audit entries in one
// statement; it returns each workload's ID and seq.
const flushQuery = `WITH a AS (
	INSERT INTO audit (time, user_name, role, action, method, path, object, team, status, message)
	SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::text[])
)
INSERT INTO workloads (id, team, owner, phase, created_at, spec, status)
SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bytea[], ?::bytea[])
RETURNING id, seq`

// flush writes the deferred rows (see above). A write whose row could not
// be written gets its own error in errs (indexed as batch.ops) and is no
// longer recorded as changed; the error returned is one that fails the
// whole batch (the database's, not one write's).
func (tx *wtx) flush(errs []error) error {
	if tx.rows.empty() {
		return nil
	}
	d := tx.rows
	tx.rows = deferred{}
	fnErr, err := tx.savepoint("flush", func() error { return tx.flushAll(d) })
	if err != nil || fnErr == nil {
		return err
	}
	// One of the rows failed: each again on its own, to find which.
	for _, sub := range d.subs {
		fnErr, err := tx.savepoint("one", func() error { return tx.flushOne(sub, d.audits) })
		if err != nil {
			return err
		}
		if fnErr != nil {
			errs[sub.op] = fnErr
			tx.dropChanged(sub.w)
		}
	}
	return nil
}

// flushError is err, which failed a flush, as it fails the batch.
func flushError(err error) error {
	if isStorage(err) {
		return err
	}
	return fmt.Errorf("write the deferred rows: %w", err)
}

// flushAll writes every deferred row in one statement.
func (tx *wtx) flushAll(d deferred) error {
	n := len(d.audits)
	at, status := make([]int64, n), make([]int64, n)
	user, role, action, method, path, object, team, message := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, a := range d.audits {
		e := a.e
		at[i], user[i], role[i], action[i], method[i], path[i], object[i], team[i], status[i], message[i] = unixNano(e.Time), e.User, e.Role, e.Action, e.Method, e.Path, e.Object, e.Team, int64(e.Status), e.Message
	}
	m := len(d.subs)
	ids, teams, owners, phases := make([]string, m), make([]string, m), make([]string, m), make([]string, m)
	created := make([]int64, m)
	specs, statuses := make([][]byte, m), make([][]byte, m)
	seqOf := make(map[core.WorkloadID]*core.Workload, m)
	for i, s := range d.subs {
		w := s.w
		ids[i], teams[i], owners[i], phases[i], created[i], specs[i], statuses[i] = string(w.ID), string(w.Team), w.Owner, string(w.Status.Phase), unixNano(w.CreatedAt), s.spec, s.status
		seqOf[w.ID] = w
	}
	rows, err := tx.Query(flushQuery, at, user, role, action, method, path, object, team, status, message,
		ids, teams, owners, phases, created, specs, statuses)
	if err != nil {
		return err
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			return err
		}
		if w := seqOf[core.WorkloadID(id)]; w != nil {
			w.Seq = seq
			got++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if got != m {
		return fmt.Errorf("flush: %d of %d workloads written", got, m)
	}
	return nil
}

// flushOne writes one deferred submit's row and its audit entry, as
// CreateWorkload's own INSERT would, with its errors.
func (tx *wtx) flushOne(sub deferredSubmit, audits []deferredAudit) error {
	w := sub.w
	seq, err := tx.insert(insertWorkload, "seq", string(w.ID), string(w.Team), w.Owner, string(w.Status.Phase), unixNano(w.CreatedAt), nil, nil, sub.spec, sub.status)
	if err = insertError(w, err); err != nil {
		return err
	}
	w.Seq = seq
	for _, a := range audits {
		if a.op == sub.op {
			if err := insertAudit(tx, a.e); err != nil {
				return err
			}
		}
	}
	return nil
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
