// Package core holds gpufleet's domain nouns and the rules every edge and
// loop shares: workloads and their requests, nodes and their GPUs,
// assignments of GPU shares, the snapshot the scheduler reads and the plan
// it writes; the fit check (Fits), which the store applies to every
// placement at commit and against which the scheduler's property tests
// check its own faster checks; whether a request could ever run on a node
// (Feasible); the admission of a submission (Admission.Admit, admit.go),
// the one step that gives it its defaults and refuses what may never run,
// whichever edge it comes through; the error kinds the edges map to
// status codes; users and their roles (a service account stays in its one
// team: User.CheckNew, CheckChange); and the form in which a message names
// another workload (Mention), so that the API server can take it out for
// readers of other teams (Redact).
//
// Quantities are integers: milli-GPU (1000 is one device) and MiB. core does
// no I/O, reads no clock, logs nothing and imports only the standard
// library.
package core
