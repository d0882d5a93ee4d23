package control_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
)

// flakyAdopt is the fake executor whose Adopt fails a number of times
// before it answers.
type flakyAdopt struct {
	*fake.Executor
	failures atomic.Int32
}

func (f *flakyAdopt) Adopt(ctx context.Context, t executor.Task) (bool, error) {
	if f.failures.Add(-1) >= 0 {
		return false, errors.New("pid file unreadable")
	}
	return f.Executor.Adopt(ctx, t)
}

// TestAdoptErrorsAreRetried: an Adopt that fails is not taken to mean the
// task is gone (requeueing a task that may still run would run it twice):
// it is retried each cycle, and the task, once found, keeps its attempt.
func TestAdoptErrorsAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		w := h.submit(nil)
		stop := h.run(control.New(h.options(h.exec)))
		h.waitRunning(w.ID, 1)
		h.waitCycles(1)
		stop()
		w = h.get(w.ID)

		inner := fake.New(fake.Options{Now: h.clock.Now})
		if err := inner.Start(context.Background(), control.TaskFor(w)); err != nil {
			t.Fatal(err)
		}
		ex := &flakyAdopt{Executor: inner}
		ex.failures.Store(3)
		loop := control.New(h.options(ex))
		if err := loop.Reconcile(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := h.get(w.ID); got.Status.Phase != core.Running || got.Status.Attempts != 1 {
			t.Fatalf("after a failed adopt: %s attempt %d, want still Running attempt 1", got.Status.Phase, got.Status.Attempts)
		}
		h.run(loop)
		h.until("adopt retried until it succeeds", func() (bool, string) {
			n := ex.failures.Load()
			return n < 0, fmt.Sprintf("%d failures left", n+1)
		})
		inner.Finish(w.ID, 1, 0)
		got := h.waitEnded(w.ID)
		if got.Status.Phase != core.Succeeded || got.Status.Attempts != 1 {
			t.Errorf("after adoption: %s attempt %d, want Succeeded at attempt 1", got.Status.Phase, got.Status.Attempts)
		}
	})
}
