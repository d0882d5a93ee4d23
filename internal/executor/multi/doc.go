// Package multi runs several executors as one: this machine (the local
// executor) and any number of Kubernetes clusters, under one scheduler.
// Each is a Cluster, named as core.Node.Cluster names the cluster of its
// nodes; New takes them and an Options.NodeCluster that reads a node's
// cluster (the server: from the store's nodes).
//
// # Routing
//
// Start and Adopt send a task to the cluster of the node of its
// assignments (all of them must be in one cluster); a task with no
// assignment, on a node of no known cluster, or on a cluster this server
// does not run, is an error that names it. The route of each attempt is
// remembered from just before the cluster starts (or adopts) it until its
// exit has passed through Exits, and then forgotten. While remembered it
// routes Stop, AnnounceStop and ExplainStop (where that cluster's
// executor is an executor.StopAnnouncer or StopExplainer; otherwise they
// do nothing) and Endpoint (false
// where the cluster's executor has no Endpoint method, or the Cluster is
// marked NoEndpoints). Stop of an attempt not remembered goes to every
// cluster, where stopping a task that is not running is no error.
//
// Logs go to the cluster of the workload's highest remembered attempt, and
// the reader comes back unchanged (the local executor's is a file that the
// API server seeks in). A workload with no attempt remembered (it ended,
// perhaps before a restart) takes the log of the first cluster, in order,
// whose Logs succeeds: when attempts ran in two clusters, only that one's
// are shown. The error wraps fs.ErrNotExist only when every cluster said
// so.
//
// # Exits
//
// One goroutine per cluster forwards its exits to one merged channel
// (executor.Outbox: a slow reader never blocks a cluster), each exit once,
// in each cluster's order. Close stops the forwarders; the exits the
// clusters deliver afterwards stay on their own channels, for a new
// Executor over the same clusters (a restart). Close leaves the clusters'
// executors and tasks alone. Unlike the fake executor's, an exit reaches
// the merged channel a moment after the call that caused it returns (a
// forwarder carries it), so a deterministic simulation drives one fake
// directly, not through an Executor.
//
// # Volumes
//
// A team volume is kept in every cluster whose executor is an
// executor.Volumes, each its own copy (a cluster's PVC, this machine's
// directory); data does not move between clusters, so a workload requeued
// in another cluster finds that cluster's copy. EnsureVolume and
// DeleteVolume apply to each such cluster and carry on past one that
// fails, naming it in the error; ListVolumes is the union, each volume
// once; VolumeUsage is the first usage a cluster can tell (not negative),
// else -1. With no such cluster they do nothing (KeepsVolumes is false).
//
// The optional interfaces of the API server's log handling (LogSincer,
// LogFollower) are not routed: an Executor offers neither.
//
// multi imports executor, core and the standard library only.
package multi
