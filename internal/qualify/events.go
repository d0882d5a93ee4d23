package qualify

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/health"
)

// Cordon stops new work from landing on a node; what runs there stays.
func (q *Qualifier) Cordon(ctx context.Context, name core.NodeName, by string) (core.NodeStatus, error) {
	now := q.opts.Now().UTC()
	return q.opts.Store.UpdateNodeStatus(ctx, name, now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		to, err := st.Cordon()
		if err != nil {
			return nil, fmt.Errorf("cordon %s: %w", name, err)
		}
		return []core.NodeEvent{transition(st, to, "Cordoned", "cordoned: it takes no new work; what runs there stays", by, now)}, nil
	})
}

// Drain cordons a node and stops its running work with the checkpoint-
// friendly stop (SIGTERM, its grace period, SIGKILL); the work is requeued
// and the node ends Cordoned.
func (q *Qualifier) Drain(ctx context.Context, name core.NodeName, grace time.Duration, by string) (core.NodeStatus, error) {
	now := q.opts.Now().UTC()
	snap, err := q.opts.Store.Snapshot(ctx)
	if err != nil {
		return core.NodeStatus{}, err
	}
	idle := len(running(snap, name)) == 0
	st, err := q.opts.Store.UpdateNodeStatus(ctx, name, now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		to, err := st.Drain()
		if err != nil {
			return nil, fmt.Errorf("drain %s: %w", name, err)
		}
		st.DrainGrace = grace
		evs := []core.NodeEvent{transition(st, to, "Draining", "draining: running work is stopped and requeued; no new work lands here", by, now)}
		if idle {
			// Nothing runs there: drained at once. (The loop's next step
			// stops the work of a busy node, then cordons it.)
			evs = append(evs, transition(st, core.NodeCordoned, "Drained", "nothing ran there; it takes no new work until uncordoned", by, now))
		}
		return evs, nil
	})
	return st, err
}

// Uncordon returns a cordoned or draining node to service.
func (q *Qualifier) Uncordon(ctx context.Context, name core.NodeName, by string) (core.NodeStatus, error) {
	now := q.opts.Now().UTC()
	return q.opts.Store.UpdateNodeStatus(ctx, name, now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		was := st.State
		to, err := st.Uncordon()
		if err != nil {
			return nil, fmt.Errorf("uncordon %s: %w", name, err)
		}
		if was == core.NodeValidating {
			st.Validate, st.After = nil, ""
			return []core.NodeEvent{transition(st, to, "ValidationCancelled", "the qualification was given up; back in service without it", by, now)}, nil
		}
		return []core.NodeEvent{transition(st, to, "Uncordoned", "back in service", by, now)}, nil
	})
}

// XidCount is how many Xid errors of a code a device reported.
type XidCount struct {
	Node  core.NodeName
	GPU   int
	Xid   int
	Count int64
}

// XidCounts returns the Xid errors seen since the server started.
func (q *Qualifier) XidCounts() []XidCount {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]XidCount, 0, len(q.xids))
	for k, v := range q.xids {
		out = append(out, XidCount{Node: k.node, GPU: k.gpu, Xid: k.code, Count: v})
	}
	return out
}

// Xid records an Xid error on device gpu of a node, as DCGM's health watch
// classes it: a fatal one fails the device (its workloads are stopped and
// requeued, and the device is qualified again once free), a warning makes
// it Suspect, an application error is an event on the workloads that hold
// the device, any other an event on the node.
func (q *Qualifier) Xid(ctx context.Context, name core.NodeName, gpu, code int, message string) error {
	q.mu.Lock()
	q.xids[xidKey{name, gpu, code}]++
	q.mu.Unlock()
	now := q.opts.Now().UTC()
	class := health.ClassifyXid(code)
	reason := fmt.Sprintf("Xid%d", code)
	msg := fmt.Sprintf("Xid %d on GPU %d", code, gpu)
	if message != "" {
		msg += ": " + message
	}
	snap, err := q.opts.Store.Snapshot(ctx)
	if err != nil {
		return err
	}
	var on []*core.Workload
	for _, w := range running(snap, name) {
		if holds(w, name, []int{gpu}) {
			on = append(on, w)
		}
	}
	switch class {
	case health.XidApplication:
		for _, w := range on {
			if _, err := q.opts.Store.Warn(ctx, w.ID, w.Status.Attempts, reason, msg+" (an application error: the device is fine)", now); err != nil {
				return err
			}
		}
		return nil
	case health.XidFatal, health.XidWarning:
	default:
		_, err := q.opts.Store.UpdateNodeStatus(ctx, name, now, func(*core.Node, *core.NodeStatus) ([]core.NodeEvent, error) {
			return []core.NodeEvent{{Time: now, Type: core.EventWarning, Reason: reason, Message: msg, GPU: gpu}}, nil
		})
		return err
	}
	_, err = q.opts.Store.UpdateNodeStatus(ctx, name, now, func(n *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
		if !slices.ContainsFunc(n.GPUs, func(g core.GPU) bool { return g.Index == gpu }) {
			return nil, fmt.Errorf("node %s has no GPU %d: %w", name, gpu, core.ErrInvalid)
		}
		if st.GPUs == nil {
			st.GPUs = map[int]core.GPUStatus{}
		}
		if class == health.XidWarning {
			if st.GPUs[gpu].Health == core.GPUFailed {
				return []core.NodeEvent{{Time: now, Type: core.EventWarning, Reason: reason, Message: msg, GPU: gpu}}, nil
			}
			st.GPUs[gpu] = core.GPUStatus{Health: core.GPUSuspect, Reason: reason, Message: msg, Since: now}
			return []core.NodeEvent{{Time: now, Type: core.EventWarning, Reason: reason, Message: msg + ": GPU is Suspect", GPU: gpu}}, nil
		}
		st.GPUs[gpu] = core.GPUStatus{Health: core.GPUFailed, Reason: reason, Message: msg, Since: now}
		evs := []core.NodeEvent{{Time: now, Type: core.EventWarning, Reason: reason, Message: msg + ": GPU Failed; its work is requeued and it is qualified again once free", GPU: gpu}}
		switch v := st.Validate; {
		case v == nil && st.State != core.NodeValidating && st.State != core.NodeRegistering:
			st.Validate = &core.ValidateRequest{Level: max(2, q.opts.Level), GPUs: []int{gpu}, Reason: "after " + msg, At: now}
		case v != nil && len(v.GPUs) > 0 && !slices.Contains(v.GPUs, gpu):
			// A qualification of other devices is asked: this one joins it.
			v.GPUs = append(v.GPUs, gpu)
			v.Level = max(v.Level, 2, q.opts.Level)
		}
		return evs, nil
	})
	if err != nil {
		return err
	}
	if class == health.XidFatal {
		q.stop(ctx, on, ReasonGPUFailed, msg+": the GPU failed; requeued")
	}
	return nil
}

// Fault is what may be injected on a simulated node.
type Fault struct {
	GPU *int
	// Diag makes the device's next diagnostic fail this test.
	Diag string
	// Xid reports an Xid error on the device now.
	Xid int
	// HeartbeatLost makes the node Lost now: its work is requeued and it
	// returns through qualification.
	HeartbeatLost bool
}

// InjectFault injects a fault on a node whose devices are all simulated; a
// real node is core.ErrForbidden.
func (q *Qualifier) InjectFault(ctx context.Context, name core.NodeName, f Fault, by string) error {
	now := q.opts.Now().UTC()
	snap, err := q.opts.Store.Snapshot(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(snap.Nodes, func(n *core.Node) bool { return n.Name == name })
	if i < 0 {
		return fmt.Errorf("node %s: %w", name, core.ErrNotFound)
	}
	n := snap.Nodes[i]
	if !simulated(n) {
		return fmt.Errorf("node %s has real GPUs: faults are injected on simulated nodes only: %w", name, core.ErrForbidden)
	}
	if f.GPU != nil && !slices.ContainsFunc(n.GPUs, func(g core.GPU) bool { return g.Index == *f.GPU }) {
		return fmt.Errorf("node %s has no GPU %d: %w", name, *f.GPU, core.ErrInvalid)
	}
	switch {
	case f.HeartbeatLost:
		_, err := q.opts.Store.UpdateNodeStatus(ctx, name, now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
			ev := transition(st, core.NodeLost, "HeartbeatLost", "no heartbeat (injected): its work is requeued; it returns through qualification", by, now)
			st.Validate = &core.ValidateRequest{Level: q.opts.Level, Reason: "after its heartbeat was lost", At: now}
			return []core.NodeEvent{ev}, nil
		})
		if err != nil {
			return err
		}
		q.stop(ctx, running(snap, name), ReasonNodeLost, fmt.Sprintf("node %s lost its heartbeat; requeued", name))
		return nil
	case f.GPU == nil:
		return fmt.Errorf("gpu: a diagnostic or Xid fault names a GPU: %w", core.ErrInvalid)
	case f.Xid > 0:
		return q.Xid(ctx, name, *f.GPU, f.Xid, "injected")
	case f.Diag != "":
		if health.SimTestLevel(f.Diag) == 0 {
			return fmt.Errorf("diag %q: not a test dcgmi diag runs; one of memory, pcie (level 2), diagnostic, targeted_stress, targeted_power, memory_bandwidth (level 3): %w", f.Diag, core.ErrInvalid)
		}
		_, err := q.opts.Store.UpdateNodeStatus(ctx, name, now, func(_ *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error) {
			st.Faults = append(st.Faults, core.DiagFault{GPU: *f.GPU, Test: f.Diag})
			return []core.NodeEvent{{Time: now, Type: core.EventWarning, Reason: "FaultInjected",
				Message: fmt.Sprintf("the next diagnostic of GPU %d at level %d or above fails test %s", *f.GPU, health.SimTestLevel(f.Diag), f.Diag), GPU: *f.GPU, By: by}}, nil
		})
		return err
	}
	return fmt.Errorf("diag: give a diagnostic test, an xid or heartbeat lost: %w", core.ErrInvalid)
}
