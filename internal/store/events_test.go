package store

import (
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestWarn(t *testing.T) {
	s := fixture(t)
	ctx := t.Context()
	w := submit(t, s, 1000)
	warnings := func() int {
		evs, err := s.Events(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Type == core.EventWarning && e.Reason == "IdleWarning" {
				n++
			}
		}
		return n
	}
	if ok, err := s.Warn(ctx, w.ID, 1, "IdleWarning", "idle", t0); ok || err != nil {
		t.Errorf("Warn on a pending workload = %v, %v; want false, nil", ok, err)
	}
	if res, err := s.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", 0, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if ok, err := s.Warn(ctx, w.ID, 2, "IdleWarning", "idle", t0); ok || err != nil {
		t.Errorf("Warn on another attempt = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.Warn(ctx, w.ID, 1, "IdleWarning", "idle for 50m", t0.Add(time.Minute)); !ok || err != nil {
		t.Errorf("Warn on the running attempt = %v, %v; want true, nil", ok, err)
	}
	if _, err := s.RequestStop(ctx, w.ID, "Idle", "idle", t0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Warn(ctx, w.ID, 1, "IdleWarning", "idle", t0); ok {
		t.Error("Warn on a workload being stopped recorded an event")
	}
	if n := warnings(); n != 1 {
		t.Errorf("%d warnings recorded, want 1", n)
	}
	if _, err := s.Warn(ctx, "wl-missing", 1, "IdleWarning", "idle", t0); err == nil {
		t.Error("Warn on a missing workload: no error")
	}
}
