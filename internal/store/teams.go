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
		_, err := tx.Exec("INSERT INTO teams (name, created_at, spec) VALUES (?, ?, ?)", string(t.Name), unixNano(t.CreatedAt), b)
		return err
	})
}

// Teams lists the teams by name.
func (s *Store) Teams(ctx context.Context) ([]core.Team, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT spec FROM teams ORDER BY name")
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
	var b []byte
	if err := s.read.QueryRowContext(ctx, "SELECT spec FROM teams WHERE name = ?", string(name)).Scan(&b); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("team %s: %w", name, core.ErrNotFound)
		}
		return nil, err
	}
	var t core.Team
	return &t, json.Unmarshal(b, &t)
}

// CreateUser stores a new user with the hash of its first token. The token
// itself is never stored.
func (s *Store) CreateUser(ctx context.Context, u core.User, tokenHash string, expires *time.Time) error {
	b, err := json.Marshal(&u)
	if err != nil {
		return err
	}
	err = s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM users WHERE name = ?", u.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("user %s exists: %w", u.Name, core.ErrConflict)
		}
		for _, t := range u.Teams {
			if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(t)).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("team %q: %w", t, core.ErrNotFound)
			}
		}
		if _, err := tx.Exec("INSERT INTO users (name, created_at, spec) VALUES (?, ?, ?)", u.Name, unixNano(u.CreatedAt), b); err != nil {
			return err
		}
		return insertToken(tx, u.Name, tokenHash, u.CreatedAt, expires)
	})
	s.forgetTokens()
	return err
}

func insertToken(tx *wtx, user, hash string, now time.Time, expires *time.Time) error {
	var exp any
	if expires != nil {
		exp = unixNano(*expires)
	}
	_, err := tx.Exec("INSERT INTO tokens (hash, user_name, created_at, expires_at) VALUES (?, ?, ?, ?)", hash, user, unixNano(now), exp)
	return err
}

// UserByTokenHash finds the user a token belongs to. Revoked and expired
// tokens find nobody (core.ErrNotFound).
//
// Found users are cached for a few seconds (every request authenticates);
// any write that revokes or changes tokens or users must call
// forgetTokens.
func (s *Store) UserByTokenHash(ctx context.Context, hash string, now time.Time) (*core.User, error) {
	s.tokMu.Lock()
	c, ok := s.tokens[hash]
	s.tokMu.Unlock()
	if ok && now.Before(c.until) {
		return c.user, nil
	}
	u, until, err := s.userByTokenHash(ctx, hash, now)
	if err != nil {
		return nil, err
	}
	s.tokMu.Lock()
	if len(s.tokens) >= 10000 {
		clear(s.tokens)
	}
	s.tokens[hash] = cachedUser{user: u, until: until}
	s.tokMu.Unlock()
	return u, nil
}

type cachedUser struct {
	user  *core.User
	until time.Time
}

// tokenCacheTTL bounds how long a cached token lookup is trusted.
const tokenCacheTTL = 5 * time.Second

func (s *Store) forgetTokens() {
	s.tokMu.Lock()
	clear(s.tokens)
	s.tokMu.Unlock()
}

func (s *Store) userByTokenHash(ctx context.Context, hash string, now time.Time) (*core.User, time.Time, error) {
	until := now.Add(tokenCacheTTL)
	var b []byte
	var exp sql.NullInt64
	err := s.read.QueryRowContext(ctx, `SELECT u.spec, t.expires_at FROM tokens t JOIN users u ON u.name = t.user_name
		WHERE t.hash = ? AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > ?)`, hash, unixNano(now)).Scan(&b, &exp)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, until, core.ErrNotFound
		}
		return nil, until, err
	}
	if exp.Valid && fromNano(exp.Int64).Before(until) {
		until = fromNano(exp.Int64)
	}
	var u core.User
	return &u, until, json.Unmarshal(b, &u)
}

// User reads one user.
func (s *Store) User(ctx context.Context, name string) (*core.User, error) {
	var b []byte
	if err := s.read.QueryRowContext(ctx, "SELECT spec FROM users WHERE name = ?", name).Scan(&b); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("user %s: %w", name, core.ErrNotFound)
		}
		return nil, err
	}
	var u core.User
	return &u, json.Unmarshal(b, &u)
}

// AddToken gives an existing user another token (stored as its hash).
func (s *Store) AddToken(ctx context.Context, user, tokenHash string, now time.Time, expires *time.Time) error {
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM users WHERE name = ?", user).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("user %s: %w", user, core.ErrNotFound)
		}
		return insertToken(tx, user, tokenHash, now, expires)
	})
}
