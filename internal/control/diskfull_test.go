package control_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
)

// smallDisk mounts a tmpfs of size on a fresh directory, unmounted when the
// test ends. It needs root; CI runs as root. 2m keeps the WAL below its
// checkpoint size, so that once a write fails for want of space the next
// ones do too, until space is freed.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: filling a disk needs root, to mount a small tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs on %s (%v: %s)", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillStore fills the disk of the harness's store (in dir) until the store
// refuses a write, and returns the function that frees the space again.
func (h *harness) fillStore(dir string) (free func()) {
	h.t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		h.t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	for i := 0; ; i++ {
		err := h.store.CreateTeam(context.Background(), core.NewTeam(core.TeamName(fmt.Sprintf("filler-%d", i)), t0))
		if errors.Is(err, core.ErrNoSpace) {
			break
		}
		if err != nil || i == 1000 {
			h.t.Fatalf("filling the disk: write %d: %v, want ErrNoSpace in the end", i, err)
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestExitsWaitForTheStore: exits that come while the store cannot write
// (its disk is full) are kept and recorded once space returns, as they
// were: the attempt is not requeued for a later report that it was lost,
// nor failed for the max runtime that passed meanwhile, and no attempt
// runs twice.
func TestExitsWaitForTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := smallDisk(t, "2m")
		h := newHarnessIn(t, dir)
		ex := newLossy(t, h.exec)
		done := h.submit(func(w *core.Workload) { w.MaxRuntime = time.Hour })
		failed := h.submit(nil)
		lost := h.submit(nil)
		h.run(control.New(h.options(ex)))
		for _, w := range []*core.Workload{done, failed, lost} {
			h.waitRunning(w.ID, 1)
		}
		h.waitCycles(1)

		free := h.fillStore(dir)
		h.exec.Finish(done.ID, 1, 0)
		h.exec.Finish(failed.ID, 1, 3)
		h.waitCycles(3) // the loop has had the exits
		// A late report that the ended task is lost, as an executor that found
		// its process gone might send: the exit seen first stands.
		ex.lose(done.ID, 1, "the supervisor is gone")
		ex.lose(lost.ID, 1, "the supervisor is gone")
		h.clock.Advance(2 * time.Hour) // past done's max runtime
		h.waitCycles(20)
		for _, w := range []*core.Workload{done, failed, lost} {
			if got := h.get(w.ID); got.Status.Phase != core.Running || got.Status.Attempts != 1 {
				t.Fatalf("%s while the disk is full: %s attempt %d, want Running attempt 1 (nothing can be written)", w.ID, got.Status.Phase, got.Status.Attempts)
			}
		}

		free()
		for _, tt := range []struct {
			w      *core.Workload
			phase  core.Phase
			reason string
			code   *int
		}{
			{done, core.Succeeded, control.ReasonCompleted, ptr(0)},
			{failed, core.Failed, control.ReasonError, ptr(3)},
		} {
			got := h.waitEnded(tt.w.ID)
			if got.Status.Phase != tt.phase || got.Status.Reason != tt.reason || got.Status.Attempts != 1 ||
				got.Status.ExitCode == nil || *got.Status.ExitCode != *tt.code {
				t.Errorf("%s once space returned: %s/%s attempt %d exit %v, want %s/%s attempt 1 exit %d",
					tt.w.ID, got.Status.Phase, got.Status.Reason, got.Status.Attempts, got.Status.ExitCode, tt.phase, tt.reason, *tt.code)
			}
			h.checkAllClosed(tt.w.ID)
			if n := countEvents(h.events(tt.w.ID), "ProcessLost"); n != 0 {
				t.Errorf("%s: %d ProcessLost events, want none: its exit was seen first", tt.w.ID, n)
			}
		}
		// The task reported lost (and nothing else) is requeued, once.
		h.waitRunning(lost.ID, 2)
		if n := countEvents(h.events(lost.ID), "ProcessLost"); n != 1 {
			t.Errorf("%s: %d ProcessLost events, want 1", lost.ID, n)
		}
		h.waitCycles(3)
		for _, tk := range h.exec.Running() {
			if tk.WorkloadID == done.ID || tk.WorkloadID == failed.ID {
				t.Errorf("%s runs again (attempt %d) after it ended", tk.WorkloadID, tk.Attempt)
			}
		}
	})
}

// TestReconcileOnAFullDisk: a control plane that restarts while the disk is
// full starts; the task it finds gone is requeued once space returns, and
// the one whose cancel was asked for ends Cancelled.
func TestReconcileOnAFullDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := smallDisk(t, "2m")
		h := newHarnessIn(t, dir)
		gone := h.submit(nil)
		cancelled := h.submit(func(w *core.Workload) { w.Command = []string{"serve", fake.IgnoreSIGTERM} })
		stop := h.run(control.New(h.options(h.exec)))
		h.waitRunning(gone.ID, 1)
		h.waitRunning(cancelled.ID, 1)
		if _, err := h.store.RequestStop(context.Background(), cancelled.ID, control.ReasonCancelled, "cancelled by alice", h.clock.Now()); err != nil {
			t.Fatal(err)
		}
		h.waitCycles(2)
		stop()

		free := h.fillStore(dir)
		loop := control.New(h.options(fake.New(fake.Options{Now: h.clock.Now})))
		if err := loop.Reconcile(context.Background()); err != nil {
			t.Fatalf("Reconcile on a full disk: %v, want nil (what it cannot record now, it records later)", err)
		}
		h.run(loop)
		h.waitCycles(5)
		free()
		h.waitRunning(gone.ID, 2)
		got := h.waitEnded(cancelled.ID)
		if got.Status.Phase != core.Cancelled || got.Status.Attempts != 1 {
			t.Errorf("cancelled task lost across a restart on a full disk: %s attempt %d, want Cancelled attempt 1", got.Status.Phase, got.Status.Attempts)
		}
	})
}
