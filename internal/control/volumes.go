package control

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/store"
)

// VolumeReconciler keeps the executor's team volumes equal to the store's:
// every Every it ensures each stored volume, records what it holds, and
// deletes the volumes the store no longer has (deleted, or their team
// deleted). The store owns the truth; the executor's directories or PVCs
// follow it.
type VolumeReconciler struct {
	Store   *store.Store
	Volumes executor.Volumes
	Every   time.Duration // default 1 minute
	Now     func() time.Time
	Logger  *slog.Logger
}

// Run reconciles until ctx ends.
func (r *VolumeReconciler) Run(ctx context.Context) {
	every := r.Every
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.Step(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn("reconcile volumes", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Step reconciles once; it goes on past a volume that fails and returns
// the first error.
func (r *VolumeReconciler) Step(ctx context.Context) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	stored, err := r.Store.Volumes(ctx, "")
	if err != nil {
		return err
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	want := make(map[executor.VolumeRef]bool, len(stored))
	for _, v := range stored {
		want[executor.VolumeRef{Team: v.Team, Name: v.Name}] = true
		if err := r.Volumes.EnsureVolume(ctx, v.Team, v.Name, v.SizeBytes); err != nil {
			keep(fmt.Errorf("volume %s/%s: %w", v.Team, v.Name, err))
			continue
		}
		used, err := r.Volumes.VolumeUsage(ctx, v.Team, v.Name)
		if err != nil {
			keep(fmt.Errorf("volume %s/%s: usage: %w", v.Team, v.Name, err))
			continue
		}
		if err := r.Store.SetVolumeUsage(ctx, v.Team, v.Name, used, now()); err != nil {
			keep(err)
		}
	}
	have, err := r.Volumes.ListVolumes(ctx)
	if err != nil {
		keep(err)
	}
	for _, ref := range have {
		if want[ref] {
			continue
		}
		// Looked up again: a volume created since the list was read
		// must not lose its data.
		if _, err := r.Store.Volume(ctx, ref.Team, ref.Name); err == nil {
			continue
		}
		r.Logger.Info("deleting a volume the store no longer has", "team", ref.Team, "volume", ref.Name)
		if err := r.Volumes.DeleteVolume(ctx, ref.Team, ref.Name); err != nil {
			keep(fmt.Errorf("delete volume %s/%s: %w", ref.Team, ref.Name, err))
		}
	}
	return first
}

// ensureVolumes makes the volumes a task mounts exist before it starts,
// so that a volume created a moment ago need not wait for the reconciler.
func ensureVolumes(ctx context.Context, st *store.Store, vols executor.Volumes, team core.TeamName, ms []core.VolumeMount) error {
	for _, m := range ms {
		v, err := st.Volume(ctx, team, m.Name)
		if err != nil {
			return fmt.Errorf("volume %s: %w", m.Name, err)
		}
		if err := vols.EnsureVolume(ctx, team, m.Name, v.SizeBytes); err != nil {
			return fmt.Errorf("volume %s: %w", m.Name, err)
		}
	}
	return nil
}
