package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/store"
)

// checkpointSweeper is an executor that keeps what a workload leaves after
// its end: the local executor's checkpoint directory, the kubernetes
// executor's checkpoint claim and Service.
type checkpointSweeper interface {
	DeleteWorkload(ctx context.Context, team core.TeamName, id core.WorkloadID) error
}

// localSweeper removes the checkpoint directory of a local workload.
type localSweeper struct{ ex *local.Executor }

func (l localSweeper) DeleteWorkload(_ context.Context, _ core.TeamName, id core.WorkloadID) error {
	return l.ex.RemoveCheckpoint(id)
}

// sweepers is one checkpointSweeper over several (one per cluster).
type sweepers []checkpointSweeper

func (ss sweepers) DeleteWorkload(ctx context.Context, team core.TeamName, id core.WorkloadID) error {
	var errs []error
	for _, s := range ss {
		errs = append(errs, s.DeleteWorkload(ctx, team, id))
	}
	return errors.Join(errs...)
}

// sweepCheckpoints removes what executors keep of workloads that ended
// more than retention ago (their checkpoints), now and every sweep
// interval, until ctx ends. A checkpoint is kept across a workload's
// attempts (requeue, preemption, node loss) and for retention after its
// end.
func sweepCheckpoints(ctx context.Context, st *store.Store, ex checkpointSweeper, retention, every time.Duration, log *slog.Logger) {
	swept := map[core.WorkloadID]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		sweepOnce(ctx, st, ex, retention, swept, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepOnce is one pass of sweepCheckpoints; swept holds the workloads
// whose checkpoints are gone already.
func sweepOnce(ctx context.Context, st *store.Store, ex checkpointSweeper, retention time.Duration, swept map[core.WorkloadID]bool, log *slog.Logger) {
	ws, err := st.Workloads(ctx, store.WorkloadFilter{Phases: []core.Phase{core.Succeeded, core.Failed, core.Cancelled}})
	if err != nil && ctx.Err() == nil {
		log.Warn("checkpoints: list ended workloads", "err", err)
	}
	now := time.Now()
	for _, w := range ws {
		if swept[w.ID] || w.Status.FinishedAt == nil || now.Sub(*w.Status.FinishedAt) < retention {
			continue
		}
		if err := ex.DeleteWorkload(ctx, w.Team, w.ID); err != nil {
			log.Warn("checkpoints: remove", "workload", w.ID, "err", err)
			continue
		}
		swept[w.ID] = true
	}
}
