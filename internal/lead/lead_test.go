package lead

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openPG(t *testing.T, url string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestElection: of two servers on one database one leads; its work's
// writes carry its fence and commit; when it stops it resigns and the other
// takes over at once with the next token, and the first one's fence no
// longer writes.
func TestElection(t *testing.T) {
	url := pgtest.DB(t)
	a, b := openPG(t, url), openPG(t, url)
	ttl := 2 * time.Second
	type term struct {
		name  string
		token int64
		ctx   context.Context
	}
	terms := make(chan term, 4)
	run := func(ctx context.Context, st *store.Store, name string) *Elector {
		e := New(Options{Store: st, Name: name, Addr: name + ":1", PID: 1, TTL: ttl})
		go e.Run(ctx, func(wctx context.Context) {
			terms <- term{name, e.Token(), wctx}
			<-wctx.Done()
		})
		return e
	}
	actx, acancel := context.WithCancel(context.Background())
	ea := run(actx, a, "a")
	first := <-terms
	if first.name != "a" || first.token != 1 || !ea.Leader() {
		t.Fatalf("first term %+v leader=%v, want a with token 1", first, ea.Leader())
	}
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	eb := run(bctx, b, "b")
	if err := a.CreateTeam(first.ctx, core.NewTeam("t1", time.Now())); err != nil {
		t.Fatalf("the leader's fenced write: %v", err)
	}
	select {
	case tm := <-terms:
		t.Fatalf("b led while a held the lease: %+v", tm)
	case <-time.After(ttl):
	}
	stopped := time.Now()
	acancel() // a stops: it resigns
	second := <-terms
	if second.name != "b" || second.token != 2 || time.Since(stopped) > ttl/2 {
		t.Fatalf("second term %+v after %s, want b with token 2 at once (resigned)", second, time.Since(stopped))
	}
	if !eb.Leader() || ea.Leader() {
		t.Fatalf("leaders: a=%v b=%v", ea.Leader(), eb.Leader())
	}
	if err := a.CreateTeam(store.WithFence(context.Background(), ea), core.NewTeam("t2", time.Now())); err == nil {
		t.Fatal("the deposed leader's fence still writes")
	}
	servers, err := b.Servers(context.Background())
	if err != nil || len(servers) != 2 {
		t.Fatalf("servers %+v %v", servers, err)
	}
}

// TestTokenByOwnClock: a leader whose own clock says its lease may have run
// out (it was paused) has token 0 at once, before any database answer.
func TestTokenByOwnClock(t *testing.T) {
	e := New(Options{Name: "a", TTL: time.Second})
	e.set(5, time.Now())
	if e.Token() != 5 {
		t.Fatalf("fresh lease: token %d", e.Token())
	}
	e.set(5, time.Now().Add(-950*time.Millisecond)) // asked long ago: valid 0.6 s from then (the grant, 2/3 s, less a tenth)
	if e.Token() != 0 || e.Leader() {
		t.Fatalf("lease past its time by this clock: token %d", e.Token())
	}
}

// TestFailoverOnCrash: a leader that dies without resigning (its lease left
// to run out) is replaced within the lease's length.
func TestFailoverOnCrash(t *testing.T) {
	url := pgtest.DB(t)
	a, b := openPG(t, url), openPG(t, url)
	ttl := 2 * time.Second
	// a takes the lease and "crashes": nobody renews or resigns it.
	if _, won, err := a.Campaign(context.Background(), "a", ttl); err != nil || !won {
		t.Fatal(won, err)
	}
	crashed := time.Now()
	var led atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	e := New(Options{Store: b, Name: "b", TTL: ttl})
	go e.Run(ctx, func(wctx context.Context) {
		led.Store(time.Since(crashed).Milliseconds())
		close(done)
		<-wctx.Done()
	})
	select {
	case <-done:
	case <-time.After(3 * ttl):
		t.Fatal("b never led")
	}
	if ms := led.Load(); ms > (ttl + 300*time.Millisecond).Milliseconds() {
		t.Errorf("b led %d ms after the crash, want within the lease (%s)", ms, ttl)
	}
}
