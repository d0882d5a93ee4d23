package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The leader lease: one row, holder and expiry, with a fencing token that
// grows by one at every acquisition. Every write the leader's control loop
// makes carries its token (WithFence); the writer checks it in the write's
// own transaction, which holds the write lock, so that between the check
// and the commit no other server can take the lease. A deposed leader
// (paused past its lease, cut off, slow) therefore writes nothing once
// another server has taken over, whatever it believes.
//
// Times are those of the database (PostgreSQL's clock_timestamp()), not of
// each server: the servers' clocks need not agree. A SQLite store has one
// server; its clock is the machine's.

// ErrFenced is the error of a fenced write whose token is no longer the
// lease's (another server leads, or the lease ran out).
var ErrFenced = fmt.Errorf("fenced: this server does not hold the leader lease: %w", core.ErrUnavailable)

// Fence is the leadership a write is made under: Token is the fencing token
// of the lease held, or 0 when the caller knows it holds none (its lease ran
// out by its own clock), in which case the write is refused without asking
// the database.
type Fence interface{ Token() int64 }

type fenceKey struct{}

// WithFence makes every write done with ctx carry f: refused with ErrFenced
// unless f's token is the lease's and the lease has not expired.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

func fenceOf(ctx context.Context) Fence {
	f, _ := ctx.Value(fenceKey{}).(Fence)
	return f
}

// leaseRow is the lease as a transaction read it.
type leaseRow struct {
	holder     string
	token      int64
	acquiredAt int64
	expiresAt  int64
	now        int64 // the database's time when read
}

// Lease is the leader lease, as GET /readyz and the servers list show it.
type Lease struct {
	Holder     string
	Token      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	// Now is the database's time when it was read: ExpiresAt after Now
	// means held.
	Now time.Time
}

// Held reports whether the lease had not expired when read.
func (l Lease) Held() bool { return l.Holder != "" && l.ExpiresAt.After(l.Now) }

// dbNow is the database's time, in Unix nanoseconds.
func (tx *wtx) dbNow() (int64, error) {
	if tx.s.pg == nil {
		return unixNano(time.Now()), nil
	}
	var n int64
	err := tx.QueryRow("SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT").Scan(&n)
	return n, err
}

func (tx *wtx) readLease() (*leaseRow, error) {
	now, err := tx.dbNow()
	if err != nil {
		return nil, err
	}
	l := &leaseRow{now: now}
	err = tx.QueryRow("SELECT holder, token, acquired_at, expires_at FROM leader_lease WHERE id = 1").Scan(&l.holder, &l.token, &l.acquiredAt, &l.expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return l, nil
	}
	return l, err
}

// checkFence refuses a write under f unless f's token is the lease's and the
// lease is unexpired. The lease is read once and kept in *cached for the
// fenced writes that follow in the batch: the write lock keeps other servers
// from changing it; the batch forgets it after any write that is not fenced
// (a Campaign may have changed it) and before each write that arrives into
// an open batch (Store.pipeline: an fsync may have passed since).
func (tx *wtx) checkFence(f Fence, cached **leaseRow) error {
	tok := f.Token()
	if tok == 0 {
		return ErrFenced
	}
	if *cached == nil {
		l, err := tx.readLease()
		if err != nil {
			return err
		}
		*cached = l
	}
	l := *cached
	if l.token != tok || l.expiresAt <= l.now {
		return fmt.Errorf("token %d, lease token %d: %w", tok, l.token, ErrFenced)
	}
	return nil
}

// Campaign takes the lease for holder for ttl when it is free or expired
// (or held by holder itself: a restarted server of the same name), with the
// next fencing token. won is false, and the lease as it stands returned,
// when another holds it.
func (s *Store) Campaign(ctx context.Context, holder string, ttl time.Duration) (l Lease, won bool, err error) {
	err = s.do(ctx, func(tx *wtx) error {
		r, err := tx.readLease()
		if err != nil {
			return err
		}
		if r.holder != "" && r.holder != holder && r.expiresAt > r.now {
			l, won = r.lease(), false
			return nil
		}
		r.holder, r.token, r.acquiredAt, r.expiresAt = holder, r.token+1, r.now, r.now+int64(ttl)
		if _, err := tx.Exec(`INSERT INTO leader_lease (id, holder, token, acquired_at, expires_at) VALUES (1, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, token = excluded.token, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`,
			r.holder, r.token, r.acquiredAt, r.expiresAt); err != nil {
			return err
		}
		l, won = r.lease(), true
		return nil
	})
	return l, won, err
}

// Renew extends the lease of holder with token by ttl from now. It fails
// with ErrFenced when the lease is no longer theirs or has expired: the
// holder must stop leading (and campaign again, for a new token).
func (s *Store) Renew(ctx context.Context, holder string, token int64, ttl time.Duration) (Lease, error) {
	var l Lease
	err := s.do(ctx, func(tx *wtx) error {
		r, err := tx.readLease()
		if err != nil {
			return err
		}
		if r.holder != holder || r.token != token || r.expiresAt <= r.now {
			return fmt.Errorf("renew token %d (lease: %s, token %d): %w", token, r.holder, r.token, ErrFenced)
		}
		r.expiresAt = r.now + int64(ttl)
		if _, err := tx.Exec("UPDATE leader_lease SET expires_at = ? WHERE id = 1", r.expiresAt); err != nil {
			return err
		}
		l = r.lease()
		return nil
	})
	return l, err
}

// Resign gives the lease up at once, if holder still holds it with token,
// so that another server takes over without waiting for it to expire.
func (s *Store) Resign(ctx context.Context, holder string, token int64) error {
	return s.do(ctx, func(tx *wtx) error {
		now, err := tx.dbNow()
		if err != nil {
			return err
		}
		_, err = tx.Exec("UPDATE leader_lease SET expires_at = ? WHERE id = 1 AND holder = ? AND token = ? AND expires_at > ?", now, holder, token, now)
		return err
	})
}

// LeaseNow reads the lease (a zero Lease when none was ever taken), with the
// database's time.
func (s *Store) LeaseNow(ctx context.Context) (Lease, error) {
	r := leaseRow{now: unixNano(time.Now())}
	q := "SELECT holder, token, acquired_at, expires_at, ? FROM leader_lease WHERE id = 1"
	args := []any{r.now}
	if s.pg != nil {
		q, args = "SELECT holder, token, acquired_at, expires_at, (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT FROM leader_lease WHERE id = 1", nil
	}
	err := s.read.QueryRowContext(ctx, q, args...).Scan(&r.holder, &r.token, &r.acquiredAt, &r.expiresAt, &r.now)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Lease{}, err
	}
	return r.lease(), nil
}

func (r *leaseRow) lease() Lease {
	l := Lease{Holder: r.holder, Token: r.token, Now: fromNano(r.now)}
	if r.holder != "" {
		l.AcquiredAt, l.ExpiresAt = fromNano(r.acquiredAt), fromNano(r.expiresAt)
	}
	return l
}

// Server is one gpufleet server sharing the store, as it last said.
type Server struct {
	Name      string
	Addr      string
	PID       int
	StartedAt time.Time
	LastSeen  time.Time
}

// serverRetention bounds how long a server that stopped saying it is there
// stays listed.
const serverRetention = 24 * time.Hour

type quietKey struct{}

// PutServer records that srv is there now (by the database's clock), and
// forgets servers silent for serverRetention. It is a quiet write: the
// control loop is not woken by heartbeats.
func (s *Store) PutServer(ctx context.Context, srv Server) error {
	return s.do(context.WithValue(ctx, quietKey{}, true), func(tx *wtx) error {
		now, err := tx.dbNow()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO servers (name, addr, pid, started_at, last_seen) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET addr = excluded.addr, pid = excluded.pid, started_at = excluded.started_at, last_seen = excluded.last_seen`,
			srv.Name, srv.Addr, int64(srv.PID), unixNano(srv.StartedAt), now); err != nil {
			return err
		}
		_, err = tx.Exec("DELETE FROM servers WHERE last_seen < ?", now-int64(serverRetention))
		return err
	})
}

// Servers lists the servers that share the store, by name.
func (s *Store) Servers(ctx context.Context) ([]Server, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT name, addr, pid, started_at, last_seen FROM servers ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Server
	for rows.Next() {
		var sv Server
		var pid, started, seen int64
		if err := rows.Scan(&sv.Name, &sv.Addr, &pid, &started, &seen); err != nil {
			return nil, err
		}
		sv.PID, sv.StartedAt, sv.LastSeen = int(pid), fromNano(started), fromNano(seen)
		out = append(out, sv)
	}
	return out, rows.Err()
}

// Postgres reports whether the store is a PostgreSQL database (which
// several servers may share) rather than a SQLite file.
func (s *Store) Postgres() bool { return s.pg != nil }

// FencedWrites is how many fenced writes this store refused since it was
// opened (a deposed leader's, or a follower's): the metric
// gpufleet_store_fenced_writes_total.
func (s *Store) FencedWrites() int64 { return s.fenced.Load() }
