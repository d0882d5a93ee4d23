package store

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"golang.org/x/sys/unix"
)

// TestAcknowledgedOnlyAfterTheFsync holds the syncer's fsync and checks that
// a write committed meanwhile is not acknowledged (its caller still waits),
// though readers already see it (durable.go says why that is allowed), and
// that it is acknowledged once the fsync returns; that a write arriving
// meanwhile waits in the writer's open transaction, committed only once the
// syncer is free, with an fsync of its own (one COMMIT for each fsync); and
// that each fsync starts after the COMMIT of the writes it acknowledges.
func TestAcknowledgedOnlyAfterTheFsync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := fileFixture(t)
		ctx := context.Background()
		committed := func() int { return countCommitted(t, s) }
		// seen: the workloads committed as each fsync starts.
		entered := make(chan int, 16)
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) }) // never left hanging
		s.wal.fdatasync = func(fd int) error {
			entered <- committed()
			<-release
			return unix.Fdatasync(fd)
		}
		type result struct {
			w   *core.Workload
			err error
		}
		submitAsync := func(milli int64) chan result {
			ch := make(chan result, 1)
			go func() {
				w, _, err := s.CreateWorkload(ctx, workload(milli), nil, t0)
				ch <- result{w, err}
			}()
			return ch
		}
		first := submitAsync(1000)
		synctest.Wait() // the write has gone as far as it can: into the held fsync
		var seen []int
		select {
		case n := <-entered: // committed; the fsync is held
			seen = append(seen, n)
		default:
			t.Fatal("the write's fsync never started")
		}
		select {
		case r := <-first:
			t.Fatalf("write acknowledged (err %v) while its fsync was held", r.err)
		default:
		}
		if n := committed(); n != 1 {
			t.Errorf("readers see %d workloads while the fsync is held, want the 1 committed", n)
		}
		second := submitAsync(500)
		synctest.Wait()
		select {
		case r := <-second:
			t.Fatalf("second write acknowledged (err %v) while the first's fsync was held", r.err)
		default:
		}
		if n := committed(); n != 1 {
			t.Errorf("readers see %d workloads while the first's fsync is held, want 1: the second waits uncommitted", n)
		}
		once.Do(func() { close(release) })
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
		for len(entered) > 0 {
			seen = append(seen, <-entered)
		}
		if want := []int{1, 2}; !slices.Equal(seen, want) {
			t.Errorf("workloads committed as each fsync started: %v, want %v (each write's own fsync, after its COMMIT)", seen, want)
		}
	})
}

// TestFailedFsyncStopsWrites fails the WAL's fsync: the writes it was to
// make durable fail with core.ErrUnavailable, never succeed; and so does
// every write after it, an idempotent replay of the failed submit too, even
// once fsync works again, with Writable reporting it, until the store is
// opened again (a restart), which writes again.
func TestFailedFsyncStopsWrites(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	s.wal.fdatasync = func(int) error { return unix.EIO }
	idem := &Idempotency{Key: "k1", Hash: "h1"}
	_, _, err := s.CreateWorkload(ctx, workload(1000), idem, t0)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("submit with a failing fsync: err %v, want core.ErrUnavailable", err)
	}
	s.wal.fdatasync = unix.Fdatasync
	for _, w := range []struct {
		name string
		idem *Idempotency
	}{{"the failed submit replayed", idem}, {"another submit", nil}} {
		if _, _, err := s.CreateWorkload(ctx, workload(1000), w.idem, t0); !errors.Is(err, core.ErrUnavailable) {
			t.Errorf("%s after a failed fsync: err %v, want core.ErrUnavailable until a restart", w.name, err)
		}
	}
	s.healthMu.Lock()
	s.probedAt = time.Time{} // Writable may probe: it must still fail
	s.healthMu.Unlock()
	if err := s.Writable(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Writable after a failed fsync: %v, want core.ErrUnavailable until a restart", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
		t.Errorf("submit after a restart: %v", err)
	}
	if err := s.Writable(ctx); err != nil {
		t.Errorf("Writable after a restart: %v", err)
	}
}

// TestWriteDuringFailingFsyncFails runs a write in the writer's open
// transaction while the previous batch's fsync fails: it must fail too,
// never be acknowledged, since recovery would drop it with the failed batch.
func TestWriteDuringFailingFsyncFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := fileFixture(t)
		ctx := context.Background()
		entered := make(chan struct{}, 4)
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		var calls atomic.Int32
		s.wal.fdatasync = func(fd int) error {
			if calls.Add(1) == 1 {
				entered <- struct{}{}
				<-release
				return unix.EIO
			}
			return unix.Fdatasync(fd)
		}
		submitAsync := func(milli int64) chan error {
			ch := make(chan error, 1)
			go func() { _, _, err := s.CreateWorkload(ctx, workload(milli), nil, t0); ch <- err }()
			return ch
		}
		first := submitAsync(1000)
		<-entered
		second := submitAsync(500)
		synctest.Wait() // the second has run in the open transaction
		once.Do(func() { close(release) })
		for i, ch := range []chan error{first, second} {
			select {
			case err := <-ch:
				if !errors.Is(err, core.ErrUnavailable) {
					t.Errorf("write %d, with or after the failed fsync: err %v, want core.ErrUnavailable", i+1, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("write %d never answered", i+1)
			}
		}
	})
}

// TestRemovedWALStopsWrites removes the WAL file behind the store's back:
// SQLite goes on writing into the removed file, which no recovery would
// read, so the write fails rather than being acknowledged, and so do those
// after it.
func TestRemovedWALStopsWrites(t *testing.T) {
	s, path := fileFixture(t)
	ctx := context.Background()
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); !errors.Is(err, core.ErrUnavailable) {
			t.Errorf("submit %d after the WAL was removed: err %v, want core.ErrUnavailable", i, err)
		}
	}
}

// TestHealthInWriteOrder notes a batch's success after a later batch's
// failure, as the syncer can (it acknowledges a batch while the writer has
// failed the next): Writable keeps the later failure.
func TestHealthInWriteOrder(t *testing.T) {
	s, _ := fileFixture(t)
	full := &diskError{kind: core.ErrNoSpace, err: syscall.ENOSPC, what: "full"}
	s.noteWrite(full, 11)
	s.noteWrite(nil, 10)
	s.healthMu.Lock()
	s.probedAt = time.Now() // no probe: the noted outcome is reported
	s.healthMu.Unlock()
	if err := s.Writable(context.Background()); !errors.Is(err, core.ErrNoSpace) {
		t.Errorf("Writable after batch 11 failed and batch 10 succeeded: %v, want core.ErrNoSpace", err)
	}
	s.noteWrite(nil, 12)
	if err := s.Writable(context.Background()); err != nil {
		t.Errorf("Writable after batch 12 succeeded: %v", err)
	}
}

// TestSmallBatchWaitsForWritesOnTheirWay checks group commit's wait
// (Store.fill) on the bubble's clock: once the syncer is free, a batch
// holding fewer writes than the last one made durable takes the writes
// that arrive, without waiting longer once it holds as many; with none
// arriving, it commits when as long as the last fsync took has passed; and
// a batch as large as the last one commits at once.
func TestSmallBatchWaitsForWritesOnTheirWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := fileFixture(t)
		ctx := context.Background()
		type fsync struct {
			committed int // workloads committed as it started
			at        time.Time
		}
		entered := make(chan fsync, 16)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		s.wal.fdatasync = func(fd int) error {
			entered <- fsync{countCommitted(t, s), time.Now()}
			<-release
			return unix.Fdatasync(fd)
		}
		lasts := fsyncClock(s) // how long the held fsync takes, as the syncer measures it
		var acks []chan error
		submit := func(n int) {
			for range n {
				ch := make(chan error, 1)
				go func() { _, _, err := s.CreateWorkload(ctx, workload(100), nil, t0); ch <- err }()
				acks = append(acks, ch)
			}
			synctest.Wait()
		}
		// next is the next fsync, once it starts: on the bubble's clock,
		// as soon as the writes can run, or when the writer's timer fires.
		next := func() fsync { return <-entered }
		const took = 500 * time.Microsecond
		submit(1)
		next() // the first write's batch, alone
		submit(3)
		release <- struct{}{}
		if f := next(); f.committed != 4 {
			t.Fatalf("%d committed at the second fsync, want 4: the three that came during the first", f.committed)
		}
		lasts(took) // the second fsync
		submit(1)
		free := time.Now()
		release <- struct{}{}
		synctest.Wait()
		if len(entered) > 0 {
			t.Fatal("a batch of one committed at once after a batch of three")
		}
		submit(2)
		if f := next(); f.committed != 7 || f.at != free {
			t.Errorf("third fsync: %d committed after %v, want 7 at once: the batch takes the two that arrive", f.committed, f.at.Sub(free))
		}
		lasts(took)
		submit(1)
		free = time.Now()
		release <- struct{}{}
		if f := next(); f.committed != 8 || f.at.Sub(free) != took {
			t.Errorf("fourth fsync: %d committed after %v, want 8 after %v: the last fsync's time, with none arriving", f.committed, f.at.Sub(free), took)
		}
		submit(1)
		free = time.Now()
		release <- struct{}{}
		if f := next(); f.committed != 9 || f.at != free {
			t.Errorf("fifth fsync: %d committed after %v, want 9 at once: a batch of one after a batch of one", f.committed, f.at.Sub(free))
		}
		// However long the last fsync took, a batch waits at most maxFill.
		submit(3)
		release <- struct{}{}
		if f := next(); f.committed != 12 {
			t.Fatalf("%d committed at the sixth fsync, want 12", f.committed)
		}
		lasts(2 * maxFill) // the sixth fsync
		submit(1)
		free = time.Now()
		release <- struct{}{}
		if f := next(); f.committed != 13 || f.at.Sub(free) != maxFill {
			t.Errorf("seventh fsync: %d committed after %v, want 13 after %v: a slow fsync's time capped", f.committed, f.at.Sub(free), maxFill)
		}
		release <- struct{}{}
		for i, ch := range acks {
			if err := <-ch; err != nil {
				t.Errorf("write %d: %v", i+1, err)
			}
		}
	})
}

// TestBatchFailedWhileFillingGivesTheSyncerBack: a batch that fails while
// Store.fill holds it open (a write in it meets a storage error) hands the
// syncer's token back, so that the writes after it are still made durable
// and acknowledged, not blocked for good.
func TestBatchFailedWhileFillingGivesTheSyncerBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := fileFixture(t)
		ctx := context.Background()
		entered := make(chan struct{}, 16)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		s.wal.fdatasync = func(fd int) error {
			entered <- struct{}{}
			<-release
			return unix.Fdatasync(fd)
		}
		lasts := fsyncClock(s)
		submit := func() chan error {
			ch := make(chan error, 1)
			go func() { _, _, err := s.CreateWorkload(ctx, workload(100), nil, t0); ch <- err }()
			synctest.Wait()
			return ch
		}
		first := submit()
		<-entered // the first write's batch, alone
		three := []chan error{submit(), submit(), submit()}
		release <- struct{}{}
		<-entered // the three, as one batch: the next batch smaller waits
		lasts(100 * time.Microsecond)
		small := submit()
		release <- struct{}{}
		synctest.Wait() // the small batch is held open by fill
		failing := make(chan error, 1)
		go func() {
			failing <- s.do(ctx, func(*wtx) error {
				return &diskError{kind: core.ErrUnavailable, err: errors.New("injected"), what: "a test's failure"}
			})
		}()
		synctest.Wait()
		if err := <-failing; !isStorage(err) {
			t.Fatalf("the failing write: %v, want its storage error", err)
		}
		if err := <-small; err == nil {
			t.Error("the write in the failed batch was acknowledged")
		}
		after := submit()
		<-entered // the syncer has its token back: the next batch is made durable
		release <- struct{}{}
		for i, ch := range append([]chan error{first, after}, three...) {
			if err := <-ch; err != nil {
				t.Errorf("write %d: %v", i+1, err)
			}
		}
	})
}

// fsyncClock gives s's syncer a clock of the test's: lasts(d), called
// while an fsync is held, makes the syncer measure that fsync as taking d
// (walSync.took), while the bubble's own clock, which the writer's timers
// run on, stands still.
func fsyncClock(s *Store) (lasts func(time.Duration)) {
	var ahead atomic.Int64
	s.wal.now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	return func(d time.Duration) { ahead.Add(int64(d)) }
}
