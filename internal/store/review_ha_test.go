package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
)

// TestPendingBoundAcrossServers: the pending bound holds over every server
// sharing the database, not per server: submissions racing on two stores
// never leave more pending workloads than the bound. Each writer holds the
// write lock when it checks, so it must check against every commit made
// before it took the lock, not against a view its listener has not caught
// up with yet.
func TestPendingBoundAcrossServers(t *testing.T) {
	pgOnly(t)
	ctx := context.Background()
	url := pgtest.DB(t)
	const bound = 5
	var stores []*Store
	for range 2 {
		s, err := OpenWith(ctx, url, Options{MaxPendingPerTeam: bound})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	if err := stores[0].CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		s := stores[i%2]
		wg.Go(func() {
			if _, _, err := s.CreateWorkload(ctx, workload(100), nil, t0); err != nil && !errors.Is(err, core.ErrLimit) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ws, err := stores[0].Workloads(ctx, WorkloadFilter{Phases: []core.Phase{core.Pending}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) > bound {
		t.Fatalf("%d pending workloads stored for team a, bound %d", len(ws), bound)
	}
}

// TestPostgresErrorsHideThePassword: a connection URL's password is in no
// error that opening the store answers (malformed, unreachable, refused).
func TestPostgresErrorsHideThePassword(t *testing.T) {
	const pw = "s3cr3tPassw0rd"
	for _, u := range []string{
		"postgres://gpufleet:" + pw + "@127.0.0.1:1/gpufleet?connect_timeout=1",
		"postgres://gpufleet:" + pw + "@127.0.0.1:notaport/gpufleet",
		"postgres://gpufleet:" + pw + "@127.0.0.1:1/gpufleet?sslmode=bogus",
		"postgres://gpufleet:" + pw + "@[::1/gpufleet",
		"postgresql://gpufleet:" + pw + "@127.0.0.1:1/gpufleet?connect_timeout=x",
	} {
		s, err := Open(context.Background(), u)
		if err == nil {
			s.Close()
			t.Errorf("open %q: no error", strings.ReplaceAll(u, pw, "***"))
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("open: the error shows the password: %v", err)
		}
	}
}
