package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// smallDisk mounts a tmpfs of size (as mount's size= takes it) on a fresh
// directory, unmounted when the test ends. It needs root; CI runs as root.
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

// probeDue moves the time of Writable's last probe back by probeEvery, as
// if that long had passed since: the next Writable probes.
func probeDue(s *Store) {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	s.probedAt = s.probedAt.Add(-probeEvery)
}

// fill writes a file into dir until the disk has no space left, and returns
// the function that removes it.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFullDiskFailsWritesAndRecovers fills the store's disk while many
// writes run at once (so that they share batches): each write either is
// acknowledged or fails with core.ErrNoSpace, the store says it cannot
// write, reads go on, and once space returns writes succeed again without a
// restart. After reopening, the file holds exactly the acknowledged writes:
// none lost, none that was reported failed.
func TestFullDiskFailsWritesAndRecovers(t *testing.T) {
	sqliteOnly(t)
	dir := smallDisk(t, "2m")
	path := filepath.Join(dir, "gpufleet.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	ctx := context.Background()
	if err := s.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Writable(ctx); err != nil {
		t.Fatalf("Writable before the disk fills: %v", err)
	}

	var mu sync.Mutex
	var acked []core.WorkloadID
	var other []error
	noSpace := 0
	// burst submits n workloads at once and reports how many failed for
	// want of space.
	burst := func(n int) int {
		var wg sync.WaitGroup
		failed := 0
		for range n {
			wg.Go(func() {
				w, _, err := s.CreateWorkload(ctx, workload(100), nil, t0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					acked = append(acked, w.ID)
				case errors.Is(err, core.ErrNoSpace):
					noSpace++
					failed++
				default:
					other = append(other, err)
				}
			})
		}
		wg.Wait()
		return failed
	}
	burst(50)
	free := fill(t, dir)
	// The WAL may still have room that an earlier checkpoint left: writes
	// that fit there succeed, durably. Go on until the disk refuses.
	for i := 0; ; i++ {
		if burst(32) > 0 {
			break
		}
		if i == 500 {
			t.Fatalf("%d writes succeeded on a full disk, none failed", len(acked))
		}
	}
	if len(other) > 0 {
		t.Fatalf("writes on a full disk failed otherwise than with ErrNoSpace: %v", other)
	}
	if err := s.Writable(ctx); !errors.Is(err, core.ErrNoSpace) {
		t.Errorf("Writable on a full disk = %v, want ErrNoSpace", err)
	}
	// The probe of a later Writable fails too while the disk is full.
	probeDue(s)
	if err := s.Writable(ctx); !errors.Is(err, core.ErrNoSpace) {
		t.Errorf("Writable on a full disk, probing = %v, want ErrNoSpace", err)
	}
	if _, err := s.Workloads(ctx, WorkloadFilter{}); err != nil {
		t.Errorf("reads on a full disk: %v", err)
	}
	if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); !errors.Is(err, core.ErrNoSpace) {
		t.Errorf("CreateTeam on a full disk = %v, want ErrNoSpace", err)
	}
	actx := WithAudit(ctx, &core.AuditEntry{Time: t0, User: "alice", Action: "submit workload", Method: "POST", Path: "/api/v1/workloads", Status: 201})
	if _, _, err := s.CreateWorkload(actx, workload(100), nil, t0); err == nil || !errors.Is(err, core.ErrNoSpace) {
		t.Errorf("submit on a full disk = %v, want ErrNoSpace", err)
	} else {
		t.Logf("on a full disk a submit fails with: %v", err)
	}
	if AuditWritten(actx) {
		t.Errorf("the audit entry of a submit that failed for want of space counts as written; the failure would go unaudited")
	}

	// Space returns: Writable clears by its own probe, then writes work.
	free()
	probeDue(s)
	if err := s.Writable(ctx); err != nil {
		t.Fatalf("Writable once space returned, probing = %v, want nil", err)
	}
	if f := burst(20); f > 0 || len(other) > 0 {
		t.Fatalf("once space returned: %d writes failed for space, others with %v", f, other)
	}
	if err := s.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
		t.Errorf("CreateTeam once space returned: %v", err)
	}
	t.Logf("%d writes acknowledged, %d refused for want of space", len(acked), noSpace)

	// The file holds the acknowledged workloads and nothing else.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := s.Workloads(ctx, WorkloadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[core.WorkloadID]bool{}
	for _, w := range ws {
		got[w.ID] = true
	}
	want := map[core.WorkloadID]bool{}
	for _, id := range acked {
		want[id] = true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after reopening, workloads (-acknowledged +stored):\n%s", diff)
	}
}

// TestStoreErrorsAreNotTakenForGone: a workload the store cannot read (here
// its status does not decode) fails the plan that touches it, rather than
// being skipped as if it did not exist. Pending and running workloads are
// served to the writer from the view (getForUpdate), so the rows garbled
// are of finished ones, which a late plan may still name.
func TestStoreErrorsAreNotTakenForGone(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	finish := func(id core.WorkloadID) {
		t.Helper()
		if _, err := s.Finish(ctx, id, 1, core.Succeeded, "Completed", "", nil, t0); err != nil {
			t.Fatal(err)
		}
	}
	preemptor, finished := submit(t, s, 1000), submit(t, s, 1000)
	done, victim := running(t, s, 0), running(t, s, 1)
	finish(done)
	finish(victim)
	victim2 := running(t, s, 0)
	if _, err := s.RequestStop(ctx, finished.ID, "Cancelled", "", t0); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	garble := func(id core.WorkloadID) {
		t.Helper()
		if _, err := db.Exec("UPDATE workloads SET status = 'not json' WHERE id = ?", string(id)); err != nil {
			t.Fatal(err)
		}
	}
	garble(done)
	garble(victim)
	garble(finished.ID)
	tests := []struct {
		name string
		plan core.Plan
	}{
		{"decision on a finished workload", core.Plan{Unplaced: []core.Decision{{Workload: done, Reason: "Unschedulable", Message: "no room"}}}},
		{"preemption of a finished workload", core.Plan{Preemptions: []core.Preemption{{Victim: victim, Attempt: 1, Preemptor: preemptor.ID, Reason: "Preempted"}}}},
		{"preemption for a finished workload", core.Plan{Preemptions: []core.Preemption{{Victim: victim2, Attempt: 1, Preemptor: finished.ID, Reason: "Preempted"}}}},
		{"decision on a workload that is gone", core.Plan{Unplaced: []core.Decision{{Workload: "wl-gone", Reason: "Unschedulable"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ApplyPlan(ctx, tt.plan, t0)
			if len(tt.plan.Unplaced) > 0 {
				// On SQLite an explanation goes to the view, which
				// holds neither workload: no row is read.
				if err != nil {
					t.Errorf("ApplyPlan = %v, want nil: a workload that is gone or finished needs no explanation", err)
				}
				return
			}
			if err == nil || errors.Is(err, core.ErrNotFound) {
				t.Errorf("ApplyPlan = %v, want the decode error", err)
			}
		})
	}
}

// running submits a one-GPU workload and places it on n1's GPU gpu.
func running(t *testing.T, s *Store, gpu int) core.WorkloadID {
	t.Helper()
	w := submit(t, s, 1000)
	if res, err := s.ApplyPlan(context.Background(), core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{assign("n1", gpu, 1000)}}}}, t0); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res)
	}
	return w.ID
}
