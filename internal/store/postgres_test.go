package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func pgOnly(t *testing.T) {
	t.Helper()
	if backend != "postgres" {
		t.Skip("PostgreSQL only: runs in the store's second pass")
	}
}

// TestSharedViews: two stores on one database (two servers) follow each
// other's commits: a workload submitted on one is in the other's snapshot,
// and leaves it when finished there, in commit order.
func TestSharedViews(t *testing.T) {
	pgOnly(t)
	ctx := context.Background()
	a, b := twoServers(t)
	if err := a.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := a.PutNode(ctx, node("n1", 2)); err != nil {
		t.Fatal(err)
	}
	var ids []core.WorkloadID
	for i := range 10 {
		s := a
		if i%2 == 1 {
			s = b
		}
		w, _, err := s.CreateWorkload(ctx, workload(100), nil, t0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	pending := func(s *Store) []core.WorkloadID {
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []core.WorkloadID
		for _, w := range snap.Pending {
			out = append(out, w.ID)
		}
		return out
	}
	eventually(t, a, b, func() bool { return len(pending(a)) == 10 && len(pending(b)) == 10 }, "both views hold the 10 submits")
	if got := pending(b); strings.Join(ids2s(got), ",") != strings.Join(ids2s(ids), ",") {
		t.Fatalf("b's pending %v, want submission order %v", got, ids)
	}
	// b places one; a sees it Running.
	if res, err := b.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: ids[0], Assignments: []core.Assignment{assign("n1", 0, 100)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	eventually(t, a, b, func() bool {
		snap, _ := a.Snapshot(ctx)
		return len(snap.Running) == 1 && snap.Running[0].ID == ids[0] && len(snap.Pending) == 9
	}, "a sees b's placement")
	if _, err := a.Finish(ctx, ids[0], 1, core.Succeeded, "Completed", "", nil, t0); err != nil {
		t.Fatal(err)
	}
	eventually(t, a, b, func() bool { snap, _ := b.Snapshot(ctx); return len(snap.Running) == 0 && len(snap.Pending) == 9 }, "b sees a's finish")
}

// twoServers opens two stores on one new database, as two servers would.
func twoServers(t *testing.T) (a, b *Store) {
	t.Helper()
	url := pgtest.DB(t)
	for _, s := range []**Store{&a, &b} {
		st, err := Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		*s = st
	}
	return a, b
}

func ids2s(ids []core.WorkloadID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// eventually waits until ok holds, checking it again on each change either
// store signals (Changed: after a commit of its own, and after it has read
// into its view a commit of the other's, which LISTEN tells it of).
func eventually(t *testing.T, a, b *Store, ok func() bool, what string) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for !ok() {
		select {
		case <-a.Changed():
		case <-b.Changed():
		case <-deadline.C:
			t.Fatalf("not within 5 s: %s", what)
		}
	}
}

// TestPostgresBadInput: a malformed connection string, an unreachable
// database and a schema newer than this gpufleet are refused at open with
// messages that say which; none falls back to anything.
func TestPostgresBadInput(t *testing.T) {
	pgOnly(t)
	ctx := context.Background()
	if _, err := Open(ctx, "postgres://user:secret@host:notaport/db"); err == nil || !strings.Contains(err.Error(), "malformed") || strings.Contains(err.Error(), "secret") {
		t.Errorf("malformed URL: %v", err)
	}
	if _, err := Open(ctx, "postgres://nobody@127.0.0.1:1/db?connect_timeout=2"); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("unreachable: %v", err)
	}
	url := pgtest.DB(t)
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE gpufleet_schema SET version = 99"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, url); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version 99 is newer than this gpufleet (%d)", pgSchemaVersion)) {
		t.Errorf("newer schema: %v", err)
	}
	// A database holding other tables is not taken for a store.
	other := pgtest.DB(t)
	odb, _ := sql.Open("pgx", other)
	defer odb.Close()
	if _, err := odb.Exec("CREATE TABLE invoices (id INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, other); err == nil || !strings.Contains(err.Error(), "not a gpufleet store") {
		t.Errorf("foreign database: %v", err)
	}
}

func TestRebind(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT 1":                             "SELECT 1",
		"a = ? AND b IN (?, ?)":                "a = $1 AND b IN ($2, $3)",
		"x = '?' AND y = ? AND \"q?\" = ?":     "x = '?' AND y = $1 AND \"q?\" = $2",
		"INSERT INTO t VALUES (?, 'it''s', ?)": "INSERT INTO t VALUES ($1, 'it''s', $2)",
	} {
		if got := rebind(q); got != want {
			t.Errorf("rebind(%q) = %q, want %q", q, got, want)
		}
	}
}

// TestChangesReachEveryServer: a change that is no workload's (a quota)
// committed on one server signals Changed on another, so that a leader
// hears of a quota or a node a follower wrote; a heartbeat signals nothing.
func TestChangesReachEveryServer(t *testing.T) {
	pgOnly(t)
	ctx := context.Background()
	a, b := twoServers(t)
	if err := b.CreateTeam(ctx, core.NewTeam("q", t0)); err != nil {
		t.Fatal(err)
	}
	drain := func() {
		for {
			select {
			case <-a.Changed():
			case <-time.After(1500 * time.Millisecond): // past a's 1 s poll
				return
			}
		}
	}
	drain()
	if _, err := b.UpdateTeam(ctx, "q", func(tm *core.Team) error { tm.Guaranteed = 4000; return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Changed():
	case <-time.After(3 * time.Second):
		t.Fatal("a quota written on b did not signal a's Changed")
	}
	drain()
	if err := b.PutServer(ctx, Server{Name: "b", Addr: "x", PID: 1, StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Changed():
		t.Fatal("a heartbeat signalled Changed")
	case <-time.After(1500 * time.Millisecond):
	}
}

// TestOwnCommitsNotReadBack: a server does not read back from the database
// the workloads its own writer committed (its view has them from the
// commit: applyOwn); it reads the view only once a second then, where it
// read once for each commit's notification. Another server on the same
// database follows the commits.
func TestOwnCommitsNotReadBack(t *testing.T) {
	pgOnly(t)
	ctx := context.Background()
	a, b := twoServers(t)
	if err := a.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	const clients, each = 16, 20
	reads, start := a.reads.Load(), time.Now()
	errs := make(chan error, clients)
	for range clients {
		go func() {
			for range each {
				if _, _, err := a.CreateWorkload(ctx, workload(100), nil, t0); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// At most one read a second, and one more for the second begun:
	// each commit's notification made one before.
	got, most := a.reads.Load()-reads, int64(time.Since(start)/time.Second)+1
	pending := func(s *Store) int {
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(snap.Pending)
	}
	eventually(t, a, b, func() bool { return pending(a) == clients*each && pending(b) == clients*each }, "both views hold every submit")
	if got > most {
		t.Errorf("the submitting server read the database %d times while its %d submits were committed; want at most %d", got, clients*each, most)
	}
}
