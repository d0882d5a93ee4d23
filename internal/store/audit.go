package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// auditCtx is a request's audit entry on its way to the store: the API
// server fills it in before calling a write, and the first write of the
// request records it in the same transaction (see Store.do). A request
// that changes nothing records it with AppendAudit instead.
type auditCtx struct {
	entry   *core.AuditEntry
	written bool
}

type auditKey struct{}

// WithAudit attaches an audit entry to ctx: the first write made with the
// returned context records it in its own transaction.
func WithAudit(ctx context.Context, e *core.AuditEntry) context.Context {
	return context.WithValue(ctx, auditKey{}, &auditCtx{entry: e})
}

// AuditWritten reports whether a write made with ctx recorded its audit
// entry.
func AuditWritten(ctx context.Context) bool {
	a := auditOf(ctx)
	return a != nil && a.written
}

func auditOf(ctx context.Context) *auditCtx {
	a, _ := ctx.Value(auditKey{}).(*auditCtx)
	return a
}

// setAuditObject names the object a write creates (a workload's ID is
// made in the store), unless the entry names one already.
func setAuditObject(ctx context.Context, object, team string) {
	if a := auditOf(ctx); a != nil && !a.written {
		if a.entry.Object == "" {
			a.entry.Object = object
		}
		if a.entry.Team == "" {
			a.entry.Team = team
		}
	}
}

// clearAuditObject forgets the object the entry names when it is object.
func clearAuditObject(ctx context.Context, object string) {
	if a := auditOf(ctx); a != nil && !a.written && a.entry.Object == object {
		a.entry.Object = ""
	}
}

func insertAudit(tx *wtx, e *core.AuditEntry) error {
	if tx.deferredOp {
		tx.deferAudit(e) // with the write's own deferred row (pgdefer.go)
		return nil
	}
	id, err := tx.insert(`INSERT INTO audit (time, user_name, role, action, method, path, object, team, status, message)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, "id", unixNano(e.Time), e.User, e.Role, e.Action, e.Method, e.Path, e.Object, e.Team, e.Status, e.Message)
	if err != nil {
		return err
	}
	e.ID = id
	return nil
}

// AppendAudit records an entry on its own: for requests that changed
// nothing (refused, failed), or whose entry no write carried.
func (s *Store) AppendAudit(ctx context.Context, e core.AuditEntry) error {
	return s.do(context.WithoutCancel(context.WithValue(ctx, auditKey{}, nil)), func(tx *wtx) error { return insertAudit(tx, &e) })
}

// AuditFilter selects audit entries: at or after Since (zero: all), by
// User ("" any), after the entry AfterID (paging), at most Limit (0: 100).
type AuditFilter struct {
	Since   time.Time
	User    string
	AfterID int64
	Limit   int
}

// Audit lists entries, oldest first.
func (s *Store) Audit(ctx context.Context, f AuditFilter) ([]core.AuditEntry, error) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, "time >= ?"), append(args, unixNano(f.Since))
	}
	if f.User != "" {
		where, args = append(where, "user_name = ?"), append(args, f.User)
	}
	if f.AfterID > 0 {
		where, args = append(where, "id > ?"), append(args, f.AfterID)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q := "SELECT id, time, user_name, role, action, method, path, object, team, status, message FROM audit"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(" ORDER BY id LIMIT %d", f.Limit)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.AuditEntry
	for rows.Next() {
		var e core.AuditEntry
		var t int64
		if err := rows.Scan(&e.ID, &t, &e.User, &e.Role, &e.Action, &e.Method, &e.Path, &e.Object, &e.Team, &e.Status, &e.Message); err != nil {
			return nil, err
		}
		e.Time = fromNano(t)
		out = append(out, e)
	}
	return out, rows.Err()
}
