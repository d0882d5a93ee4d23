package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestBatchedSubmitsFailAlone submits, from many goroutines at once (so that
// the writer gathers them into shared batches), workloads of a team that
// exists and of one that does not, each with its audit entry: on
// PostgreSQL their rows are written together (pgdefer.go), and a row that
// fails must fail only its own submit, with its own error, while the
// others' rows and audit entries are written, in submission order. Both
// backends must answer alike.
func TestBatchedSubmitsFailAlone(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	const n = 64
	type result struct {
		w   *core.Workload
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			w := workload(100)
			if i%4 == 3 {
				w.Team = "nosuchteam"
			}
			actx := WithAudit(ctx, &core.AuditEntry{Time: t0, User: "alice", Action: "submit", Method: "POST", Path: "/api/v1/workloads"})
			out, _, err := s.CreateWorkload(actx, w, nil, t0)
			results[i] = result{out, err}
		})
	}
	wg.Wait()
	var made []*core.Workload
	for i, r := range results {
		if i%4 == 3 {
			if !errors.Is(r.err, core.ErrNotFound) {
				t.Errorf("submit %d to a team that does not exist: %v, want not found", i, r.err)
			}
			continue
		}
		if r.err != nil {
			t.Errorf("submit %d: %v", i, r.err)
			continue
		}
		made = append(made, r.w)
	}
	stored, err := s.Workloads(ctx, WorkloadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(made) {
		t.Fatalf("%d workloads stored, want the %d submits that succeeded", len(stored), len(made))
	}
	slices.SortFunc(made, func(a, b *core.Workload) int { return int(a.Seq - b.Seq) })
	for i, w := range stored {
		if w.ID != made[i].ID || w.Seq != made[i].Seq {
			t.Errorf("stored #%d: %s seq %d, want %s seq %d (each submit's seq is its row's)", i, w.ID, w.Seq, made[i].ID, made[i].Seq)
		}
	}
	audit, err := s.Audit(ctx, AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]bool{}
	for _, e := range audit {
		objects[e.Object] = true
	}
	for _, w := range made {
		if !objects[string(w.ID)] {
			t.Errorf("no audit entry for %s", w.ID)
		}
	}
	if len(audit) != len(made) {
		t.Errorf("%d audit entries, want one for each of the %d workloads made", len(audit), len(made))
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pending) != len(made) {
		t.Errorf("the view holds %d pending, want %d", len(snap.Pending), len(made))
	}
	for i, w := range snap.Pending {
		if w.ID != made[i].ID || w.Seq != made[i].Seq {
			t.Errorf("view #%d: %s seq %d, want %s seq %d", i, w.ID, w.Seq, made[i].ID, made[i].Seq)
			break
		}
	}
}

// TestTeamChangeHeardByOtherServer: a server keeps the teams it read
// (PostgreSQL, cache.go) and forgets them when another server's commit
// changes one: the change is seen at once, not after the cache's time
// bound.
func TestTeamChangeHeardByOtherServer(t *testing.T) {
	pgOnly(t)
	ctx := context.Background()
	a, b := twoServers(t)
	if err := a.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	// a listens (its listener has connected) once it keeps what it read.
	testwait.Until(t, 5*time.Second, "a to keep the teams it read", func() (bool, string) {
		a.Team(ctx, "a")
		a.teams.mu.Lock()
		defer a.teams.mu.Unlock()
		return a.teams.rows != nil, "not kept"
	})
	for i := range 3 {
		want := int64(1000 * (i + 1))
		if _, err := b.UpdateTeam(ctx, "a", func(t *core.Team) error { t.Guaranteed = want; return nil }); err != nil {
			t.Fatal(err)
		}
		// Well within the cache's bound (tokenCacheTTL): heard, not
		// timed out.
		testwait.Until(t, tokenCacheTTL/2, fmt.Sprintf("a to read the guarantee %d b set", want), func() (bool, string) {
			got, err := a.Team(ctx, "a")
			return err == nil && got.Guaranteed == want, fmt.Sprintf("guarantee %d (%v)", got.Guaranteed, err)
		})
	}
}

// TestAcknowledgedSurviveADatabaseKill submits from many goroutines into a
// PostgreSQL server of the test's own and kills it (SIGKILL of every
// process) while they do: every submit acknowledged before the kill must
// be found once the server is started again. The writer commits without
// waiting for the log's flush (pgsync.go), so a commit may sit in the
// server's memory only: a batch acknowledged before the syncer's flush
// would be lost.
func TestAcknowledgedSurviveADatabaseKill(t *testing.T) {
	pgOnly(t)
	in := pgtest.Private(t)
	url := in.DB(t)
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []core.WorkloadID
	killed := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				w, _, err := s.CreateWorkload(ctx, workload(100), nil, t0)
				if err != nil {
					select {
					case <-killed:
						return // the server is gone: the submits fail
					default:
						t.Errorf("submit before the kill: %v", err)
						return
					}
				}
				mu.Lock()
				acked = append(acked, w.ID)
				n := len(acked)
				mu.Unlock()
				if n == 2000 {
					close(killed)
					in.Kill()
				}
			}
		})
	}
	wg.Wait()
	s.Close()
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	stored, err := s2.Workloads(ctx, WorkloadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[core.WorkloadID]bool{}
	for _, w := range stored {
		have[w.ID] = true
	}
	lost := 0
	for _, id := range acked {
		if !have[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged submits lost by the kill", lost, len(acked))
	}
}
