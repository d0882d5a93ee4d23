package control_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// A start that fails for want of disk space on the executor's side (its
// data directory full: no room for the attempt's files) requeues the
// workload, reason NoSpace, and nothing says it ran; once space returns it
// starts. A new executor on the same directory (the server after a crash)
// finds no attempt to adopt, so none is recorded as killed.
func TestStartOnAFullDiskRequeues(t *testing.T) {
	disk := smallDisk(t, "1m")
	ex, err := local.New(local.Options{DataDir: disk, Isolation: local.Isolation{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	h := newHarness(t)
	loop := control.New(h.options(ex))
	w := h.submit(func(w *core.Workload) { w.Command = []string{"true"} })

	filler := filepath.Join(disk, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()

	loop.Step(context.Background())
	got := h.get(w.ID)
	if got.Status.Phase != core.Pending || got.Status.Attempts != 1 || !strings.Contains(got.Status.Message, "no space left") {
		t.Fatalf("after a start on a full disk: %s %s (%s), attempts %d; want Pending again, requeued",
			got.Status.Phase, got.Status.Reason, got.Status.Message, got.Status.Attempts)
	}
	evs, err := h.store.Events(context.Background(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || e.Reason == control.ReasonNoSpace
	}
	if !found {
		t.Errorf("no %s event: %+v", control.ReasonNoSpace, evs)
	}
	again, err := local.New(local.Options{DataDir: disk, Isolation: local.Isolation{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	if ok, err := again.Adopt(context.Background(), control.TaskFor(got)); err != nil || ok {
		t.Errorf("after a restart, Adopt of the attempt that never started: (%t, %v), want (false, nil)", ok, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	loop.Step(context.Background())
	if got := h.get(w.ID); got.Status.Phase != core.Running && got.Status.Phase != core.Succeeded {
		t.Fatalf("with space again: %s %s (%s), want it started", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	// Its end, before the disk goes.
	select {
	case x := <-ex.Exits():
		if x.WorkloadID != w.ID || x.Attempt != 2 || x.ExitCode == nil || *x.ExitCode != 0 {
			t.Errorf("exit %+v, want attempt 2 ending with code 0", x)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit of the started attempt within 10 s")
	}
}
