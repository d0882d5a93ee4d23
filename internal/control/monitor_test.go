package control_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/reclaim"
	"github.com/gpufleet/gpufleet/internal/usage"
)

// setSampler reports, for each running workload, the utilisation and
// memory the test set (0 and 0 when it set none).
type setSampler struct {
	mu   sync.Mutex
	util map[core.WorkloadID]float64
	mem  map[core.WorkloadID]int64
}

func (s *setSampler) set(id core.WorkloadID, util float64, mem int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.util[id], s.mem[id] = util, mem
}

func (s *setSampler) Sample(_ context.Context, snap *core.Snapshot) (core.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := core.Sample{Workloads: map[core.WorkloadID]core.WorkloadSample{}}
	for _, w := range snap.Running {
		ws := core.WorkloadSample{ID: w.ID, Attempt: w.Status.Attempts, Utilization: s.util[w.ID], MemoryUsedMiB: s.mem[w.ID],
			PerGPUMemoryMiB: map[core.GPURef]int64{}}
		a := w.Status.Placement[0]
		ws.PerGPUMemoryMiB[core.GPURef{Node: a.Node, Index: a.GPUIndex}] = s.mem[w.ID]
		out.Workloads[w.ID] = ws
		out.GPUs = append(out.GPUs, core.GPUSample{Node: a.Node, Index: a.GPUIndex, Utilization: s.util[w.ID]})
	}
	return out, nil
}

// ends records what the loop reports.
type ends struct {
	mu      sync.Mutex
	started []core.WorkloadID
	ended   []string
}

func (e *ends) WorkloadStarted(w *core.Workload, _ time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = append(e.started, w.ID)
}

func (e *ends) WorkloadEnded(w *core.Workload, phase core.Phase, reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended = append(e.ended, string(w.ID)+" "+string(phase)+"/"+reason)
}

func (e *ends) snapshot() ([]core.WorkloadID, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]core.WorkloadID(nil), e.started...), append([]string(nil), e.ended...)
}

func TestIdleReclaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		if _, err := h.store.UpdateTeam(context.Background(), "a", func(t *core.Team) error { t.Guaranteed = 4000; return nil }); err != nil {
			t.Fatal(err)
		}
		rep := &ends{}
		opts := h.options(h.exec)
		opts.Reporter = rep
		h.run(control.New(opts))
		nb := h.submit(func(w *core.Workload) { w.Kind, w.Priority = core.KindNotebook, "development" })
		prod := h.submit(func(w *core.Workload) { w.Kind, w.Priority = core.KindNotebook, "production" })
		busy := h.submit(func(w *core.Workload) { w.Kind, w.Priority = core.KindNotebook, "development" })
		for _, w := range []*core.Workload{nb, prod, busy} {
			h.waitRunning(w.ID, 1)
		}
		smp := &setSampler{util: map[core.WorkloadID]float64{}, mem: map[core.WorkloadID]int64{}}
		smp.set(busy.ID, 0.5, 1000)
		tr := usage.NewTracker(time.Minute, time.Hour)
		m := control.NewMonitor(control.MonitorOptions{Store: h.store, Sampler: smp, Tracker: tr, Now: h.clock.Now,
			Rules: reclaim.Rules{Idle: []reclaim.IdleRule{{Kind: core.KindNotebook, Threshold: 0.05, Timeout: 10 * time.Minute, Warning: 2 * time.Minute}}}})

		reasons := func(acts []reclaim.Action) []string {
			var out []string
			for _, a := range acts {
				out = append(out, string(a.Workload)+" "+a.Reason)
			}
			return out
		}
		if acts := m.Step(context.Background()); len(acts) != 0 {
			t.Fatalf("first idle sample: actions %v, want none", reasons(acts))
		}
		if _, _, idle, ok := tr.Workload(nb.ID, 1); !ok || idle == nil || !idle.Equal(t0) {
			t.Errorf("tracker: idle since %v (sampled %v), want %s", idle, ok, t0)
		}
		h.clock.Advance(8 * time.Minute)
		if got := reasons(m.Step(context.Background())); len(got) != 1 || got[0] != string(nb.ID)+" IdleWarning" {
			t.Fatalf("after 8 minutes: actions %v, want the notebook's IdleWarning", got)
		}
		var warned bool
		for _, e := range h.events(nb.ID) {
			if e.Reason == reclaim.ReasonIdleWarning && e.Type == core.EventWarning && strings.Contains(e.Message, "below 5.0%") {
				warned = true
			}
		}
		if !warned {
			t.Errorf("no Warning event IdleWarning with the threshold among %+v", h.events(nb.ID))
		}
		h.clock.Advance(2 * time.Minute)
		if got := reasons(m.Step(context.Background())); len(got) != 1 || got[0] != string(nb.ID)+" Idle" {
			t.Fatalf("after 10 minutes: actions %v, want the notebook's stop", got)
		}
		got := h.waitEnded(nb.ID)
		if got.Status.Phase != core.Failed || got.Status.Reason != reclaim.ReasonIdle || !strings.Contains(got.Status.Message, "stayed below 5.0% for 10m0s") {
			t.Errorf("got %s/%s %q, want Failed/Idle with the figures", got.Status.Phase, got.Status.Reason, got.Status.Message)
		}
		for _, w := range []*core.Workload{prod, busy} {
			if g := h.get(w.ID); g.Status.Phase != core.Running || g.Status.StopRequested != "" {
				t.Errorf("%s (%s): %s, stop %q; want it left running", w.ID, w.Priority, g.Status.Phase, g.Status.StopRequested)
			}
		}
		h.checkAllClosed(nb.ID)
		// The loop reports the end after the store has it: wait for the report.
		var started []core.WorkloadID
		var ended []string
		h.until("the end reported", func() (bool, string) {
			started, ended = rep.snapshot()
			return len(ended) > 0, "none yet"
		})
		if len(started) != 3 || len(ended) != 1 || ended[0] != string(nb.ID)+" Failed/Idle" {
			t.Errorf("reported starts %v and ends %v; want 3 starts and the notebook's Failed/Idle", started, ended)
		}
		if h := tr.History(time.Hour, h.clock.Now()); len(h) != 3 || h[0].Running != 3 || h[0].UsedGPUs != 0.5 {
			t.Errorf("history %+v, want 3 points, the first with 3 running and 0.5 GPU used", h)
		}
	})
}

func TestMemoryEnforcement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.start()
		frac := h.submit(func(w *core.Workload) { w.Request.MilliGPU = 250 })
		whole := h.submit(nil)
		got := h.waitRunning(frac.ID, 1)
		h.waitRunning(whole.ID, 1)
		// The monitor reads the store's snapshot (its in-memory view of what
		// is committed), which follows the file a moment after the commit
		// that the reads above see: wait for it too.
		h.waitSnapshotRunning(frac.ID, whole.ID)
		share := got.Status.Placement[0].MemoryMiB
		smp := &setSampler{util: map[core.WorkloadID]float64{}, mem: map[core.WorkloadID]int64{}}
		smp.set(frac.ID, 0.9, share)
		smp.set(whole.ID, 0.9, 81920)
		m := control.NewMonitor(control.MonitorOptions{Store: h.store, Sampler: smp, Now: h.clock.Now,
			Rules: reclaim.Rules{Memory: reclaim.MemoryRule{Enabled: true}}})
		if acts := m.Step(context.Background()); len(acts) != 0 {
			t.Fatalf("at its share: actions %+v, want none", acts)
		}
		smp.set(frac.ID, 0.9, share+1)
		m.Step(context.Background())
		end := h.waitEnded(frac.ID)
		if end.Status.Phase != core.Failed || end.Status.Reason != reclaim.ReasonMemoryExceeded || !strings.Contains(end.Status.Message, "above its share") {
			t.Errorf("got %s/%s %q, want Failed/GPUMemoryLimitExceeded with the figures", end.Status.Phase, end.Status.Reason, end.Status.Message)
		}
		if n := countEvents(h.events(frac.ID), reclaim.ReasonMemoryWarning); n != 1 {
			t.Errorf("%d GPUMemoryLimitWarning events, want 1", n)
		}
		if g := h.get(whole.ID); g.Status.Phase != core.Running {
			t.Errorf("the whole-GPU workload is %s, want Running", g.Status.Phase)
		}
	})
}

// failWarn is the store whose first Warn fails.
type failWarn struct {
	control.MonitorStore
	failed bool
}

func (f *failWarn) Warn(ctx context.Context, id core.WorkloadID, attempt int, reason, message string, now time.Time) (bool, error) {
	if !f.failed {
		f.failed = true
		return false, errors.New("disk full")
	}
	return f.MonitorStore.Warn(ctx, id, attempt, reason, message, now)
}

// TestIdleWarningNotRecordedIsRetried: a warning the store failed to record
// is given again at the next sample, and the stop still waits for it.
func TestIdleWarningNotRecordedIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.start()
		nb := h.submit(func(w *core.Workload) { w.Kind, w.Priority = core.KindNotebook, "development" })
		h.waitRunning(nb.ID, 1)
		smp := &setSampler{util: map[core.WorkloadID]float64{}, mem: map[core.WorkloadID]int64{}}
		st := &failWarn{MonitorStore: h.store}
		m := control.NewMonitor(control.MonitorOptions{Store: st, Sampler: smp, Tracker: usage.NewTracker(time.Minute, time.Hour), Now: h.clock.Now,
			Rules: reclaim.Rules{Idle: []reclaim.IdleRule{{Kind: core.KindNotebook, Threshold: 0.05, Timeout: 10 * time.Minute, Warning: 2 * time.Minute}}}})
		kinds := func(acts []reclaim.Action) []string {
			var out []string
			for _, a := range acts {
				out = append(out, a.Reason)
			}
			return out
		}
		m.Step(context.Background())
		for _, step := range []struct {
			after time.Duration
			want  string
		}{
			{8 * time.Minute, "IdleWarning"}, // not recorded: the store fails
			{time.Minute, "IdleWarning"},     // given again
			{time.Minute, "Idle"},
		} {
			h.clock.Advance(step.after)
			if got := kinds(m.Step(context.Background())); len(got) != 1 || got[0] != step.want {
				t.Fatalf("after %s more: actions %v, want %s", step.after, got, step.want)
			}
		}
		var warnings int
		for _, e := range h.events(nb.ID) {
			if e.Reason == reclaim.ReasonIdleWarning {
				warnings++
			}
		}
		if warnings != 1 {
			t.Errorf("%d IdleWarning events, want 1 (the second try)", warnings)
		}
	})
}

// waitSnapshotRunning waits until the store's snapshot has every id
// Running.
func (h *harness) waitSnapshotRunning(ids ...core.WorkloadID) {
	h.t.Helper()
	h.until(fmt.Sprintf("the snapshot to have %v Running", ids), func() (bool, string) {
		snap, err := h.store.Snapshot(context.Background())
		if err != nil {
			h.t.Fatal(err)
		}
		running := 0
		for _, w := range snap.Running {
			if slices.Contains(ids, w.ID) {
				running++
			}
		}
		return running == len(ids), fmt.Sprintf("%d of them are", running)
	})
}

// countingSampler counts its samples, and reports none.
type countingSampler struct{ n atomic.Int64 }

func (c *countingSampler) Sample(context.Context, *core.Snapshot) (core.Sample, error) {
	c.n.Add(1)
	return core.Sample{}, nil
}

// TestMonitorSamplesEveryInterval: Run samples at once, then every
// Interval, on the clock it waits on (the bubble's), until its context
// ends.
func TestMonitorSamplesEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		smp := &countingSampler{}
		m := control.NewMonitor(control.MonitorOptions{Store: h.store, Sampler: smp, Interval: 10 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if n := smp.n.Load(); n != 1 {
			t.Errorf("%d samples at the start, want 1", n)
		}
		time.Sleep(35 * time.Second) // the bubble's clock
		if n := smp.n.Load(); n != 4 {
			t.Errorf("%d samples after 35s, want 4: at once, then every 10s", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		time.Sleep(time.Minute) // the bubble's clock: a minute after Run returned
		if n := smp.n.Load(); n != 4 {
			t.Errorf("%d samples a minute after Run returned, want still 4", n)
		}
	})
}
