package control_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/store"
)

// These are component tests: the real store on a file, the fake executor, a
// virtual clock (Options.Now), and the loop running on its own goroutine.
// A test that runs the loop runs in a synctest bubble, so that the loop's
// timers (Resync, the safety resync, a wake the plan asked for) and the
// fake's run on the bubble's clock, which moves only once every goroutine
// of the test (the loop, its launcher, the store's writer) waits: until
// checks a condition each time they all wait, and lets that clock move on
// otherwise. Nothing waits on the machine's clock, so that a slow machine
// (or -race) changes no outcome, and a timing the test checks is exact.

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

const (
	resync = 20 * time.Millisecond
	// deadline and poll are on the bubble's clock: how long until waits,
	// and by how much it lets the clock move on while its condition is
	// false.
	deadline = 15 * time.Second
	poll     = 2 * time.Millisecond
	// spinCycles is more cycles than any test runs (a failed wait of
	// deadline runs deadline/resync); a loop that runs that many spins,
	// and is stopped, so that the test fails instead of never settling.
	spinCycles = 10000
)

// clock is a virtual clock shared by the loop, the fake executor and the
// test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// harness is one cluster: a store with team "a" and node "n1" (four 80 GiB
// GPUs), a fake executor and a virtual clock. A loop is started on it with
// run.
type harness struct {
	t      *testing.T
	store  *store.Store
	exec   *fake.Executor
	clock  *clock
	cycles atomic.Int64 // cycles run by the loops started with run
	// halts cancels the loops started with run (halt).
	mu    sync.Mutex
	halts []context.CancelFunc
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessIn(t, t.TempDir())
}

// newHarnessIn is newHarness with the store's file in dir.
func newHarnessIn(t *testing.T, dir string) *harness {
	t.Helper()
	ctx := context.Background()
	// As a server opens its SQLite store (Options.Cache): the loop's
	// check for changes then compares the workloads alone while the rows'
	// version holds (store.Rows).
	s, err := store.OpenWith(ctx, filepath.Join(dir, "gpufleet.db"), store.Options{Cache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	n := core.Node{Name: "n1", Schedulable: true, UpdatedAt: t0}
	for i := range 4 {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-n1-%d", i), Model: "H100", MemoryMiB: 81920})
	}
	if err := s.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	c := &clock{now: t0}
	return &harness{t: t, store: s, exec: fake.New(fake.Options{Now: c.Now}), clock: c}
}

// options returns loop options for the harness with ex as the executor.
func (h *harness) options(ex executor.Executor) control.Options {
	return control.Options{
		Store:    h.store,
		Executor: ex,
		Now:      h.clock.Now,
		Resync:   resync,
		OnCycle:  h.counted,
	}
}

// counted counts a cycle, and halts the loops once they spin (spinCycles).
func (h *harness) counted(time.Duration, core.Plan) {
	if h.cycles.Add(1) == spinCycles {
		h.t.Errorf("the loops ran %d cycles: one spins; halted", spinCycles)
		h.halt()
	}
}

// halt cancels the loops started with run, without waiting for them.
func (h *harness) halt() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cancel := range h.halts {
		cancel()
	}
}

// run starts loop on its own goroutine. The returned function (also run at
// cleanup) stops it and waits until Run has returned.
func (h *harness) run(loop *control.Loop) (stop func()) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.mu.Lock()
	h.halts = append(h.halts, cancel)
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("Run: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return stop
}

// start starts a loop on the harness's fake executor.
func (h *harness) start() {
	h.t.Helper()
	h.run(control.New(h.options(h.exec)))
}

// submit stores a pending workload asking for one whole GPU, after edit (if
// any) has changed its spec.
func (h *harness) submit(edit func(*core.Workload)) *core.Workload {
	h.t.Helper()
	w := &core.Workload{Spec: core.Spec{Name: "train", Team: "a", Owner: "alice", Kind: core.KindJob, Priority: "training",
		Request: core.Request{MilliGPU: 1000}, Command: []string{"train", "--epochs=1"}}}
	if edit != nil {
		edit(w)
	}
	out, _, err := h.store.CreateWorkload(context.Background(), w, nil, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// get reads a workload from the store.
func (h *harness) get(id core.WorkloadID) *core.Workload {
	h.t.Helper()
	w, err := h.store.Workload(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

// until waits until ok holds, in a test that runs in a synctest bubble: it
// checks ok each time every other goroutine of the bubble waits, and
// otherwise lets the bubble's clock move on by poll, which fires the timers
// due meanwhile. It fails the test with ok's account of what it saw once
// deadline has passed on that clock.
func (h *harness) until(what string, ok func() (bool, string)) {
	h.t.Helper()
	end := time.Now().Add(deadline)
	for {
		synctest.Wait()
		done, saw := ok()
		if done {
			return
		}
		if time.Now().After(end) {
			h.t.Fatalf("waited %s for %s: %s", deadline, what, saw)
		}
		time.Sleep(poll) // the bubble's clock: returns at once
	}
}

// waitFor waits until cond holds for the workload, and returns it.
func (h *harness) waitFor(id core.WorkloadID, what string, cond func(*core.Workload) bool) *core.Workload {
	h.t.Helper()
	var w *core.Workload
	h.until(fmt.Sprintf("workload %s to be %s", id, what), func() (bool, string) {
		w = h.get(id)
		return cond(w), fmt.Sprintf("it is %s (reason %q, message %q, attempt %d)", w.Status.Phase, w.Status.Reason, w.Status.Message, w.Status.Attempts)
	})
	return w
}

// waitRunning waits until the workload runs the given attempt.
func (h *harness) waitRunning(id core.WorkloadID, attempt int) *core.Workload {
	h.t.Helper()
	return h.waitFor(id, fmt.Sprintf("Running attempt %d", attempt), func(w *core.Workload) bool {
		return w.Status.Phase == core.Running && w.Status.Attempts == attempt
	})
}

// waitEnded waits until the workload is in a terminal phase.
func (h *harness) waitEnded(id core.WorkloadID) *core.Workload {
	h.t.Helper()
	return h.waitFor(id, "finished", func(w *core.Workload) bool { return w.Status.Phase.Terminal() })
}

// waitCycles waits until the loops have run n more cycles.
func (h *harness) waitCycles(n int64) {
	h.t.Helper()
	want := h.cycles.Load() + n
	h.until(fmt.Sprintf("%d cycles", n), func() (bool, string) {
		got := h.cycles.Load()
		return got >= want, fmt.Sprintf("%d ran", got-want+n)
	})
}

// task returns the attempt of a workload that the fake runs.
func (h *harness) task(ex *fake.Executor, id core.WorkloadID, attempt int) (executor.Task, bool) {
	for _, tk := range ex.Running() {
		if tk.WorkloadID == id && tk.Attempt == attempt {
			return tk, true
		}
	}
	return executor.Task{}, false
}

// allocations reads a workload's allocation intervals.
func (h *harness) allocations(id core.WorkloadID) []core.Allocation {
	h.t.Helper()
	as, err := h.store.Allocations(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return as
}

// checkAllClosed fails unless the workload has allocations and all are
// closed.
func (h *harness) checkAllClosed(id core.WorkloadID) {
	h.t.Helper()
	as := h.allocations(id)
	if len(as) == 0 {
		h.t.Errorf("allocations of %s: none, want the intervals of its attempts", id)
	}
	for _, a := range as {
		if a.End == nil {
			h.t.Errorf("allocation %d (attempt %d, gpu %d) is still open, want End set", a.ID, a.Attempt, a.GPUIndex)
		}
	}
}

// events reads a workload's events, oldest first.
func (h *harness) events(id core.WorkloadID) []core.Event {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func countEvents(evs []core.Event, reason string) int {
	n := 0
	for _, e := range evs {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

func logs(t *testing.T, ex *fake.Executor, id core.WorkloadID) string {
	t.Helper()
	r, err := ex.Logs(id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func gpu(index int) core.Assignment {
	return core.Assignment{Node: "n1", GPUIndex: index, GPUUUID: fmt.Sprintf("GPU-n1-%d", index), MilliGPU: 1000, MemoryMiB: 81920}
}

func ptr[T any](v T) *T { return &v }

func TestPlaceStartAndFinish(t *testing.T) {
	tests := []struct {
		name       string
		code       int
		wantPhase  core.Phase
		wantReason string
	}{
		{"exit code 0 succeeds", 0, core.Succeeded, control.ReasonCompleted},
		{"exit code 3 fails with reason Error", 3, core.Failed, control.ReasonError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				w := h.submit(func(w *core.Workload) { w.Env = map[string]string{"SEED": "7"} })
				h.start()

				got := h.waitRunning(w.ID, 1)
				wantPlacement := []core.Assignment{gpu(0)}
				if diff := cmp.Diff(wantPlacement, got.Status.Placement); diff != "" {
					t.Errorf("stored placement (-want +got):\n%s", diff)
				}
				if got.Status.StartedAt == nil || !got.Status.StartedAt.Equal(t0) {
					t.Errorf("StartedAt: got %v, want %v (the loop's clock)", got.Status.StartedAt, t0)
				}
				// The store commits the placement before the loop calls Start.
				h.waitCycles(1)
				tk, ok := h.task(h.exec, w.ID, 1)
				if !ok {
					t.Fatalf("the executor does not run attempt 1; it runs %+v", h.exec.Running())
				}
				want := executor.Task{
					WorkloadID:  w.ID,
					Attempt:     1,
					Team:        w.Team,
					Priority:    w.Priority,
					Command:     []string{"train", "--epochs=1"},
					Env:         map[string]string{"SEED": "7"},
					Request:     core.Request{MilliGPU: 1000},
					Assignments: wantPlacement,
					GracePeriod: core.DefaultGracePeriod,
				}
				if diff := cmp.Diff(want, tk); diff != "" {
					t.Errorf("started task (-want +got):\n%s", diff)
				}
				if as := h.allocations(w.ID); len(as) != 1 || as[0].End != nil || as[0].Attempt != 1 {
					t.Errorf("allocations while running: got %+v, want one open interval for attempt 1", as)
				}

				h.clock.Advance(time.Minute)
				if !h.exec.Finish(w.ID, 1, tc.code) {
					t.Fatalf("Finish: the task is not running")
				}
				got = h.waitEnded(w.ID)
				if got.Status.Phase != tc.wantPhase || got.Status.Reason != tc.wantReason {
					t.Errorf("after exit code %d: got %s/%s, want %s/%s", tc.code, got.Status.Phase, got.Status.Reason, tc.wantPhase, tc.wantReason)
				}
				if diff := cmp.Diff(ptr(tc.code), got.Status.ExitCode); diff != "" {
					t.Errorf("exit code (-want +got):\n%s", diff)
				}
				if end := t0.Add(time.Minute); got.Status.FinishedAt == nil || !got.Status.FinishedAt.Equal(end) {
					t.Errorf("FinishedAt: got %v, want %v", got.Status.FinishedAt, end)
				}
				h.checkAllClosed(w.ID)
			})
		})
	}
}

func TestStartFailure(t *testing.T) {
	t.Run("a program that does not exist fails with StartError and frees its GPU", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(func(w *core.Workload) { w.Command = []string{fake.NoSuchProgram, "--flag"} })
			h.start()

			got := h.waitEnded(w.ID)
			if got.Status.Phase != core.Failed || got.Status.Reason != control.ReasonStartError {
				t.Errorf("got %s/%s, want Failed/%s", got.Status.Phase, got.Status.Reason, control.ReasonStartError)
			}
			if !strings.Contains(got.Status.Message, fake.NoSuchProgram) {
				t.Errorf("message: got %q, want the start error naming %q", got.Status.Message, fake.NoSuchProgram)
			}
			if got.Status.ExitCode != nil || got.Status.Attempts != 1 {
				t.Errorf("got exit code %v after %d attempts, want none after 1", got.Status.ExitCode, got.Status.Attempts)
			}
			h.checkAllClosed(w.ID)
			usage, err := h.store.Usage(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if held := usage["n1"].GPUs; len(held) != 0 {
				t.Errorf("GPUs held on n1 after the failed start: %v, want none", held)
			}
			// The whole node is free again: a four-GPU workload runs.
			all := h.submit(func(w *core.Workload) { w.Request.MilliGPU = 4000 })
			h.waitRunning(all.ID, 1)
			if got := h.get(w.ID); got.Status.Phase != core.Failed || got.Status.Attempts != 1 {
				t.Errorf("failed workload changed later: %s attempt %d", got.Status.Phase, got.Status.Attempts)
			}
		})
	})
}

func TestStop(t *testing.T) {
	t.Run("cancel of a running workload stops the task and ends Cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(nil)
			h.start()
			h.waitRunning(w.ID, 1)

			if _, err := h.store.RequestStop(context.Background(), w.ID, control.ReasonCancelled, "cancelled by alice", h.clock.Now()); err != nil {
				t.Fatal(err)
			}
			got := h.waitEnded(w.ID)
			if got.Status.Phase != core.Cancelled || got.Status.Reason != control.ReasonCancelled || got.Status.Message != "cancelled by alice" {
				t.Errorf("got %s/%s %q, want Cancelled/Cancelled %q", got.Status.Phase, got.Status.Reason, got.Status.Message, "cancelled by alice")
			}
			if !strings.Contains(logs(t, h.exec, w.ID), "attempt 1 stopped (SIGTERM)") {
				t.Errorf("the executor was not asked to stop attempt 1; its log:\n%s", logs(t, h.exec, w.ID))
			}
			if tks := h.exec.Running(); len(tks) != 0 {
				t.Errorf("tasks still running: %+v", tks)
			}
			h.checkAllClosed(w.ID)
		})
	})

	t.Run("a stop is sent once while the task takes its grace period", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(func(w *core.Workload) {
				w.Command = []string{"serve", fake.IgnoreSIGTERM}
				w.GracePeriod = 10 * time.Second
			})
			h.start()
			h.waitRunning(w.ID, 1)
			if _, err := h.store.RequestStop(context.Background(), w.ID, control.ReasonCancelled, "cancelled by alice", h.clock.Now()); err != nil {
				t.Fatal(err)
			}
			h.waitFor(w.ID, "asked to stop", func(w *core.Workload) bool { return w.Status.StopRequested != "" })
			h.waitCycles(5)
			if got := h.get(w.ID); got.Status.Phase != core.Running {
				t.Fatalf("before the grace has passed: got %s, want Running", got.Status.Phase)
			}
			if n := strings.Count(logs(t, h.exec, w.ID), "ignores SIGTERM"); n != 1 {
				t.Errorf("stops sent to the executor: got %d, want 1; its log:\n%s", n, logs(t, h.exec, w.ID))
			}

			h.clock.Advance(10 * time.Second)
			h.exec.Tick()
			got := h.waitEnded(w.ID)
			if got.Status.Phase != core.Cancelled || got.Status.Reason != control.ReasonCancelled {
				t.Errorf("after SIGKILL: got %s/%s, want Cancelled/Cancelled", got.Status.Phase, got.Status.Reason)
			}
			h.checkAllClosed(w.ID)
		})
	})
}

func TestMaxRuntime(t *testing.T) {
	t.Run("a workload past its max runtime is stopped and fails with MaxRuntimeExceeded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(func(w *core.Workload) { w.MaxRuntime = 50 * time.Millisecond })
			h.start()
			h.waitRunning(w.ID, 1)

			h.clock.Advance(49 * time.Millisecond)
			h.waitCycles(3)
			if got := h.get(w.ID); got.Status.Phase != core.Running || got.Status.StopRequested != "" {
				t.Fatalf("1ms before its max runtime: got %s (stop requested %q), want Running and no stop", got.Status.Phase, got.Status.StopRequested)
			}

			h.clock.Advance(time.Millisecond)
			got := h.waitEnded(w.ID)
			if got.Status.Phase != core.Failed || got.Status.Reason != control.ReasonMaxRuntime {
				t.Errorf("got %s/%s, want Failed/%s", got.Status.Phase, got.Status.Reason, control.ReasonMaxRuntime)
			}
			if want := "stopped after its max runtime of 50ms"; got.Status.Message != want {
				t.Errorf("message: got %q, want %q", got.Status.Message, want)
			}
			if !strings.Contains(logs(t, h.exec, w.ID), "attempt 1 stopped (SIGTERM)") {
				t.Errorf("the executor was not asked to stop attempt 1; its log:\n%s", logs(t, h.exec, w.ID))
			}
			h.checkAllClosed(w.ID)
		})
	})
}

func TestMoreDemandThanGPUs(t *testing.T) {
	t.Run("the first four run, the rest wait and start in submission order", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			var ws []*core.Workload
			for range 6 {
				ws = append(ws, h.submit(nil))
			}
			h.start()

			for _, w := range ws[:4] {
				h.waitRunning(w.ID, 1)
			}
			for _, w := range ws[4:] {
				got := h.waitFor(w.ID, "explained as Unschedulable", func(w *core.Workload) bool { return w.Status.Reason == "Unschedulable" })
				if got.Status.Phase != core.Pending {
					t.Errorf("%s: got %s, want Pending", w.ID, got.Status.Phase)
				}
				if !strings.Contains(got.Status.Message, "not enough free whole GPUs") {
					t.Errorf("%s: message %q, want it to say there are not enough free whole GPUs", w.ID, got.Status.Message)
				}
			}
			h.waitCycles(1)
			if n := len(h.exec.Running()); n != 4 {
				t.Errorf("tasks running: got %d, want 4", n)
			}

			// Finishing the second frees its GPU for the fifth; the sixth waits.
			freed := h.get(ws[1].ID).Status.Placement
			h.exec.Finish(ws[1].ID, 1, 0)
			fifth := h.waitRunning(ws[4].ID, 1)
			if diff := cmp.Diff(freed, fifth.Status.Placement); diff != "" {
				t.Errorf("the fifth workload's placement (-freed +got):\n%s", diff)
			}
			h.waitCycles(2)
			if got := h.get(ws[5].ID); got.Status.Phase != core.Pending {
				t.Errorf("sixth workload with no GPU free: got %s, want Pending", got.Status.Phase)
			}

			h.exec.Finish(ws[2].ID, 1, 0)
			h.waitRunning(ws[5].ID, 1)
			h.waitCycles(1)
			if n := len(h.exec.Running()); n != 4 {
				t.Errorf("tasks running at the end: got %d, want 4", n)
			}
		})
	})
}

func TestPendingExplanationIsWrittenOnce(t *testing.T) {
	t.Run("an unchanged reason is not recorded again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(func(w *core.Workload) { w.Request.MilliGPU = 8000 })
			h.start()
			h.waitFor(w.ID, "explained as Unschedulable", func(w *core.Workload) bool { return w.Status.Reason == "Unschedulable" })

			h.waitCycles(20)
			if n := countEvents(h.events(w.ID), "Unschedulable"); n != 1 {
				t.Errorf("Unschedulable events after 20 cycles: got %d, want 1", n)
			}
		})
	})

	t.Run("an unchanged reason does not make the loop run without a change", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Writing the same explanation again would be a commit, whose change
			// signal starts the next cycle at once: the loop would spin. With a
			// resync of an hour, only the first cycle and the changes made so
			// far (the explanation) may start one.
			h := newHarness(t)
			w := h.submit(func(w *core.Workload) { w.Request.MilliGPU = 8000 })
			opts := h.options(h.exec)
			opts.Resync = time.Hour
			h.run(control.New(opts))
			h.waitFor(w.ID, "explained as Unschedulable", func(w *core.Workload) bool { return w.Status.Reason == "Unschedulable" })

			// Settled: every goroutine waits (a loop that spins never does,
			// and is halted after spinCycles), and a second of the
			// bubble's clock passes.
			synctest.Wait()
			time.Sleep(time.Second) // the bubble's clock
			if n := h.cycles.Load(); n != 2 {
				t.Errorf("cycles with no tick and only the explanation written: got %d, want 2 (the first, and the explanation's)", n)
			}
			if n := countEvents(h.events(w.ID), "Unschedulable"); n != 1 {
				t.Errorf("Unschedulable events: got %d, want 1", n)
			}
		})
	})
}

func TestReconcile(t *testing.T) {
	// runOnce runs a first loop until the workload runs attempt 1, then
	// stops that loop as a restart of the control plane would.
	runOnce := func(h *harness) *core.Workload {
		h.t.Helper()
		w := h.submit(nil)
		stop := h.run(control.New(h.options(h.exec)))
		h.waitRunning(w.ID, 1)
		h.waitCycles(1) // the launch that follows the placement is done
		stop()
		return h.get(w.ID)
	}

	t.Run("a task the new executor does not know is requeued as Lost and started as attempt 2", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := runOnce(h)
			h.clock.Advance(time.Minute)

			ex := fake.New(fake.Options{Now: h.clock.Now})
			loop := control.New(h.options(ex))
			if err := loop.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := h.get(w.ID)
			if got.Status.Phase != core.Pending || got.Status.Reason != string(core.Lost) || got.Status.Placement != nil {
				t.Errorf("after Reconcile: got %s/%s placement %v, want Pending/Lost with no placement", got.Status.Phase, got.Status.Reason, got.Status.Placement)
			}
			h.checkAllClosed(w.ID)
			evs := h.events(w.ID)
			if n := countEvents(evs, "ProcessLost"); n != 1 {
				t.Errorf("ProcessLost events: got %d, want 1 (%+v)", n, evs)
			}
			if n := countEvents(evs, "Requeued"); n != 1 {
				t.Errorf("Requeued events: got %d, want 1 (%+v)", n, evs)
			}

			h.run(loop)
			h.waitRunning(w.ID, 2)
			h.waitCycles(1)
			tk, ok := h.task(ex, w.ID, 2)
			if !ok {
				t.Fatalf("the new executor does not run attempt 2; it runs %+v", ex.Running())
			}
			if diff := cmp.Diff(h.get(w.ID).Status.Placement, tk.Assignments); diff != "" {
				t.Errorf("attempt 2's assignments (-stored +started):\n%s", diff)
			}
			as := h.allocations(w.ID)
			if len(as) != 2 || as[0].Attempt != 1 || as[0].End == nil || as[1].Attempt != 2 || as[1].End != nil {
				t.Errorf("allocations: got %+v, want attempt 1 closed and attempt 2 open", as)
			}
		})
	})

	t.Run("a task the new executor still runs is adopted and keeps attempt 1", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := runOnce(h)

			ex := fake.New(fake.Options{Now: h.clock.Now})
			if err := ex.Start(context.Background(), control.TaskFor(w)); err != nil {
				t.Fatal(err)
			}
			loop := control.New(h.options(ex))
			if err := loop.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			h.run(loop)
			h.waitCycles(3)
			got := h.get(w.ID)
			if got.Status.Phase != core.Running || got.Status.Attempts != 1 {
				t.Fatalf("after Reconcile: got %s attempt %d, want Running attempt 1", got.Status.Phase, got.Status.Attempts)
			}
			if diff := cmp.Diff(w.Status.Placement, got.Status.Placement); diff != "" {
				t.Errorf("placement after Reconcile (-before +after):\n%s", diff)
			}
			if n := len(ex.Running()); n != 1 {
				t.Errorf("tasks on the new executor: got %d (%+v), want the adopted one", n, ex.Running())
			}

			// Its exit is recorded as that of any task.
			ex.Finish(w.ID, 1, 0)
			got = h.waitEnded(w.ID)
			if got.Status.Phase != core.Succeeded || got.Status.Attempts != 1 {
				t.Errorf("after its exit: got %s attempt %d, want Succeeded attempt 1", got.Status.Phase, got.Status.Attempts)
			}
		})
	})

	t.Run("a lost task whose cancel was requested ends Cancelled, not requeued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(func(w *core.Workload) { w.Command = []string{"serve", fake.IgnoreSIGTERM} })
			stop := h.run(control.New(h.options(h.exec)))
			h.waitRunning(w.ID, 1)
			if _, err := h.store.RequestStop(context.Background(), w.ID, control.ReasonCancelled, "cancelled by alice", h.clock.Now()); err != nil {
				t.Fatal(err)
			}
			h.waitFor(w.ID, "asked to stop", func(w *core.Workload) bool { return w.Status.StopRequested != "" })
			stop()

			loop := control.New(h.options(fake.New(fake.Options{Now: h.clock.Now})))
			if err := loop.Reconcile(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := h.get(w.ID)
			if got.Status.Phase != core.Cancelled || got.Status.Reason != control.ReasonCancelled || got.Status.Attempts != 1 {
				t.Errorf("after Reconcile: got %s/%s attempt %d, want Cancelled/Cancelled attempt 1", got.Status.Phase, got.Status.Reason, got.Status.Attempts)
			}
			h.checkAllClosed(w.ID)
		})
	})
}

func TestLateExit(t *testing.T) {
	t.Run("the exit of an old attempt does not touch the newer one", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(nil)
			sentinel := h.submit(nil)
			h.start()
			h.waitRunning(w.ID, 1)
			h.waitRunning(sentinel.ID, 1)

			// Attempt 1 is given up (preempted, say) while its task still runs.
			if _, err := h.store.Requeue(context.Background(), w.ID, 1, core.Preempted, "Preempted", "test", h.clock.Now()); err != nil {
				t.Fatal(err)
			}
			h.waitRunning(w.ID, 2)
			h.waitCycles(1)
			if _, ok := h.task(h.exec, w.ID, 2); !ok {
				t.Fatalf("attempt 2 is not running; the executor runs %+v", h.exec.Running())
			}

			h.exec.Finish(w.ID, 1, 1)
			// Exits are handled in order: once the sentinel's is recorded,
			// attempt 1's has been too.
			h.exec.Finish(sentinel.ID, 1, 0)
			h.waitEnded(sentinel.ID)

			got := h.get(w.ID)
			if got.Status.Phase != core.Running || got.Status.Attempts != 2 || got.Status.ExitCode != nil {
				t.Errorf("after attempt 1's exit: got %s attempt %d exit code %v, want Running attempt 2", got.Status.Phase, got.Status.Attempts, got.Status.ExitCode)
			}
			if as := h.allocations(w.ID); len(as) != 2 || as[1].Attempt != 2 || as[1].End != nil {
				t.Errorf("allocations: got %+v, want attempt 2's open", as)
			}

			h.exec.Finish(w.ID, 2, 0)
			got = h.waitEnded(w.ID)
			if got.Status.Phase != core.Succeeded || got.Status.Attempts != 2 {
				t.Errorf("after attempt 2's exit: got %s attempt %d, want Succeeded attempt 2", got.Status.Phase, got.Status.Attempts)
			}
		})
	})

	t.Run("an exit after the workload has finished changes nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			w := h.submit(func(w *core.Workload) { w.Command = []string{"serve", fake.IgnoreSIGTERM} })
			sentinel := h.submit(nil)
			h.start()
			h.waitRunning(w.ID, 1)
			h.waitRunning(sentinel.ID, 1)
			if _, err := h.store.Finish(context.Background(), w.ID, 1, core.Failed, "NodeFailed", "test", nil, h.clock.Now()); err != nil {
				t.Fatal(err)
			}
			h.exec.Finish(w.ID, 1, 0)
			h.exec.Finish(sentinel.ID, 1, 0)
			h.waitEnded(sentinel.ID)
			if got := h.get(w.ID); got.Status.Phase != core.Failed || got.Status.Reason != "NodeFailed" || got.Status.ExitCode != nil {
				t.Errorf("got %s/%s exit code %v, want Failed/NodeFailed unchanged", got.Status.Phase, got.Status.Reason, got.Status.ExitCode)
			}
		})
	})
}

// lossy is the fake executor with a way to report a task as Lost, as an
// executor does when the process vanished without a recorded ending.
type lossy struct {
	*fake.Executor
	exits chan executor.Exit
}

func newLossy(t *testing.T, f *fake.Executor) *lossy {
	l := &lossy{Executor: f, exits: make(chan executor.Exit, 64)}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case x := <-f.Exits():
				select {
				case l.exits <- x:
				case <-done:
					return
				}
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return l
}

func (l *lossy) Exits() <-chan executor.Exit { return l.exits }

func (l *lossy) lose(id core.WorkloadID, attempt int, msg string) {
	l.exits <- executor.Exit{WorkloadID: id, Attempt: attempt, Reason: "Lost", Message: msg, At: time.Now()}
}

func TestLostExit(t *testing.T) {
	t.Run("a task reported Lost is requeued and started again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			ex := newLossy(t, h.exec)
			w := h.submit(nil)
			h.run(control.New(h.options(ex)))
			h.waitRunning(w.ID, 1)

			ex.lose(w.ID, 1, "the supervisor is gone")
			h.waitRunning(w.ID, 2)
			h.waitCycles(1)
			if _, ok := h.task(h.exec, w.ID, 2); !ok {
				t.Fatalf("attempt 2 is not running; the executor runs %+v", h.exec.Running())
			}
			evs := h.events(w.ID)
			var lost []core.Event
			for _, e := range evs {
				if e.Reason == "ProcessLost" {
					lost = append(lost, e)
				}
			}
			if len(lost) != 1 || lost[0].Message != "the supervisor is gone" || lost[0].From != core.Running || lost[0].To != core.Lost {
				t.Errorf("ProcessLost events: got %+v, want one Running → Lost with the executor's message", lost)
			}
			if n := countEvents(evs, "Requeued"); n != 1 {
				t.Errorf("Requeued events: got %d, want 1", n)
			}
			if as := h.allocations(w.ID); len(as) != 2 || as[0].End == nil || as[1].End != nil {
				t.Errorf("allocations: got %+v, want attempt 1 closed and attempt 2 open", as)
			}
		})
	})

	t.Run("a cancelled task reported Lost is not started again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			ex := newLossy(t, h.exec)
			// The task ignores SIGTERM, so that the stop leaves it running
			// until it is lost.
			w := h.submit(func(w *core.Workload) { w.Command = []string{"serve", fake.IgnoreSIGTERM} })
			h.run(control.New(h.options(ex)))
			h.waitRunning(w.ID, 1)
			if _, err := h.store.RequestStop(context.Background(), w.ID, control.ReasonCancelled, "cancelled by alice", h.clock.Now()); err != nil {
				t.Fatal(err)
			}
			h.waitFor(w.ID, "asked to stop", func(w *core.Workload) bool { return w.Status.StopRequested != "" })
			h.waitCycles(2)

			ex.lose(w.ID, 1, "the supervisor is gone")
			got := h.waitFor(w.ID, "no longer running attempt 1", func(w *core.Workload) bool {
				return w.Status.Phase != core.Running || w.Status.Attempts != 1
			})
			if got.Status.Phase != core.Cancelled || got.Status.Reason != control.ReasonCancelled || got.Status.Attempts != 1 {
				t.Errorf("got %s/%s attempt %d, want Cancelled/Cancelled attempt 1", got.Status.Phase, got.Status.Reason, got.Status.Attempts)
			}
			h.checkAllClosed(w.ID)
		})
	})
}

func TestStepDrivesTheLoopWithoutRun(t *testing.T) {
	h := newHarness(t)
	loop := control.New(h.options(h.exec))
	ctx := context.Background()
	type step struct{ Exits, Placed, Preempted int }
	do := func() step {
		t.Helper()
		exits, plan := loop.Step(ctx)
		return step{exits, len(plan.Placements), len(plan.Preemptions)}
	}
	var devs []core.WorkloadID
	for range 4 {
		devs = append(devs, h.submit(func(w *core.Workload) { w.Priority = "development" }).ID)
	}
	if diff := cmp.Diff(step{Placed: 4}, do()); diff != "" {
		t.Fatalf("first step: four development workloads fill the node (-want +got):\n%s", diff)
	}
	for _, id := range devs {
		if w := h.get(id); w.Status.Phase != core.Running {
			t.Fatalf("%s is %s after the step, want Running", id, w.Status.Phase)
		}
	}

	// A training workload of the same team preempts one of them: the plan
	// asks for the stop, the next step sends it, and the step after that
	// records the exit and places the preemptor.
	h.clock.Advance(time.Minute)
	train := h.submit(nil).ID
	want := []step{{Preempted: 1}, {}, {Exits: 1, Placed: 1}, {}}
	var got []step
	for range want {
		got = append(got, do())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps after the training workload arrived (-want +got):\n%s", diff)
	}
	if w := h.get(train); w.Status.Phase != core.Running || !w.Status.StartedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("training workload: %s since %v, want Running since %v", w.Status.Phase, w.Status.StartedAt, t0.Add(time.Minute))
	}
	preempted := 0
	for _, id := range devs {
		if w := h.get(id); w.Status.Phase == core.Pending && w.Status.Preemptions == 1 {
			preempted++
		}
	}
	if preempted != 1 {
		t.Errorf("%d development workloads are Pending after one preemption, want 1", preempted)
	}

	// An exit the executor delivered is handled by the next step.
	h.clock.Advance(time.Minute)
	if !h.exec.Finish(train, 1, 0) {
		t.Fatal("Finish: the training workload is not running")
	}
	if diff := cmp.Diff(step{Exits: 1, Placed: 1}, do()); diff != "" {
		t.Errorf("step after the exit (-want +got):\n%s", diff)
	}
	if w := h.get(train); w.Status.Phase != core.Succeeded {
		t.Errorf("training workload is %s after its exit, want Succeeded", w.Status.Phase)
	}
}
