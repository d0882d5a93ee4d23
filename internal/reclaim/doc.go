// Package reclaim decides which running workloads to warn and stop because
// they leave their GPUs idle, or use more GPU memory than their share.
//
// Decide is a pure function of the previous state, the latest sample, the
// running workloads, the rules and the time: it does no I/O, reads no clock
// and starts no goroutines. The control loop's monitor applies what it
// returns (a Warning event, a stop through the store). It imports only
// core.
package reclaim
