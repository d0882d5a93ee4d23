package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// Store is gpufleet's authoritative state, in one SQLite file or in a
// PostgreSQL database that several servers share.
type Store struct {
	write  *sql.DB // one connection, used only by the writer goroutine
	read   *sql.DB // a pool of read-only connections
	ops    chan *op
	notify chan struct{}
	done   chan struct{}
	closed sync.Once
	wg     sync.WaitGroup

	// mu guards active: the Pending and Running workloads, as committed,
	// kept in memory so that a scheduling cycle reads them without decoding
	// rows. The writer updates it after each commit, and on SQLite the
	// cycle's explanations too (explain); its values are never modified in
	// place.
	mu     sync.RWMutex
	active map[core.WorkloadID]*core.Workload
	// order holds the values of active sorted by Seq, kept so by the
	// writer (and explain), so that Snapshot copies the queue instead of
	// sorting it.
	order  []*core.Workload
	shares []core.TeamShare
	// committing holds, on SQLite, the workloads the writer's batch
	// changes, from just before its COMMIT until the view has them:
	// their rows may be newer than the view, so Workload reads them.
	committing map[core.WorkloadID]bool
	// explained holds, on SQLite, the explanation events of pending
	// workloads not stored yet (explain.go).
	explained map[core.WorkloadID][]core.Event

	tokMu  sync.Mutex
	tokens map[string]cachedUser // token hash → user, see UserByTokenHash
	// accessChanged is closed by the next forgetTokens (AccessChanged);
	// nil until someone waits. Under tokMu.
	accessChanged chan struct{}

	newID func() core.WorkloadID

	maxPendingTeam, maxPendingUser int
	// pendingTeam and pendingOwner count the committed Pending workloads
	// by team and by submitter, under mu, for the pending bounds;
	// pendingAll counts them all (PendingCount).
	pendingTeam  map[core.TeamName]int
	pendingOwner map[string]int
	pendingAll   int

	// nodes and teams hold the decoded nodes (with their status) and
	// teams when Options.Cache is set; the writer forgets them for every
	// batch that writes one (see cache).
	nodes cache[core.Node]
	teams cache[core.Team]

	// healthMu guards writeErr, the storage error of the last commit when
	// it failed for one (nil once a commit writes), and probedAt, when
	// Writable last tried a write of its own.
	healthMu sync.Mutex
	writeErr error
	probedAt time.Time
	// notedSeq is the batch whose outcome writeErr is (noteWrite);
	// syncErr, the failed fsync that stopped every write (durable.go).
	notedSeq int64
	syncErr  error
	// batchSeq counts the writer's transactions (batch.seq).
	batchSeq int64

	// stmts holds the writer's statements, prepared once on the write
	// connection, by query text; toPrepare the queries a transaction ran
	// that are not prepared yet. Only the writer goroutine uses them.
	stmts     map[string]*sql.Stmt
	toPrepare []string

	// readStmts holds the one-row reads of readRow, prepared on the read
	// pool, by query text.
	readMu    sync.Mutex
	readStmts map[string]*sql.Stmt

	// pg is the configuration of a PostgreSQL store (nil: SQLite), where
	// its redacted address for messages. Its view of the active workloads
	// follows the commits of every server by rev (syncView): rev is the
	// last applied, under syncMu and mu.
	pg     *pgx.ConnConfig
	where  string
	syncMu sync.Mutex
	rev    int64

	// fenced counts the fenced writes refused (FencedWrites).
	fenced atomic.Int64

	// wal, on a durable SQLite store, syncs the WAL apart from the
	// COMMIT (durable.go); nil on PostgreSQL and with NoSync.
	wal *walSync
	// pgSync, on PostgreSQL, takes the writer's batches to the syncer that
	// acknowledges them once flushed (pgsync.go).
	pgSync *pgSync
	// commits counts the writer's commits on PostgreSQL (batch.commit).
	commits atomic.Int64
	// writerPID is the backend of the writer's connection on PostgreSQL,
	// set at each BEGIN, before any of the transaction's notifications,
	// and 0 once a BEGIN or COMMIT has failed (the connection may be
	// replaced): the listener knows the notifications of the store's own
	// commits by it (listen).
	writerPID atomic.Uint32
	// reads counts syncView's queries on PostgreSQL.
	reads atomic.Int64
}

// Options changes how a store is opened. The zero value is what the server
// uses: durable writes and workload IDs from NewWorkloadID.
type Options struct {
	// NoSync turns off fsync (PRAGMA synchronous=OFF): a write is
	// acknowledged once it is in the operating system's cache, and may be
	// lost by a crash. Only for throwaway stores, such as a simulation's.
	NoSync bool
	// NewID, when set, makes the workload IDs instead of NewWorkloadID, so
	// that a simulation can give reproducible IDs. It should not repeat an
	// ID (one already taken is drawn again, three times at most, and then
	// the write fails), and must be safe for concurrent use: CreateWorkload
	// calls it on the caller's goroutine.
	NewID func() core.WorkloadID
	// MaxPendingPerTeam and MaxPendingPerUser bound the pending workloads
	// of one team and of one submitter (0: no bound). A submission beyond
	// either fails with core.ErrLimit and changes nothing.
	MaxPendingPerTeam, MaxPendingPerUser int
	// Cache keeps the decoded nodes and teams in memory between the
	// writes that change them, so that Snapshot decodes no node rows (with
	// a thousand nodes that is most of a cycle's cost) and a submit reads
	// its team from memory. The simulator sets it, and a server on SQLite
	// (never on a store other servers write too).
	Cache bool
}

// wtx is a write transaction. It records the workloads each write changes so
// that the in-memory view of active workloads follows the commit.
type wtx struct {
	*sql.Tx
	s       *Store
	changed []*core.Workload
	// latest indexes changed by ID (the place of each ID's last change),
	// for the first indexed entries: built as lookups need it (last), so
	// that a write of thousands (CancelArray) does not scan changed once
	// for each of them.
	latest  map[core.WorkloadID]int
	indexed int
	// kept: the values of changed that no one outside the writer holds,
	// which the view takes as they are instead of a copy (keep).
	kept map[*core.Workload]bool
	// explained: the explanation events kept in memory that this
	// transaction stored (withExplained), in order, and by workload in
	// explainedBy; forgotten by the view once it commits. explains: the
	// pending workloads whose explanation it wrote (setPendingReason),
	// which the view takes from it (carryExplanation).
	explained   []core.Event
	explainedBy map[core.WorkloadID][]core.Event
	explains    []core.WorkloadID
	stmts       map[string]*sql.Stmt // this transaction's handles on s.stmts
	// nodes, teams: a write of the batch changed a node (or its status),
	// a team, so the decoded ones kept (Options.Cache) are forgotten by
	// the writer, before the commit and again after it, before anyone is
	// told.
	nodes, teams bool
	// The rows of deferred writes not written yet (pgdefer.go,
	// sqlitedefer.go); op, the place in the batch of the write running;
	// deferOK, whether it may defer its rows; deferredOp, whether it did.
	rows                deferred
	op                  int
	deferOK, deferredOp bool
}

// maxStmts bounds how many distinct queries the writer keeps prepared:
// queries built with a variable number of placeholders are run unprepared
// once the bound is reached.
const maxStmts = 256

// stmt returns query prepared for this transaction, or nil when it is not
// prepared yet: it is then prepared after the transaction ends, on the idle
// write connection (preparing on the DB while the transaction holds the
// only connection would wait for ever). Tx.Stmt reuses the statement
// prepared on the connection, so no query is parsed twice.
func (tx *wtx) stmt(query string) *sql.Stmt {
	if st := tx.stmts[query]; st != nil {
		return st
	}
	parent := tx.s.stmts[query]
	if parent == nil {
		if len(tx.s.stmts)+len(tx.s.toPrepare) < maxStmts && !slices.Contains(tx.s.toPrepare, query) {
			tx.s.toPrepare = append(tx.s.toPrepare, query)
		}
		return nil
	}
	st := tx.Tx.Stmt(parent)
	if tx.stmts == nil {
		tx.stmts = map[string]*sql.Stmt{}
	}
	tx.stmts[query] = st
	return st
}

// keep records w as changed, as changed does, for a value of the writer's
// own that no caller is given: the view keeps w itself once committed, and
// nothing may change it after.
func (tx *wtx) keep(w *core.Workload) {
	if tx.kept == nil {
		tx.kept = map[*core.Workload]bool{}
	}
	tx.kept[w] = true
	tx.changed = append(tx.changed, w)
}

// handedOut reports whether w, a value known returned, is one a write of
// this transaction changed and did not keep: its caller may hold it. (Of
// known's values, only its last change of an ID is in changed.)
func (tx *wtx) handedOut(w *core.Workload) bool {
	return tx.last(w.ID) == w && !tx.kept[w]
}

// linearLast is how many changes last scans before it indexes them.
const linearLast = 16

// last returns the last change this transaction recorded of workload id,
// or nil.
func (tx *wtx) last(id core.WorkloadID) *core.Workload {
	if len(tx.changed) <= linearLast {
		for i := len(tx.changed) - 1; i >= 0; i-- {
			if tx.changed[i].ID == id {
				return tx.changed[i]
			}
		}
		return nil
	}
	if tx.latest == nil {
		tx.latest = make(map[core.WorkloadID]int, len(tx.changed))
	}
	for ; tx.indexed < len(tx.changed); tx.indexed++ {
		tx.latest[tx.changed[tx.indexed].ID] = tx.indexed
	}
	if i, ok := tx.latest[id]; ok {
		return tx.changed[i]
	}
	return nil
}

// truncateChanged takes back the changes recorded after the first n (a
// savepoint's rollback): the index, if it covers any of them, is built
// again, as an ID's last change may now be an earlier one.
func (tx *wtx) truncateChanged(n int) {
	tx.changed = tx.changed[:n]
	if tx.indexed > n {
		clear(tx.latest)
		tx.indexed = 0
	}
}

// Exec, Query and QueryRow are those of sql.Tx, through the prepared
// statement of query when there is one.
func (tx *wtx) Exec(query string, args ...any) (sql.Result, error) {
	if st := tx.stmt(query); st != nil {
		return st.Exec(args...)
	}
	return tx.Tx.Exec(query, args...)
}

func (tx *wtx) Query(query string, args ...any) (*sql.Rows, error) {
	if st := tx.stmt(query); st != nil {
		return st.Query(args...)
	}
	return tx.Tx.Query(query, args...)
}

func (tx *wtx) QueryRow(query string, args ...any) *sql.Row {
	if st := tx.stmt(query); st != nil {
		return st.QueryRow(args...)
	}
	return tx.Tx.QueryRow(query, args...)
}

// insert runs an INSERT of one row and returns the key (column col) the
// database gave it: by LastInsertId on SQLite, where RETURNING costs a
// result set, and by RETURNING on PostgreSQL, which has no LastInsertId.
func (tx *wtx) insert(query, col string, args ...any) (int64, error) {
	if tx.s.pg != nil {
		var id int64
		err := tx.QueryRow(query+" RETURNING "+col, args...).Scan(&id)
		return id, err
	}
	res, err := tx.Exec(query, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// prepare prepares the queries the last transaction ran unprepared, while
// the write connection is idle. A query that cannot be prepared stays
// unprepared (it will fail, or not, when run).
func (s *Store) prepare() {
	for _, q := range s.toPrepare {
		if st, err := s.write.Prepare(q); err == nil {
			s.stmts[q] = st
		}
	}
	s.toPrepare = s.toPrepare[:0]
}

// savepoint runs fn under a named savepoint: on error the database changes
// and the recorded workload changes of fn are rolled back together. An error
// of fn that says the disk is full or failing (see storageError) is returned
// as err, not fnErr: SQLite may have rolled the whole transaction back, so
// the transaction, not only fn, has failed.
func (tx *wtx) savepoint(name string, fn func() error) (fnErr error, err error) {
	if _, err := tx.Exec("SAVEPOINT " + name); err != nil {
		return nil, err
	}
	n, ne, nx := len(tx.changed), len(tx.explained), len(tx.explains)
	if fnErr = fn(); fnErr != nil {
		if de := storageError(fnErr); isStorage(de) {
			return nil, de
		}
		tx.truncateChanged(n)
		tx.explains = tx.explains[:nx]
		tx.dropExplainedAfter(ne)
		if _, err := tx.Exec("ROLLBACK TO " + name); err != nil {
			return fnErr, err
		}
	}
	if _, err := tx.Exec("RELEASE " + name); err != nil {
		return fnErr, err
	}
	return fnErr, nil
}

// bare runs fn as savepoint does, with no savepoint: for a write whose fn
// fails, if at all, before its first change or with a storage error (which
// fails the whole batch). On SQLite a statement that fails takes back only
// itself, so such a write leaves nothing behind when it fails. A failure
// that is not one of the write's own refusals (not found, a bound, a
// conflict, bad input), or that comes after it changed a workload, fails
// the batch instead: the write may have left a change behind, or SQLite
// may have rolled the whole transaction back (out of memory, say), and
// without a savepoint nothing would notice.
func (tx *wtx) bare(fn func() error) (fnErr error, err error) {
	n := len(tx.changed)
	if fnErr = fn(); fnErr == nil {
		return nil, nil
	}
	if de := storageError(fnErr); isStorage(de) {
		return nil, de
	}
	if len(tx.changed) > n || !isRefusal(fnErr) {
		return nil, fmt.Errorf("a write with no savepoint failed: %w", fnErr)
	}
	return fnErr, nil
}

// isRefusal reports whether err is a write's refusal of its own request.
func isRefusal(err error) bool {
	for _, kind := range []error{core.ErrNotFound, core.ErrLimit, core.ErrConflict, core.ErrInvalid, core.ErrIdempotency, core.ErrForbidden} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// op is one write: fn runs inside the batch's transaction, under its own
// savepoint (unless bare), and err is delivered once the batch is on disk.
type op struct {
	fn    func(tx *wtx) error
	err   chan error
	fence Fence // the leadership it is made under (WithFence), or nil
	// quiet: a write nobody needs to hear of (a server's heartbeat): it
	// does not signal Changed.
	quiet bool
	// bare: fn fails, if at all, before it changes anything or with a
	// storage error (doBare); on SQLite it runs with no savepoint. On
	// PostgreSQL a failed statement aborts the whole transaction, so
	// every write keeps its savepoint there, but a deferred one.
	bare bool
	// deferred: fn may defer its rows (opDeferred, pgdefer.go,
	// sqlitedefer.go); it runs no statement that can fail but for a storage
	// error, and so needs no savepoint.
	deferred bool
}

// opKind is how a write runs in its batch: under its own savepoint; bare,
// with none on SQLite (op.bare); or deferred, its rows written with the
// batch's other deferred rows (and bare on SQLite).
type opKind uint8

const (
	opSavepoint opKind = iota
	opBare
	opDeferred
)

// MaxBatch bounds how many writes share one transaction (and one fsync).
const MaxBatch = 256

// Open opens (creating if needed) the store at path. It fails with a clear
// message when the file exists but is not a readable gpufleet store.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith is Open with options. A target that is a PostgreSQL URL
// (postgres:// or postgresql://) opens a PostgreSQL store instead (see
// postgres.go); anything else is the path of a SQLite file.
func OpenWith(ctx context.Context, path string, opts Options) (*Store, error) {
	if IsPostgres(path) {
		return openPostgres(ctx, path, opts)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("store %s: is a directory, not a database file", path)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	dsn := func(extra string) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		if opts.NoSync {
			q.Add("_pragma", "synchronous(OFF)")
		} else {
			q.Add("_pragma", "synchronous(FULL)")
		}
		q.Add("_pragma", "foreign_keys(1)")
		if extra != "" {
			q.Add("_pragma", extra)
		}
		return "file:" + path + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn(""))
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	s := newStore(w, opts)
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("store %s cannot be used (is it a gpufleet store, and readable?): %w", path, err)
	}
	if !opts.NoSync {
		// The writer's COMMIT leaves the fsync to the syncer (durable.go).
		// A write connection database/sql opened again would have the
		// DSN's synchronous=FULL: slower, as durable.
		if _, err := w.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
			w.Close()
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		if s.wal, err = openWALSync(path); err != nil {
			w.Close()
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	r, err := sql.Open("sqlite", dsn("query_only(1)"))
	if err != nil {
		w.Close()
		if s.wal != nil {
			s.wal.f.Close()
		}
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	s.read = r
	if err := s.loadActive(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store %s: load active workloads: %w", path, err)
	}
	s.wg.Add(1)
	go s.writer()
	if s.wal != nil {
		s.wg.Add(1)
		go s.syncer()
	}
	return s, nil
}

// newStore is a store writing through w, not started.
func newStore(w *sql.DB, opts Options) *Store {
	if opts.NewID == nil {
		opts.NewID = NewWorkloadID
	}
	return &Store{newID: opts.NewID, maxPendingTeam: opts.MaxPendingPerTeam, maxPendingUser: opts.MaxPendingPerUser,
		committing: map[core.WorkloadID]bool{}, explained: map[core.WorkloadID][]core.Event{}, tokens: map[string]cachedUser{}, stmts: map[string]*sql.Stmt{}, readStmts: map[string]*sql.Stmt{}, write: w,
		ops: make(chan *op, 4*MaxBatch), notify: make(chan struct{}, 1), done: make(chan struct{}),
		nodes: cache[core.Node]{on: opts.Cache}, teams: cache[core.Team]{on: opts.Cache}}
}

// loadActive fills the view of active workloads from the database.
func (s *Store) loadActive(ctx context.Context) error {
	active, err := s.queryWorkloads(ctx, s.read, WorkloadFilter{Phases: []core.Phase{core.Pending, core.Running}})
	if err != nil {
		return err
	}
	s.active = make(map[core.WorkloadID]*core.Workload, len(active))
	s.pendingTeam, s.pendingOwner, s.pendingAll = map[core.TeamName]int{}, map[string]int{}, 0
	for _, w := range active {
		s.active[w.ID] = w
		s.countPending(w, +1)
	}
	s.order = active // ORDER BY seq
	if s.pg == nil {
		return s.loadExplanations(ctx)
	}
	return nil
}

// privateFiles makes the store's files (path, -wal, -shm) 0600, whatever the
// umask: they hold every token's hash. SQLite gives the -wal and -shm files
// it creates the mode of the database file, so a new store's file is made
// here first; files an earlier start left looser are tightened.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Close stops the writer after the writes already queued and closes the file.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		// The explanation events kept in memory, in one last write: a
		// clean stop loses none (explain.go). Failing, it fails alone.
		_ = s.storeAllExplained(context.Background())
		close(s.done)
		s.wg.Wait()
		for _, st := range s.stmts {
			st.Close()
		}
		for _, st := range s.readStmts {
			st.Close()
		}
		err = errors.Join(s.read.Close(), s.write.Close())
		if s.wal != nil {
			err = errors.Join(err, s.wal.f.Close())
		}
	})
	return err
}

// readRow runs a one-row read of constant text on the read pool through a
// statement prepared once (and then on each read connection as it is
// used), so that reads on every request, such as Team on each submit, are
// not parsed again. It answers what QueryRowContext would.
func (s *Store) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	s.readMu.Lock()
	st := s.readStmts[query]
	s.readMu.Unlock()
	if st == nil {
		var err error
		if st, err = s.read.PrepareContext(ctx, query); err != nil {
			return s.read.QueryRowContext(ctx, query, args...)
		}
		s.readMu.Lock()
		if prev := s.readStmts[query]; prev != nil {
			st.Close()
			st = prev
		} else {
			s.readStmts[query] = st
		}
		s.readMu.Unlock()
	}
	return st.QueryRowContext(ctx, args...)
}

// Changed is signalled (without blocking, coalesced) after every commit that
// changed something. The control loop waits on it.
func (s *Store) Changed() <-chan struct{} { return s.notify }

// do queues fn as one write and waits until it is durable or failed.
func (s *Store) do(ctx context.Context, fn func(tx *wtx) error) error {
	return s.queue(ctx, fn, opSavepoint)
}

// doBare is do for a write whose fn fails, if at all, before its first
// change or with a storage error: it needs no savepoint of its own (see
// op.bare), whose two statements and journalled pages a submit then does
// not pay.
func (s *Store) doBare(ctx context.Context, fn func(tx *wtx) error) error {
	return s.queue(ctx, fn, opBare)
}

func (s *Store) queue(ctx context.Context, fn func(tx *wtx) error, kind opKind) error {
	a := auditOf(ctx)
	audited := false // the entry is in this write, to be committed with it
	if a != nil && !a.written {
		// The request's audit entry goes into the transaction of the
		// change it describes: no change is ever without its entry.
		inner := fn
		fn = func(tx *wtx) error {
			if err := inner(tx); err != nil {
				return err
			}
			if err := insertAudit(tx, a.entry); err != nil {
				return err
			}
			audited = true
			return nil
		}
	}
	o := &op{fn: fn, err: make(chan error, 1), fence: fenceOf(ctx), quiet: ctx.Value(quietKey{}) != nil,
		bare: kind != opSavepoint && s.pg == nil, deferred: kind == opDeferred}
	select {
	case s.ops <- o:
	case <-s.done:
		return fmt.Errorf("store closed: %w", core.ErrUnavailable)
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the write will be carried out; wait for it even if ctx
	// ends, so that the caller never reports failure for a committed write.
	// The entry counts as written only once committed: a batch that failed
	// (a full disk) took it with it, and the failure is audited instead.
	err := <-o.err
	if err == nil && audited {
		a.written = true
	}
	return err
}

// writer is the only goroutine that writes. It gathers queued writes into one
// transaction (group commit), and on a durable SQLite store goes on running
// the writes that arrive in it until the syncer is free, and a little
// longer for a small batch (pipeline, fill); each
// runs under its own savepoint (or none, a bare one, which fails before it
// changes anything), so a failing write is rolled back alone, and all are
// acknowledged once the COMMIT has reached the disk: after the syncer's
// fsync on a durable SQLite store (durable.go), at once on PostgreSQL
// (whose COMMIT waits for its own flush) and with NoSync.
func (s *Store) writer() {
	defer s.wg.Done()
	if s.wal != nil {
		defer close(s.wal.batches) // after the last batch: the syncer stops
	}
	if s.pgSync != nil {
		defer close(s.pgSync.batches) // likewise (pgsync.go)
	}
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.done:
			// Drain what is queued, then stop.
			for {
				select {
				case o := <-s.ops:
					s.commit(s.gather([]*op{o}))
				default:
					return
				}
			}
		}
		if s.wal != nil {
			s.pipeline(first)
		} else {
			s.commit(s.gather([]*op{first}))
		}
		s.prepare()
	}
}

// gather adds to batch what is queued; then yields once and takes what the
// writers that were about to queue have added, so that writes arriving
// together share a transaction rather than each paying its own commit (and
// its own pages in the WAL).
func (s *Store) gather(batch []*op) []*op {
	for yielded := false; len(batch) < MaxBatch; {
		select {
		case o := <-s.ops:
			batch = append(batch, o)
			continue
		default:
		}
		if yielded {
			break
		}
		runtime.Gosched()
		yielded = true
	}
	return batch
}

// pipeline is the writer's round on a durable SQLite store: it opens a
// transaction with first and the writes gathered with it, and then, while
// the syncer is still making the previous batch durable, runs in it each
// write that arrives (which would wait for that fsync anyway), and commits
// once the syncer is free (or the batch full), after fill: one COMMIT for
// each fsync, holding everything that arrived while the last one ran.
func (s *Store) pipeline(first *op) {
	b := s.begin(s.gather([]*op{first}))
	if b == nil {
		return
	}
	for b.live() && len(b.ops) < MaxBatch {
		select {
		case <-s.wal.idle:
			if s.fill(b); !b.live() {
				s.wal.idle <- struct{}{} // no batch for the syncer: its token back
				return
			}
			s.end(b, true)
			return
		case o := <-s.ops:
			// The lease a fenced write is checked against is read
			// again for a write that arrives into the open batch:
			// an fsync may have passed since it was read.
			b.lease = nil
			b.run(o)
		}
	}
	if b.live() {
		s.end(b, false)
	}
}

// maxFill bounds how long fill keeps a batch open after the syncer is free.
const maxFill = time.Millisecond

// fill is group commit's wait: once the syncer is free, a batch holding
// fewer writes than the one it last made durable runs the writes that
// arrive, until it holds as many, for at most as long as that fsync took
// (and maxFill). Every fsync costs the same CPU however many writes it
// makes durable, and so do the batch's BEGIN, COMMIT and the WAL pages its
// tables and indexes share; under concurrent writes, committing as soon as
// the syncer is free made a small batch of whatever had arrived during a
// quick fsync, and the writers acknowledged with the last batch, on their
// way back, paid for another. A writer alone waits only when the last
// batch held more (once, after a burst: its own batch of one is then the
// last), and no write waits more than one fsync's time longer (nor more
// than maxFill). What is acknowledged, and when relative to its fsync, is
// as before: each batch only once an fsync after its COMMIT has returned.
func (s *Store) fill(b *batch) {
	want, wait := min(s.wal.last, MaxBatch), min(s.wal.took, maxFill)
	if len(b.ops) >= want || wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for b.live() && len(b.ops) < want {
		select {
		case o := <-s.ops:
			b.lease = nil // read again, as in pipeline
			b.run(o)
		case <-t.C:
			return
		}
	}
}

// batch is the writer's open transaction and the writes run in it.
type batch struct {
	s    *Store
	tx   *wtx
	ops  []*op
	errs []error // each write's own outcome
	// wrote: some write of the batch took effect (the store writes);
	// changed: one that others should hear of (not a heartbeat).
	wrote, changed bool
	lease          *leaseRow // read once, by the first fenced write
	pw             *pgWrite  // on PostgreSQL, what BEGIN and COMMIT carry
	commit         int64     // on PostgreSQL, its place in Store.commits
	err            error     // set by abort: every write fails with it
	seq            int64     // its place in the writer's order (noteWrite)
}

// commit runs ops in one transaction and commits it. When the transaction
// cannot be committed, or a write in it failed because the disk is full or
// failing, every write of the batch fails with that error and none is
// acknowledged: after SQLITE_FULL or an I/O error SQLite may already have
// rolled the whole transaction back (https://sqlite.org/lang_transaction.html),
// so the others cannot be trusted to commit. The transaction is then rolled
// back explicitly, so that the connection is never left inside it and the
// next batch starts clean once space returns.
func (s *Store) commit(ops []*op) {
	if b := s.begin(ops); b != nil && b.live() {
		s.end(b, false)
	}
}

// begin opens a transaction and runs ops in it; nil when it could not be
// opened (every op has failed).
func (s *Store) begin(ops []*op) *batch {
	ctx := context.Background()
	s.batchSeq++
	b := &batch{s: s, seq: s.batchSeq}
	fail := func(err error) *batch {
		b.ops = ops // none has run
		b.abort(err)
		return nil
	}
	if err := s.brokenSync(); err != nil {
		return fail(err) // stopped for good (durable.go)
	}
	if s.pg != nil {
		// One writer at a time over every server (see writeLock),
		// taken with the BEGIN (pgtx.go).
		b.pw = &pgWrite{async: true}
		ctx = context.WithValue(ctx, pgWriteKey{}, b.pw)
	}
	sqltx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		s.writerPID.Store(0)
		s.rollback()
		return fail(fmt.Errorf("begin: %w", err))
	}
	if b.pw != nil {
		s.writerPID.Store(b.pw.pid)
	}
	b.tx = &wtx{Tx: sqltx, s: s}
	if s.pg != nil {
		// Under the lock no other server commits: the view, brought up
		// to the last commit, is exact for the checks the batch makes
		// with it (the pending bounds). It is already when no rev was
		// drawn since the last it applied.
		if err := s.syncTo(ctx, b.pw.rev); err != nil {
			b.tx.Rollback()
			return fail(fmt.Errorf("read the other servers' writes: %w", err))
		}
	}
	for _, o := range ops {
		b.run(o)
	}
	return b
}

// live reports whether the batch can take more writes: no write in it has
// failed it.
func (b *batch) live() bool { return b.err == nil }

// run runs o in the batch's transaction. A storage error fails the whole
// batch (abort), o with it.
func (b *batch) run(o *op) {
	if b.err != nil {
		o.err <- b.err
		return
	}
	tx := b.tx
	if !o.deferred {
		// The deferred rows first: statements run in the writes' order.
		if err := tx.flush(b.errs); err != nil {
			b.ops = append(b.ops, o)
			b.fail(flushError(err))
			return
		}
	}
	b.ops = append(b.ops, o)
	b.errs = append(b.errs, nil)
	i := len(b.ops) - 1
	if o.fence != nil {
		if err := tx.checkFence(o.fence, &b.lease); err != nil {
			if de := storageError(err); isStorage(de) {
				b.fail(de)
				return
			}
			b.s.fenced.Add(1)
			b.errs[i] = err
			return
		}
	}
	var fnErr, err error
	if o.deferred {
		tx.op, tx.deferOK = i, true
		fnErr, err = tx.bare(func() error { return o.fn(tx) })
		tx.deferOK, tx.deferredOp = false, false
	} else if o.bare {
		fnErr, err = tx.bare(func() error { return o.fn(tx) })
	} else if fnErr, err = tx.savepoint("op", func() error { return o.fn(tx) }); err != nil && !isStorage(err) {
		err = fmt.Errorf("savepoint: %w", err)
	}
	if err != nil {
		b.fail(err)
		return
	}
	b.errs[i] = fnErr
	b.wrote = b.wrote || fnErr == nil
	b.changed = b.changed || (fnErr == nil && !o.quiet)
	if fnErr == nil && o.fence == nil {
		b.lease = nil // it may have changed the lease (Campaign)
	}
}

// fail rolls the batch's transaction back and fails every write of it with
// err (abort).
func (b *batch) fail(err error) {
	b.tx.Rollback()
	b.s.rollback()
	b.abort(err)
}

// abort fails every write of the batch with err (the transaction is
// already rolled back, or was never opened).
func (b *batch) abort(err error) {
	err = storageError(err)
	if isStorage(err) {
		b.s.noteWrite(err, b.seq)
	}
	b.err = err
	for _, o := range b.ops {
		o.err <- err
	}
}

// end commits the batch and brings the view up to it, then acknowledges
// its writes: on a durable SQLite store by handing it to the syncer (idle:
// the caller took the syncer's token, which a batch that fails gives back),
// otherwise at once.
func (s *Store) end(b *batch, idle bool) {
	tx := b.tx
	if idle {
		defer func() {
			if b.err != nil {
				s.wal.idle <- struct{}{} // no batch for the syncer: its token back
			}
		}()
	}
	// Readers that fill a cache from here to the COMMIT read the old
	// rows; the second forget, below, keeps them from storing them.
	s.forgetCached(tx)
	if err := tx.flush(b.errs); err != nil {
		b.fail(flushError(err))
		return
	}
	if s.pg != nil && (b.changed || len(tx.changed) > 0) {
		// Every server's loop hears of the change (a quota, a node, a
		// workload) at COMMIT, as this one's does through notify; the
		// payload names what the other servers keep (cache.go). Under
		// the write lock only this batch draws revs: the last one drawn
		// before the COMMIT is its last (pgTx.Commit reads it).
		payload := ""
		if tx.teams {
			payload = "teams"
		}
		b.pw.notify = &payload
	}
	if err := s.brokenSync(); err != nil {
		// An fsync failed while this batch was open: nothing after it
		// may commit (durable.go).
		b.fail(err)
		return
	}
	if s.pg == nil && len(tx.changed) > 0 {
		s.mu.Lock()
		for _, w := range tx.changed {
			s.committing[w.ID] = true
		}
		s.mu.Unlock()
	}
	if err := tx.Commit(); err != nil {
		// A COMMIT whose answer was lost may have committed: the
		// listener reads what the writer's backend sent from here on
		// (listen), and at the latest within a second.
		s.writerPID.Store(0)
		s.mu.Lock()
		clear(s.committing)
		s.mu.Unlock()
		s.rollback()
		b.abort(fmt.Errorf("commit: %w", err))
		return
	}
	s.forgetCached(tx)
	if s.pg != nil {
		// The view follows the database, in commit order, with the other
		// servers' writes; this batch is in it before it is acknowledged,
		// by the syncer once the database has flushed it (pgsync.go).
		b.commit = s.commits.Add(1)
		s.applyOwn(tx, b.pw.last)
		s.pgSync.batches <- b
		return
	}
	s.mu.Lock()
	clear(s.committing)
	s.forgetExplained(tx)
	s.applyChanges(tx)
	s.mu.Unlock()
	if s.wal != nil {
		// Acknowledged once the syncer's fsync has made it durable.
		if !idle {
			<-s.wal.idle // the syncer's token: it waits for this batch
		}
		s.wal.last = len(b.ops)
		s.wal.batches <- b
		return
	}
	if b.wrote {
		s.noteWrite(nil, b.seq)
	}
	b.acknowledge()
}

// applyChanges brings the view up to tx, committed: the workloads its
// writes changed, in their order. Callers hold mu.
func (s *Store) applyChanges(tx *wtx) {
	for _, w := range tx.changed {
		old := s.active[w.ID]
		if old != nil {
			s.countPending(old, -1)
		}
		if w.Status.Phase == core.Pending || w.Status.Phase == core.Running {
			c := w
			if !tx.kept[w] {
				c = w.Clone()
			}
			if s.pg == nil {
				carryExplanation(tx, old, c)
			}
			s.active[w.ID] = c
			s.countPending(c, +1)
			s.putOrder(c)
		} else if old != nil {
			delete(s.active, w.ID)
			s.dropOrder(old)
		}
	}
}

// applyOwn brings a PostgreSQL store's view up to tx, committed, whose last
// rev was rev, from the workloads its writes changed, which are their rows
// (no row is read back and decoded again): unless syncView has already
// read them (the listener, woken by the commit's notification, may be
// first), together with any other server's commits after it, which must
// not be overwritten by older values. Under the write lock no other server
// committed a workload between syncView's read at the batch's start and
// this commit, so the view is then at this batch's first rev, or at its
// last or beyond.
func (s *Store) applyOwn(tx *wtx, rev int64) {
	if len(tx.changed) == 0 {
		return
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.rev >= rev {
		return
	}
	s.mu.Lock()
	s.applyChanges(tx)
	s.rev = rev
	s.mu.Unlock()
}

// acknowledge delivers each write's outcome and tells whoever waits on
// Changed.
func (b *batch) acknowledge() {
	for i, o := range b.ops {
		o.err <- b.errs[i]
	}
	if b.changed {
		b.s.signal()
	}
}

// forgetCached forgets the decoded rows kept of the kinds tx wrote.
func (s *Store) forgetCached(tx *wtx) {
	if tx.nodes {
		s.nodes.forget()
	}
	if tx.teams {
		s.teams.forget()
	}
}

// signal wakes whoever waits on Changed, without blocking.
func (s *Store) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// putOrder puts w in order in the place of its Seq: replacing the workload
// it was, or inserting it (at the end, for a new submission). Callers hold
// mu.
func (s *Store) putOrder(w *core.Workload) {
	i, found := slices.BinarySearchFunc(s.order, w.Seq, bySeq)
	if found {
		s.order[i] = w
		return
	}
	s.order = slices.Insert(s.order, i, w)
}

// dropOrder takes w out of order. Callers hold mu.
func (s *Store) dropOrder(w *core.Workload) {
	if i, found := slices.BinarySearchFunc(s.order, w.Seq, bySeq); found {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

func bySeq(w *core.Workload, seq int64) int { return cmp.Compare(w.Seq, seq) }

// rollback ends whatever transaction a failed batch left open on the write
// connection. database/sql forgets a transaction whose COMMIT failed, but
// SQLite may still hold it open; without this the next BEGIN would fail
// ("cannot start a transaction within a transaction") for ever. When no
// transaction is open, SQLite answers an error that is of no interest.
func (s *Store) rollback() {
	if s.pg != nil {
		return // database/sql's Rollback ended it; pgx reports a broken connection as bad
	}
	s.write.ExecContext(context.Background(), "ROLLBACK")
}

// schemaVersion is the version this gpufleet writes; migrations[v] takes a
// store from version v to v+1 (migrations[0] creates it).
var schemaVersion = len(migrations)

var migrations = [][]string{
	schema,
	{
		// Gangs: a running workload may hold devices on several nodes.
		`CREATE TABLE workload_nodes (
			workload_id TEXT NOT NULL,
			node TEXT NOT NULL,
			PRIMARY KEY (node, workload_id)
		)`,
		`INSERT INTO workload_nodes (workload_id, node) SELECT id, node FROM workloads WHERE phase = 'Running' AND node IS NOT NULL`,
		`ALTER TABLE allocations ADD COLUMN replica INTEGER NOT NULL DEFAULT 0`,
	},
	{
		// Tenancy: tokens get a public ID and a name, for listing and
		// revoking; the audit trail.
		`ALTER TABLE tokens ADD COLUMN id TEXT`,
		`ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT ''`,
		`UPDATE tokens SET id = 'tok-' || substr(hash, 1, 10)`,
		`CREATE UNIQUE INDEX tokens_id ON tokens(id)`,
		`CREATE INDEX tokens_user ON tokens(user_name)`,
		`CREATE TABLE audit (
			id INTEGER PRIMARY KEY AUTOINCREMENT,
			time INTEGER NOT NULL,
			user_name TEXT NOT NULL,
			role TEXT NOT NULL,
			action TEXT NOT NULL,
			method TEXT NOT NULL,
			path TEXT NOT NULL,
			object TEXT NOT NULL,
			team TEXT NOT NULL,
			status INTEGER NOT NULL,
			message TEXT NOT NULL
		)`,
		`CREATE INDEX audit_time ON audit(time)`,
		`CREATE INDEX audit_user ON audit(user_name, id)`,
	},
	{
		// Cost: price versions per pool, team budgets, and how each
		// attempt's allocations ended.
		`CREATE TABLE prices (
			pool TEXT NOT NULL,
			effective_from INTEGER NOT NULL,
			created_at INTEGER NOT NULL,
			spec BLOB NOT NULL,
			PRIMARY KEY (pool, effective_from)
		)`,
		`CREATE TABLE budgets (
			team TEXT PRIMARY KEY REFERENCES teams(name),
			spec BLOB NOT NULL
		)`,
		`ALTER TABLE allocations ADD COLUMN outcome TEXT NOT NULL DEFAULT ''`,
		// The pool of the node when the interval began: a node moved to
		// another pool later does not re-price its past.
		`ALTER TABLE allocations ADD COLUMN pool TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX allocations_start ON allocations(start)`,
	},
	{
		// Node lifecycle: the platform's status of each node (apart from
		// what its executor reports), node events, qualification evidence.
		`CREATE TABLE node_status (
			name TEXT PRIMARY KEY,
			status BLOB NOT NULL
		)`,
		`CREATE TABLE node_events (
			id INTEGER PRIMARY KEY AUTOINCREMENT,
			node TEXT NOT NULL,
			time INTEGER NOT NULL,
			spec BLOB NOT NULL
		)`,
		`CREATE INDEX node_events_node ON node_events(node, id)`,
		`CREATE TABLE evidence (
			id INTEGER PRIMARY KEY AUTOINCREMENT,
			node TEXT NOT NULL,
			run TEXT NOT NULL,
			time INTEGER NOT NULL,
			spec BLOB NOT NULL
		)`,
		`CREATE INDEX evidence_node ON evidence(node, id)`,
	},
	{
		// Team secrets, sealed (internal/secrets): names and keys in
		// clear, values never.
		`CREATE TABLE secrets (
			team TEXT NOT NULL REFERENCES teams(name),
			name TEXT NOT NULL,
			keys TEXT NOT NULL,
			sealed BLOB NOT NULL,
			created_at INTEGER NOT NULL,
			PRIMARY KEY (team, name)
		)`,
	},
	{
		// Team volumes: their asked size (counted against the team's
		// storage limit, billed) and the last measure of their use.
		// A deleted volume keeps its row (deleted_at set) for the cost
		// ledger, which bills the time it existed.
		`CREATE TABLE volumes (
			id INTEGER PRIMARY KEY AUTOINCREMENT,
			team TEXT NOT NULL REFERENCES teams(name),
			name TEXT NOT NULL,
			size_bytes INTEGER NOT NULL,
			used_bytes INTEGER NOT NULL,
			created_at INTEGER NOT NULL,
			measured_at INTEGER NOT NULL,
			deleted_at INTEGER NOT NULL DEFAULT 0
		)`,
		`CREATE UNIQUE INDEX volumes_live ON volumes(team, name) WHERE deleted_at = 0`,
		// Volumes deleted whose data the executor has still to remove
		// (before a volume of the same name is made again).
		`CREATE TABLE volume_purges (
			team TEXT NOT NULL,
			name TEXT NOT NULL,
			at INTEGER NOT NULL,
			PRIMARY KEY (team, name)
		)`,
		// Acceptance cards' runs: the run as JSON, its team, status and
		// start in columns for listing.
		`CREATE TABLE acceptance_runs (
			id TEXT PRIMARY KEY,
			team TEXT NOT NULL REFERENCES teams(name),
			status TEXT NOT NULL,
			created_at INTEGER NOT NULL,
			spec BLOB NOT NULL
		)`,
		`CREATE INDEX acceptance_runs_team ON acceptance_runs(team, created_at)`,
	},
	{
		// Several servers: the leader lease and its fencing token, and
		// the servers that share the store (lease.go).
		leaseTable,
		serversTable,
	},
	{
		// Outputs as they are reported, each at its time (cost reports
		// count them in the window that holds it). What workloads had
		// reported before is recorded once, at their finish (now for
		// those still active).
		outputsTable,
		`CREATE INDEX outputs_at ON outputs(at)`,
		`CREATE INDEX outputs_workload ON outputs(workload_id)`,
		`INSERT INTO outputs (workload_id, team, at, unit, accepted, rejected)
			SELECT id, team,
				CAST(ROUND((julianday(COALESCE(json_extract(CAST(status AS TEXT), '$.finishedAt'), 'now')) - 2440587.5) * 86400000) AS INTEGER) * 1000000,
				COALESCE(json_extract(CAST(status AS TEXT), '$.outputs.unit'), ''),
				COALESCE(json_extract(CAST(status AS TEXT), '$.outputs.accepted'), 0),
				COALESCE(json_extract(CAST(status AS TEXT), '$.outputs.rejected'), 0)
			FROM workloads WHERE json_extract(CAST(status AS TEXT), '$.outputs') IS NOT NULL`,
	},
	{
		// Each attempt's end with what it used of its host (CPU time,
		// peak memory), beside what it requested.
		attemptsTable,
		attemptsIndex,
	},
	{
		// Allocations by length and start: a window's intervals are
		// read without the rows before and after it (cost.go,
		// AllocationsBetween).
		allocationsSpan,
	},
}

var tables = []string{"workloads", "events", "allocations", "nodes", "teams", "users", "tokens", "workload_nodes", "audit", "prices", "budgets", "node_status", "node_events", "evidence", "secrets", "volumes", "volume_purges", "acceptance_runs", "leader_lease", "servers", "outputs", "attempts"}

func (s *Store) migrate(ctx context.Context) error {
	var v int
	if err := s.write.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("store schema version %d is newer than this gpufleet (%d)", v, schemaVersion)
	}
	if v == 0 {
		var n int
		if err := s.write.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
			return err
		}
		if n != 0 {
			return errors.New("the file holds tables that are not a gpufleet store")
		}
	}
	if v < schemaVersion {
		tx, err := s.write.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for ; v < schemaVersion; v++ {
			for _, stmt := range migrations[v] {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("migrate schema from version %d: %w", v, err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	// Check that the tables are there: a file with user_version set by
	// something else is not ours.
	var n int
	err := s.write.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('"+strings.Join(tables, "','")+"')").Scan(&n)
	if err != nil {
		return err
	}
	if n != len(tables) {
		return fmt.Errorf("schema version %d but %d of %d tables", v, n, len(tables))
	}
	return nil
}

var schema = []string{
	`CREATE TABLE teams (
		name TEXT PRIMARY KEY,
		created_at INTEGER NOT NULL,
		spec BLOB NOT NULL
	)`,
	`CREATE TABLE users (
		name TEXT PRIMARY KEY,
		created_at INTEGER NOT NULL,
		spec BLOB NOT NULL
	)`,
	`CREATE TABLE tokens (
		hash TEXT PRIMARY KEY,
		user_name TEXT NOT NULL REFERENCES users(name),
		created_at INTEGER NOT NULL,
		expires_at INTEGER,
		revoked_at INTEGER
	)`,
	`CREATE TABLE nodes (
		name TEXT PRIMARY KEY,
		spec BLOB NOT NULL
	)`,
	`CREATE TABLE workloads (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		id TEXT NOT NULL UNIQUE,
		team TEXT NOT NULL REFERENCES teams(name),
		owner TEXT NOT NULL,
		phase TEXT NOT NULL,
		node TEXT,
		created_at INTEGER NOT NULL,
		idem_key TEXT,
		idem_hash TEXT,
		spec BLOB NOT NULL,
		status BLOB NOT NULL
	)`,
	`CREATE INDEX workloads_phase ON workloads(phase, seq)`,
	`CREATE INDEX workloads_team ON workloads(team, seq)`,
	`CREATE INDEX workloads_node ON workloads(node) WHERE node IS NOT NULL`,
	`CREATE UNIQUE INDEX workloads_idem ON workloads(owner, idem_key) WHERE idem_key IS NOT NULL`,
	`CREATE TABLE events (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		workload_id TEXT NOT NULL,
		time INTEGER NOT NULL,
		type TEXT NOT NULL,
		reason TEXT NOT NULL,
		message TEXT NOT NULL,
		from_phase TEXT NOT NULL,
		to_phase TEXT NOT NULL
	)`,
	`CREATE INDEX events_workload ON events(workload_id, id)`,
	`CREATE TABLE allocations (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		workload_id TEXT NOT NULL,
		team TEXT NOT NULL,
		attempt INTEGER NOT NULL,
		node TEXT NOT NULL,
		gpu_index INTEGER NOT NULL,
		gpu_uuid TEXT NOT NULL,
		milli_gpu INTEGER NOT NULL,
		memory_mib INTEGER NOT NULL,
		start INTEGER NOT NULL,
		end INTEGER
	)`,
	`CREATE INDEX allocations_workload ON allocations(workload_id)`,
	`CREATE INDEX allocations_open ON allocations(node, gpu_index) WHERE end IS NULL`,
}

func unixNano(t time.Time) int64 { return t.UTC().UnixNano() }

func fromNano(n int64) time.Time { return time.Unix(0, n).UTC() }

// countPending adds sign to w's team's and owner's pending counts when w is
// Pending. Callers hold mu.
func (s *Store) countPending(w *core.Workload, sign int) {
	if w.Status.Phase != core.Pending {
		return
	}
	s.pendingTeam[w.Team] += sign
	s.pendingOwner[w.Owner] += sign
	s.pendingAll += sign
}
