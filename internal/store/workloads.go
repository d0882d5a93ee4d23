package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// NewWorkloadID returns a fresh workload ID such as "wl-4pzi4zb2m4pxh5ys":
// "wl-", 8 base32 digits of the time in milliseconds since 2024 (wrapping
// after 34 years, in 2058), and 8 of 40 random bits. The random half keeps
// one team from guessing another's IDs, as the fully random IDs before did
// (60 bits; those still read and work alike). The time half puts the IDs
// a store writes in a row side by side in its ID index: a batch of random
// IDs dirtied one index page each, where time-ordered ones share the last
// page (as UUIDv7 and ULID do; see doc.go). The digits are base32's in
// ASCII order, so that IDs sort by their time. Two IDs repeat only in the
// same millisecond with the same 40 random bits, and CreateWorkload and
// CreateArray then draw another (withFreshID).
func NewWorkloadID() core.WorkloadID {
	var b [5]byte
	rand.Read(b[:])
	return workloadID(time.Now(), b)
}

// idEpoch is the start of a workload ID's clock, 2024-01-01 UTC, in Unix
// milliseconds.
const idEpoch = 1704067200000

// idDigits are base32's digits in ASCII order: IDs compare as their bits.
const idDigits = "234567abcdefghijklmnopqrstuvwxyz"

// workloadID spells a workload ID made at t with the random bits b.
func workloadID(t time.Time, b [5]byte) core.WorkloadID {
	var id [3 + 16]byte
	copy(id[:], "wl-")
	ms := uint64(t.UnixMilli() - idEpoch)
	r := uint64(b[0])<<32 | uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4])
	for i := 7; i >= 0; i-- {
		id[3+i] = idDigits[ms&31]
		id[3+8+i] = idDigits[r&31]
		ms >>= 5
		r >>= 5
	}
	return core.WorkloadID(id[:])
}

// Idempotency ties a submission to a client-chosen key. The same owner and
// key with the same body hash returns the workload created the first time;
// with another hash it fails with core.ErrIdempotency.
type Idempotency struct {
	Key  string
	Hash string
}

// CreateWorkload stores a new Pending workload (its "Submitted" event is
// the row itself: see Events).
// w.ID, Seq and Status are set by the store; the stored workload is
// returned. created is false when an earlier submission with the same
// idempotency key is returned instead.
func (s *Store) CreateWorkload(ctx context.Context, w *core.Workload, idem *Idempotency, now time.Time) (out *core.Workload, created bool, err error) {
	w = w.Clone()
	w.CreatedAt = now.UTC()
	w.Status = submitted
	spec, err := json.Marshal(&w.Spec)
	if err != nil {
		return nil, false, err
	}
	status := submittedJSON
	var key, hash any
	if idem != nil {
		key, hash = idem.Key, idem.Hash
	}
	userBound := s.maxPendingUser
	if ctx.Value(noUserBoundKey{}) != nil {
		userBound = 0
	}
	// Every check comes before the first change, so the write needs no
	// savepoint (doBare): the idempotency key and the pending bounds here,
	// and the team's foreign key on the INSERT, which takes back only
	// itself: the submit's own with a key, else the batch's many-row one
	// at its flush (sqlitedefer.go, pgdefer.go), where a refused row is
	// written again alone. An ID already taken (see NewWorkloadID) is drawn
	// again.
	insert := func(tx *wtx) error {
		if idem != nil {
			prev, err := scanWorkload(tx.QueryRow(selectWorkload+" WHERE owner = ? AND idem_key = ?", w.Owner, idem.Key))
			if err == nil {
				if prev.hash != idem.Hash {
					return fmt.Errorf("key %q: %w", idem.Key, core.ErrIdempotency)
				}
				s.explainRows([]*core.Workload{prev.w})
				out, created = prev.w, false
				return nil
			}
			if !errors.Is(err, core.ErrNotFound) {
				return err
			}
		}
		if err := s.checkPending(tx, w, userBound); err != nil {
			// A team that does not exist is refused as such, first.
			if terr := teamExists(tx, w.Team); terr != nil {
				return terr
			}
			return err
		}
		if tx.canDefer() {
			// Written with the batch's other submits (pgdefer.go,
			// sqlitedefer.go).
			setAuditObject(ctx, string(w.ID), string(w.Team))
			tx.deferSubmit(w, spec, status)
			out, created = w, true
			return nil
		}
		seq, err := tx.insert(insertWorkload, "seq", string(w.ID), string(w.Team), w.Owner, string(w.Status.Phase), unixNano(w.CreatedAt), key, hash, spec, status)
		if err = insertError(w, err); err != nil {
			return err
		}
		setAuditObject(ctx, string(w.ID), string(w.Team))
		w.Seq = seq
		tx.changed = append(tx.changed, w)
		out, created = w, true
		return nil
	}
	kind := opBare
	if idem == nil {
		kind = opDeferred
	}
	err = withFreshID(s.newID, func(id core.WorkloadID) error {
		if kind == opDeferred && w.ID != "" {
			// A deferred write named the ID it drew, taken, in its
			// audit entry before its row failed.
			clearAuditObject(ctx, string(w.ID))
		}
		w.ID = id
		return s.queue(ctx, insert, kind)
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// submitted is a new workload's status, and submittedJSON its encoding in
// the row, the same for every submit: encoded once.
var (
	submitted     = core.Status{Phase: core.Pending, Reason: "Submitted"}
	submittedJSON = func() []byte {
		b, err := json.Marshal(&submitted)
		if err != nil {
			panic(err)
		}
		return b
	}()
)

// insertWorkload stores a new workload's row.
const insertWorkload = `INSERT INTO workloads (id, team, owner, phase, created_at, idem_key, idem_hash, spec, status)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertError is what a submit's INSERT of w answers for err: a team that
// does not exist (the foreign key), an ID taken, as refusals, so that the
// write fails alone (on SQLite the INSERT took back only itself), not its
// batch; an ID taken is drawn again (withFreshID).
func insertError(w *core.Workload, err error) error {
	switch {
	case isForeignKey(err):
		return fmt.Errorf("team %q: %w", w.Team, core.ErrNotFound)
	case isIDTaken(err):
		return fmt.Errorf("workload ID %s is taken: %w (%w)", w.ID, core.ErrConflict, err)
	}
	return err
}

// withFreshID calls write with an ID from newID, and again with the next
// one while it fails because the ID is taken, idDraws times in all. When
// every ID drawn was taken (the ID maker repeats itself), nothing was
// written: the error says so, in words for the caller rather than the
// database's, as one to try again (core.ErrUnavailable).
func withFreshID(newID func() core.WorkloadID, write func(id core.WorkloadID) error) error {
	for try := 1; ; try++ {
		err := write(newID())
		if !isIDTaken(err) {
			return err
		}
		if try == idDraws {
			return fmt.Errorf("the %d workload IDs drawn were all taken; nothing was written, try again: %w", idDraws, core.ErrUnavailable)
		}
	}
}

// idDraws is how many IDs a submit draws before it gives up.
const idDraws = 3

const selectWorkload = "SELECT seq, id, created_at, spec, status, idem_hash FROM workloads"

type scanned struct {
	w    *core.Workload
	hash string
}

type rowScanner interface{ Scan(dest ...any) error }

func scanWorkload(r rowScanner) (*scanned, error) {
	var (
		seq, created int64
		id           string
		spec, status []byte
		hash         sql.NullString
	)
	if err := r.Scan(&seq, &id, &created, &spec, &status, &hash); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, core.ErrNotFound
		}
		return nil, err
	}
	w := &core.Workload{ID: core.WorkloadID(id), Seq: seq, CreatedAt: fromNano(created)}
	if err := json.Unmarshal(spec, &w.Spec); err != nil {
		return nil, fmt.Errorf("workload %s: decode spec: %w", id, err)
	}
	if err := json.Unmarshal(status, &w.Status); err != nil {
		return nil, fmt.Errorf("workload %s: decode status: %w", id, err)
	}
	return &scanned{w: w, hash: hash.String}, nil
}

// Workload reads one workload. On SQLite an active one comes from the view
// of active workloads, which this store's writer brings up to each commit
// before acknowledging it: what the row holds, without decoding it, with
// the explanation kept in the view (explain.go); but for one whose change
// is being committed (the row may already be newer than the view), which
// is read.
func (s *Store) Workload(ctx context.Context, id core.WorkloadID) (*core.Workload, error) {
	if s.pg == nil {
		s.mu.RLock()
		var w *core.Workload
		if !s.committing[id] {
			w = s.active[id]
		}
		s.mu.RUnlock()
		if w != nil {
			return w.Clone(), nil
		}
	}
	sc, err := scanWorkload(s.readRow(ctx, selectWorkload+" WHERE id = ?", string(id)))
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", id, err)
	}
	s.explainRows([]*core.Workload{sc.w})
	return sc.w, nil
}

// WorkloadFilter selects workloads. Zero fields select everything.
type WorkloadFilter struct {
	Teams  []core.TeamName // any of these; nil means every team
	Phases []core.Phase
	Owner  string
	// AfterSeq pages: only workloads submitted after this sequence number.
	AfterSeq int64
	Limit    int
}

// Workloads lists workloads in submission order, pending ones with the
// explanation the view holds (explainRows).
func (s *Store) Workloads(ctx context.Context, f WorkloadFilter) ([]*core.Workload, error) {
	ws, err := s.queryWorkloads(ctx, s.read, f)
	if err != nil {
		return nil, err
	}
	s.explainRows(ws)
	return ws, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) queryWorkloads(ctx context.Context, q querier, f WorkloadFilter) ([]*core.Workload, error) {
	var where []string
	var args []any
	if f.Teams != nil {
		if len(f.Teams) == 0 {
			return nil, nil
		}
		where = append(where, "team IN ("+placeholders(len(f.Teams))+")")
		for _, t := range f.Teams {
			args = append(args, string(t))
		}
	}
	if len(f.Phases) > 0 {
		where = append(where, "phase IN ("+placeholders(len(f.Phases))+")")
		for _, p := range f.Phases {
			args = append(args, string(p))
		}
	}
	if f.Owner != "" {
		where = append(where, "owner = ?")
		args = append(args, f.Owner)
	}
	if f.AfterSeq > 0 {
		where = append(where, "seq > ?")
		args = append(args, f.AfterSeq)
	}
	query := selectWorkload
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY seq"
	if f.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*core.Workload
	for rows.Next() {
		sc, err := scanWorkload(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sc.w)
	}
	return out, rows.Err()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// Events lists a workload's events, oldest first. A workload's creation,
// its "Submitted" event, is its row (created_at, owner and team), not a
// stored event, so that a submit writes one row less: it is listed first,
// with ID 0, unless an event stored it (workloads submitted by earlier
// versions, and array tasks, whose events one statement stores). On SQLite
// the explanation events of a pending workload not stored yet come last,
// from memory, also with ID 0 (explain.go).
func (s *Store) Events(ctx context.Context, id core.WorkloadID) ([]core.Event, error) {
	mem := s.explainedOf(id) // before the stored ones: see explainedOf
	var created int64
	var owner, team string
	err := s.readRow(ctx, "SELECT created_at, owner, team FROM workloads WHERE id = ?", string(id)).Scan(&created, &owner, &team)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, "SELECT id, time, type, reason, message, from_phase, to_phase FROM events WHERE workload_id = ? ORDER BY id", string(id))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []core.Event{submittedEvent(id, fromNano(created), owner, team)}
	stored := false // the creation is among the stored events
	for rows.Next() {
		var e core.Event
		var t int64
		var from, to string
		if err := rows.Scan(&e.ID, &t, &e.Type, &e.Reason, &e.Message, &from, &to); err != nil {
			return nil, err
		}
		e.WorkloadID, e.Time, e.From, e.To = id, fromNano(t), core.Phase(from), core.Phase(to)
		if len(out) == 1 { // the first stored event: the creation, if an earlier version stored it
			stored = e.Reason == submittedReason && e.From == "" && e.To == core.Pending
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if stored {
		out = out[1:]
	}
	return mergeExplained(out, mem), nil
}

// submittedReason is the reason of a workload's first event, its creation.
const submittedReason = "Submitted"

// submittedEvent is the creation of workload id, read from its row.
func submittedEvent(id core.WorkloadID, at time.Time, owner, team string) core.Event {
	return core.Event{WorkloadID: id, Time: at, Type: core.EventNormal, Reason: submittedReason,
		Message: "submitted by " + owner + " to team " + team, To: core.Pending}
}

// Allocations lists a workload's allocation intervals, or every one when id
// is empty, oldest first.
func (s *Store) Allocations(ctx context.Context, id core.WorkloadID) ([]core.Allocation, error) {
	q := selectAllocations
	var args []any
	if id != "" {
		q += " WHERE workload_id = ?"
		args = append(args, string(id))
	}
	return s.queryAllocations(ctx, q+" ORDER BY id", args...)
}

const selectAllocations = `SELECT id, workload_id, team, attempt, replica, node, gpu_index, gpu_uuid, milli_gpu, memory_mib, start, "end", outcome, pool FROM allocations`

func (s *Store) queryAllocations(ctx context.Context, q string, args ...any) ([]core.Allocation, error) {
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Allocation
	for rows.Next() {
		var a core.Allocation
		var wid, team, node string
		var start int64
		var end sql.NullInt64
		if err := rows.Scan(&a.ID, &wid, &team, &a.Attempt, &a.Replica, &node, &a.GPUIndex, &a.GPUUUID, &a.MilliGPU, &a.MemoryMiB, &start, &end, &a.Outcome, &a.Pool); err != nil {
			return nil, err
		}
		a.WorkloadID, a.Team, a.Node, a.Start = core.WorkloadID(wid), core.TeamName(team), core.NodeName(node), fromNano(start)
		if end.Valid {
			t := fromNano(end.Int64)
			a.End = &t
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// addEvent records one event (Normal unless its type says otherwise).
func addEvent(tx *wtx, e core.Event) error { return addEvents(tx, []core.Event{e}) }

// addEvents records events (Normal unless their type says otherwise) in
// multi-row INSERTs, in order, in chunks whose sizes are powers of two
// (see chunks): few distinct statements, each prepared once. On SQLite a
// workload's explanation events kept in memory are stored first
// (withExplained).
func addEvents(tx *wtx, events []core.Event) error {
	return insertEvents(tx, tx.withExplained(events))
}

// insertEvents stores events as they are (addEvents).
func insertEvents(tx *wtx, events []core.Event) error {
	off := 0
	for _, size := range chunks(len(events)) {
		args := make([]any, 0, 7*size)
		for _, e := range events[off : off+size] {
			if e.Type == "" {
				e.Type = core.EventNormal
			}
			args = append(args, string(e.WorkloadID), unixNano(e.Time), e.Type, e.Reason, e.Message, string(e.From), string(e.To))
		}
		if _, err := tx.Exec("INSERT INTO events (workload_id, time, type, reason, message, from_phase, to_phase) VALUES "+rowsOf(size, "(?, ?, ?, ?, ?, ?, ?)"), args...); err != nil {
			return err
		}
		off += size
	}
	return nil
}

// getForUpdate reads a workload inside a write. A pending or running one is
// taken, with no read of its row, from this transaction's own changes or
// from the view of committed active workloads, which is exact inside the
// writer: every status is written through putStatus or setPendingReason
// (so the transaction's changes hold it), the view is brought up to each
// commit before the next batch begins, and on PostgreSQL up to the other
// servers' commits under the write lock (syncView). (On SQLite the view's
// explanation may be newer than the row's: the write then stores it.) Of
// any other, the status is read from its row (which may be gone: a team's
// deletion), and the rest, which never changes once stored, is taken from
// what the transaction changed when it is there.
func getForUpdate(tx *wtx, id core.WorkloadID) (*core.Workload, error) {
	known := tx.known(id)
	if known != nil && (known.Status.Phase == core.Pending || known.Status.Phase == core.Running) {
		return known.Clone(), nil
	}
	if known != nil {
		var status []byte
		if err := tx.QueryRow("SELECT status FROM workloads WHERE id = ?", string(id)).Scan(&status); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				err = core.ErrNotFound
			}
			return nil, fmt.Errorf("workload %s: %w", id, err)
		}
		w := known.Clone()
		w.Status = core.Status{}
		if err := json.Unmarshal(status, &w.Status); err != nil {
			return nil, fmt.Errorf("workload %s: decode status: %w", id, err)
		}
		return w, nil
	}
	sc, err := scanWorkload(tx.QueryRow(selectWorkload+" WHERE id = ?", string(id)))
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", id, err)
	}
	return sc.w, nil
}

// known returns the workload id as this transaction last changed it, or
// as committed in the view of active workloads, or nil (see getForUpdate:
// inside the writer it is the row). It is shared: callers copy it before
// changing it.
func (tx *wtx) known(id core.WorkloadID) *core.Workload {
	if w := tx.last(id); w != nil {
		return w
	}
	tx.s.mu.RLock()
	defer tx.s.mu.RUnlock()
	return tx.s.active[id]
}

// putStatus writes a workload's status, phase and node columns; of a
// pending one, with the explanation events kept in memory that led to the
// explanation it writes (storeKeptOf).
func putStatus(tx *wtx, w *core.Workload) error {
	b, err := json.Marshal(&w.Status)
	if err != nil {
		return err
	}
	var node any
	if w.Status.Phase == core.Running && len(w.Status.Placement) > 0 {
		node = string(w.Status.Placement[0].Node)
	}
	res, err := tx.Exec("UPDATE workloads SET phase = ?, node = ?, status = ? WHERE id = ?", string(w.Status.Phase), node, b, string(w.ID))
	if err := wroteOne(res, err, w.ID); err != nil {
		return err
	}
	tx.changed = append(tx.changed, w)
	if w.Status.Phase == core.Pending {
		return tx.storeKeptOf(w.ID)
	}
	return nil
}

// wroteOne checks that an UPDATE of workload id changed its row: a write
// that found the workload (in the view) but not its row is out of step
// with the file, and fails rather than report a change it did not make.
func wroteOne(res sql.Result, err error, id core.WorkloadID) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("workload %s: its row was not updated (%d rows): the store's view is out of step with it", id, n)
	}
	return nil
}

// teamExists fails with core.ErrNotFound when team is not stored, inside a
// write.
func teamExists(tx *wtx, team core.TeamName) error {
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM teams WHERE name = ?", string(team)).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("team %q: %w", team, core.ErrNotFound)
	}
	return nil
}

// nodeUsage sums what Running workloads hold on one node, inside a write.
func nodeUsage(tx *wtx, node core.NodeName) (*core.NodeUsage, error) {
	rows, err := tx.Query(selectWorkload+" WHERE phase = ? AND id IN (SELECT workload_id FROM workload_nodes WHERE node = ?)", string(core.Running), string(node))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	u := &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
	for rows.Next() {
		sc, err := scanWorkload(rows)
		if err != nil {
			return nil, err
		}
		u.Add(node, sc.w.Request, sc.w.Status.Placement)
	}
	return u, rows.Err()
}

// pendingOf counts the Pending workloads of w's team and of its submitter:
// the committed ones (the view) plus those this batch created so far.
func (s *Store) pendingOf(tx *wtx, w *core.Workload) (team, owner int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	team, owner = s.pendingTeam[w.Team], s.pendingOwner[w.Owner]
	for _, c := range tx.changed {
		if _, committed := s.active[c.ID]; committed || c.Status.Phase != core.Pending {
			continue
		}
		if c.Team == w.Team {
			team++
		}
		if c.Owner == w.Owner {
			owner++
		}
	}
	return team, owner
}

type noUserBoundKey struct{}

// WithoutUserBound exempts the submissions made with the returned context
// from MaxPendingPerUser (the API server uses it for admins); the team
// bound still applies.
func WithoutUserBound(ctx context.Context) context.Context {
	return context.WithValue(ctx, noUserBoundKey{}, true)
}

// checkPending fails with core.ErrLimit when w would take its team or its
// submitter beyond the pending bounds (userBound: the submitter's). It runs
// in the writer, so concurrent submissions cannot both pass: the committed
// counts (kept in memory with the active workloads) plus the workloads this
// batch has created so far. Those the batch has started are still counted,
// which errs on the side of the bound.
func (s *Store) checkPending(tx *wtx, w *core.Workload, userBound int) error {
	if s.maxPendingTeam <= 0 && userBound <= 0 {
		return nil
	}
	team, owner := s.pendingOf(tx, w)
	switch {
	case s.maxPendingTeam > 0 && team >= s.maxPendingTeam:
		return fmt.Errorf("team %s has %d pending workloads, the most allowed; wait until some start or cancel some: %w", w.Team, team, core.ErrLimit)
	case userBound > 0 && owner >= userBound:
		return fmt.Errorf("user %s has %d pending workloads, the most allowed; wait until some start or cancel some: %w", w.Owner, owner, core.ErrLimit)
	}
	return nil
}
