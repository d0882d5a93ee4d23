package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Secret is a team secret as stored: its keys in clear, its values sealed
// (internal/secrets).
type Secret struct {
	Team      core.TeamName
	Name      string
	Keys      []string
	Sealed    []byte
	CreatedAt time.Time
}

// CreateSecret stores a new secret; one of the same name in the team is
// core.ErrConflict (delete it first), a team that does not exist
// core.ErrNotFound.
func (s *Store) CreateSecret(ctx context.Context, sec Secret) error {
	keys, err := json.Marshal(sec.Keys)
	if err != nil {
		return err
	}
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(sec.Team)).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("team %s: %w", sec.Team, core.ErrNotFound)
		}
		if err := tx.QueryRow("SELECT count(*) FROM secrets WHERE team = ? AND name = ?", string(sec.Team), sec.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("team %s has a secret %s already (delete it first): %w", sec.Team, sec.Name, core.ErrConflict)
		}
		setAuditObject(ctx, sec.Name, string(sec.Team))
		_, err := tx.Exec("INSERT INTO secrets (team, name, keys, sealed, created_at) VALUES (?, ?, ?, ?, ?)",
			string(sec.Team), sec.Name, string(keys), sec.Sealed, unixNano(sec.CreatedAt))
		return err
	})
}

// Secrets lists a team's secrets (sealed values included: the caller shows
// only names and keys), by name.
func (s *Store) Secrets(ctx context.Context, team core.TeamName) ([]Secret, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT name, keys, sealed, created_at FROM secrets WHERE team = ? ORDER BY name", string(team))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Secret
	for rows.Next() {
		sec := Secret{Team: team}
		var keys string
		var created int64
		if err := rows.Scan(&sec.Name, &keys, &sec.Sealed, &created); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(keys), &sec.Keys); err != nil {
			return nil, err
		}
		sec.CreatedAt = fromNano(created)
		out = append(out, sec)
	}
	return out, rows.Err()
}

// Secret returns one secret, or core.ErrNotFound.
func (s *Store) Secret(ctx context.Context, team core.TeamName, name string) (Secret, error) {
	sec := Secret{Team: team, Name: name}
	var keys string
	var created int64
	err := s.read.QueryRowContext(ctx, "SELECT keys, sealed, created_at FROM secrets WHERE team = ? AND name = ?", string(team), name).Scan(&keys, &sec.Sealed, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return sec, fmt.Errorf("secret %s/%s: %w", team, name, core.ErrNotFound)
	}
	if err != nil {
		return sec, err
	}
	sec.CreatedAt = fromNano(created)
	return sec, json.Unmarshal([]byte(keys), &sec.Keys)
}

// DeleteSecret removes a secret, or is core.ErrNotFound.
func (s *Store) DeleteSecret(ctx context.Context, team core.TeamName, name string) error {
	return s.do(ctx, func(tx *wtx) error {
		res, err := tx.Exec("DELETE FROM secrets WHERE team = ? AND name = ?", string(team), name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("secret %s/%s: %w", team, name, core.ErrNotFound)
		}
		setAuditObject(ctx, name, string(team))
		return nil
	})
}
