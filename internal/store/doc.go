// Package store owns gpufleet's truth: teams, users and token hashes, nodes,
// workloads with their status, events and allocation intervals, in one SQLite
// file (modernc.org/sqlite, WAL, synchronous=FULL). OpenWith can turn fsync
// off and choose the workload IDs, for throwaway stores such as the
// simulator's.
//
// Every write goes through one writer goroutine that gathers the writes
// queued at that moment into one transaction, each under its own savepoint,
// and acknowledges them only after the COMMIT has reached the disk (group
// commit). A 2xx on submit therefore means the workload is on disk, and the
// cost of an fsync is shared by everything that arrived while the previous
// one was in flight; before committing, the writer yields once to take the
// writes that were about to be queued, so that a burst shares one commit
// (and one copy of its pages in the WAL) instead of paying one each. Reads use a separate pool of read-only connections and
// see only committed data.
//
// A full or failing disk fails writes, never acknowledges them: when the
// batch's COMMIT fails, or one of its writes fails with SQLITE_FULL, ENOSPC
// or an I/O error, every write of the batch fails, with an error of kind
// core.ErrNoSpace (full) or core.ErrUnavailable (I/O), and the transaction is
// rolled back. Reads go on; Writable reports the condition (for readiness)
// until a write succeeds, probing with a small write of its own, and writes
// work again once space returns, without a restart. Errors other than "not
// found" from a read inside a write fail that write: nothing is taken for
// gone because it could not be read.
//
// SQLite is the state, so a restart (even after kill -9) finds exactly what
// was acknowledged. The store keeps in memory only views of what is
// committed, which it rebuilds or refills from the file, and derived data
// that is not persisted:
//
//   - the Pending and Running workloads, loaded at Open and updated by the
//     writer after each commit, kept in submission order (Snapshot copies
//     them, so that a scheduling cycle decodes no rows and sorts nothing),
//     and with them the counts of Pending workloads by team and by
//     submitter for the pending bounds (core.ErrLimit);
//   - the users found by token hash (UserByTokenHash: every request
//     authenticates), each for at most tokenCacheTTL (5 s), all forgotten
//     by every write that changes users or tokens;
//   - the decoded nodes, only with Options.CacheNodes (the simulator's),
//     forgotten by every PutNode;
//   - the team shares of the last scheduling cycle (SetShares), derived
//     and memory only.
//
// Writes that depend on the state (placing a workload, finishing an
// attempt) read it inside their transaction and re-check it, never the
// view: ApplyPlan calls core.Fits again, so a stale plan is rejected rather
// than over-committing a GPU. A workload's status is always read from the
// transaction; only what never changes once stored (ID, sequence, creation
// time, spec) is taken from the view, or from the batch's own earlier
// writes, so that the spec is not decoded again by every write.
//
// The writer prepares each query once on its connection (between
// transactions, the first time a transaction runs it; at most maxStmts of
// them) and every later transaction runs the prepared statement, so the
// single writer parses no SQL on the submit path. The one-row reads done on
// every request (a team, a user, a token, a workload) are prepared once on
// the read pool in the same way.
//
// store imports core and the SQLite driver; never sched, control or the API.
package store
