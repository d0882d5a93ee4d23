package control_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestIdleCPU measures what an idle loop costs: the harness's one node is
// filled and 50,000 workloads wait behind it; with the loop settled, it
// reads this process's CPU time (getrusage) over a window in which nothing
// changes but what an idle server changes: the node's record rewritten
// every 10 s (its heartbeat), the budget gates read. It is a measurement,
// not a check, and runs only when asked:
//
//	GPUFLEET_IDLE_CPU=30s go test ./internal/control -run TestIdleCPU -v -timeout 10m
func TestIdleCPU(t *testing.T) {
	window, err := time.ParseDuration(os.Getenv("GPUFLEET_IDLE_CPU"))
	if err != nil {
		t.Skip("set GPUFLEET_IDLE_CPU to a duration (e.g. 30s) to measure an idle loop's CPU")
	}
	const pending = 50000
	h := newHarness(t)
	// The loop's own clock, as the server's; submissions timed now.
	h.clock.now = time.Now()
	for range 4 {
		h.submit(nil)
	}
	began := time.Now()
	var wg sync.WaitGroup
	const clients = 32
	for c := range clients {
		wg.Go(func() {
			for i := c; i < pending; i += clients {
				h.submit(nil)
			}
		})
	}
	wg.Wait()
	t.Logf("submitted %d pending in %s", pending, time.Since(began).Round(time.Millisecond))

	ex := fake.New(fake.Options{})
	opts := h.options(ex)
	opts.Now = nil
	opts.Resync = time.Second // the server's default (config resyncPeriod)
	opts.Budgets = &gates{}
	var mu sync.Mutex
	var last time.Duration
	opts.OnCycle = func(d time.Duration, _ core.Plan) { h.cycles.Add(1); mu.Lock(); last = d; mu.Unlock() }
	h.run(control.New(opts))
	// Settled: the fillers run and the 50,000 explanations are written.
	testwait.Until(t, 5*time.Minute, "the loop to settle", func() (bool, string) {
		return len(ex.Running()) >= 4 && h.cycles.Load() >= 2, fmt.Sprintf("%d running, %d cycles", len(ex.Running()), h.cycles.Load())
	})
	time.Sleep(5 * time.Second) // a measurement: what the start left to do is done

	ctx, cancel := context.WithCancel(context.Background())
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			ns, err := h.store.Nodes(ctx)
			if err != nil || len(ns) != 1 {
				return
			}
			ns[0].UpdatedAt = time.Now().UTC()
			_ = h.store.PutNode(ctx, ns[0])
		}
	}()
	c0, n0, w0 := cpu(t), h.cycles.Load(), time.Now()
	time.Sleep(window) // the window measured, on the wall clock as the CPU time is
	cancel()
	<-beat
	used, wall, cycles := cpu(t)-c0, time.Since(w0), h.cycles.Load()-n0
	mu.Lock()
	d := last
	mu.Unlock()
	t.Logf("idle with %d pending for %s: CPU %s = %.3f%% of a core; %d cycles (last took %s)",
		pending, wall.Round(time.Millisecond), used.Round(time.Microsecond), 100*used.Seconds()/wall.Seconds(), cycles, d.Round(time.Millisecond))
}

// cpu is the CPU time (user and system, every thread) this process has
// used.
func cpu(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gates is a Budgets whose gates a test sets.
type gates struct {
	mu    sync.Mutex
	gates map[core.TeamName]core.BudgetGate
	reads int
}

func (g *gates) Gates(context.Context, time.Time) (map[core.TeamName]core.BudgetGate, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads++
	out := map[core.TeamName]core.BudgetGate{}
	for k, v := range g.gates {
		out[k] = v
	}
	return out, nil
}

func (g *gates) set(team core.TeamName, gate core.BudgetGate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gates = map[core.TeamName]core.BudgetGate{team: gate}
}
