// Package control is the loop that joins the store, the scheduler and the
// executor: wait for a change, snapshot, schedule, apply the plan (the store
// re-checks every placement), launch what was placed, stop what was asked to
// stop, and record every exit. It is the only code that calls both the store
// and the executor.
//
// Everything happens on one goroutine, so the loop needs no locks: exits,
// store changes and the resync tick are events handled one at a time.
//
// After a restart Reconcile re-adopts the workloads the store says are
// Running: the executor either finds the process (still alive, or ended with
// its result recorded) or the workload is marked Lost and requeued. A
// workload is never started twice for one attempt, and a finished one never
// runs again, because only Pending workloads are placed.
package control
