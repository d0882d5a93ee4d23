package store

import (
	"context"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Warn records a Warning event on a workload while it runs the given
// attempt and is not being stopped (idle and memory warnings). It reports
// whether the event was recorded: a workload that has moved on is left
// alone.
func (s *Store) Warn(ctx context.Context, id core.WorkloadID, attempt int, reason, message string, now time.Time) (bool, error) {
	var done bool
	err := s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		if w.Status.Phase != core.Running || w.Status.Attempts != attempt || w.Status.StopRequested != "" {
			return nil
		}
		done = true
		return addEvent(tx, core.Event{WorkloadID: id, Time: now.UTC(), Type: core.EventWarning, Reason: reason, Message: message})
	})
	return done, err
}
