package control

import (
	"context"
	"sync"

	"github.com/gpufleet/gpufleet/internal/core"
)

// launcher starts the placements Run's cycles commit, at most
// StartParallelism at a time, without the cycle waiting for them: the next
// cycle plans while pods are still being created. Each placement
// is committed before it is handed over, so the next snapshot already
// counts its devices, and nothing is placed twice.
//
// While an attempt's start is in flight the loop does not stop it (stops
// skips it and asks for a retry): a Stop that overtook its Start would find
// nothing to stop, and the task would then start and run unstopped. A start
// that fails and cannot be recorded comes back to the loop's goroutine
// (failed) to be remembered, as a synchronous one is.
//
// At the end of Run (a shutdown, or a leader's term) the starts not yet
// begun are dropped, the placements committed: the next Reconcile finds
// those attempts without a task and requeues them, as after a crash; the
// starts under way are waited for, so that Run returns only when this
// loop starts nothing more.
type launcher struct {
	sem    chan struct{}
	failed chan *unrecorded
	wg     sync.WaitGroup

	mu       sync.Mutex
	inflight map[attemptKey]bool
}

func newLauncher(parallelism int) *launcher {
	return &launcher{sem: make(chan struct{}, max(1, parallelism)), failed: make(chan *unrecorded, 64), inflight: map[attemptKey]bool{}}
}

// launch hands ws to the pool and returns at once.
func (lc *launcher) launch(ctx context.Context, l *Loop, ws []*core.Workload) {
	for _, w := range ws {
		k := attemptKey{w.ID, w.Status.Attempts}
		lc.mu.Lock()
		lc.inflight[k] = true
		lc.mu.Unlock()
		lc.wg.Go(func() {
			defer lc.done(k)
			select {
			case lc.sem <- struct{}{}:
			case <-ctx.Done():
				return // dropped: the next Reconcile requeues it
			}
			defer func() { <-lc.sem }()
			if ctx.Err() != nil {
				return
			}
			if u := l.launch(ctx, w); u != nil {
				select {
				case lc.failed <- u:
				case <-ctx.Done():
				}
			}
		})
	}
}

func (lc *launcher) done(k attemptKey) {
	lc.mu.Lock()
	delete(lc.inflight, k)
	lc.mu.Unlock()
}

// starting reports whether k's start is in flight.
func (lc *launcher) starting(k attemptKey) bool {
	if lc == nil {
		return false
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.inflight[k]
}

// wait waits for the starts under way (those not begun are dropped once
// ctx is done).
func (lc *launcher) wait() { lc.wg.Wait() }
