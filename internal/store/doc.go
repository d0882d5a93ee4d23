// Package store owns gpufleet's truth: teams, users and token hashes, nodes,
// workloads with their status, events (a workload's first, Submitted, is
// read from its row) and allocation intervals, in one SQLite
// file (modernc.org/sqlite, WAL, each commit fsynced before it is
// acknowledged) or, for several servers,
// one PostgreSQL database (below). OpenWith can turn fsync
// off and choose the workload IDs, for throwaway stores such as the
// simulator's.
//
// Every write goes through one writer goroutine that gathers the writes
// queued at that moment into one transaction, each under its own savepoint
// (but a submit, which fails, if at all, before its first change: on
// SQLite a failed statement takes back only itself; the rows of the
// batch's submits without an idempotency key are written together, one
// INSERT of many rows per table: sqlitedefer.go), and acknowledges
// them only after the COMMIT has reached the disk (group
// commit). A 2xx on submit therefore means the workload is on disk, and the
// cost of an fsync is shared by everything that arrived while the previous
// one was in flight; before it opens a transaction, the writer yields once
// to take the writes that were about to be queued, so that a burst shares
// one commit (and one copy of its pages in the WAL) instead of paying one
// each. On
// SQLite the fsync is pipelined (durable.go): the COMMIT writes the WAL
// (synchronous=NORMAL) and a second goroutine, the syncer, runs fdatasync
// on it and then acknowledges the batch, while the writer runs the writes
// that arrive in its next transaction and commits it once the syncer is
// free: one COMMIT for each fsync, each holding what arrived during the
// last fsync, at most one batch in fsync and one open. A batch that holds
// fewer writes than the one the syncer last made durable first waits for
// the writes on their way, until it holds as many or as long as that fsync
// took (at most a millisecond: Store.fill), so that under concurrent writes
// a quick fsync does not leave the next batch small.
//
// Workload IDs begin with the time they were made (NewWorkloadID), as
// UUIDv7 and ULID do, and end with 40 random bits: the IDs of a batch are
// neighbours in the ID index, whose last page takes them all, where random
// IDs would dirty one index page each (docs/PERFORMANCE.md measures it).
// Fully random IDs are valid too.
//
// Reads use a separate pool of read-only connections and see only committed
// data, which on SQLite includes a batch whose fsync is still running
// (never acknowledged before it returns: as InnoDB shows a transaction
// before its log flush).
//
// A full or failing disk fails writes, never acknowledges them: when the
// batch's COMMIT fails, or one of its writes fails with SQLITE_FULL, ENOSPC
// or an I/O error, every write of the batch fails, with an error of kind
// core.ErrNoSpace (full) or core.ErrUnavailable (I/O), and the transaction is
// rolled back. Reads go on; Writable reports the condition (for readiness)
// until a write succeeds, probing with a small write of its own, and writes
// work again once space returns, without a restart. A failed fsync of the
// WAL is different: the batch it was to make durable is committed but may
// never reach the disk, so it and every write after it fail, and Writable
// reports it, until the server restarts (durable.go). Errors other than "not
// found" from a read inside a write fail that write: nothing is taken for
// gone because it could not be read.
//
// SQLite is the state, so a restart (even after kill -9) finds everything
// that was acknowledged (and possibly a batch whose fsync was running or
// failed, never acknowledged). The store keeps in memory only views of what is
// committed, which it rebuilds or refills from the file, and derived data
// that is not persisted:
//
//   - the Pending and Running workloads, loaded at Open and updated by the
//     writer after each commit, kept in submission order (Snapshot copies
//     them, so that a scheduling cycle decodes no rows and sorts nothing),
//     and with them the counts of Pending workloads by team and by
//     submitter for the pending bounds (core.ErrLimit); the writer takes a
//     pending or running workload from it, not from its row (getForUpdate:
//     inside the writer it is the row, explanation included, which a
//     write then stores with it); on SQLite, Workload
//     answers an active workload from it, but for one whose change the
//     writer is committing (marked just before the COMMIT), whose row is
//     read, so that no read is older than a row already seen;
//   - the users found by token hash (UserByTokenHash: every request
//     authenticates), each for at most tokenCacheTTL (5 s), all forgotten
//     by every write that changes users or tokens;
//   - the decoded nodes and teams, only with Options.Cache (the
//     simulator's, and a SQLite server's, which writes every node and team
//     through this store), forgotten by the writer for every batch that
//     writes a node (or its status), a team (cache.go);
//   - the team shares of the last scheduling cycle (SetShares), derived
//     and memory only;
//   - on SQLite, the pending workloads' explanations (the reason each
//     waits and its message; a nominated node is written), in the view of
//     active workloads, and the events they record (at most 16 a
//     workload, the latest) until the workload's next stored event, a
//     write of its row, or Close, stores them (explain.go): derived, taken
//     back from the last stored event at Open and recomputed by the first
//     cycle after a restart; PostgreSQL writes them, as its other servers
//     read them from the database.
//
// A job array (CreateArray, arrays.go) is one write: all its tasks, their
// events and the pending bounds checked for them together, or nothing.
//
// Writes that depend on the state (placing a workload, finishing an
// attempt) read it inside their transaction and re-check it, never the
// view: ApplyPlan calls core.Fits again, so a stale plan is rejected rather
// than over-committing a GPU. A pending or running workload is taken from
// the view or from the batch's own earlier writes (inside the writer they
// are the row: only the writer changes it, and it brings the view up to
// each commit before it runs the next batch; on SQLite the cycle's
// explanations also change the view, never the row, and a write keeps the
// view's newer one, carryExplanation); any other workload's status
// is read from the transaction, and only what never changes once stored
// (ID, sequence, creation time, spec) is taken from the view, so that the
// spec is not decoded again by every write.
//
// The writer prepares each query once on its connection (between
// transactions, the first time a transaction runs it; at most maxStmts of
// them) and every later transaction runs the prepared statement, so the
// single writer parses no SQL on the submit path. The one-row reads done on
// every request (a team, a user, a token, a workload) are prepared once on
// the read pool in the same way.
//
// # PostgreSQL
//
// Open with a postgres:// URL opens the same Store on PostgreSQL (pgx
// through database/sql, postgres.go), which several servers may share. The
// SQL is the same: the connection rebinds "?" to $1, $2, … and passes bools
// as integers; what the dialects spell differently (RETURNING instead of
// LastInsertId, ON CONFLICT instead of INSERT OR REPLACE, "end" quoted) is
// written the way both accept. PostgreSQL has its own versioned migrations
// (table gpufleet_schema; version 1 is SQLite's current schema with BIGINT
// times, BYTEA documents and identity keys); a newer schema than the binary
// is refused naming both versions, a database holding other tables is
// refused, and an unreachable one fails Open: nothing falls back to SQLite.
//
// The writer works as on SQLite, one goroutine batching writes under
// savepoints; each batch first takes a transaction-scoped advisory lock
// (writeLock), so that the writes of all servers are serialized as one
// SQLite writer serializes them: the checks a write makes in its
// transaction (core.Fits, the lease) hold until it commits. A lost
// connection fails the batch with core.ErrUnavailable (nothing
// acknowledged) and database/sql reconnects for the next. Every statement
// is a round trip, so a batch sends few: the lock and the last rev go with
// its BEGIN, its notification and last rev with its COMMIT (pgtx.go), and
// the rows of its submits without an idempotency key are written together,
// in one statement from arrays, with their audit entries (pgdefer.go); a
// plan's explanations are one UPDATE. As on SQLite the flush is pipelined
// (pgsync.go): the writer commits without waiting for PostgreSQL's flush
// (synchronous_commit off for its transactions alone) and a syncer
// acknowledges each batch once a commit of its own, made as the server's
// settings say, has returned: the log is flushed in order, so that flush
// is the batch's. A batch is visible to readers, and to the other servers,
// up to one flush before its writes are acknowledged. The teams are kept
// in memory while the store listens to the database (cache.go): a commit
// that changes one names "teams" in its notification.
//
// The view of active workloads must also follow the other servers' writes.
// A trigger stamps every inserted or updated workload row with rev, the
// next value of a sequence; under the write lock revs grow in commit order.
// On every NOTIFY the trigger sends (PostgreSQL delivers it at COMMIT) from
// another connection than its own writer's, at least every second, and at
// a batch's start when a rev was drawn since the last it applied, a server
// reads the rows with rev above that one, in rev order, and applies them to
// its view (syncView): only committed rows, never its own uncommitted
// state, and in one order for all servers. After its own commit it applies
// its batch's changes, which are those rows, as SQLite's writer does,
// unless syncView has read them already (applyOwn); it does not read them
// back.
// Three things stay per server: the token cache (a revoke on another
// server takes effect here within tokenCacheTTL), the teams kept (a change
// on another server forgotten when its notification arrives, within
// tokenCacheTTL from a server that does not name it) and the pending
// bounds (counted from this server's view, which lags others' submits by
// at most one sync).
//
// # The leader lease
//
// lease.go keeps one row, the leader lease, with a fencing token that grows
// at every acquisition (Campaign, Renew, Resign; times from the database's
// clock), and the servers list (PutServer, Servers). A write made with
// WithFence carries the caller's token; the writer checks it, once per
// batch, inside the batch's transaction, and refuses it (ErrFenced, which
// is core.ErrUnavailable) unless it is the lease's and the lease has not
// expired: a deposed leader's writes never commit, however late they come.
// A SQLite store has one server and no election: its writes carry no fence.
//
// store imports core, the SQLite driver, pgx and golang.org/x/sys (the
// WAL's fdatasync); never sched, control or the API.
package store
