package core

import (
	"fmt"
	"slices"
	"time"
)

// NodeState is where a node is in its lifecycle. The executor reports a
// node (its devices, labels, whether its cluster lets it take pods); the
// platform decides its state, and only a Ready node takes new work.
//
//	Registering → Validating → Ready ⇄ Cordoned
//	Ready, Cordoned → Draining → Cordoned
//	any → Failed (qualification, a fatal health event) → Validating
//	any → Lost (no heartbeat) → Validating
type NodeState string

const (
	NodeRegistering NodeState = "Registering"
	NodeValidating  NodeState = "Validating"
	NodeReady       NodeState = "Ready"
	NodeCordoned    NodeState = "Cordoned"
	NodeDraining    NodeState = "Draining"
	NodeFailed      NodeState = "Failed"
	NodeLost        NodeState = "Lost"
)

// NodeStates lists the states, for metrics.
var NodeStates = []NodeState{NodeRegistering, NodeValidating, NodeReady, NodeCordoned, NodeDraining, NodeFailed, NodeLost}

// GPU health.
const (
	GPUHealthy = "Healthy"
	GPUSuspect = "Suspect" // a warning: it still takes work
	GPUFailed  = "Failed"  // it takes no new work until it passes qualification again
	// GPUValidating is a device a qualification of it alone waits for or
	// runs on: it takes no new work meanwhile. It is a merged view only
	// (Node.Apply), never stored.
	GPUValidating = "Validating"
)

// GPUHealths lists the healths, for metrics.
var GPUHealths = []string{GPUHealthy, GPUSuspect, GPUFailed}

// GPUStatus is one device's health as the platform last judged it.
type GPUStatus struct {
	Health  string    `json:"health"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since"`
}

// NodeStatus is what the platform decides about a node, kept apart from
// what its executor reports (Node), which rewrites it at every heartbeat.
type NodeStatus struct {
	State   NodeState `json:"state"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since"`
	// GPUs holds each device's health, by index; a device not listed is
	// Healthy.
	GPUs map[int]GPUStatus `json:"gpus,omitempty"`
	// Validate is a qualification asked for and not yet run.
	Validate *ValidateRequest `json:"validate,omitempty"`
	// After is the state the node returns to once a validation it was
	// not Registering, Failed or Lost for passes (Ready or Cordoned).
	After NodeState `json:"after,omitempty"`
	// DrainGrace is the grace period a drain gives running work.
	DrainGrace time.Duration `json:"drainGrace,omitempty"`
	// Faults are the diagnostic faults injected on a simulated node: the
	// next diagnostic of that device fails that test.
	Faults []DiagFault `json:"faults,omitempty"`
	// LastQualified is when the node last passed qualification.
	LastQualified *time.Time `json:"lastQualified,omitempty"`
}

// ValidateRequest is a qualification to run: at Level (1 to 3, as dcgmi
// diag -r), of the given devices only (none: the whole node), asked by By
// ("" for the platform) for Reason. Drain requeues the work on the devices
// under test rather than wait for it to end; Waits says, as of the
// request, what the qualification waits for and for how long.
type ValidateRequest struct {
	Level  int       `json:"level"`
	GPUs   []int     `json:"gpus,omitempty"`
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	Drain  bool      `json:"drain,omitempty"`
	Waits  string    `json:"waits,omitempty"`
}

// DiagFault makes the next diagnostic of a simulated device fail a test.
type DiagFault struct {
	GPU  int    `json:"gpu"`
	Test string `json:"test"`
}

// NodeEvent is one change of a node's state or of a device's health.
type NodeEvent struct {
	ID      int64     `json:"id"`
	Node    NodeName  `json:"node"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"` // EventNormal or EventWarning
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	// GPU is the device the event is about; -1 for the node.
	GPU  int       `json:"gpu"`
	From NodeState `json:"from,omitempty"`
	To   NodeState `json:"to,omitempty"`
	// By names the person who caused it ("" for the platform).
	By string `json:"by,omitempty"`
}

// Evidence is the record of one qualification command run on a node: what
// ran, what it printed (bounded), how long it took and what it showed.
type Evidence struct {
	ID   int64    `json:"id"`
	Node NodeName `json:"node"`
	Run  string   `json:"run"` // the qualification run it belongs to
	// Check names a check that its command alone does not tell
	// (EvidenceCUDAInit).
	Check  string   `json:"check,omitempty"`
	GPUs   []int    `json:"gpus,omitempty"`
	Argv   []string `json:"command"`
	Exit   *int     `json:"exitCode"`
	Stdout string   `json:"stdout"`
	Stderr string   `json:"stderr"`
	// Err says why the command did not run or finish (not found, timed
	// out); empty when it ran to its end.
	Err        string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	DurationMs int64     `json:"durationMs"`
	// Result is Pass, Fail or NotAvailable, with what the check found.
	Result  string `json:"result"`
	Message string `json:"message,omitempty"`
	// Simulated: a built-in simulator produced the output (simulated GPUs).
	Simulated     bool   `json:"simulated,omitempty"`
	DriverVersion string `json:"driverVersion,omitempty"`
	DCGMVersion   string `json:"dcgmVersion,omitempty"`
}

// EvidenceCUDAInit is the check that CUDA starts in the sandbox workloads
// run in.
const EvidenceCUDAInit = "cuda-init"

// Evidence results.
const (
	EvidencePass         = "Pass"
	EvidenceFail         = "Fail"
	EvidenceNotAvailable = "NotAvailable"
)

// Takes reports whether a node in this state takes new work.
func (s NodeState) Takes() bool { return s == "" || s == NodeReady }

// Apply merges a status into the node as the scheduler sees it: State and
// each device's health, and Schedulable only while the node is Ready (a
// node without a status is Ready: one registered before lifecycles, or in
// a store used without them).
func (n *Node) Apply(st *NodeStatus) {
	if st == nil {
		return
	}
	n.State = st.State
	n.Schedulable = n.Schedulable && st.State.Takes()
	if st.State == NodeDraining {
		n.DrainGrace = st.DrainGrace
	}
	for i := range n.GPUs {
		if g, ok := st.GPUs[n.GPUs[i].Index]; ok {
			n.GPUs[i].Health = g.Health
		}
		if v := st.Validate; v != nil && slices.Contains(v.GPUs, n.GPUs[i].Index) && n.GPUs[i].Health != GPUFailed {
			n.GPUs[i].Health = GPUValidating
		}
	}
}

// Usable reports whether a device may take new work.
func (g GPU) Usable() bool { return g.Health != GPUFailed && g.Health != GPUValidating }

// Cordon, Drain and Uncordon check an operator's transition from a node's
// state; they return the new state or an ErrConflict naming why not.
func (st *NodeStatus) Cordon() (NodeState, error) {
	switch st.State {
	case NodeReady, "":
		return NodeCordoned, nil
	case NodeCordoned:
		return "", fmt.Errorf("node is already cordoned: %w", ErrConflict)
	case NodeDraining:
		return "", fmt.Errorf("node is draining; it is cordoned once its work has stopped: %w", ErrConflict)
	}
	return "", fmt.Errorf("node is %s: only a Ready node can be cordoned: %w", st.State, ErrConflict)
}

// Drain: running work gets the checkpoint-friendly stop and is requeued;
// the node ends Cordoned.
func (st *NodeStatus) Drain() (NodeState, error) {
	switch st.State {
	case NodeReady, NodeCordoned, "":
		return NodeDraining, nil
	case NodeDraining:
		return "", fmt.Errorf("node is already draining: %w", ErrConflict)
	}
	// Not a Failed node: it would end Cordoned, and an uncordon would put
	// it back in service without qualification.
	return "", fmt.Errorf("node is %s: only a Ready or Cordoned node can be drained: %w", st.State, ErrConflict)
}

// Uncordon returns a cordoned or draining node to Ready; a Failed or Lost
// node must pass qualification instead.
func (st *NodeStatus) Uncordon() (NodeState, error) {
	switch st.State {
	case NodeCordoned, NodeDraining:
		return NodeReady, nil
	case NodeReady, "":
		return "", fmt.Errorf("node is not cordoned: %w", ErrConflict)
	case NodeFailed, NodeLost:
		if st.Validate != nil {
			return "", fmt.Errorf("node is %s (%s): it returns to service by passing the qualification already asked for: %w", st.State, st.Reason, ErrConflict)
		}
		return "", fmt.Errorf("node is %s (%s): it returns to service by passing qualification: gpufleet node validate: %w", st.State, st.Reason, ErrConflict)
	case NodeValidating:
		// A qualification that waits for work to end may be given up.
		if st.After == NodeCordoned {
			return NodeCordoned, nil
		}
		return NodeReady, nil
	}
	return "", fmt.Errorf("node is %s: %w", st.State, ErrConflict)
}

// Reasons of the stops the node lifecycle asks for; the control loop
// requeues each workload so stopped: a drain or a qualification as if
// preempted, a failed device or a lost node as a lost attempt.
const (
	StopDrained        = "Drained"
	StopNodeValidating = "NodeValidating"
	StopGPUFailed      = "GPUFailed"
	StopNodeLost       = "NodeLost"
)

// StopDisrupted is the reason of a stop an acceptance card's failure stage
// asks for: the workload is requeued, as if preempted, and announced in
// its stop file, so that it checkpoints.
const StopDisrupted = "Disrupted"
