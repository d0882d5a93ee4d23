package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

	// mu orders purges and ensures: a deleted volume's data is removed
	// before a volume of its name is made again, and a purge never
	// removes a volume made since.
	mu sync.Mutex
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
	r.mu.Lock()
	defer r.mu.Unlock()
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	// The data of deleted volumes first, so that none is ensured over it.
	purges, err := r.Store.VolumePurges(ctx)
	if err != nil {
		return err
	}
	for _, p := range purges {
		if err := r.purge(ctx, p.Team, p.Name); err != nil {
			keep(err)
		}
	}
	stored, err := r.Store.Volumes(ctx, "")
	if err != nil {
		return err
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
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Looked up again: a volume created since the list was read
		// must not lose its data, nor one the store could not answer
		// for (only a volume it says is gone is deleted).
		if _, err := r.Store.Volume(ctx, ref.Team, ref.Name); !errors.Is(err, core.ErrNotFound) {
			if err != nil {
				keep(fmt.Errorf("volume %s/%s: %w", ref.Team, ref.Name, err))
			}
			continue
		}
		r.Logger.Info("deleting a volume the store no longer has", "team", ref.Team, "volume", ref.Name)
		if err := r.Volumes.DeleteVolume(ctx, ref.Team, ref.Name); err != nil {
			keep(fmt.Errorf("delete volume %s/%s: %w", ref.Team, ref.Name, err))
		}
	}
	return first
}

// purge removes a deleted volume's data; the caller holds mu.
func (r *VolumeReconciler) purge(ctx context.Context, team core.TeamName, name string) error {
	if err := r.Volumes.DeleteVolume(ctx, team, name); err != nil {
		return fmt.Errorf("purge volume %s/%s: %w", team, name, err)
	}
	r.Logger.Info("removed the data of a deleted volume", "team", team, "volume", name)
	return r.Store.PurgeDone(ctx, team, name)
}

// Ensure makes the volumes a task mounts exist before it starts, so that a
// volume created a moment ago need not wait for the next Step; the data of
// a deleted volume of the same name is removed first.
func (r *VolumeReconciler) Ensure(ctx context.Context, team core.TeamName, ms []core.VolumeMount) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range ms {
		pending, err := r.Store.PurgePending(ctx, team, m.Name)
		if err != nil {
			return err
		}
		if pending {
			if err := r.purge(ctx, team, m.Name); err != nil {
				return err
			}
		}
	}
	return ensureVolumes(ctx, r.Store, r.Volumes, team, ms)
}

// ensureVolumes makes the volumes exist in the executor.
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
