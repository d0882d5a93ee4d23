package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/store"
)

// sweepCheckpoints removes the checkpoint directories of workloads that
// ended more than retention ago, now and every sweep interval, until ctx
// ends. A checkpoint is kept across a workload's attempts (requeue,
// preemption, node loss) and for retention after its end.
func sweepCheckpoints(ctx context.Context, st *store.Store, ex *local.Executor, retention, every time.Duration, log *slog.Logger) {
	swept := map[core.WorkloadID]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ws, err := st.Workloads(ctx, store.WorkloadFilter{Phases: []core.Phase{core.Succeeded, core.Failed, core.Cancelled}})
		if err != nil && ctx.Err() == nil {
			log.Warn("checkpoints: list ended workloads", "err", err)
		}
		now := time.Now()
		for _, w := range ws {
			if swept[w.ID] || w.Status.FinishedAt == nil || now.Sub(*w.Status.FinishedAt) < retention {
				continue
			}
			if err := ex.RemoveCheckpoint(w.ID); err != nil {
				log.Warn("checkpoints: remove", "workload", w.ID, "err", err)
				continue
			}
			swept[w.ID] = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
