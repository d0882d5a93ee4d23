package multi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// exitBuffer is the capacity of the merged Exits channel; beyond it exits
// queue in memory (executor.Outbox), so that no cluster's forwarder ever
// blocks on a slow reader.
const exitBuffer = 1024

// Cluster is one executor the server runs, under a name unique among the
// clusters: the name that core.Node.Cluster gives for the nodes it runs.
type Cluster struct {
	Name     string
	Executor executor.Executor
	// NoEndpoints: the server cannot reach this cluster's workloads (a
	// Kubernetes cluster whose pod IPs it cannot route to), so Endpoint
	// answers false for them even when the executor has an Endpoint
	// method.
	NoEndpoints bool
}

// Options configures an Executor.
type Options struct {
	// NodeCluster names the cluster of a node (core.Node.Cluster, as the
	// store has it); false for a node it does not know. Required.
	NodeCluster func(core.NodeName) (string, bool)
}

// endpointer is an executor that says where a task serves its ports (the
// local and kubernetes executors; apiserver.EndpointSource).
type endpointer interface {
	Endpoint(id core.WorkloadID, attempt, port int) (string, bool)
}

// Executor routes every task to the executor of its node's cluster. It is
// safe for concurrent use.
type Executor struct {
	clusters    []Cluster
	byName      map[string]int
	nodeCluster func(core.NodeName) (string, bool)
	out         *executor.Outbox

	mu sync.Mutex
	// routes is where each started or adopted attempt runs, until its
	// exit has passed through: workload, attempt, index in clusters.
	routes map[core.WorkloadID]map[int]int

	done       chan struct{}
	closeOnce  sync.Once
	forwarders sync.WaitGroup
}

var (
	_ executor.Executor      = (*Executor)(nil)
	_ executor.StopAnnouncer = (*Executor)(nil)
	_ executor.Volumes       = (*Executor)(nil)
	_ endpointer             = (*Executor)(nil)
)

// New returns an executor over the clusters and starts forwarding their
// exits; Close stops it. The clusters must have distinct names (an empty
// name is a name too: the cluster of nodes that name none) and executors.
func New(clusters []Cluster, opts Options) (*Executor, error) {
	if len(clusters) == 0 {
		return nil, errors.New("multi: no clusters")
	}
	if opts.NodeCluster == nil {
		return nil, errors.New("multi: Options.NodeCluster is nil")
	}
	m := &Executor{
		clusters:    slices.Clone(clusters),
		byName:      make(map[string]int, len(clusters)),
		nodeCluster: opts.NodeCluster,
		out:         executor.NewOutbox(exitBuffer),
		routes:      map[core.WorkloadID]map[int]int{},
		done:        make(chan struct{}),
	}
	for i, c := range m.clusters {
		if c.Executor == nil {
			return nil, fmt.Errorf("multi: cluster %q has no executor", c.Name)
		}
		if _, dup := m.byName[c.Name]; dup {
			return nil, fmt.Errorf("multi: cluster %q is named twice", c.Name)
		}
		m.byName[c.Name] = i
	}
	for i := range m.clusters {
		m.forwarders.Add(1)
		go m.forward(i)
	}
	return m, nil
}

// Close stops forwarding the clusters' exits and returns once the
// forwarders have stopped: an exit a cluster delivers afterwards stays on
// that cluster's channel, for whoever reads it next (a new Executor over
// the same clusters). Close leaves the clusters' executors and their tasks
// as they are, and does not close the channel of Exits. It is idempotent.
func (m *Executor) Close() error {
	m.closeOnce.Do(func() { close(m.done) })
	m.forwarders.Wait()
	return nil
}

// forward passes the exits of cluster i to the merged channel, forgetting
// each attempt's route before its exit can be read.
func (m *Executor) forward(i int) {
	defer m.forwarders.Done()
	src := m.clusters[i].Executor.Exits()
	for {
		select {
		case <-m.done:
			return
		case x, ok := <-src:
			if !ok {
				return
			}
			m.forget(x.WorkloadID, x.Attempt, i)
			m.out.Put(x) // never blocks: nothing read is lost
		}
	}
}

// Exits implements executor.Executor: the exits of every cluster, each
// once, in the order each cluster delivered them (no order holds between
// clusters).
func (m *Executor) Exits() <-chan executor.Exit { return m.out.C }

// clusterOfTask is the index of the cluster that runs t: the cluster of
// the nodes of its assignments, which must all be in one.
func (m *Executor) clusterOfTask(t executor.Task) (int, error) {
	if len(t.Assignments) == 0 {
		return 0, errors.New("the task has no assignment, so no node and no cluster to run on")
	}
	idx, first := -1, core.NodeName("")
	for _, a := range t.Assignments {
		name, ok := m.nodeCluster(a.Node)
		if !ok {
			return 0, fmt.Errorf("node %q is not known to be in any cluster", a.Node)
		}
		i, ok := m.byName[name]
		if !ok {
			return 0, fmt.Errorf("node %q is in cluster %q, which this server does not run (clusters: %v)", a.Node, name, m.Clusters())
		}
		switch {
		case idx < 0:
			idx, first = i, a.Node
		case idx != i:
			return 0, fmt.Errorf("the task's nodes are in two clusters: %q in %q, %q in %q", first, m.clusters[idx].Name, a.Node, name)
		}
	}
	return idx, nil
}

// remember records that the attempt runs in cluster i. It reports whether
// it added the route; an attempt remembered in another cluster is an error
// wrapping fs.ErrExist.
func (m *Executor) remember(id core.WorkloadID, attempt, i int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, ok := m.routes[id][attempt]; ok {
		if j != i {
			return false, fmt.Errorf("attempt is already running in cluster %q: %w", m.clusters[j].Name, fs.ErrExist)
		}
		return false, nil
	}
	if m.routes[id] == nil {
		m.routes[id] = map[int]int{}
	}
	m.routes[id][attempt] = i
	return true, nil
}

// forget drops the route of the attempt if it leads to cluster i.
func (m *Executor) forget(id core.WorkloadID, attempt, i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, ok := m.routes[id][attempt]; !ok || j != i {
		return
	}
	delete(m.routes[id], attempt)
	if len(m.routes[id]) == 0 {
		delete(m.routes, id)
	}
}

// route is the index of the cluster the attempt runs in.
func (m *Executor) route(id core.WorkloadID, attempt int) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.routes[id][attempt]
	return i, ok
}

// latest is the cluster of the highest attempt of the workload that is
// remembered.
func (m *Executor) latest(id core.WorkloadID) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	best, idx := 0, -1
	for attempt, i := range m.routes[id] {
		if idx < 0 || attempt > best {
			best, idx = attempt, i
		}
	}
	return idx, idx >= 0
}

// Start implements executor.Executor: it starts the task in the cluster of
// its assignments' node, and fails for a task with no assignment, a node
// of no known cluster, or nodes in two clusters. The route is remembered
// before the cluster starts the task, so that an exit that comes at once
// finds it, and dropped again when the start fails.
func (m *Executor) Start(ctx context.Context, t executor.Task) error {
	fail := func(err error) error { return fmt.Errorf("start %s attempt %d: %w", t.WorkloadID, t.Attempt, err) }
	i, err := m.clusterOfTask(t)
	if err != nil {
		return fail(err)
	}
	added, err := m.remember(t.WorkloadID, t.Attempt, i)
	if err != nil {
		return fail(err)
	}
	if err := m.clusters[i].Executor.Start(ctx, t); err != nil {
		if added {
			m.forget(t.WorkloadID, t.Attempt, i)
		}
		return fmt.Errorf("cluster %q: %w", m.clusters[i].Name, err)
	}
	return nil
}

// Adopt implements executor.Executor: it asks the cluster of the task's
// assignments, as Start would, and remembers the route when the task is
// known there.
func (m *Executor) Adopt(ctx context.Context, t executor.Task) (bool, error) {
	i, err := m.clusterOfTask(t)
	if err != nil {
		return false, fmt.Errorf("adopt %s attempt %d: %w", t.WorkloadID, t.Attempt, err)
	}
	added, err := m.remember(t.WorkloadID, t.Attempt, i)
	if err != nil {
		return false, fmt.Errorf("adopt %s attempt %d: %w", t.WorkloadID, t.Attempt, err)
	}
	ok, err := m.clusters[i].Executor.Adopt(ctx, t)
	// Nothing of a task the cluster does not know is left to route to.
	if (err != nil && added) || (err == nil && !ok) {
		m.forget(t.WorkloadID, t.Attempt, i)
	}
	if err != nil {
		return ok, fmt.Errorf("cluster %q: %w", m.clusters[i].Name, err)
	}
	return ok, nil
}

// Stop implements executor.Executor: it stops the attempt in the cluster
// that runs it. An attempt whose route is not known (never started here,
// or its exit has passed) is stopped in every cluster, which is no error
// where it is not running, so that nothing that still runs is missed.
func (m *Executor) Stop(ctx context.Context, id core.WorkloadID, attempt int, grace time.Duration) error {
	if i, ok := m.route(id, attempt); ok {
		if err := m.clusters[i].Executor.Stop(ctx, id, attempt, grace); err != nil {
			return fmt.Errorf("cluster %q: %w", m.clusters[i].Name, err)
		}
		return nil
	}
	var errs []error
	for _, c := range m.clusters {
		if err := c.Executor.Stop(ctx, id, attempt, grace); err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// AnnounceStop implements executor.StopAnnouncer: it passes the reason to
// the cluster that runs the attempt when that cluster's executor announces
// stops; otherwise (another executor, or a route not known) it does
// nothing.
func (m *Executor) AnnounceStop(id core.WorkloadID, attempt int, reason string) error {
	i, ok := m.route(id, attempt)
	if !ok {
		return nil
	}
	a, ok := m.clusters[i].Executor.(executor.StopAnnouncer)
	if !ok {
		return nil
	}
	if err := a.AnnounceStop(id, attempt, reason); err != nil {
		return fmt.Errorf("cluster %q: %w", m.clusters[i].Name, err)
	}
	return nil
}

// ExplainStop implements executor.StopExplainer: it passes the reason to
// the cluster that runs the attempt when that cluster's executor explains
// stops; otherwise it does nothing.
func (m *Executor) ExplainStop(id core.WorkloadID, attempt int, reason, message string) {
	if i, ok := m.route(id, attempt); ok {
		if x, ok := m.clusters[i].Executor.(executor.StopExplainer); ok {
			x.ExplainStop(id, attempt, reason, message)
		}
	}
}

// Logs implements executor.Executor. For a workload with an attempt
// remembered it is the log of the cluster of its highest such attempt,
// unchanged (the local executor's is a file the API server seeks in and
// reads again as it grows). Otherwise (it ended, perhaps before a restart)
// it is the log of the first cluster, in order, whose Logs returns no
// error. When every cluster says fs.ErrNotExist the error wraps it; when
// some fail otherwise, the error names them (an unreachable cluster is not
// taken for an empty log).
func (m *Executor) Logs(id core.WorkloadID) (io.ReadCloser, error) {
	if i, ok := m.latest(id); ok {
		r, err := m.clusters[i].Executor.Logs(id)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", m.clusters[i].Name, err)
		}
		return r, nil
	}
	var errs []error
	for _, c := range m.clusters {
		r, err := c.Executor.Logs(id)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("cluster %q: %w", c.Name, err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("logs of %s: %w", id, errors.Join(errs...))
	}
	return nil, fmt.Errorf("logs of %s: in no cluster: %w", id, fs.ErrNotExist)
}

// LogSource is the executor that holds a workload's log: the cluster of
// its highest remembered attempt, else the first cluster, in order, whose
// Logs answers; nil when none does. The API server asks it for what only
// some executors offer (logs since a time, a followed stream).
func (m *Executor) LogSource(id core.WorkloadID) executor.Executor {
	if i, ok := m.latest(id); ok {
		return m.clusters[i].Executor
	}
	for _, c := range m.clusters {
		if r, err := c.Executor.Logs(id); err == nil {
			r.Close()
			return c.Executor
		}
	}
	return nil
}

// Endpoint says where the attempt serves port: the answer of the cluster
// that runs it. False when the route is not known, or the cluster's
// executor has no Endpoint method or is marked NoEndpoints.
func (m *Executor) Endpoint(id core.WorkloadID, attempt, port int) (string, bool) {
	i, ok := m.route(id, attempt)
	if !ok || m.clusters[i].NoEndpoints {
		return "", false
	}
	e, ok := m.clusters[i].Executor.(endpointer)
	if !ok {
		return "", false
	}
	return e.Endpoint(id, attempt, port)
}

// DialContext connects to an address an Endpoint gave, through the
// cluster executor that serves it (the local executor reaches its
// workloads' addresses from inside their namespaces), or directly.
func (m *Executor) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	for _, c := range m.clusters {
		if d, ok := c.Executor.(interface {
			Serves(string) bool
			DialContext(context.Context, string, string) (net.Conn, error)
		}); ok && d.Serves(addr) {
			return d.DialContext(ctx, network, addr)
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// Address says at which address the attempt is reached: the answer of the
// cluster that runs it.
func (m *Executor) Address(id core.WorkloadID, attempt int) (string, bool) {
	i, ok := m.route(id, attempt)
	if !ok {
		return "", false
	}
	a, ok := m.clusters[i].Executor.(interface {
		Address(core.WorkloadID, int) (string, bool)
	})
	if !ok {
		return "", false
	}
	return a.Address(id, attempt)
}

// volumeCluster is a cluster whose executor keeps volumes.
type volumeCluster struct {
	name string
	v    executor.Volumes
}

// volumeClusters are the clusters whose executors keep volumes, in order.
func (m *Executor) volumeClusters() []volumeCluster {
	var out []volumeCluster
	for _, c := range m.clusters {
		if v, ok := c.Executor.(executor.Volumes); ok {
			out = append(out, volumeCluster{c.Name, v})
		}
	}
	return out
}

// KeepsVolumes reports whether any cluster's executor keeps volumes; the
// server reconciles volumes only then.
func (m *Executor) KeepsVolumes() bool { return len(m.volumeClusters()) > 0 }

// EnsureVolume implements executor.Volumes: it ensures the volume in every
// cluster that keeps volumes, each its own (data does not move between
// clusters), carrying on past a cluster that fails; the error names each
// that did.
func (m *Executor) EnsureVolume(ctx context.Context, team core.TeamName, name string, sizeBytes int64) error {
	var errs []error
	for _, c := range m.volumeClusters() {
		if err := c.v.EnsureVolume(ctx, team, name, sizeBytes); err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// DeleteVolume implements executor.Volumes: it deletes the volume in every
// cluster that keeps volumes, as EnsureVolume.
func (m *Executor) DeleteVolume(ctx context.Context, team core.TeamName, name string) error {
	var errs []error
	for _, c := range m.volumeClusters() {
		if err := c.v.DeleteVolume(ctx, team, name); err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// ListVolumes implements executor.Volumes: the volumes any cluster keeps,
// each once, by team and name. A cluster that cannot list is named in the
// error, and the others' volumes are still returned.
func (m *Executor) ListVolumes(ctx context.Context) ([]executor.VolumeRef, error) {
	seen := map[executor.VolumeRef]bool{}
	var out []executor.VolumeRef
	var errs []error
	for _, c := range m.volumeClusters() {
		refs, err := c.v.ListVolumes(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %w", c.name, err))
		}
		for _, r := range refs {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(a, b executor.VolumeRef) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Name, b.Name))
	})
	return out, errors.Join(errs...)
}

// VolumeUsage implements executor.Volumes: the first usage, in cluster
// order, that a cluster can tell (not negative); -1 when none can. A
// cluster's error is returned only when no cluster told a usage.
func (m *Executor) VolumeUsage(ctx context.Context, team core.TeamName, name string) (int64, error) {
	var errs []error
	for _, c := range m.volumeClusters() {
		n, err := c.v.VolumeUsage(ctx, team, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %w", c.name, err))
			continue
		}
		if n >= 0 {
			return n, nil
		}
	}
	return -1, errors.Join(errs...)
}

// Clusters names the clusters, in order.
func (m *Executor) Clusters() []string {
	out := make([]string, len(m.clusters))
	for i, c := range m.clusters {
		out[i] = c.Name
	}
	return out
}

// Cluster returns the executor of the named cluster, for what only it
// offers (the kubernetes executor's DeleteOrphans, a checkpoint sweep).
func (m *Executor) Cluster(name string) (executor.Executor, bool) {
	i, ok := m.byName[name]
	if !ok {
		return nil, false
	}
	return m.clusters[i].Executor, true
}

// ClusterOf names the cluster that runs the attempt, while its route is
// remembered (from Start or Adopt until its exit has passed through).
func (m *Executor) ClusterOf(id core.WorkloadID, attempt int) (string, bool) {
	i, ok := m.route(id, attempt)
	if !ok {
		return "", false
	}
	return m.clusters[i].Name, true
}
