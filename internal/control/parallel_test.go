package control_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
)

// slowStart is the fake executor with a Start that takes a while, as a pod
// create on a busy API server does, and counts the Starts under way.
type slowStart struct {
	*fake.Executor
	now, most atomic.Int64
}

func (s *slowStart) Start(ctx context.Context, t executor.Task) error {
	n := s.now.Add(1)
	defer s.now.Add(-1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond) // the bubble's clock: Starts under way at once overlap in it
	return s.Executor.Start(ctx, t)
}

// TestStartParallelism: the placements of one cycle start StartParallelism
// at a time, and one after another by default.
func TestStartParallelism(t *testing.T) {
	for _, tc := range []struct{ parallelism, want int64 }{{0, 1}, {4, 4}} {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			var ids []core.WorkloadID
			for range 4 { // the node's four GPUs, placed in the first cycle
				ids = append(ids, h.submit(nil).ID)
			}
			ex := &slowStart{Executor: h.exec}
			opts := h.options(ex)
			opts.StartParallelism = int(tc.parallelism)
			h.run(control.New(opts))
			for _, id := range ids {
				h.waitRunning(id, 1)
			}
			h.waitCycles(2)
			if got := ex.most.Load(); got != tc.want {
				t.Errorf("StartParallelism %d: at most %d Starts at once, want %d", tc.parallelism, got, tc.want)
			}
		})
	}
}
