// Package core holds gpufleet's domain nouns: workloads and their requests,
// nodes and their GPUs, assignments of GPU shares, the snapshot the scheduler
// reads and the plan it writes, and the one fit check that both the scheduler
// and the store call.
//
// Quantities are integers: milli-GPU (1000 is one device) and MiB. core does
// no I/O, reads no clock and imports only the standard library.
package core
