// Package app builds the whole server from a Config and runs it until the
// context ends: it opens the store, makes sure an admin and the teams
// exist, starts the executors of the configured clusters, registers this
// machine as a node, re-adopts running workloads, and runs the control
// loop, the monitor, the node lifecycle, the leader election (lead) and
// the HTTP server (the portal in front of the API server) side by side.
//
// It owns wiring and little else: the heap floor of a server process
// (heapfloor.go), the heartbeats that keep nodes alive (heartbeat.go), the
// checkpoints' retention (checkpoints.go). Decisions stay in the packages
// it wires.
//
// It may import every package above its row of the table in
// docs/ARCHITECTURE.md; only cli imports it. Its tests include the
// architecture test, which checks every package's imports against that
// table.
package app
