package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Environment variables each task of an array gets.
const (
	EnvArrayIndex = "GPUFLEET_ARRAY_INDEX"
	EnvArrayID    = "GPUFLEET_ARRAY_ID"
)

// ArrayRange is the indices of a job array, Start to End inclusive, and how
// many of its tasks may run at once (MaxRunning, 0: no cap).
type ArrayRange struct {
	Start, End, MaxRunning int
}

// Len is the number of tasks.
func (r ArrayRange) Len() int { return r.End - r.Start + 1 }

// Array is a stored job array as CreateArray made it: its ID, its range,
// and the first of its tasks (the one of index Start).
type Array struct {
	ID    core.WorkloadID
	Range ArrayRange
	First *core.Workload
}

// CreateArray stores a job array: one Pending workload per index of r, each
// w's spec with env GPUFLEET_ARRAY_INDEX=<index> and GPUFLEET_ARRAY_ID, its
// Array set, and ID core.ArrayTaskID(array, index), with their "Submitted"
// events, all in one write: every task is stored or none is. The pending
// bounds count every task (core.ErrLimit, nothing stored). An idempotency
// key is kept on the first task: a retry with the same key and hash
// returns the array stored the first time (created false).
//
// The SQL is portable (SQLite and PostgreSQL): multi-row INSERTs in chunks
// whose sizes are powers of two (few distinct statements, each prepared
// once), the tasks' seqs read back in one range query on the ID index
// (cheaper in SQLite than RETURNING on every row; no LastInsertId), and
// the events made by one INSERT ... SELECT.
func (s *Store) CreateArray(ctx context.Context, w *core.Workload, r ArrayRange, idem *Idempotency, now time.Time) (out *Array, created bool, err error) {
	n := r.Len()
	if r.Start < 0 || n < 1 || n > core.MaxArrayTasks || r.MaxRunning < 0 {
		return nil, false, fmt.Errorf("array %d-%d%%%d: a range of 1 to %d tasks from index 0 up: %w", r.Start, r.End, r.MaxRunning, core.MaxArrayTasks, core.ErrInvalid)
	}
	// An ID already taken (see NewWorkloadID) is drawn again.
	err = withFreshID(s.newID, func(id core.WorkloadID) error {
		out, created, err = s.createArray(ctx, w, r, idem, now, id)
		return err
	})
	return out, created, err
}

// createArray is CreateArray with the array's ID.
func (s *Store) createArray(ctx context.Context, w *core.Workload, r ArrayRange, idem *Idempotency, now time.Time, id core.WorkloadID) (out *Array, created bool, err error) {
	n := r.Len()
	tasks, specs, err := arrayTasks(w, id, r, now.UTC())
	if err != nil {
		return nil, false, err
	}
	status, err := json.Marshal(&tasks[0].Status)
	if err != nil {
		return nil, false, err
	}
	var key, hash any
	if idem != nil {
		key, hash = idem.Key, idem.Hash
	}
	userBound := s.maxPendingUser
	if ctx.Value(noUserBoundKey{}) != nil {
		userBound = 0
	}
	// The rows' arguments are made here, on the caller's goroutine, not
	// in the writer, which runs one write at a time.
	t := unixNano(now)
	message := fmt.Sprintf("submitted by %s to team %s (array %s)", w.Owner, w.Team, id)
	type batch struct {
		size  int
		tasks []any
	}
	var batches []batch
	// What every row shares is boxed once, not once a row.
	var team, owner, at, st any = string(w.Team), w.Owner, t, status
	off := 0
	for _, size := range chunks(n) {
		c := batch{size: size, tasks: make([]any, 0, size*6)}
		for i := off; i < off+size; i++ {
			c.tasks = append(c.tasks, string(tasks[i].ID), team, owner, at, specs[i], st)
		}
		batches = append(batches, c)
		off += size
	}
	err = s.do(ctx, func(tx *wtx) error {
		if idem != nil {
			prev, err := scanWorkload(tx.QueryRow(selectWorkload+" WHERE owner = ? AND idem_key = ?", w.Owner, idem.Key))
			if err == nil {
				if prev.hash != idem.Hash || prev.w.Array == nil {
					return fmt.Errorf("key %q: %w", idem.Key, core.ErrIdempotency)
				}
				a := prev.w.Array
				s.explainRows([]*core.Workload{prev.w})
				out, created = &Array{ID: a.ID, First: prev.w, Range: ArrayRange{Start: a.Start, End: a.End, MaxRunning: a.MaxRunning}}, false
				return nil
			}
			if !errors.Is(err, core.ErrNotFound) {
				return err
			}
		}
		var team string
		if err := tx.QueryRow("SELECT name FROM teams WHERE name = ?", string(w.Team)).Scan(&team); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("team %q: %w", w.Team, core.ErrNotFound)
			}
			return err
		}
		if err := s.checkPendingN(tx, w, userBound, n); err != nil {
			return err
		}
		setAuditObject(ctx, string(id), string(w.Team))
		for _, c := range batches {
			if _, err := tx.Exec(insertTasks(c.size), c.tasks...); err != nil {
				return err
			}
		}
		if idem != nil { // kept on the first task
			if _, err := tx.Exec("UPDATE workloads SET idem_key = ?, idem_hash = ? WHERE id = ?", key, hash, string(tasks[0].ID)); err != nil {
				return err
			}
		}
		// Each task's seq, read back from the ID index in one query
		// rather than with each row written.
		lo, hi := taskRange(id)
		rows, err := tx.Query("SELECT seq, id FROM workloads WHERE id >= ? AND id < ?", lo, hi)
		if err != nil {
			return err
		}
		got := 0
		for rows.Next() {
			var seq int64
			var tid sql.RawBytes
			if err := rows.Scan(&seq, &tid); err != nil {
				rows.Close()
				return err
			}
			i, err := strconv.Atoi(string(tid[len(lo):])) // the index, after "<id>-"
			if err != nil || i < r.Start || i > r.End || tasks[i-r.Start].Seq != 0 {
				rows.Close()
				return fmt.Errorf("array %s: unexpected task %s", id, tid)
			}
			tasks[i-r.Start].Seq = seq
			got++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("array %s: %d of its %d tasks were stored", id, got, n)
		}
		// The "Submitted" events, one a task, made by the database from
		// the rows just written rather than bound row by row.
		if _, err := tx.Exec(insertArrayEvents, t, core.EventNormal, "Submitted", message, "", string(core.Pending), lo, hi); err != nil {
			return err
		}
		tx.changed = append(tx.changed, tasks...)
		out, created = &Array{ID: id, Range: r, First: tasks[0]}, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// arrayTasks makes the tasks of array id from w and their encoded specs.
// The spec is encoded once, with a random number standing for the index,
// and each task's spec is that encoding with its index written in: the
// encoding is most of the cost of a task otherwise.
func arrayTasks(w *core.Workload, id core.WorkloadID, r ArrayRange, now time.Time) ([]*core.Workload, [][]byte, error) {
	var b [8]byte
	rand.Read(b[:])
	mark := strconv.FormatUint(binary.LittleEndian.Uint64(b[:])>>3|1<<61, 10) // 19 digits, an int
	base := w.Clone()
	base.CreatedAt = now
	base.Status = core.Status{Phase: core.Pending, Reason: "Submitted"}
	env := make(map[string]string, len(w.Env)+2)
	maps.Copy(env, w.Env)
	env[EnvArrayID] = string(id)
	env[EnvArrayIndex] = mark
	base.Env = env
	base.Array = &core.ArrayTask{ID: id, Start: r.Start, End: r.End, MaxRunning: r.MaxRunning}
	markIndex, _ := strconv.Atoi(mark)
	base.Array.Index = markIndex
	tmpl, err := json.Marshal(&base.Spec)
	if err != nil {
		return nil, nil, err
	}
	parts := bytes.Split(tmpl, []byte(mark))
	if len(parts) != 3 { // the mark also appears elsewhere: encode each
		parts = nil
	}
	n := r.Len()
	var buf []byte
	tasks := make([]*core.Workload, n)
	specs := make([][]byte, n)
	arrays := make([]core.ArrayTask, n)
	for i := range n {
		idx := r.Start + i
		t := *base
		t.ID = core.ArrayTaskID(id, idx)
		arrays[i] = core.ArrayTask{ID: id, Index: idx, Start: r.Start, End: r.End, MaxRunning: r.MaxRunning}
		t.Array = &arrays[i]
		e := maps.Clone(env)
		digits := strconv.Itoa(idx)
		e[EnvArrayIndex] = digits
		t.Env = e
		tasks[i] = &t
		if parts != nil {
			if len(buf)+len(tmpl)+40 > cap(buf) { // the specs share large buffers
				buf = make([]byte, 0, max(64<<10, 2*len(tmpl)+40))
			}
			sp := buf[len(buf):len(buf):cap(buf)]
			sp = append(sp, parts[0]...)
			sp = append(sp, digits...)
			sp = append(sp, parts[1]...)
			sp = append(sp, digits...)
			sp = append(sp, parts[2]...)
			specs[i] = sp[:len(sp):len(sp)]
			buf = buf[:len(buf)+len(sp)]
		} else if specs[i], err = json.Marshal(&t.Spec); err != nil {
			return nil, nil, err
		}
	}
	return tasks, specs, nil
}

// chunks splits n rows into runs, in order, whose sizes are powers of two,
// at most maxChunk.
func chunks(n int) []int {
	var out []int
	for size := maxChunk; size > 0; size /= 2 {
		for ; n >= size; n -= size {
			out = append(out, size)
		}
	}
	return out
}

// maxChunk is the most rows one INSERT of CreateArray writes (6 parameters
// each: well within SQLite's and PostgreSQL's bounds on parameters).
const maxChunk = 256

// insertTasks writes n Pending tasks: id, team, owner, created_at, spec
// and status each.
func insertTasks(n int) string {
	return "INSERT INTO workloads (id, team, owner, phase, created_at, spec, status) VALUES " +
		rowsOf(n, "(?, ?, ?, 'Pending', ?, ?, ?)")
}

// insertArrayEvents adds an event to each task of an array (by the range
// of their IDs, see taskRange), in the order of the ID index: each task's
// events are its own, so no sort is asked for.
const insertArrayEvents = `INSERT INTO events (workload_id, time, type, reason, message, from_phase, to_phase)
	SELECT id, CAST(? AS BIGINT), ?, ?, ?, ?, ? FROM workloads WHERE id >= ? AND id < ?`

func rowsOf(n int, row string) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// checkPendingN is checkPending for n workloads like w submitted at once.
func (s *Store) checkPendingN(tx *wtx, w *core.Workload, userBound, n int) error {
	if s.maxPendingTeam <= 0 && userBound <= 0 {
		return nil
	}
	team, owner := s.pendingOf(tx, w)
	switch {
	case s.maxPendingTeam > 0 && team+n > s.maxPendingTeam:
		return fmt.Errorf("team %s has %d pending workloads and the array adds %d, more than the %d allowed; wait until some start, cancel some, or submit a smaller array: %w", w.Team, team, n, s.maxPendingTeam, core.ErrLimit)
	case userBound > 0 && owner+n > userBound:
		return fmt.Errorf("user %s has %d pending workloads and the array adds %d, more than the %d allowed; wait until some start, cancel some, or submit a smaller array: %w", w.Owner, owner, n, userBound, core.ErrLimit)
	}
	return nil
}

// taskRange is the bounds of the IDs of array id's tasks, for
// "id >= lo AND id < hi": every task's ID is id, "-" and digits, and "."
// follows "-". (On PostgreSQL the id column needs the "C" collation for
// this range to hold and use the index.)
func taskRange(id core.WorkloadID) (lo, hi string) {
	return string(id) + "-", string(id) + "."
}

// ArrayTasks reads the tasks of array id in submission order, pending ones
// with the explanation the view holds; none (and no error) when there is
// no such array.
func (s *Store) ArrayTasks(ctx context.Context, id core.WorkloadID) ([]*core.Workload, error) {
	lo, hi := taskRange(id)
	rows, err := s.read.QueryContext(ctx, selectWorkload+" WHERE id >= ? AND id < ? ORDER BY seq", lo, hi)
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
		if sc.w.Array != nil && sc.w.Array.ID == id {
			out = append(out, sc.w)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.explainRows(out)
	return out, nil
}

// ArrayPhases counts array id's tasks by phase, without decoding them;
// the first task is returned too (nil, and no error, when there is no such
// array).
func (s *Store) ArrayPhases(ctx context.Context, id core.WorkloadID) (map[core.Phase]int, *core.Workload, error) {
	lo, hi := taskRange(id)
	rows, err := s.read.QueryContext(ctx, "SELECT phase, count(*) FROM workloads WHERE id >= ? AND id < ? GROUP BY phase", lo, hi)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	counts := map[core.Phase]int{}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, nil, err
		}
		counts[core.Phase(p)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(counts) == 0 {
		return counts, nil, nil
	}
	sc, err := scanWorkload(s.read.QueryRowContext(ctx, selectWorkload+" WHERE id >= ? AND id < ? ORDER BY seq LIMIT 1", lo, hi))
	if err != nil {
		return nil, nil, err
	}
	if sc.w.Array == nil || sc.w.Array.ID != id {
		return map[core.Phase]int{}, nil, nil
	}
	s.explainRows([]*core.Workload{sc.w})
	return counts, sc.w, nil
}

// CancelArray cancels every task of array id that has not finished, in
// one write: a pending task becomes Cancelled, a running one is asked to
// stop (as RequestStop does for one workload, whose steps it repeats). It
// returns how many tasks it changed.
func (s *Store) CancelArray(ctx context.Context, id core.WorkloadID, reason, message string, now time.Time) (int, error) {
	lo, hi := taskRange(id)
	var changed int
	err := s.do(ctx, func(tx *wtx) error {
		changed = 0
		rows, err := tx.Query("SELECT id FROM workloads WHERE id >= ? AND id < ? AND phase IN (?, ?) ORDER BY seq", lo, hi, string(core.Pending), string(core.Running))
		if err != nil {
			return err
		}
		var ids []core.WorkloadID
		for rows.Next() {
			var tid string
			if err := rows.Scan(&tid); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, core.WorkloadID(tid))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		setAuditObject(ctx, string(id), "")
		t := now.UTC()
		for _, tid := range ids {
			w, err := getForUpdate(tx, tid)
			if err != nil {
				return err
			}
			if w.Array == nil || w.Array.ID != id {
				continue
			}
			switch w.Status.Phase {
			case core.Pending:
				w.Status.Phase, w.Status.Reason, w.Status.Message = core.Cancelled, reason, message
				w.Status.FinishedAt = &t
				if err := putStatus(tx, w); err != nil {
					return err
				}
				if err := addEvent(tx, core.Event{WorkloadID: tid, Time: t, Reason: reason, Message: message, From: core.Pending, To: core.Cancelled}); err != nil {
					return err
				}
			case core.Running:
				if w.Status.StopRequested != "" {
					continue
				}
				w.Status.StopRequested, w.Status.Message = reason, message
				if err := putStatus(tx, w); err != nil {
					return err
				}
				if err := addEvent(tx, core.Event{WorkloadID: tid, Time: t, Reason: "StopRequested", Message: message}); err != nil {
					return err
				}
			default:
				continue
			}
			changed++
		}
		return nil
	})
	return changed, err
}
