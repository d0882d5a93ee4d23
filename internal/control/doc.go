// Package control is the loop that joins the store, the scheduler and the
// executor: wait for a change, snapshot, schedule, apply the plan (the store
// re-checks every placement), launch what was placed, stop what was asked to
// stop, and record every exit. It is the only code that calls both the store
// and the executor.
//
// Everything happens on one goroutine, so the loop needs no locks: exits,
// store changes and the loop's own timer are events handled one at a time.
// The one exception is starting what a cycle placed: under Run a bounded
// pool (launcher.go, StartParallelism at a time) starts the committed
// placements while the next cycles plan, so that a burst of pod creations
// never holds the scheduler; an attempt whose start is in flight is not
// stopped until it has returned, and a start that fails unrecorded comes
// back to the loop's goroutine. Step starts a cycle's placements before it
// returns, so that a virtual clock sees them at once.
//
// Cycles are event-driven (wake.go): a cycle runs on a change of the store
// (a submission, an exit recorded, a node, a quota), at the time the last
// plan asked for (sched.Options.NextWake: a workload crossing
// StarvationAfter or Burst.After, a MinRuntime window ending), at the next
// max runtime, when a budget gate changed (read every Resync), Resync after
// a cycle that left something to retry, and otherwise every 60 × Resync
// (the safety resync), so that an idle server does not re-run its queue.
// Changes are paced: one that comes less than eight times the last cycle's
// length (at most 1 s) after it ended waits until then, with the others that
// come meanwhile, so that a flood of submits leaves the CPU to the API and
// the writer. A cycle hands the store its explanations of pending workloads
// 128 at a time: on PostgreSQL each is a write, so that a submit queued
// meanwhile waits for one of them only; on SQLite the store keeps them in
// memory, but for a change of nominated node, which it writes.
// With a clock of the caller's (a virtual one), the loop runs every Resync,
// as it cannot wait on that clock. Step, for callers that drive the loop
// themselves, runs one cycle whenever called.
//
// After a restart Reconcile re-adopts the workloads the store says are
// Running: the executor either finds the process (still alive, or ended with
// its result recorded) or the workload is marked Lost and requeued. A
// workload is never started twice for one attempt, and a finished one never
// runs again, because only Pending workloads are placed.
//
// An exit (or a failed start) that the store cannot record, because its disk
// is full, is not dropped: the loop keeps it in memory, with the outcome
// decided when it was seen, and tries again with backoff each cycle until the
// store takes it. Until then the attempt keeps its GPUs and is never
// requeued, taken for lost, stopped or preempted, so that an attempt that has
// ended is never run again. A restart loses only what the executor keeps on
// disk anyway (the local executor's exit file), and Reconcile, too, keeps
// what it cannot record rather than failing.
//
// A start that fails because the executor cannot reach the task's cluster
// (an error wrapping executor.ErrUnavailable) is not the workload's fault:
// it is requeued as a lost attempt (reason ClusterUnreachable), not failed.
//
// Beside the loop, on goroutines of their own: the readiness Prober, the
// VolumeReconciler (the executor's volumes follow the store's, deleted
// volumes' data purged before a volume of their name is made again), the
// usage Monitor. Burst capacity (asking a cluster for nodes, giving idle
// ones back) is package burst's, run beside the loop by the leader.
//
// control imports core, sched, store, executor, usage and reclaim; the
// API server and the edges never import it.
package control
