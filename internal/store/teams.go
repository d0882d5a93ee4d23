package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// CreateTeam stores a new team; an existing name is a conflict.
func (s *Store) CreateTeam(ctx context.Context, t core.Team) error {
	b, err := json.Marshal(&t)
	if err != nil {
		return err
	}
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(t.Name)).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("team %s exists: %w", t.Name, core.ErrConflict)
		}
		tx.teams = true
		_, err := tx.Exec("INSERT INTO teams (name, created_at, spec) VALUES (?, ?, ?)", string(t.Name), unixNano(t.CreatedAt), b)
		return err
	})
}

// Teams lists the teams by name.
func (s *Store) Teams(ctx context.Context) ([]core.Team, error) {
	teams, err := s.decodedTeams(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]core.Team, len(teams))
	for i := range teams {
		out[i] = *teams[i].Clone()
	}
	return out, nil
}

// decodedTeams is every team, by name, from the cache when Options.Cache
// is set: shared rows, which callers copy.
func (s *Store) decodedTeams(ctx context.Context) ([]core.Team, error) {
	return s.teams.get(func() ([]core.Team, error) { return queryTeams(ctx, s.read) })
}

func queryTeams(ctx context.Context, q querier) ([]core.Team, error) {
	rows, err := q.QueryContext(ctx, "SELECT spec FROM teams ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Team
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var t core.Team
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// UpdateTeam changes a team's quota with fn, which may return an error to
// refuse the change.
func (s *Store) UpdateTeam(ctx context.Context, name core.TeamName, fn func(*core.Team) error) (*core.Team, error) {
	var out *core.Team
	err := s.do(ctx, func(tx *wtx) error {
		var b []byte
		if err := tx.QueryRow("SELECT spec FROM teams WHERE name = ?", string(name)).Scan(&b); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("team %s: %w", name, core.ErrNotFound)
			}
			return err
		}
		var t core.Team
		if err := json.Unmarshal(b, &t); err != nil {
			return err
		}
		if err := fn(&t); err != nil {
			return err
		}
		t.Name = name
		nb, err := json.Marshal(&t)
		if err != nil {
			return err
		}
		tx.teams = true
		if _, err := tx.Exec("UPDATE teams SET spec = ? WHERE name = ?", nb, string(name)); err != nil {
			return err
		}
		out = &t
		return nil
	})
	return out, err
}

// SetShares records the teams' standing computed by the last scheduling
// cycle (kept in memory only: it is derived data).
func (s *Store) SetShares(shares []core.TeamShare) {
	s.mu.Lock()
	s.shares = shares
	s.mu.Unlock()
}

// Shares returns what SetShares recorded last.
func (s *Store) Shares() []core.TeamShare {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.shares
}

// Team reads one team.
func (s *Store) Team(ctx context.Context, name core.TeamName) (*core.Team, error) {
	if s.teams.keeps() {
		teams, err := s.decodedTeams(ctx)
		if err != nil {
			return nil, err
		}
		i, ok := slices.BinarySearchFunc(teams, name, func(t core.Team, name core.TeamName) int { return cmp.Compare(t.Name, name) })
		if !ok {
			return nil, fmt.Errorf("team %s: %w", name, core.ErrNotFound)
		}
		return teams[i].Clone(), nil
	}
	var b []byte
	if err := s.readRow(ctx, "SELECT spec FROM teams WHERE name = ?", string(name)).Scan(&b); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("team %s: %w", name, core.ErrNotFound)
		}
		return nil, err
	}
	var t core.Team
	return &t, json.Unmarshal(b, &t)
}

// maxNamedActive is how many of a team's active workloads DeleteTeam's
// refusal names.
const maxNamedActive = 10

// DeleteTeam removes a team and everything that is the team's alone, in one
// transaction: its finished workloads with their events and allocations,
// its service accounts (which belong to it for good) with their tokens, and
// every person's membership in it; the people keep their other teams. A
// team with Pending or Running workloads is refused (core.ErrConflict,
// naming them): cancel them first. Its history goes with it, so that a team
// created later under the same name inherits nothing.
func (s *Store) DeleteTeam(ctx context.Context, name core.TeamName) error {
	s.mu.RLock()
	var active []string
	for id, w := range s.active {
		if w.Team == name {
			active = append(active, string(id))
		}
	}
	s.mu.RUnlock()
	err := s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(name)).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("team %s: %w", name, core.ErrNotFound)
		}
		// The committed phases decide, not the memory view read above,
		// which names the culprits only.
		if err := tx.QueryRow("SELECT count(*) FROM workloads WHERE team = ? AND phase IN (?, ?)",
			string(name), string(core.Pending), string(core.Running)).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			slices.Sort(active)
			named := active[:min(len(active), maxNamedActive)]
			more := ""
			if n > len(named) {
				more = fmt.Sprintf(" and %d more", n-len(named))
			}
			return fmt.Errorf("team %s has %d pending or running workloads (%s%s): cancel them first: %w",
				name, n, strings.Join(named, ", "), more, core.ErrConflict)
		}
		setAuditObject(ctx, string(name), string(name))
		for _, q := range []string{
			"DELETE FROM events WHERE workload_id IN (SELECT id FROM workloads WHERE team = ?)",
			"DELETE FROM allocations WHERE team = ?",
			"DELETE FROM outputs WHERE team = ?",
			"DELETE FROM attempts WHERE team = ?",
			"DELETE FROM workload_nodes WHERE workload_id IN (SELECT id FROM workloads WHERE team = ?)",
			"DELETE FROM workloads WHERE team = ?",
			"DELETE FROM budgets WHERE team = ?",
			"DELETE FROM secrets WHERE team = ?",
			// The team's volumes' data goes too (VolumePurges), before
			// a team of the same name could make volumes of those names.
			"INSERT INTO volume_purges (team, name, at) SELECT team, name, created_at FROM volumes WHERE team = ? AND deleted_at = 0 ON CONFLICT (team, name) DO UPDATE SET at = excluded.at",
			"DELETE FROM volumes WHERE team = ?",
			"DELETE FROM acceptance_runs WHERE team = ?",
		} {
			if _, err := tx.Exec(q, string(name)); err != nil {
				return err
			}
		}
		users, err := queryUsers(tx.Tx)
		if err != nil {
			return err
		}
		for _, u := range users {
			if _, in := u.Role(name); !in {
				continue
			}
			if u.ServiceAccount {
				if err := deleteUserRows(tx, u.Name); err != nil {
					return err
				}
				continue
			}
			u.RemoveTeam(name)
			b, err := json.Marshal(&u)
			if err != nil {
				return err
			}
			if _, err := tx.Exec("UPDATE users SET spec = ? WHERE name = ?", b, u.Name); err != nil {
				return err
			}
		}
		tx.teams = true
		_, err = tx.Exec("DELETE FROM teams WHERE name = ?", string(name))
		return err
	})
	s.forgetTokens()
	return err
}

// queryUsers decodes every user inside a write.
func queryUsers(tx *sql.Tx) ([]core.User, error) {
	return scanUsers(tx.Query("SELECT spec FROM users ORDER BY name"))
}
