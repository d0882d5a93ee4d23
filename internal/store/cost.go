package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// PriceVersion is one stored version of a pool's price model. The store
// keeps the spec as the API wrote it (api.Price in JSON); what a price means
// is internal/cost's.
type PriceVersion struct {
	Pool          string
	EffectiveFrom time.Time
	CreatedAt     time.Time
	Spec          []byte
}

// AddPrice stores a new version of a pool's price. A version at the same
// time as one stored is refused (core.ErrConflict): versions never rewrite
// each other. The caller checks what else a version must respect (after
// the pool's latest, not in the past: cost.CheckVersions).
func (s *Store) AddPrice(ctx context.Context, v PriceVersion) error {
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM prices WHERE pool = ? AND effective_from = ?", v.Pool, unixNano(v.EffectiveFrom)).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("pool %s already has a price version effective from %s: %w", v.Pool, v.EffectiveFrom.UTC().Format(time.RFC3339), core.ErrConflict)
		}
		setAuditObject(ctx, v.Pool, "")
		_, err := tx.Exec("INSERT INTO prices (pool, effective_from, created_at, spec) VALUES (?, ?, ?, ?)",
			v.Pool, unixNano(v.EffectiveFrom), unixNano(v.CreatedAt), v.Spec)
		return err
	})
}

// Prices lists the stored price versions by pool, oldest first.
func (s *Store) Prices(ctx context.Context) ([]PriceVersion, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT pool, effective_from, created_at, spec FROM prices ORDER BY pool, effective_from")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PriceVersion
	for rows.Next() {
		var v PriceVersion
		var from, created int64
		if err := rows.Scan(&v.Pool, &from, &created, &v.Spec); err != nil {
			return nil, err
		}
		v.EffectiveFrom, v.CreatedAt = fromNano(from), fromNano(created)
		out = append(out, v)
	}
	return out, rows.Err()
}

// SetBudget stores a team's budget (the spec as the API wrote it,
// api.Budget in JSON), replacing the one it had. A team that does not exist
// is core.ErrNotFound.
func (s *Store) SetBudget(ctx context.Context, team core.TeamName, spec []byte) error {
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(team)).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("team %s: %w", team, core.ErrNotFound)
		}
		setAuditObject(ctx, string(team), string(team))
		_, err := tx.Exec("INSERT INTO budgets (team, spec) VALUES (?, ?) ON CONFLICT(team) DO UPDATE SET spec = excluded.spec", string(team), spec)
		return err
	})
}

// DeleteBudget removes a team's budget; a team without one is
// core.ErrNotFound.
func (s *Store) DeleteBudget(ctx context.Context, team core.TeamName) error {
	return s.do(ctx, func(tx *wtx) error {
		res, err := tx.Exec("DELETE FROM budgets WHERE team = ?", string(team))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("team %s has no budget: %w", team, core.ErrNotFound)
		}
		setAuditObject(ctx, string(team), string(team))
		return nil
	})
}

// Budgets returns every team's budget spec.
func (s *Store) Budgets(ctx context.Context) (map[core.TeamName][]byte, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT team, spec FROM budgets ORDER BY team")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[core.TeamName][]byte{}
	for rows.Next() {
		var team string
		var spec []byte
		if err := rows.Scan(&team, &spec); err != nil {
			return nil, err
		}
		out[core.TeamName(team)] = spec
	}
	return out, rows.Err()
}

// Budget returns a team's budget spec, or core.ErrNotFound.
func (s *Store) Budget(ctx context.Context, team core.TeamName) ([]byte, error) {
	var spec []byte
	err := s.read.QueryRowContext(ctx, "SELECT spec FROM budgets WHERE team = ?", string(team)).Scan(&spec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("team %s has no budget: %w", team, core.ErrNotFound)
	}
	return spec, err
}

// AllocationsBetween lists the allocation intervals that overlap [from, to):
// begun before to and not ended by from (open ones included), oldest first.
//
// It reads the window's rows, not the table: an interval that overlaps the
// window began before its end and, when it has ended, no longer before its
// start than the interval lasted. The rows are indexed by their length's
// class (spanClass: open, up to an hour, a day, a week, five weeks, longer)
// and their start, so that each class is read from its longest length
// before the window: the rows of a month of a year of history, not the
// year (BenchmarkReportAtScale in internal/ledger). Open intervals (at
// most the devices' slices) and those longer than five weeks (at most one
// per slice every five weeks) are read from the first.
func (s *Store) AllocationsBetween(ctx context.Context, from, to time.Time) ([]core.Allocation, error) {
	f, t := unixNano(from), unixNano(to)
	args := []any{t}
	for _, max := range spanBounds {
		args = append(args, f-int64(max), t, f)
	}
	args = append(args, t, f)
	return s.queryAllocations(ctx, allocationsBetween, args...)
}

// spanBounds are the longest lengths of the classes of closed intervals
// that spanClass names 1, 2, 3 and 4; a longer one is of class 5, an open
// one of class 0.
var spanBounds = []time.Duration{time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 35 * 24 * time.Hour}

// spanClass is the expression the index allocations_span and the queries
// that use it share (an expression index is used by a query that spells
// it the same way): the class of an interval's length, by spanBounds.
const spanClass = `(CASE WHEN "end" IS NULL THEN 0 WHEN "end" - start <= 3600000000000 THEN 1 WHEN "end" - start <= 86400000000000 THEN 2 ` +
	`WHEN "end" - start <= 604800000000000 THEN 3 WHEN "end" - start <= 3024000000000000 THEN 4 ELSE 5 END)`

// allocationsSpan indexes allocations by spanClass and start.
const allocationsSpan = `CREATE INDEX allocations_span ON allocations(` + spanClass + `, start)`

// allocationsBetween is AllocationsBetween's query, one part a class: the
// open intervals begun before the window's end; each bounded class begun
// no longer than its bound before the window's start; the longest begun
// before its end.
var allocationsBetween = func() string {
	q := selectAllocations + ` WHERE ` + spanClass + ` = 0 AND start < ?`
	for i := range spanBounds {
		q += fmt.Sprintf(` UNION ALL `+selectAllocations+` WHERE %s = %d AND start >= ? AND start < ? AND "end" > ?`, spanClass, i+1)
	}
	q += fmt.Sprintf(` UNION ALL `+selectAllocations+` WHERE %s = %d AND start < ? AND "end" > ?`, spanClass, len(spanBounds)+1)
	return q + ` ORDER BY id`
}()

// WorkloadsByID returns the workloads of the given IDs that exist.
func (s *Store) WorkloadsByID(ctx context.Context, ids []core.WorkloadID) (map[core.WorkloadID]*core.Workload, error) {
	out := make(map[core.WorkloadID]*core.Workload, len(ids))
	const chunk = 500
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = string(id)
		}
		ids = ids[n:]
		rows, err := s.read.QueryContext(ctx, selectWorkload+" WHERE id IN ("+placeholders(n)+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			sc, err := scanWorkload(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out[sc.w.ID] = sc.w
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	s.explainRows(slices.Collect(maps.Values(out)))
	return out, nil
}

// AddMetrics merges the figures an attempt reported about itself into the
// workload's (core.MergeMetrics: the last value of each name).
func (s *Store) AddMetrics(ctx context.Context, id core.WorkloadID, ms []core.Metric) error {
	return s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		w.Status.Metrics = core.MergeMetrics(w.Status.Metrics, ms)
		return putStatus(tx, w)
	})
}

// AddOutputs adds completed work a workload reported at at: to the sums in
// its status, and as a row of the outputs it reported at that time
// (OutputsBetween), in one transaction. A workload that does not exist is
// core.ErrNotFound.
func (s *Store) AddOutputs(ctx context.Context, id core.WorkloadID, o core.Outputs, at time.Time) (*core.Workload, error) {
	var out *core.Workload
	err := s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		sum := core.Outputs{}
		if w.Status.Outputs != nil {
			sum = *w.Status.Outputs
		}
		sum.Add(o)
		w.Status.Outputs = &sum
		setAuditObject(ctx, string(id), string(w.Team))
		if err := putStatus(tx, w); err != nil {
			return err
		}
		if o.Accepted != 0 || o.Rejected != 0 {
			if _, err := tx.Exec("INSERT INTO outputs (workload_id, team, at, unit, accepted, rejected) VALUES (?, ?, ?, ?, ?, ?)",
				string(id), string(w.Team), unixNano(at), o.Unit, o.Accepted, o.Rejected); err != nil {
				return err
			}
		}
		out = w
		return nil
	})
	return out, err
}

// OutputsReport is outputs a workload reported at one time.
type OutputsReport struct {
	Workload           core.WorkloadID
	At                 time.Time
	Unit               string
	Accepted, Rejected int64
}

// OutputsBetween lists the outputs reported in [from, to), oldest first.
func (s *Store) OutputsBetween(ctx context.Context, from, to time.Time) ([]OutputsReport, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT workload_id, at, unit, accepted, rejected FROM outputs WHERE at >= ? AND at < ? ORDER BY at", unixNano(from), unixNano(to))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OutputsReport
	for rows.Next() {
		var r OutputsReport
		var id string
		var at int64
		if err := rows.Scan(&id, &at, &r.Unit, &r.Accepted, &r.Rejected); err != nil {
			return nil, err
		}
		r.Workload, r.At = core.WorkloadID(id), fromNano(at)
		out = append(out, r)
	}
	return out, rows.Err()
}
