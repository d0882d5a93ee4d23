package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"golang.org/x/sys/unix"
)

// TestAcknowledgedOnlyAfterTheFsync holds the syncer's fsync and checks that
// a write committed meanwhile is not acknowledged (its caller still waits),
// though readers already see it (durable.go says why that is allowed), and
// that it is acknowledged once the fsync returns; and that a write arriving
// meanwhile waits in the writer's open transaction, committed only once the
// syncer is free, with an fsync of its own (one COMMIT for each fsync).
func TestAcknowledgedOnlyAfterTheFsync(t *testing.T) {
	s, _ := fileFixture(t)
	ctx := context.Background()
	entered := make(chan int, 16)
	release := make(chan struct{})
	s.wal.fdatasync = func(fd int) error {
		entered <- fd
		<-release
		return unix.Fdatasync(fd)
	}
	type result struct {
		w   *core.Workload
		err error
	}
	first := make(chan result, 1)
	go func() {
		w, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0)
		first <- result{w, err}
	}()
	select {
	case <-entered: // committed; the fsync is held
	case <-time.After(10 * time.Second):
		t.Fatal("the write's fsync never started")
	}
	select {
	case r := <-first:
		t.Fatalf("write acknowledged (err %v) while its fsync was held", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	// Committed: readers see the first.
	list, err := s.Workloads(ctx, WorkloadFilter{Phases: []core.Phase{core.Pending}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("readers see %d pending workloads while the fsync is held, want the 1 committed", len(list))
	}
	second := make(chan result, 1)
	go func() {
		w, _, err := s.CreateWorkload(ctx, workload(500), nil, t0)
		second <- result{w, err}
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-second:
		t.Fatalf("second write acknowledged (err %v) while the first's fsync was held", r.err)
	default:
	}
	if list, err := s.Workloads(ctx, WorkloadFilter{}); err != nil || len(list) != 1 {
		t.Errorf("readers see %d workloads (err %v) while the first's fsync is held, want 1: the second waits uncommitted", len(list), err)
	}
	close(release)
	for _, ch := range []chan result{first, second} {
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("write not acknowledged after its fsync returned")
		}
	}
	if n := len(entered); n != 1 {
		t.Errorf("%d more fsyncs after the first, want 1: the second write's own", n)
	}
}

// TestFailedFsyncFailsTheBatch fails the WAL's fsync: the writes it was to
// make durable fail with core.ErrUnavailable, never succeed, Writable reports
// the disk, and the next write whose fsync works is acknowledged and clears
// it.
func TestFailedFsyncFailsTheBatch(t *testing.T) {
	s, _ := fileFixture(t)
	ctx := context.Background()
	s.wal.fdatasync = func(int) error { return unix.EIO }
	_, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("submit with a failing fsync: err %v, want core.ErrUnavailable", err)
	}
	if err := s.Writable(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Writable after a failed fsync: %v, want core.ErrUnavailable", err)
	}
	s.healthMu.Lock()
	s.probedAt = time.Now() // no probe of its own: the next write clears it
	s.healthMu.Unlock()
	s.wal.fdatasync = unix.Fdatasync
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Writable(ctx); err != nil {
		t.Errorf("Writable after a write that was synced: %v", err)
	}
}

// TestSyncFollowsARemadeWAL removes the WAL file behind the syncer's back
// (as SQLite does when the last connection closes) and makes it again: the
// syncer must sync the file SQLite now writes, not the removed one.
func TestSyncFollowsARemadeWAL(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	var synced []uint64
	s.wal.fdatasync = func(fd int) error {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		synced = append(synced, st.Ino)
		return unix.Fdatasync(fd)
	}
	wal := path + "-wal"
	if err := os.Rename(wal, filepath.Join(filepath.Dir(path), "old-wal")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(filepath.Dir(path), "old-wal")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(wal, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	// The write itself goes to the removed file (SQLite's descriptor);
	// what is checked is the file synced.
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
		t.Fatal(err)
	}
	want := fi.Sys().(*syscall.Stat_t).Ino
	if len(synced) == 0 || synced[len(synced)-1] != want {
		t.Errorf("synced inodes %v, want the last to be the WAL now at its path (%d)", synced, want)
	}
}
