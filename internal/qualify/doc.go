// Package qualify runs the node lifecycle's active side: it qualifies a
// node before it takes work (at registration, on demand, on a schedule and
// after a fatal health event), keeps the evidence, and turns health events
// (Xid errors, a lost heartbeat, injected faults) into device and node
// states. It joins the store, which owns every state, with the commands
// (nvidia-smi, dcgmi) and internal/health, which reads their outputs and
// judges them.
//
// A qualification consumes real capacity, so it is coordinated with the
// scheduler through the node's state: a node being qualified as a whole is
// Validating, which takes no new work, and the commands run only once the
// work on the devices under test has stopped (policy wait, the default) or
// been requeued (policy drain, or a request that asks to drain); a
// qualification says at its request what it will wait for and for how long
// (Waits), says so again while it waits, and may be given up (uncordon). A device qualified alone (on demand, or
// after a fatal event) is Validating (or already Failed), so it takes no
// work, while the node's other devices keep serving. A device that no
// diagnostic could test (no dcgmi, a node whose commands this server cannot
// run) is never put back in service by it. This is the scheduler placing the qualification as
// a system workload that holds the devices exclusively, without a queue
// entry of its own: we chose the node state because a qualification must
// never be preempted, wait behind a team's quota or be billed to one.
//
// qualify imports core, health and store; it runs the commands itself
// (argv, no shell, bounded), or simulated ones.
package qualify
