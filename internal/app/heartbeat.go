package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// heartbeatInterval is how often the server rewrites its local node's
// record, so that the node's updatedAt says when the server last reported
// it: every usage sample (usage.sampleInterval, 10 s by default), or every
// 10 s when sampling is off.
func heartbeatInterval(cfg config.Config) time.Duration {
	if d := cfg.Usage.SampleInterval.Duration; d > 0 {
		return d
	}
	return 10 * time.Second
}

// heartbeat rewrites the local node with the time, every interval until ctx
// ends: one store write per interval. The server is the only writer of its
// local node, so the rest of the record stays as registered. A failed write
// (a full disk) is logged once until one succeeds again.
func heartbeat(ctx context.Context, st *store.Store, n core.Node, interval time.Duration, log *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n.UpdatedAt = time.Now().UTC()
		err := st.PutNode(ctx, n)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			log.Warn("cannot refresh the local node's record: its updatedAt stays old", "node", n.Name, "err", err)
			failing = true
		case err == nil && failing:
			log.Info("the local node's record is refreshed again", "node", n.Name)
			failing = false
		}
	}
}
