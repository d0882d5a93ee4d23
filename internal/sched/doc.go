// Package sched is one scheduling cycle: a pure function from a frozen
// core.Snapshot to a core.Plan. It does no I/O, reads no clock (time is an
// argument), starts no goroutines and logs nothing.
//
// This first version places pending workloads in submission order, first
// fit, with backfill: a workload that does not fit is skipped with a reason
// and never blocks smaller ones behind it. Fractions are packed onto the
// device with the least room that still fits them (best fit), so that whole
// devices stay free for whole-GPU requests; whole-GPU requests land on one
// node. Quotas, fair share and preemption come with the full scheduler.
//
// sched imports core only.
package sched
