package store

import (
	"context"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Pending explanations on SQLite.
//
// Every cycle explains each pending workload whose reason, message or
// nominated node changed (core.Decision). On SQLite the explanation lives
// in the view of active workloads, as Slurm keeps a job's reason in
// slurmctld's memory, and is not written: one server holds the store, it
// serves every read, and the first cycle after a restart explains every
// pending workload again. An explanation written to its row took a fifth
// of a submit's cost, in the single writer, for a value the next cycle
// recomputes.
//
// What stays durable:
//   - A nominated node (a preemptor's, the starvation reservation) is
//     promised capacity, which the next cycle holds for the workload: a
//     decision that nominates a node, or takes a nomination back, is
//     written in the plan's transaction as on PostgreSQL (ApplyPlan).
//   - A write that changes a pending workload writes the status it took
//     from the view, explanation included (getForUpdate), with the events
//     kept of it (putStatus, storeKeptOf); and the view keeps the
//     explanation it holds over the one such a write took, which may be
//     older (end, carryExplanation).
//   - The event an explanation records (when the reason changes) is kept
//     in memory, at most maxExplained of them per workload, and stored
//     before the workload's next stored event, in that event's
//     transaction (addEvents): its admission, its cancellation. So a
//     workload's stored events stay in time order, and once it has left
//     Pending why it waited is on disk. Close stores those still kept. A
//     crash loses the explanations of the workloads still pending, and
//     the next cycle gives them their reason again. At Open the view takes
//     each pending workload's last stored explanation (loadExplanations).
//
// On PostgreSQL other servers serve reads from the database, so every
// explanation is written there (setPendingReason).
//
// An event kept in memory and its stored copy are told apart by value
// (sameEvent): two identical explanations of one workload at the same
// nanosecond would read as one.

// loadExplanations gives the pending workloads of the view just loaded
// the explanation of their last stored event, when that event is an
// explanation (no change of phase) whose reason differs from their row's:
// it is then newer than the row's (Close stored it), since a write of a
// pending workload's row stores the explanation events that led to the
// reason it writes (putStatus, storeKeptOf; setPendingReason records its
// own). So a restart shows each workload's last reason at once, and the
// first cycle, explaining it alike, records no event again. A row whose
// reason its last event repeats is kept, message included (the message may
// have changed since).
func (s *Store) loadExplanations(ctx context.Context) error {
	rows, err := s.read.QueryContext(ctx, `SELECT e.workload_id, e.type, e.reason, e.message, e.from_phase, e.to_phase
		FROM events e JOIN (SELECT workload_id, max(id) AS id FROM events
			WHERE workload_id IN (SELECT id FROM workloads WHERE phase = ?) GROUP BY workload_id) last ON e.id = last.id`, string(core.Pending))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, typ, reason, message, from, to string
		if err := rows.Scan(&id, &typ, &reason, &message, &from, &to); err != nil {
			return err
		}
		w := s.active[core.WorkloadID(id)]
		if w == nil || w.Status.Phase != core.Pending || typ != core.EventNormal || from != "" || to != "" || reason == w.Status.Reason {
			continue
		}
		w.Status.Reason, w.Status.Message = reason, message // loaded just now: no one else holds w
	}
	return rows.Err()
}

// maxExplained bounds the explanation events kept in memory per pending
// workload; older ones are dropped (a reason that flips every cycle).
const maxExplained = 16

// explain applies a cycle's explanations to the view: each still pending
// workload gets a copy with its new reason, message and nominated node,
// and an event when its reason or nominated node changed. A write
// committed later from an older value of the view keeps the view's
// explanation (carryExplanation).
// An explanation wakes whoever waits on Changed, as its commit did when it
// was written: the loop sees the workloads it explained as changed.
func (s *Store) explain(ds []core.Decision, now time.Time) {
	if len(ds) == 0 {
		return
	}
	changed := false
	defer func() {
		if changed {
			s.signal()
		}
	}()
	at := now.UTC().Round(0) // as the stored events read
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		w := s.active[d.Workload]
		if w == nil || w.Status.Phase != core.Pending {
			continue // gone, or moved on: nothing to explain
		}
		st := w.Status
		if st.Reason == d.Reason && st.Message == d.Message && st.Nominated == d.Nominated {
			continue
		}
		// Only the status's strings change: a shallow copy shares the
		// rest with the old value, which nothing changes in place.
		c := *w
		c.Status.Reason, c.Status.Message, c.Status.Nominated = d.Reason, d.Message, d.Nominated
		changed = true
		s.active[c.ID] = &c
		s.putOrder(&c)
		// An event only when the reason or the nominated node changes,
		// so that a message that tracks the cluster (the best node, the
		// counts) does not add an event every cycle.
		// (And not again when the last event kept is already that
		// reason: a write took the view back meanwhile.)
		kept := s.explained[c.ID]
		if (st.Reason != d.Reason || st.Nominated != d.Nominated) && (len(kept) == 0 || kept[len(kept)-1].Reason != d.Reason) {
			evs := append(kept, core.Event{WorkloadID: c.ID, Time: at, Type: core.EventNormal, Reason: d.Reason, Message: d.Message})
			if len(evs) > maxExplained {
				evs = slices.Delete(evs, 0, len(evs)-maxExplained)
			}
			s.explained[c.ID] = evs
		}
	}
}

// withExplained returns events with, before the first event of each
// workload, that workload's explanation events kept in memory and not yet
// stored by this transaction; tx records them, and the view forgets them
// once the transaction commits (forgetExplained).
func (tx *wtx) withExplained(events []core.Event) []core.Event {
	s := tx.s
	if s.pg != nil || len(events) == 0 {
		return events
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.explained) == 0 {
		return events
	}
	if len(events) == 1 { // most writes: no map
		mem := tx.takeKept(events[0].WorkloadID)
		if len(mem) == 0 {
			return events
		}
		return append(mem, events[0])
	}
	var out []core.Event
	seen := map[core.WorkloadID]bool{}
	for i, e := range events {
		if !seen[e.WorkloadID] {
			seen[e.WorkloadID] = true
			if mem := tx.takeKept(e.WorkloadID); len(mem) > 0 {
				if out == nil {
					out = slices.Clone(events[:i])
				}
				out = append(out, mem...)
			}
		}
		if out != nil {
			out = append(out, e)
		}
	}
	if out == nil {
		return events
	}
	return out
}

// storeKeptOf stores the explanation events of pending workload id kept in
// memory that this transaction has not stored: a write of its row (an
// output recorded, say) writes the explanation it took from the view, and
// its events go with it, so that no row holds a reason newer than the
// workload's stored events say (loadExplanations relies on it after a
// crash).
func (tx *wtx) storeKeptOf(id core.WorkloadID) error {
	s := tx.s
	if s.pg != nil {
		return nil
	}
	s.mu.RLock()
	mem := tx.takeKept(id)
	s.mu.RUnlock()
	if len(mem) == 0 {
		return nil
	}
	return insertEvents(tx, mem)
}

// takeKept returns a copy of the events of workload id kept in memory that
// this transaction has not stored, and records that it stores them: in
// order in explained (which a savepoint's rollback cuts back,
// dropExplainedAfter) and by workload in explainedBy, so that a
// transaction storing many workloads' events compares each only with its
// own workload's. Callers hold mu.
func (tx *wtx) takeKept(id core.WorkloadID) []core.Event {
	mem := tx.s.explained[id]
	if len(mem) == 0 {
		return nil
	}
	stored := tx.explainedBy[id]
	var out []core.Event
	for _, e := range mem {
		if !slices.ContainsFunc(stored, func(f core.Event) bool { return sameEvent(e, f) }) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	if tx.explainedBy == nil {
		tx.explainedBy = map[core.WorkloadID][]core.Event{}
	}
	tx.explainedBy[id] = append(stored, out...)
	tx.explained = append(tx.explained, out...)
	return out
}

// dropExplainedAfter forgets that this transaction stored the kept events
// after the first n it recorded: a savepoint rolled them back.
func (tx *wtx) dropExplainedAfter(n int) {
	for _, e := range tx.explained[n:] {
		by := tx.explainedBy[e.WorkloadID]
		tx.explainedBy[e.WorkloadID] = by[:len(by)-1]
	}
	tx.explained = tx.explained[:n]
}

// storeAllExplained stores every explanation event kept in memory (Close:
// a clean stop loses none).
func (s *Store) storeAllExplained(ctx context.Context) error {
	s.mu.RLock()
	none := len(s.explained) == 0
	s.mu.RUnlock()
	if s.pg != nil || none {
		return nil
	}
	return s.do(ctx, func(tx *wtx) error {
		s.mu.RLock()
		var evs []core.Event
		for id := range s.explained {
			evs = append(evs, tx.takeKept(id)...)
		}
		s.mu.RUnlock()
		return insertEvents(tx, evs)
	})
}

// carryExplanation gives c, a pending workload's value a write commits, the
// explanation of old, its value in the view, when both are Pending and the
// write set none (setPendingReason's): the write took its value from the
// view, maybe before the cycle's latest explanation, which it must not
// take back. Callers hold mu and own c.
func carryExplanation(tx *wtx, old, c *core.Workload) {
	if old == nil || old.Status.Phase != core.Pending || c.Status.Phase != core.Pending || slices.Contains(tx.explains, c.ID) {
		return
	}
	c.Status.Reason, c.Status.Message, c.Status.Nominated = old.Status.Reason, old.Status.Message, old.Status.Nominated
}

// forgetExplained drops from memory, once tx has committed, the
// explanation events it stored, and those of the workloads it moved out of
// Pending (stale: what the cycle said of a workload since admitted).
// Callers hold mu.
func (s *Store) forgetExplained(tx *wtx) {
	if len(s.explained) == 0 {
		return
	}
	for _, f := range tx.explained {
		evs := slices.DeleteFunc(s.explained[f.WorkloadID], func(e core.Event) bool { return sameEvent(e, f) })
		if len(evs) == 0 {
			delete(s.explained, f.WorkloadID)
		} else {
			s.explained[f.WorkloadID] = evs
		}
	}
	for _, w := range tx.changed {
		if w.Status.Phase != core.Pending {
			delete(s.explained, w.ID)
		}
	}
}

// sameEvent reports whether a and b are the same explanation event: one
// kept in memory and its stored copy.
func sameEvent(a, b core.Event) bool {
	return a.WorkloadID == b.WorkloadID && a.Time.Equal(b.Time) && a.Reason == b.Reason && a.Message == b.Message && a.Type == b.Type
}

// explainedOf returns a copy of the explanation events of workload id kept
// in memory. Events reads them before the stored ones: a transaction that
// stores them and commits in between is then read with them, and
// mergeExplained drops the copies.
func (s *Store) explainedOf(id core.WorkloadID) []core.Event {
	if s.pg != nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.explained[id])
}

// mergeExplained appends to stored, the events of a workload read from the
// database, those of mem (explainedOf, read before them) not among them.
func mergeExplained(stored, mem []core.Event) []core.Event {
	for _, e := range mem {
		if !slices.ContainsFunc(stored, func(f core.Event) bool { return sameEvent(e, f) }) {
			stored = append(stored, e)
		}
	}
	return stored
}

// explainRows gives the pending workloads of a list read from the
// database the explanation the view holds (the rows hold the one last
// written with another change).
func (s *Store) explainRows(ws []*core.Workload) {
	if s.pg != nil {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, w := range ws {
		if w.Status.Phase != core.Pending {
			continue
		}
		if v := s.active[w.ID]; v != nil && v.Status.Phase == core.Pending {
			w.Status.Reason, w.Status.Message, w.Status.Nominated = v.Status.Reason, v.Status.Message, v.Status.Nominated
		}
	}
}
