package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// AcceptanceRun is a run of an acceptance card as stored: its team, status
// and times in columns for listing, the run itself (the api's
// AcceptanceRun, as JSON) opaque to the store.
type AcceptanceRun struct {
	ID        string
	Team      core.TeamName
	Status    string
	CreatedAt time.Time
	Spec      []byte
}

// NewRunID makes an acceptance run's ID: "ar-" and 12 random base32
// characters.
func NewRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return "ar-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:12]
}

// PutAcceptanceRun creates or replaces a run. A team that does not exist
// is core.ErrNotFound.
func (s *Store) PutAcceptanceRun(ctx context.Context, r AcceptanceRun) error {
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(r.Team)).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("team %s: %w", r.Team, core.ErrNotFound)
		}
		setAuditObject(ctx, r.ID, string(r.Team))
		_, err := tx.Exec(`INSERT INTO acceptance_runs (id, team, status, created_at, spec) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET status = excluded.status, spec = excluded.spec`,
			r.ID, string(r.Team), r.Status, unixNano(r.CreatedAt), r.Spec)
		return err
	})
}

// AcceptanceRunByID returns one run, or core.ErrNotFound.
func (s *Store) AcceptanceRunByID(ctx context.Context, id string) (AcceptanceRun, error) {
	r := AcceptanceRun{ID: id}
	var team string
	var created int64
	err := s.read.QueryRowContext(ctx, "SELECT team, status, created_at, spec FROM acceptance_runs WHERE id = ?", id).Scan(&team, &r.Status, &created, &r.Spec)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("acceptance run %s: %w", id, core.ErrNotFound)
	}
	r.Team, r.CreatedAt = core.TeamName(team), fromNano(created)
	return r, err
}

// AcceptanceRuns lists the runs of the given teams (every team's when
// teams is nil), newest first, at most limit (0: 100).
func (s *Store) AcceptanceRuns(ctx context.Context, teams []core.TeamName, limit int) ([]AcceptanceRun, error) {
	if limit <= 0 {
		limit = 100
	}
	q := "SELECT id, team, status, created_at, spec FROM acceptance_runs"
	var args []any
	if teams != nil {
		if len(teams) == 0 {
			return nil, nil
		}
		q += " WHERE team IN (?" + strings.Repeat(", ?", len(teams)-1) + ")"
		for _, t := range teams {
			args = append(args, string(t))
		}
	}
	q += " ORDER BY created_at DESC, id LIMIT ?"
	args = append(args, limit)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AcceptanceRun
	for rows.Next() {
		var r AcceptanceRun
		var team string
		var created int64
		if err := rows.Scan(&r.ID, &team, &r.Status, &created, &r.Spec); err != nil {
			return nil, err
		}
		r.Team, r.CreatedAt = core.TeamName(team), fromNano(created)
		out = append(out, r)
	}
	return out, rows.Err()
}
