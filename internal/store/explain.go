package store

import (
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
//   - A write that changes a pending workload writes the status it took
//     from the view, explanation included (getForUpdate).
//   - The event an explanation records (when the reason or the nominated
//     node changes) is kept in memory, at most maxExplained of them per
//     workload, and stored before the workload's next stored event, in
//     that event's transaction (addEvents): its admission, its
//     cancellation. So a workload's stored events stay in time order, and
//     once it has left Pending why it waited is on disk. Only the
//     explanations of a workload still pending at a crash are lost, and
//     the next cycle gives it its reason again.
//
// On PostgreSQL other servers serve reads from the database, so
// explanations are written there as before (setPendingReason).

// maxExplained bounds the explanation events kept in memory per pending
// workload; older ones are dropped (a reason that flips every cycle).
const maxExplained = 16

// explain applies a cycle's explanations to the view: each still pending
// workload gets a copy with its new reason, message and nominated node,
// and an event when its reason or nominated node changed. A write
// committed later from an older value of the view takes the explanation
// back; that write wakes the loop, whose next cycle explains it again.
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
		if st.Reason != d.Reason || st.Nominated != d.Nominated {
			evs := append(s.explained[c.ID], core.Event{WorkloadID: c.ID, Time: now, Type: core.EventNormal, Reason: d.Reason, Message: d.Message})
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
	if s.pg != nil {
		return events
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.explained) == 0 {
		return events
	}
	var out []core.Event
	seen := map[core.WorkloadID]bool{}
	for i, e := range events {
		if !seen[e.WorkloadID] {
			seen[e.WorkloadID] = true
			if mem := tx.unstored(s.explained[e.WorkloadID]); len(mem) > 0 {
				if out == nil {
					out = slices.Clone(events[:i])
				}
				out = append(out, mem...)
				tx.explained = append(tx.explained, mem...)
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

// unstored returns the events of mem that this transaction has not stored.
func (tx *wtx) unstored(mem []core.Event) []core.Event {
	var out []core.Event
	for _, e := range mem {
		if !slices.ContainsFunc(tx.explained, func(f core.Event) bool { return sameEvent(e, f) }) {
			out = append(out, e)
		}
	}
	return out
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
