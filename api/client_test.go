package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentClientsReuseConnections sends rounds of 32 concurrent
// requests through 32 clients, as BenchmarkSubmit does: no connection is
// ever closed, so all the rounds together open at most 32. With the default
// transport, which keeps 2 idle connections to a server, most of each round
// dialled anew.
func TestConcurrentClientsReuseConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"wl-x","team":"a"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	const clients = 32
	cls := make([]*Client, clients)
	for i := range cls {
		cls[i] = NewClient(srv.URL, "token")
	}
	round := func() {
		var wg sync.WaitGroup
		for _, cl := range cls {
			wg.Go(func() {
				if _, err := cl.GetWorkload(context.Background(), "wl-x"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for range 6 {
		round()
	}
	// Each client's connection goes back to the pool once its answer is
	// read, by the transport's own goroutine: a round may start before
	// one is back and dial another (33 under load, 1 run in 6). Without
	// reuse, each round after the first would open about 30.
	if n := opened.Load(); n > 2*clients {
		t.Errorf("6 rounds of %d concurrent requests opened %d connections, want at most %d: most reused", clients, n, 2*clients)
	}
}

// TestSubmitSendsItsIdempotencyKey: SubmitWorkload sends the key it is
// given as the Idempotency-Key header, and no such header without one.
func TestSubmitSendsItsIdempotencyKey(t *testing.T) {
	for _, key := range []string{"", "sweep-7"} {
		t.Run("key "+strconv.Quote(key), func(t *testing.T) {
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Values("Idempotency-Key")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte(`{"id":"wl-x","team":"a"}`))
			}))
			t.Cleanup(srv.Close)
			if _, err := NewClient(srv.URL, "token").SubmitWorkload(context.Background(), &Workload{Team: "a"}, key); err != nil {
				t.Fatal(err)
			}
			var want []string
			if key != "" {
				want = []string{key}
			}
			if !slices.Equal(got, want) {
				t.Errorf("Idempotency-Key %q, want %q", got, want)
			}
		})
	}
}
