package store

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// BenchmarkCreateWorkload measures durable submits into the store alone
// (WAL, group commit, each acknowledged after its fsync) from 32
// concurrent submitters, while another goroutine does what the control loop
// does for a team at its limit: on every change, one ApplyPlan that gives
// each new workload its pending reason. It reports submits/s and the p50 and p99 latency.
//
//	go test ./internal/store -run '^$' -bench CreateWorkload -benchtime 20000x
func BenchmarkCreateWorkload(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "gpufleet.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	var reasons sync.WaitGroup
	reasons.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-s.Changed():
			}
			snap, err := s.Snapshot(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			var plan core.Plan
			for _, w := range snap.Pending {
				if w.Status.Reason == "Submitted" {
					plan.Unplaced = append(plan.Unplaced, core.Decision{Workload: w.ID, Reason: "QuotaLimit", Message: "team a is at its limit"})
				}
			}
			if len(plan.Unplaced) > 0 {
				if _, err := s.ApplyPlan(ctx, plan, time.Now()); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
	const clients = 32
	lat := make([][]time.Duration, clients)
	var next sync.Mutex
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	begin := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for {
				next.Lock()
				if n >= b.N {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				t := time.Now()
				if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	b.StopTimer()
	close(stop)
	reasons.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p int) float64 { return float64(all[min(len(all)-1, len(all)*p/100)].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "submits/s")
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(99), "p99-ms")
}
