package store

import (
	"fmt"
	"os"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"golang.org/x/sys/unix"
)

// walSync makes the WAL durable apart from the COMMIT (pipelined group
// commit). The write connection runs with synchronous=NORMAL, under which
// SQLite's COMMIT writes its frames into the WAL without an fsync (it still
// syncs the WAL before each checkpoint, the database after it, and the WAL's
// header when the WAL starts over, https://sqlite.org/pragma.html#pragma_synchronous).
// The writer hands each committed batch to the syncer goroutine, which runs
// fdatasync on the WAL file and then acknowledges the batch's writes;
// meanwhile the writer runs the writes that arrive in its next transaction,
// and commits it once the syncer is free (Store.pipeline; a batch smaller
// than the last waits a little longer, Store.fill): one COMMIT for each
// fsync, holding everything that arrived during the last one. A
// batch is acknowledged only once an fsync that started after its COMMIT
// returned has returned: the same guarantee as synchronous=FULL, whose
// fsync runs inside the COMMIT and holds the only writer for its whole
// length.
//
// What changes is when a commit is seen: readers (the read pool, the view)
// see a batch from its COMMIT, up to one fsync before its writes are
// acknowledged, as InnoDB makes a transaction visible before its redo log is
// flushed. A crash of the process (kill -9) loses nothing the operating
// system was given; only a power failure could take back a commit that a
// reader saw, and never one that was acknowledged. Every write acknowledged
// after another read its effect was in a batch synced no later than its own.
type walSync struct {
	path string
	f    *os.File
	// batches carries the committed batches to the syncer, each after
	// the writer took the syncer's token from idle, which the syncer puts
	// there each time it is ready for the next: at most one batch is in
	// fsync while the writer fills the next.
	batches chan *batch
	idle    chan struct{}
	// fdatasync is unix.Fdatasync; tests replace it to hold or fail the
	// fsync. now is time.Now, what took is measured with; tests replace
	// it to give an fsync the length they want.
	fdatasync func(fd int) error
	now       func() time.Time
	// last is how many writes the batch last handed to the syncer held
	// (the writer's), and took how long the syncer's last fsync took
	// (written before it hands its token back): what Store.fill waits
	// for, and how long at most.
	last int
	took time.Duration
}

// openWALSync opens the WAL file of the database at path for fdatasync. The
// store's first writes (migrate) have made it.
func openWALSync(path string) (*walSync, error) {
	f, err := os.OpenFile(path+"-wal", os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the WAL to sync it: %w", err)
	}
	return &walSync{path: path + "-wal", f: f, batches: make(chan *batch), idle: make(chan struct{}, 1), fdatasync: unix.Fdatasync, now: time.Now}, nil
}

// sync makes durable everything written into the WAL so far: fdatasync
// flushes the file, whichever descriptor wrote it. A WAL removed while the
// store has it open fails the sync: SQLite, which removes it only when its
// last connection closes, and the writer's stays open, may still be writing
// into the removed file, which no recovery would read.
func (w *walSync) sync() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(w.f.Fd()), &st); err != nil {
		return err
	}
	if st.Nlink == 0 {
		return fmt.Errorf("%s was removed while the store had it open", w.path)
	}
	start := w.now()
	defer func() { w.took = w.now().Sub(start) }()
	for {
		err := w.fdatasync(int(w.f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// stopWrites fails batch b, whose fsync failed (or came after one that
// did), and every write after it, until the server restarts (as PostgreSQL stops on a failed fsync): the
// batch is committed and seen but not known to be on disk, and Linux
// reports a failed writeback once and may drop the pages, so the frames
// might never reach the disk even if a later fsync succeeds; since the WAL's
// checksums chain its frames, recovery would then also drop every later
// commit. Nothing after it may be acknowledged (an idempotent replay of the
// failed submit included). Writable reports the failure from then on; a
// restart recovers the WAL from the file.
func (s *Store) stopWrites(b *batch, err error) {
	if !isStorage(err) {
		err = fmt.Errorf("fsync the WAL (writes are refused until the server restarts): %w", err)
		if de := storageError(err); isStorage(de) {
			err = de
		} else {
			err = &diskError{kind: core.ErrUnavailable, err: err, what: "fsync failed"}
		}
	}
	s.healthMu.Lock()
	if s.syncErr == nil {
		s.syncErr = err
	}
	s.healthMu.Unlock()
	for i := range b.errs {
		b.errs[i] = err
	}
}

// syncer acknowledges each batch the writer committed once an fsync has
// made it durable. It stops when the writer closes batches, after the last
// one.
func (s *Store) syncer() {
	defer s.wg.Done()
	for {
		s.wal.idle <- struct{}{} // ready for the next batch (see walSync)
		b, ok := <-s.wal.batches
		if !ok {
			return
		}
		if err := s.brokenSync(); err != nil {
			// Committed while an earlier batch's fsync failed: it may
			// not survive that batch's loss (stopWrites).
			s.stopWrites(b, err)
		} else if err := s.wal.sync(); err != nil {
			s.stopWrites(b, err)
		} else if b.wrote {
			s.noteWrite(nil, b.seq)
		}
		b.acknowledge()
	}
}
