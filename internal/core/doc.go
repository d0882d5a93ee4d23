// Package core holds gpufleet's domain nouns: workloads and their requests,
// nodes and their GPUs, assignments of GPU shares, the snapshot the scheduler
// reads and the plan it writes, and the one fit check that both the scheduler
// and the store call. It also holds users and their roles (a service account
// stays in its one team: User.CheckNew, CheckChange), and the form in which a
// message names another workload (Mention), so that the API server can take
// it out for readers of other teams (Redact).
//
// Quantities are integers: milli-GPU (1000 is one device) and MiB. core does
// no I/O, reads no clock and imports only the standard library.
package core
