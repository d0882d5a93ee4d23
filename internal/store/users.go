package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// CreateUser stores a new user and its first token, given as the token's
// record (ID, name, expiry) and its hash. The token itself is never
// stored. Every team of its memberships must exist, and a service account
// is in exactly one, the one its name says (core.User.CheckNew).
func (s *Store) CreateUser(ctx context.Context, u core.User, tok core.Token, tokenHash string) error {
	if err := u.CheckNew(); err != nil {
		return err
	}
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
		if err := teamsExist(tx, u.Teams()); err != nil {
			return err
		}
		setAuditObject(ctx, u.Name, "")
		if _, err := tx.Exec("INSERT INTO users (name, created_at, spec) VALUES (?, ?, ?)", u.Name, unixNano(u.CreatedAt), b); err != nil {
			return err
		}
		tok.User = u.Name
		return insertToken(tx, tok, tokenHash)
	})
	s.forgetTokens()
	return err
}

func teamsExist(tx *wtx, teams []core.TeamName) error {
	for _, t := range teams {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(t)).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("team %q: %w", t, core.ErrNotFound)
		}
	}
	return nil
}

// NewTokenID returns a token's public ID: "tok-" and 10 random base32
// characters.
func NewTokenID() string {
	var b [7]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "tok-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])[:10])
}

func insertToken(tx *wtx, t core.Token, hash string) error {
	var exp any
	if t.ExpiresAt != nil {
		exp = unixNano(*t.ExpiresAt)
	}
	if t.ID == "" {
		t.ID = NewTokenID()
	}
	_, err := tx.Exec("INSERT INTO tokens (hash, id, name, user_name, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
		hash, t.ID, t.Name, t.User, unixNano(t.CreatedAt), exp)
	return err
}

// CreateToken gives an existing user another token, stored as its hash.
func (s *Store) CreateToken(ctx context.Context, t core.Token, tokenHash string) error {
	return s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM users WHERE name = ?", t.User).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("user %s: %w", t.User, core.ErrNotFound)
		}
		setAuditObject(ctx, t.ID, "")
		return insertToken(tx, t, tokenHash)
	})
}

// Tokens lists the tokens of user ("" for every user), newest first,
// revoked and expired ones included. Hashes are not returned.
func (s *Store) Tokens(ctx context.Context, user string) ([]core.Token, error) {
	q := "SELECT id, name, user_name, created_at, expires_at, revoked_at FROM tokens"
	var args []any
	if user != "" {
		q += " WHERE user_name = ?"
		args = append(args, user)
	}
	rows, err := s.read.QueryContext(ctx, q+" ORDER BY created_at DESC, id", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Token
	for rows.Next() {
		var t core.Token
		var created int64
		var exp, rev sql.NullInt64
		if err := rows.Scan(&t.ID, &t.Name, &t.User, &created, &exp, &rev); err != nil {
			return nil, err
		}
		setTokenTimes(&t, created, exp, rev)
		out = append(out, t)
	}
	return out, rows.Err()
}

// setTokenTimes sets a token's times from their columns.
func setTokenTimes(t *core.Token, created int64, exp, rev sql.NullInt64) {
	t.CreatedAt = fromNano(created)
	if exp.Valid {
		e := fromNano(exp.Int64)
		t.ExpiresAt = &e
	}
	if rev.Valid {
		r := fromNano(rev.Int64)
		t.RevokedAt = &r
	}
}

// Token reads one token's record.
func (s *Store) Token(ctx context.Context, id string) (*core.Token, error) {
	ts, err := s.Tokens(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.ID == id {
			return &t, nil
		}
	}
	return nil, fmt.Errorf("token %s: %w", id, core.ErrNotFound)
}

// RevokeToken revokes a token by ID; it authenticates nobody from then on
// (the cache of token lookups is emptied). Revoking twice is not an error.
func (s *Store) RevokeToken(ctx context.Context, id string, now time.Time) error {
	err := s.do(ctx, func(tx *wtx) error {
		res, err := tx.Exec("UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", unixNano(now), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("token %s: %w", id, core.ErrNotFound)
		}
		setAuditObject(ctx, id, "")
		return nil
	})
	s.forgetTokens()
	return err
}

// UserByTokenHash finds the user a token belongs to. Revoked and expired
// tokens find nobody (core.ErrNotFound).
//
// Found users are cached for a few seconds (every request authenticates);
// any write that revokes or changes tokens or users calls forgetTokens.
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

// forgetTokens empties the cache of token lookups after a write that may
// change who a token authenticates or what it may do, and wakes those
// waiting on AccessChanged.
func (s *Store) forgetTokens() {
	s.tokMu.Lock()
	clear(s.tokens)
	if s.accessChanged != nil {
		close(s.accessChanged)
		s.accessChanged = nil
	}
	s.tokMu.Unlock()
}

// AccessChanged returns a channel closed at this store's next write that
// may change who a token authenticates or what its user may do: a token
// revoked, a user changed or deleted, a team deleted. The writes of other
// servers sharing a PostgreSQL store close nothing here: what watches
// access reads TokenHolders on a timer as well.
func (s *Store) AccessChanged() <-chan struct{} {
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	if s.accessChanged == nil {
		s.accessChanged = make(chan struct{})
	}
	return s.accessChanged
}

// TokenHolder is a token's record and the user it belongs to, as read
// again for a session that outlives the request that began it.
type TokenHolder struct {
	Token core.Token
	User  *core.User
}

// TokenHolders reads, past the cache of token lookups (so that a change
// another server made is seen at once), the record and user of each token
// of hashes that still exists, revoked and expired ones included. A hash
// missing from the answer is a token that is gone, with its user.
func (s *Store) TokenHolders(ctx context.Context, hashes []string) (map[string]TokenHolder, error) {
	out := make(map[string]TokenHolder, len(hashes))
	const chunk = 500
	for len(hashes) > 0 {
		n := min(chunk, len(hashes))
		args := make([]any, n)
		for i, h := range hashes[:n] {
			args[i] = h
		}
		hashes = hashes[n:]
		q := `SELECT t.hash, t.id, t.name, t.user_name, t.created_at, t.expires_at, t.revoked_at, u.spec
			FROM tokens t JOIN users u ON u.name = t.user_name WHERE t.hash IN (?` + strings.Repeat(", ?", n-1) + ")"
		if err := s.scanTokenHolders(ctx, q, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) scanTokenHolders(ctx context.Context, q string, args []any, out map[string]TokenHolder) error {
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var hash string
		var h TokenHolder
		var created int64
		var exp, rev sql.NullInt64
		var spec []byte
		if err := rows.Scan(&hash, &h.Token.ID, &h.Token.Name, &h.Token.User, &created, &exp, &rev, &spec); err != nil {
			return err
		}
		setTokenTimes(&h.Token, created, exp, rev)
		h.User = new(core.User)
		if err := json.Unmarshal(spec, h.User); err != nil {
			return err
		}
		out[hash] = h
	}
	return rows.Err()
}

func (s *Store) userByTokenHash(ctx context.Context, hash string, now time.Time) (*core.User, time.Time, error) {
	until := now.Add(tokenCacheTTL)
	var b []byte
	var exp sql.NullInt64
	err := s.readRow(ctx, `SELECT u.spec, t.expires_at FROM tokens t JOIN users u ON u.name = t.user_name
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
	if err := s.readRow(ctx, "SELECT spec FROM users WHERE name = ?", name).Scan(&b); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("user %s: %w", name, core.ErrNotFound)
		}
		return nil, err
	}
	var u core.User
	return &u, json.Unmarshal(b, &u)
}

// Users lists every user, by name.
func (s *Store) Users(ctx context.Context) ([]core.User, error) {
	return scanUsers(s.read.QueryContext(ctx, "SELECT spec FROM users ORDER BY name"))
}

// scanUsers decodes the users a query of their specs returned.
func scanUsers(rows *sql.Rows, err error) ([]core.User, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.User
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var u core.User
		if err := json.Unmarshal(b, &u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// UpdateUser changes a user in one transaction: fn gets the stored user
// and changes it; the teams of its memberships must exist, and a service
// account stays in its one team (core.User.CheckChange: core.ErrConflict).
func (s *Store) UpdateUser(ctx context.Context, name string, fn func(*core.User) error) (*core.User, error) {
	var out core.User
	err := s.do(ctx, func(tx *wtx) error {
		var b []byte
		if err := tx.QueryRow("SELECT spec FROM users WHERE name = ?", name).Scan(&b); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("user %s: %w", name, core.ErrNotFound)
			}
			return err
		}
		var u core.User
		if err := json.Unmarshal(b, &u); err != nil {
			return err
		}
		before := u
		before.Memberships = slices.Clone(u.Memberships)
		if err := fn(&u); err != nil {
			return err
		}
		u.Name = name
		u.Memberships = slices.Clip(u.Memberships)
		if err := u.CheckChange(&before); err != nil {
			return err
		}
		if err := teamsExist(tx, u.Teams()); err != nil {
			return err
		}
		nb, err := json.Marshal(&u)
		if err != nil {
			return err
		}
		setAuditObject(ctx, name, "")
		if _, err := tx.Exec("UPDATE users SET spec = ? WHERE name = ?", nb, name); err != nil {
			return err
		}
		out = u
		return nil
	})
	s.forgetTokens()
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteUser removes a user and its tokens, which authenticate nobody from
// then on (the cache of token lookups is emptied). Its workloads stay, with
// its name as their owner.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	err := s.do(ctx, func(tx *wtx) error {
		var n int
		if err := tx.QueryRow("SELECT count(*) FROM users WHERE name = ?", name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("user %s: %w", name, core.ErrNotFound)
		}
		setAuditObject(ctx, name, "")
		return deleteUserRows(tx, name)
	})
	s.forgetTokens()
	return err
}

func deleteUserRows(tx *wtx, name string) error {
	if _, err := tx.Exec("DELETE FROM tokens WHERE user_name = ?", name); err != nil {
		return err
	}
	_, err := tx.Exec("DELETE FROM users WHERE name = ?", name)
	return err
}
