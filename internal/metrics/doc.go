// Package metrics declares every Prometheus metric of gpufleet and serves
// them: it is the only package that imports the Prometheus client.
//
// The cluster's state (GPUs, allocations, workloads by phase, idle GPUs,
// utilisation) is read at scrape time by a collector, from a snapshot of
// the store and the utilisation tracker, so that it cannot drift from what
// the API reports. Events (scheduling cycles, starts, preemptions, stops)
// are counted as they happen, through the control loop's Reporter, which
// Metrics implements. See docs/OBSERVABILITY.md for the list.
//
// metrics imports core and prometheus/client_golang.
package metrics
