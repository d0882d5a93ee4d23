package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Snapshot reads the nodes, the usage of running workloads and the pending
// queue. The workloads come from the in-memory view of committed active
// workloads, so a cycle decodes no rows; they must not be modified: the
// writer takes the view for the rows (getForUpdate).
func (s *Store) Snapshot(ctx context.Context) (*core.Snapshot, error) {
	nodes, err := s.snapshotNodes(ctx)
	if err != nil {
		return nil, err
	}
	teams, err := s.Teams(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	active := slices.Clone(s.order)
	s.mu.RUnlock()
	snap := &core.Snapshot{Usage: map[core.NodeName]*core.NodeUsage{}, Teams: teams}
	for i := range nodes {
		snap.Nodes = append(snap.Nodes, &nodes[i])
		snap.Usage[nodes[i].Name] = &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
	}
	for _, w := range active {
		switch w.Status.Phase {
		case core.Pending:
			snap.Pending = append(snap.Pending, w)
		case core.Running:
			snap.Running = append(snap.Running, w)
			addRunning(snap.Usage, w, true)
		}
	}
	return snap, nil
}

// addRunning adds what the running workload w holds to usage, on each of
// its nodes: those usage has an entry for, or all of them with grow.
func addRunning(usage map[core.NodeName]*core.NodeUsage, w *core.Workload, grow bool) {
	for i, a := range w.Status.Placement {
		if !core.FirstOnNode(w.Status.Placement, i) {
			continue
		}
		u := usage[a.Node]
		if u == nil {
			if !grow {
				continue
			}
			u = &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
			usage[a.Node] = u
		}
		u.Add(a.Node, w.Request, w.Status.Placement)
	}
}

// RowsVersion is a version of the nodes and teams a store holds (Rows).
type RowsVersion struct{ nodes, teams uint64 }

// Rows returns the version of the nodes and teams: on a store one server
// owns, every write of a node or a team changes it (the writer forgets the
// rows it keeps, which counts). ok is false elsewhere (PostgreSQL, where
// other servers write): compare a snapshot's rows instead. A version read
// before a Snapshot is one its rows are at or after.
func (s *Store) Rows() (v RowsVersion, ok bool) {
	if !s.owned() || !s.nodes.keeps() || !s.teams.keeps() {
		return RowsVersion{}, false
	}
	return RowsVersion{nodes: s.nodes.generation(), teams: s.teams.generation()}, true
}

// PendingCount is how many workloads are pending: len of Active's
// pending, without the copy.
func (s *Store) PendingCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pendingAll
}

// Active returns the pending and running workloads as Snapshot gives them
// (in submission order), without the rest of a snapshot: shared values,
// which callers do not change.
func (s *Store) Active() (pending, running []*core.Workload) {
	s.mu.RLock()
	active := slices.Clone(s.order) // the writer waits on mu: copy, then sort out
	s.mu.RUnlock()
	for _, w := range active {
		switch w.Status.Phase {
		case core.Pending:
			pending = append(pending, w)
		case core.Running:
			running = append(running, w)
		}
	}
	return pending, running
}

// PlacementResult says what became of one placement of a plan.
type PlacementResult struct {
	Workload *core.Workload // as stored after the placement, when applied
	Err      error          // why it was rejected
}

// ApplyPlan commits a plan's placements. Each placement is checked again
// against the current state with core.Fits, and rejected alone if the
// workload is no longer pending or the devices no longer fit; the next cycle
// tries again. An applied placement moves the workload to Running, counts an
// attempt, opens one allocation interval per device and records an event.
// Decisions about workloads left pending update their reason when it
// changed: on PostgreSQL in the same transaction, on SQLite in memory once
// it has committed (explain.go), but for a nominated node, written.
// A preemption is applied only while its victim runs the attempt it names
// and its preemptor is still pending.
func (s *Store) ApplyPlan(ctx context.Context, plan core.Plan, now time.Time) ([]PlacementResult, error) {
	results := make([]PlacementResult, len(plan.Placements))
	// On SQLite the explanations go to the view, after the commit
	// (explain.go), but for those of nominated nodes; a plan of
	// explanations alone writes nothing.
	written, inMemory := s.splitExplanations(plan.Unplaced)
	if len(plan.Placements) == 0 && len(plan.Preemptions) == 0 && len(written) == 0 {
		s.explain(inMemory, now)
		return results, nil
	}
	err := s.do(ctx, func(tx *wtx) error {
		// The devices in use on each node the plan places on, read once
		// and then counted up as placements are applied: a plan packs
		// many workloads on one node. A placement rolled back after its
		// devices were counted leaves them counted, which can only
		// reject a later one (the next cycle places it), never
		// over-commit a device.
		usage := map[core.NodeName]*core.NodeUsage{}
		if s.owned() && len(plan.Placements) > 0 {
			usage = viewUsage(tx, plan.Placements)
		}
		for i, p := range plan.Placements {
			var w *core.Workload
			fnErr, err := tx.savepoint("placement", func() (err error) {
				w, err = applyPlacement(tx, p, now, usage)
				return err
			})
			if err != nil {
				return err
			}
			results[i] = PlacementResult{Workload: w, Err: fnErr}
			if fnErr != nil {
				results[i].Workload = nil
			}
		}
		var events []core.Event // the explanations' events, written together
		var statuses []pendingStatus
		for _, d := range written {
			if err := setPendingReason(tx, d, now, &events, &statuses); err != nil {
				return err
			}
		}
		if err := putPendingStatuses(tx, statuses); err != nil {
			return err
		}
		if err := addEvents(tx, events); err != nil {
			return err
		}
		for _, p := range plan.Preemptions {
			if err := preempt(tx, p, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.explain(inMemory, now)
	return results, nil
}

// splitExplanations parts a plan's explanations into those written in its
// transaction and those kept in memory (explain.go). On PostgreSQL all are
// written; on SQLite those that change a workload's nominated node: a
// nominated node is capacity the next cycle holds for the workload, which
// must survive a restart.
func (s *Store) splitExplanations(ds []core.Decision) (written, inMemory []core.Decision) {
	if s.pg != nil {
		return ds, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, d := range ds {
		// A change of nomination (the view's is the row's: only these
		// writes change it, and ApplyPlan has one caller, the loop).
		var cur core.NodeName
		if w := s.active[d.Workload]; w != nil {
			cur = w.Status.Nominated
		}
		if d.Nominated != cur {
			written = append(written, d)
		} else {
			inMemory = append(inMemory, d)
		}
	}
	if len(written) == 0 {
		return nil, ds
	}
	return written, inMemory
}

func applyPlacement(tx *wtx, p core.Placement, now time.Time, usage map[core.NodeName]*core.NodeUsage) (*core.Workload, error) {
	w, err := getForUpdate(tx, p.Workload)
	if err != nil {
		return nil, err
	}
	if w.Status.Phase != core.Pending {
		return nil, fmt.Errorf("place workload %s: it is %s, not Pending: %w", w.ID, w.Status.Phase, core.ErrConflict)
	}
	if len(p.Assignments) == 0 {
		return nil, fmt.Errorf("place workload %s: no devices: %w", w.ID, core.ErrInvalid)
	}
	// Every replica is placed, each once.
	replicas := map[int]bool{}
	for _, a := range p.Assignments {
		replicas[a.Replica] = true
	}
	if len(replicas) != w.Request.Count() {
		return nil, fmt.Errorf("place workload %s: %d of %d replicas placed: %w", w.ID, len(replicas), w.Request.Count(), core.ErrInvalid)
	}
	pools := map[core.NodeName]string{}
	for _, name := range core.Nodes(p.Assignments) {
		node, err := tx.node(name)
		if err != nil {
			return nil, fmt.Errorf("place workload %s: %w", w.ID, err)
		}
		pools[name] = node.Pool
		used := usage[name]
		if used == nil {
			if used, err = nodeUsage(tx, name); err != nil {
				return nil, err
			}
			usage[name] = used
		}
		on, _ := core.OnNode(p.Assignments, name)
		if err := core.Fits(node, used, w.Request, on); err != nil {
			return nil, fmt.Errorf("place workload %s: %w: %w", w.ID, err, core.ErrConflict)
		}
		used.Add(name, w.Request, p.Assignments)
		if _, err := tx.Exec("INSERT INTO workload_nodes (workload_id, node) VALUES (?, ?)", string(w.ID), string(name)); err != nil {
			return nil, err
		}
	}
	from := w.Status.Phase
	t := now.UTC()
	w.Status.Phase = core.Running
	w.Status.Reason = "Scheduled"
	w.Status.Message = fmt.Sprintf("placed on %s", describe(p.Assignments))
	w.Status.Attempts++
	w.Status.Placement = slices.Clone(p.Assignments)
	w.Status.StartedAt = &t
	w.Status.FinishedAt = nil
	w.Status.ExitCode = nil
	w.Status.StopRequested = ""
	w.Status.Nominated = ""
	w.Status.Ready = false
	if err := putStatus(tx, w); err != nil {
		return nil, err
	}
	for _, a := range p.Assignments {
		if _, err := tx.Exec(`INSERT INTO allocations (workload_id, team, attempt, replica, node, gpu_index, gpu_uuid, milli_gpu, memory_mib, start, pool)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, string(w.ID), string(w.Team), w.Status.Attempts, a.Replica, string(a.Node), a.GPUIndex, a.GPUUUID, a.MilliGPU, a.MemoryMiB, unixNano(t), pools[a.Node]); err != nil {
			return nil, err
		}
	}
	return w, addEvent(tx, core.Event{WorkloadID: w.ID, Time: t, Reason: "Scheduled",
		Message: fmt.Sprintf("attempt %d %s", w.Status.Attempts, w.Status.Message), From: from, To: core.Running})
}

// viewUsage is what nodeUsage reads for each node of ps, taken from the
// view of active workloads instead of the rows: the committed workloads
// but those tx changed, and tx's own last changes. Only a store one server
// owns (owned) may: there the view is the truth of what runs.
func viewUsage(tx *wtx, ps []core.Placement) map[core.NodeName]*core.NodeUsage {
	usage := map[core.NodeName]*core.NodeUsage{}
	for _, p := range ps {
		for _, a := range p.Assignments {
			if usage[a.Node] == nil {
				usage[a.Node] = &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
			}
		}
	}
	add := func(w *core.Workload) {
		if w.Status.Phase == core.Running {
			addRunning(usage, w, false)
		}
	}
	tx.s.mu.RLock()
	for _, w := range tx.s.order {
		if tx.last(w.ID) == nil {
			add(w)
		}
	}
	tx.s.mu.RUnlock()
	for _, w := range tx.changed {
		if tx.last(w.ID) == w {
			add(w)
		}
	}
	return usage
}

func describe(as []core.Assignment) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s gpu %d", a.Node, a.GPUIndex)
		if a.MilliGPU < 1000 {
			s += fmt.Sprintf(" (%d milli-GPU, %d MiB)", a.MilliGPU, a.MemoryMiB)
		}
	}
	return s
}

// setPendingReason writes d's explanation into its pending workload's
// status, and appends to events the event it adds, if any. On PostgreSQL
// the status is appended to statuses instead, for putPendingStatuses to
// write together: one statement, not one round trip a workload.
func setPendingReason(tx *wtx, d core.Decision, now time.Time, events *[]core.Event, statuses *[]pendingStatus) error {
	var w *core.Workload
	if known := tx.known(d.Workload); known != nil && known.Status.Phase == core.Pending {
		// Only the status's strings change: a shallow copy shares the
		// rest with the view, whose values are never changed in place
		// (getForUpdate's deep copy, for writes that change more). A
		// value a write of this batch changed and handed to its caller
		// (a submit's) is copied whole: the view must share nothing
		// with it.
		if tx.handedOut(known) {
			known = known.Clone()
		}
		c := *known
		w = &c
	} else {
		var err error
		w, err = getForUpdate(tx, d.Workload)
		if errors.Is(err, core.ErrNotFound) {
			return nil // gone; nothing to explain
		}
		if err != nil {
			return err
		}
	}
	if w.Status.Phase != core.Pending {
		return nil // moved on; nothing to explain
	}
	if w.Status.Reason == d.Reason && w.Status.Message == d.Message && w.Status.Nominated == d.Nominated {
		return nil
	}
	// The status always holds the latest explanation; an event is recorded
	// only when the reason or the nominated node changes, so that a message
	// that tracks the cluster (the best node, the counts) does not add an
	// event every cycle.
	newEvent := w.Status.Reason != d.Reason || w.Status.Nominated != d.Nominated
	w.Status.Reason, w.Status.Message, w.Status.Nominated = d.Reason, d.Message, d.Nominated
	// Still Pending, on no node: only the status column changes, and no
	// index with it.
	b, err := json.Marshal(&w.Status)
	if err != nil {
		return err
	}
	// The row is found by its ID alone: "phase || ''" keeps the phase's
	// index out of the plan (PostgreSQL's generic plan for a prepared
	// "id = $1 AND phase = $2" took it, and the submits on PostgreSQL
	// fell from about 1,200/s to 600/s, p99 from 70 to 600 ms).
	if tx.s.pg != nil {
		*statuses = append(*statuses, pendingStatus{w.ID, b})
	} else {
		res, err := tx.Exec("UPDATE workloads SET status = ? WHERE id = ? AND phase || '' = 'Pending'", b, string(w.ID))
		if err := wroteOne(res, err, w.ID); err != nil {
			return err
		}
	}
	tx.keep(w) // the writer's own copy: the view takes it as it is
	tx.explains = append(tx.explains, w.ID)
	if newEvent {
		*events = append(*events, core.Event{WorkloadID: w.ID, Time: now, Type: core.EventNormal, Reason: d.Reason, Message: d.Message})
	}
	return nil
}

// pendingStatus is a pending workload's status to write.
type pendingStatus struct {
	id     core.WorkloadID
	status []byte
}

// putPendingStatuses writes the statuses of pending workloads, on
// PostgreSQL, in one UPDATE; every row must be written, as wroteOne
// requires of each.
func putPendingStatuses(tx *wtx, ps []pendingStatus) error {
	if len(ps) == 0 {
		return nil
	}
	ids, statuses := make([]string, len(ps)), make([][]byte, len(ps))
	for i, p := range ps {
		ids[i], statuses[i] = string(p.id), p.status
	}
	res, err := tx.Exec(`UPDATE workloads SET status = u.status FROM unnest(?::text[], ?::bytea[]) AS u(id, status)
		WHERE workloads.id = u.id AND workloads.phase = 'Pending'`, ids, statuses)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(len(ps)) {
		return fmt.Errorf("%d pending workloads' rows updated of %d: the store's view is out of step with them", n, len(ps))
	}
	return nil
}

// closeAllocations ends the open allocation intervals of a workload with
// how the attempt ended (core.AllocFailed, core.AllocPreempted or empty)
// and forgets the nodes it ran on.
func closeAllocations(tx *wtx, id core.WorkloadID, now time.Time, outcome string) error {
	if _, err := tx.Exec(`UPDATE allocations SET "end" = ?, outcome = ? WHERE workload_id = ? AND "end" IS NULL`, unixNano(now), outcome, string(id)); err != nil {
		return err
	}
	_, err := tx.Exec("DELETE FROM workload_nodes WHERE workload_id = ?", string(id))
	return err
}

// Finish records the end of a running attempt: phase is Succeeded, Failed or
// Cancelled. A finish for another attempt than the current one, or for a
// workload that is not Running, is ignored (and reported as ErrConflict), so
// that a late report cannot touch a newer attempt. The attempt is recorded
// (Attempts) with its use unknown.
func (s *Store) Finish(ctx context.Context, id core.WorkloadID, attempt int, phase core.Phase, reason, message string, exitCode *int, now time.Time) (*core.Workload, error) {
	return s.FinishUsed(ctx, id, attempt, phase, reason, message, exitCode, core.HostUse{}, now)
}

// FinishUsed is Finish with what the attempt used of its host, recorded
// with its end in the same transaction.
func (s *Store) FinishUsed(ctx context.Context, id core.WorkloadID, attempt int, phase core.Phase, reason, message string, exitCode *int, used core.HostUse, now time.Time) (*core.Workload, error) {
	if !phase.Terminal() {
		return nil, fmt.Errorf("finish workload %s as %s: %w", id, phase, core.ErrInvalid)
	}
	var out *core.Workload
	err := s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		if w.Status.Phase != core.Running || w.Status.Attempts != attempt {
			return fmt.Errorf("finish workload %s attempt %d: it is %s at attempt %d: %w", id, attempt, w.Status.Phase, w.Status.Attempts, core.ErrConflict)
		}
		t := now.UTC()
		if err := recordAttempt(tx, w, phase, reason, used, t); err != nil {
			return err
		}
		from := w.Status.Phase
		w.Status.Phase, w.Status.Reason, w.Status.Message = phase, reason, message
		w.Status.ExitCode = exitCode
		w.Status.FinishedAt = &t
		w.Status.StopRequested = ""
		w.Status.Ready = false
		if err := putStatus(tx, w); err != nil {
			return err
		}
		outcome := ""
		if phase == core.Failed {
			outcome = core.AllocFailed
		}
		if err := closeAllocations(tx, id, t, outcome); err != nil {
			return err
		}
		typ := core.EventNormal
		if phase == core.Failed {
			typ = core.EventWarning
		}
		msg := message
		if exitCode != nil {
			msg = fmt.Sprintf("exit code %d", *exitCode)
			if message != "" {
				msg += ": " + message
			}
		}
		out = w
		return addEvent(tx, core.Event{WorkloadID: id, Time: t, Type: typ, Reason: reason, Message: msg, From: from, To: phase})
	})
	return out, err
}

// Requeue ends a running attempt that was preempted or lost (via is
// core.Preempted or core.Lost) and puts the workload back in the queue as
// Pending. Its allocations are closed, the attempt is recorded (Attempts,
// ended in via, its use unknown) and two events record the passage
// Running → via → Pending.
func (s *Store) Requeue(ctx context.Context, id core.WorkloadID, attempt int, via core.Phase, reason, message string, now time.Time) (*core.Workload, error) {
	return s.RequeueUsed(ctx, id, attempt, via, reason, message, core.HostUse{}, now)
}

// RequeueUsed is Requeue with what the attempt used of its host, recorded
// with its end in the same transaction.
func (s *Store) RequeueUsed(ctx context.Context, id core.WorkloadID, attempt int, via core.Phase, reason, message string, used core.HostUse, now time.Time) (*core.Workload, error) {
	if via != core.Preempted && via != core.Lost {
		return nil, fmt.Errorf("requeue workload %s via %s: %w", id, via, core.ErrInvalid)
	}
	var out *core.Workload
	err := s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		if w.Status.Phase != core.Running || w.Status.Attempts != attempt {
			return fmt.Errorf("requeue workload %s attempt %d: it is %s at attempt %d: %w", id, attempt, w.Status.Phase, w.Status.Attempts, core.ErrConflict)
		}
		t := now.UTC()
		if err := recordAttempt(tx, w, via, reason, used, t); err != nil {
			return err
		}
		if via == core.Preempted {
			w.Status.Preemptions++
		}
		w.Status.Phase, w.Status.Reason, w.Status.Message = core.Pending, string(via), message
		w.Status.Placement = nil
		w.Status.StartedAt = nil // the attempt's start stays in its events and allocation interval
		w.Status.StopRequested = ""
		w.Status.PreemptedBy = ""
		w.Status.ExitCode = nil
		w.Status.Ready = false
		if err := putStatus(tx, w); err != nil {
			return err
		}
		outcome := core.AllocFailed // a lost attempt's GPU time did no work
		if via == core.Preempted {
			outcome = core.AllocPreempted
		}
		if err := closeAllocations(tx, id, t, outcome); err != nil {
			return err
		}
		if err := addEvent(tx, core.Event{WorkloadID: id, Time: t, Type: core.EventWarning, Reason: reason, Message: message, From: core.Running, To: via}); err != nil {
			return err
		}
		out = w
		return addEvent(tx, core.Event{WorkloadID: id, Time: t, Reason: "Requeued", Message: fmt.Sprintf("attempt %d ended; back in the queue", attempt), From: via, To: core.Pending})
	})
	return out, err
}

// CancelPending ends a workload that is still Pending (phase Cancelled),
// as RequestStop does; a workload placed meanwhile (or ended) is left as
// it is, and the error wraps core.ErrConflict.
func (s *Store) CancelPending(ctx context.Context, id core.WorkloadID, reason, message string, now time.Time) error {
	return s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		if w.Status.Phase != core.Pending {
			return fmt.Errorf("cancel workload %s: it is %s, not Pending: %w", id, w.Status.Phase, core.ErrConflict)
		}
		return cancelLocked(tx, w, reason, message, now)
	})
}

// cancelLocked records a Pending workload Cancelled.
func cancelLocked(tx *wtx, w *core.Workload, reason, message string, now time.Time) error {
	t := now.UTC()
	w.Status.Phase, w.Status.Reason, w.Status.Message = core.Cancelled, reason, message
	w.Status.FinishedAt = &t
	if err := putStatus(tx, w); err != nil {
		return err
	}
	return addEvent(tx, core.Event{WorkloadID: w.ID, Time: t, Reason: reason, Message: message, From: core.Pending, To: core.Cancelled})
}

// RequestStop asks for a workload to end. A Pending workload ends at once
// (phase Cancelled); a Running one is marked with the reason and keeps its
// GPUs until the executor reports its end, which the control loop records as
// Cancelled. A finished workload is returned unchanged.
func (s *Store) RequestStop(ctx context.Context, id core.WorkloadID, reason, message string, now time.Time) (*core.Workload, error) {
	var out *core.Workload
	err := s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		out = w
		t := now.UTC()
		switch w.Status.Phase {
		case core.Pending:
			return cancelLocked(tx, w, reason, message, now)
		case core.Running:
			if w.Status.StopRequested != "" {
				return nil
			}
			w.Status.StopRequested = reason
			w.Status.Message = message
			if err := putStatus(tx, w); err != nil {
				return err
			}
			return addEvent(tx, core.Event{WorkloadID: id, Time: t, Reason: "StopRequested", Message: message})
		}
		return nil
	})
	return out, err
}

// Disrupt asks a running workload to stop and be requeued
// (core.StopDisrupted), as an acceptance card's failure stage does; a
// workload that is not running, or is stopping already, is
// core.ErrConflict.
func (s *Store) Disrupt(ctx context.Context, id core.WorkloadID, message string, now time.Time) (*core.Workload, error) {
	var out *core.Workload
	err := s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		if w.Status.Phase != core.Running || w.Status.StopRequested != "" {
			return fmt.Errorf("workload %s is %s%s: only a running workload can be disrupted: %w", id, w.Status.Phase, stopping(w), core.ErrConflict)
		}
		w.Status.StopRequested, w.Status.Message = core.StopDisrupted, message
		if err := putStatus(tx, w); err != nil {
			return err
		}
		out = w
		return addEvent(tx, core.Event{WorkloadID: id, Time: now.UTC(), Type: core.EventWarning, Reason: "StopRequested", Message: message})
	})
	return out, err
}

func stopping(w *core.Workload) string {
	if w.Status.StopRequested != "" {
		return " (stopping: " + w.Status.StopRequested + ")"
	}
	return ""
}

// preempt asks a running workload to stop for a preemptor. A victim that is
// gone, no longer running that attempt, or already stopping is left alone;
// an error reading it (other than not found) fails the write.
func preempt(tx *wtx, p core.Preemption, now time.Time) error {
	w, err := getForUpdate(tx, p.Victim)
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if w.Status.Phase != core.Running || w.Status.Attempts != p.Attempt || w.Status.StopRequested != "" {
		return nil
	}
	// A preemptor that is no longer pending (cancelled, or placed after
	// all, between the snapshot and this commit) needs nothing freed.
	pw, err := getForUpdate(tx, p.Preemptor)
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return err
	}
	if err != nil || pw.Status.Phase != core.Pending {
		return nil
	}
	// The status says at once that it is being stopped and why; the event
	// that names the reason is recorded when it stops (Requeue), and this
	// one marks the decision.
	t := now.UTC()
	w.Status.StopRequested, w.Status.PreemptedBy, w.Status.PreemptedAt = p.Reason, p.Preemptor, &t
	w.Status.Reason, w.Status.Message = p.Reason, p.Message
	if err := putStatus(tx, w); err != nil {
		return err
	}
	return addEvent(tx, core.Event{WorkloadID: w.ID, Time: now.UTC(), Type: core.EventWarning, Reason: "StopRequested", Message: p.Message})
}

// SetReady records whether a running attempt answered its readiness check,
// with an event when that changes. A workload that has moved on (another
// attempt, not running) is left alone.
func (s *Store) SetReady(ctx context.Context, id core.WorkloadID, attempt int, ready bool, message string, now time.Time) error {
	return s.do(ctx, func(tx *wtx) error {
		w, err := getForUpdate(tx, id)
		if err != nil {
			return err
		}
		if w.Status.Phase != core.Running || w.Status.Attempts != attempt || w.Status.Ready == ready {
			return nil
		}
		w.Status.Ready = ready
		if err := putStatus(tx, w); err != nil {
			return err
		}
		e := core.Event{WorkloadID: id, Time: now.UTC(), Reason: "Ready", Message: message}
		if !ready {
			e.Type, e.Reason = core.EventWarning, "NotReady"
		}
		return addEvent(tx, e)
	})
}
