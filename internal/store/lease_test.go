package store

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

type token int64

func (t token) Token() int64 { return int64(t) }

// TestLeaseFencing: a campaign takes a free lease with the next token, a
// second holder cannot take it while it is held, a fenced write with the
// holder's token commits, and once the lease has passed to another server
// (after it expired) the first holder's writes and renewals are refused,
// changing nothing.
func TestLeaseFencing(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	l, won, err := s.Campaign(ctx, "a", 300*time.Millisecond)
	if err != nil || !won || l.Token != 1 || l.Holder != "a" || !l.Held() {
		t.Fatalf("first campaign: %+v won=%v err=%v, want token 1 held by a", l, won, err)
	}
	if l2, won, err := s.Campaign(ctx, "b", time.Second); err != nil || won || l2.Holder != "a" {
		t.Fatalf("campaign while a holds it: %+v won=%v err=%v", l2, won, err)
	}
	fa := WithFence(ctx, token(l.Token))
	if err := s.CreateTeam(fa, core.NewTeam("by-a", t0)); err != nil {
		t.Fatalf("fenced write of the holder: %v", err)
	}
	if _, err := s.Renew(ctx, "a", l.Token, 300*time.Millisecond); err != nil {
		t.Fatalf("renew: %v", err)
	}
	// The expiry under test is on the database's clock (PostgreSQL's
	// clock_timestamp() on that backend), which no test moves: let the
	// 300 ms pass.
	time.Sleep(400 * time.Millisecond)
	// Expired: a's writes are refused even before anyone else campaigns.
	if err := s.CreateTeam(fa, core.NewTeam("late-a", t0)); !errors.Is(err, ErrFenced) {
		t.Fatalf("write under an expired lease: %v, want ErrFenced", err)
	}
	lb, won, err := s.Campaign(ctx, "b", time.Minute)
	if err != nil || !won || lb.Token != 2 {
		t.Fatalf("campaign after expiry: %+v won=%v err=%v, want token 2", lb, won, err)
	}
	if err := s.CreateTeam(fa, core.NewTeam("stale-a", t0)); !errors.Is(err, ErrFenced) || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("stale leader's write: %v, want ErrFenced", err)
	}
	if _, err := s.Renew(ctx, "a", l.Token, time.Minute); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale leader's renewal: %v, want ErrFenced", err)
	}
	if err := s.CreateTeam(WithFence(ctx, token(0)), core.NewTeam("zero", t0)); !errors.Is(err, ErrFenced) {
		t.Fatalf("write with no token: %v", err)
	}
	for _, name := range []core.TeamName{"late-a", "stale-a", "zero"} {
		if _, err := s.Team(ctx, name); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("team %s of a refused write exists (%v)", name, err)
		}
	}
	if err := s.CreateTeam(WithFence(ctx, token(lb.Token)), core.NewTeam("by-b", t0)); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	// Resign frees it at once; the next campaign has token 3.
	if err := s.Resign(ctx, "b", lb.Token); err != nil {
		t.Fatal(err)
	}
	if now, err := s.LeaseNow(ctx); err != nil || now.Held() {
		t.Fatalf("after resign: %+v %v, want not held", now, err)
	}
	if l3, won, err := s.Campaign(ctx, "a", time.Minute); err != nil || !won || l3.Token != 3 {
		t.Fatalf("campaign after resign: %+v %v %v", l3, won, err)
	}
}

// TestFencedBatch: fenced writes queued in one batch with others are refused
// alone; the others commit.
func TestFencedBatch(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if _, _, err := s.Campaign(ctx, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	stale := WithFence(ctx, token(7))
	var refused, done atomic.Int64
	errc := make(chan error, 40)
	for i := range 40 {
		go func() {
			c := ctx
			if i%2 == 0 {
				c = stale
			}
			_, _, err := s.CreateWorkload(c, workload(100), nil, t0)
			switch {
			case errors.Is(err, ErrFenced):
				refused.Add(1)
			case err == nil:
				done.Add(1)
			}
			errc <- err
		}()
	}
	for range 40 {
		<-errc
	}
	if refused.Load() != 20 || done.Load() != 20 {
		t.Fatalf("refused %d, done %d; want 20 and 20", refused.Load(), done.Load())
	}
	ws, err := s.Workloads(ctx, WorkloadFilter{})
	if err != nil || len(ws) != 20 {
		t.Fatalf("%d workloads stored (%v), want 20", len(ws), err)
	}
}

// TestServers: servers are listed by name with what they last said.
func TestServers(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	for _, sv := range []Server{{Name: "b", Addr: "10.0.0.2:8080", PID: 2, StartedAt: t0}, {Name: "a", Addr: "10.0.0.1:8080", PID: 1, StartedAt: t0}, {Name: "b", Addr: "10.0.0.2:8081", PID: 3, StartedAt: t0}} {
		if err := s.PutServer(ctx, sv); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Servers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a" || got[1].Addr != "10.0.0.2:8081" || got[1].PID != 3 || !got[1].StartedAt.Equal(t0) || time.Since(got[1].LastSeen) > time.Minute {
		t.Fatalf("servers: %+v", got)
	}
}
