package control_test

// Attacks found in review of issue 17 (volume reconciliation) that still
// succeed: each test fails until the production code is fixed. Not
// committed (CI would fail); see the review report.

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/store"
)

// cancelAfterList is the local executor whose ListVolumes ends the step's
// context once it has listed: the server stopping (or the store failing)
// between the list and the reconciler's second look-up.
type cancelAfterList struct {
	*local.Executor
	cancel context.CancelFunc
	// before runs first: a volume created (and ensured by its first
	// task's start) after the reconciler read the store's volumes.
	before func()
}

func (c cancelAfterList) ListVolumes(ctx context.Context) ([]executor.VolumeRef, error) {
	c.before()
	refs, err := c.Executor.ListVolumes(ctx)
	c.cancel()
	return refs, err
}

// The reconciler deletes a listed volume it did not read from the store
// (one created meanwhile) when the store's second look-up of it fails for
// any reason, not only when the store has no such volume: a look-up that
// fails because the server is stopping (context canceled) or the database
// is closed or busy deletes a volume that exists, with its data (the local
// executor's DeleteVolume ignores the context).
func TestAttackReconcilerDeletesExistingVolumeOnLookupError(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "gpufleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	ex, err := local.New(local.Options{DataDir: filepath.Join(dir, "data"), Isolation: local.Isolation{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(dir, "data", "volumes", "a", "data", "weights.bin")
	create := func() {
		if err := st.CreateVolume(ctx, core.Volume{Team: "a", Name: "data", SizeBytes: 1 << 20, CreatedAt: t0}, -1); err != nil {
			t.Fatal(err)
		}
		if err := ex.EnsureVolume(ctx, "a", "data", 1<<20); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keep, []byte("the first task's output"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &control.VolumeReconciler{Store: st, Volumes: cancelAfterList{ex, cancel, create}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r.Step(stepCtx)
	if _, err := st.Volume(ctx, "a", "data"); err != nil {
		t.Fatalf("the store lost the volume: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the reconciler deleted the data of volume a/data, which the store has, because its look-up failed: %v "+
			"(delete only when the look-up says core.ErrNotFound)", err)
	}
}

// A deleted volume's data goes only when the reconciler next runs; a
// volume of the same name created before then (by the same team, or by a
// new team of a deleted team's name: DeleteTeam drops its volumes' rows)
// is ensured over the old directory and gets the old data.
func TestAttackRecreatedVolumeKeepsDeletedData(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "gpufleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	ex, err := local.New(local.Options{DataDir: filepath.Join(dir, "data"), Isolation: local.Isolation{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	vol := core.Volume{Team: "a", Name: "data", SizeBytes: 1 << 20, CreatedAt: t0}
	if err := st.CreateVolume(ctx, vol, -1); err != nil {
		t.Fatal(err)
	}
	r := &control.VolumeReconciler{Store: st, Volumes: ex, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "data", "volumes", "a", "data", "old-owner.txt")
	if err := os.WriteFile(old, []byte("deleted data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteVolume(ctx, "a", "data", t0); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateVolume(ctx, vol, -1); err != nil {
		t.Fatal(err)
	}
	if err := r.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Errorf("a volume created again under a deleted one's name holds the deleted volume's data (%s): "+
			"delete the executor's volume when the store deletes it, or key volumes by a generation", old)
	}
}
