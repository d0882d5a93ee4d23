// Package burst grows and shrinks the burst pools of Kubernetes clusters,
// on goroutines of its own beside the control loop (the leader runs them).
//
// The Elastic reconciler asks a burst pool's cluster for nodes (through a
// Provisioner, a ProvisioningRequest on Kubernetes) for work that the burst
// policy lets burst and that no burst pool it may use can hold, cheapest
// pool first, backing off from a pool that fails. It counts released nodes
// as room, so a released node still ready is taken back before any new
// node is asked for.
//
// The Releaser gives back idle burst capacity: a burst node on which no
// work has run for burst.idleRelease is Cordoned with reason IdleReleased
// (an event, an audit entry, a log line), so that nothing more lands on it
// and the cluster's autoscaler can remove it once empty; a released node
// is taken back (Ready, reason TakenBack) for work the policy lets burst
// that it can hold. The idle time is read from the store (allocation
// intervals, the node's status and record), not memory, so that a restart
// or a change of leader keeps it.
//
// It imports core, sched (the burst policy, the pending reasons) and store; it decides
// which pool to ask and when to release, never where work runs, which
// stays the scheduler's.
package burst
