// Package executor defines how the control loop runs workloads: the
// Executor interface and the types that cross it (Task, Exit, the node
// reports), and the small optional interfaces some executors also offer
// (volumes, endpoints, egress enforcement, native submissions). The
// implementations are its sub-packages: local (processes or containers on
// this machine), kubernetes (pods), multi (several clusters as one) and
// fake (in memory); every one passes the conformance suite in
// executortest.
//
// Executor is the one deliberately large interface in gpufleet: the
// control loop is its only consumer and every implementation must offer
// all of it.
//
// It imports core only.
package executor
