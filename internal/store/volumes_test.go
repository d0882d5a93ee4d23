package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

const mib = 1 << 20

func vol(team, name string, size int64) core.Volume {
	return core.Volume{Team: core.TeamName(team), Name: name, SizeBytes: size, UsedBytes: -1, CreatedAt: t0}
}

func TestCreateVolumeAndRead(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateVolume(ctx, vol("a", "ckpt", 10*mib), -1); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVolume(ctx, vol("a", "cache", 5*mib), -1); err != nil {
		t.Fatal(err)
	}
	got, err := s.Volumes(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []core.Volume{vol("a", "cache", 5*mib), vol("a", "ckpt", 10*mib)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Volumes(a) (-want +got):\n%s", diff)
	}
	one, err := s.Volume(ctx, "a", "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(vol("a", "ckpt", 10*mib), one); diff != "" {
		t.Errorf("Volume(a, ckpt) (-want +got):\n%s", diff)
	}
	if _, err := s.Volume(ctx, "a", "nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Volume(a, nope) = %v, want ErrNotFound", err)
	}

	// A measure is recorded.
	at := t0.Add(time.Minute)
	if err := s.SetVolumeUsage(ctx, "a", "ckpt", 4096, at); err != nil {
		t.Fatal(err)
	}
	one, _ = s.Volume(ctx, "a", "ckpt")
	if one.UsedBytes != 4096 || !one.MeasuredAt.Equal(at) {
		t.Errorf("after SetVolumeUsage: used %d at %v, want 4096 at %v", one.UsedBytes, one.MeasuredAt, at)
	}
}

func TestCreateVolumeRefusals(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateVolume(ctx, vol("a", "ckpt", 10*mib), 20*mib); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVolume(ctx, vol("a", "ckpt", mib), 20*mib); !errors.Is(err, core.ErrConflict) {
		t.Errorf("a second ckpt: %v, want ErrConflict", err)
	}
	err := s.CreateVolume(ctx, vol("a", "big", 10*mib+1), 20*mib)
	if !errors.Is(err, ErrStorageLimit) || !errors.Is(err, core.ErrInvalid) {
		t.Errorf("over the limit: %v, want ErrStorageLimit (an ErrInvalid)", err)
	}
	// Exactly up to the limit is fine.
	if err := s.CreateVolume(ctx, vol("a", "fits", 10*mib), 20*mib); err != nil {
		t.Errorf("exactly at the limit: %v", err)
	}
	if err := s.CreateVolume(ctx, vol("ghost", "x", mib), -1); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a missing team: %v, want ErrNotFound", err)
	}
	vs, _ := s.Volumes(ctx, "a")
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	if diff := cmp.Diff([]string{"ckpt", "fits"}, names); diff != "" {
		t.Errorf("volumes after the refusals (-want +got):\n%s", diff)
	}
}

// TestCreateVolumeConcurrentLimit: many creates at once, each fitting
// alone, cannot together pass the limit.
func TestCreateVolumeConcurrentLimit(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	const n, limit = 16, 3 * mib
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateVolume(ctx, vol("a", "v"+string(rune('a'+i)), mib), limit)
		}()
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrStorageLimit):
			t.Errorf("create %d: %v, want nil or ErrStorageLimit", i, err)
		}
	}
	if ok != 3 {
		t.Errorf("%d creates of 1 MiB passed a 3 MiB limit, want 3", ok)
	}
	vs, _ := s.Volumes(ctx, "a")
	var sum int64
	for _, v := range vs {
		sum += v.SizeBytes
	}
	if len(vs) != 3 || sum != limit {
		t.Errorf("stored %d volumes of %d bytes in all, want 3 of %d", len(vs), sum, limit)
	}
}

func TestDeleteVolume(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateVolume(ctx, vol("a", "ckpt", mib), -1); err != nil {
		t.Fatal(err)
	}
	w := workload(0)
	w.Volumes = []core.VolumeMount{{Name: "ckpt", Path: "/ckpt"}}
	w, _, err := s.CreateWorkload(ctx, w, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.VolumeUsers("a", "ckpt"); !cmp.Equal(got, []string{string(w.ID)}) {
		t.Errorf("VolumeUsers = %v, want [%s]", got, w.ID)
	}
	err = s.DeleteVolume(ctx, "a", "ckpt", t0)
	if !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), string(w.ID)) {
		t.Fatalf("delete while %s is pending: %v, want ErrConflict naming it", w.ID, err)
	}
	if _, err := s.Volume(ctx, "a", "ckpt"); err != nil {
		t.Errorf("the volume after the refused delete: %v", err)
	}
	if _, err := s.RequestStop(ctx, w.ID, "Cancelled", "test", t0); err != nil {
		t.Fatal(err)
	}
	// A pending workload cancelled ends at once.
	if got := s.VolumeUsers("a", "ckpt"); len(got) != 0 {
		t.Fatalf("VolumeUsers after the cancel = %v, want none", got)
	}
	if err := s.DeleteVolume(ctx, "a", "ckpt", t0); err != nil {
		t.Fatalf("delete after the cancel: %v", err)
	}
	if _, err := s.Volume(ctx, "a", "ckpt"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Volume after the delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteVolume(ctx, "a", "ckpt", t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a second delete: %v, want ErrNotFound", err)
	}
	// The name is free again, and the deleted volume no longer counts
	// against the limit.
	if err := s.CreateVolume(ctx, vol("a", "ckpt", mib), mib); err != nil {
		t.Errorf("ckpt again after the delete, within a limit of its size: %v", err)
	}
}

func TestDeleteTeamRemovesVolumes(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
		t.Fatal(err)
	}
	for _, v := range []core.Volume{vol("a", "keep", mib), vol("b", "x", mib), vol("b", "y", mib)} {
		if err := s.CreateVolume(ctx, v, -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteTeam(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if vs, err := s.Volumes(ctx, "b"); err != nil || len(vs) != 0 {
		t.Errorf("team b's volumes after DeleteTeam: %v %v, want none", vs, err)
	}
	all, _ := s.Volumes(ctx, "")
	if len(all) != 1 || all[0].Name != "keep" {
		t.Errorf("every volume after DeleteTeam(b): %v, want a/keep only", all)
	}
	// A team of the same name starts with none.
	if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVolume(ctx, vol("b", "x", mib), mib); err != nil {
		t.Errorf("b/x in the new team b: %v", err)
	}
}
