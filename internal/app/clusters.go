package app

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/apiserver"
	"github.com/gpufleet/gpufleet/internal/burst"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/kubernetes"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/executor/multi"
	"github.com/gpufleet/gpufleet/internal/qualify"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

// executors is what the server runs work with: the one executor of
// --executor, or, with clusters in the configuration, one multi executor
// over them; and the parts of each that the server treats apart.
type executors struct {
	ex    executor.Executor // what the loop and the API use
	local *local.Executor   // this machine's, if one of the clusters
	kubes []*kubernetes.Executor
	// kubeNames are their clusters' names ("" for the server's only one).
	kubeNames []string
	multi     *multi.Executor // nil for a single executor
	// provisioners ask each Kubernetes cluster for nodes (elastic burst
	// pools), by cluster name.
	provisioners map[string]burst.Provisioner
	// reported is the local node, whose record the heartbeat refreshes.
	reported *core.Node
	// resync writes each Kubernetes cluster's nodes that differ from the
	// store's records again: the leader's first act in a term (a
	// follower's node writes are refused).
	resync []func(ctx context.Context)
	// reach says whether each Kubernetes cluster's API server answers
	// now, by cluster name (GET /clusters' reachable).
	reach      map[string]func() bool
	where, try string
}

// startExecutors starts the executor of each cluster. Without clusters in
// the configuration it is the single executor of the flags, as before (a
// Kubernetes cluster whose API server does not answer fails the start,
// naming it: the server would have nowhere to run work); with them, each
// node is put in its cluster and pool (cfg.PoolOf) and a multi executor
// routes each task to its node's cluster, and a Kubernetes cluster that
// does not answer does not hold the others back (startKubernetes).
func startExecutors(ctx context.Context, cfg config.Config, st *store.Store, log *slog.Logger, fence store.Fence) (*executors, error) {
	xs := &executors{try: "nvidia-smi", reach: map[string]func() bool{}}
	if len(cfg.ClusterList) == 0 {
		if cfg.Executor == "kubernetes" {
			kex, ns, err := startKubernetes(ctx, cfg, st, log, "", nil, fence)
			if err != nil {
				return nil, err
			}
			xs.reach[cfg.Clusters()[0].Name] = kex.Reachable
			xs.resync = append(xs.resync, func(ctx context.Context) { ns.resync(ctx, kex.Nodes()) })
			xs.ex, xs.kubes, xs.kubeNames = kex, []*kubernetes.Executor{kex}, []string{""}
			xs.where = fmt.Sprintf("Kubernetes executor, %d GPU nodes", len(kex.Nodes()))
			return xs, nil
		}
		lex, node, err := startLocal(ctx, cfg, st, log, nil)
		if err != nil {
			return nil, err
		}
		xs.ex, xs.local, xs.reported = lex, lex, &node
		xs.where, xs.try = localWhere(node)
		return xs, nil
	}
	var clusters []multi.Cluster
	var wheres []string
	for _, cl := range cfg.ClusterList {
		place := placer(cfg, cl.Name)
		c := cfg
		switch cl.Executor {
		case "kubernetes":
			c.Kubernetes.Kubeconfig, c.Kubernetes.Context = cl.Kubeconfig, cl.Context
			kex, ns, err := startKubernetes(ctx, c, st, log.With("cluster", cl.Name), cl.Name, place, fence)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
			}
			xs.resync = append(xs.resync, func(ctx context.Context) { ns.resync(ctx, kex.Nodes()) })
			xs.kubes = append(xs.kubes, kex)
			xs.kubeNames = append(xs.kubeNames, cl.Name)
			xs.reach[cl.Name] = kex.Reachable
			xs.addProvisioner(cl.Name, clientOptions(c), kex, log)
			clusters = append(clusters, multi.Cluster{Name: cl.Name, Executor: kex, NoEndpoints: !cfg.Kubernetes.ReachesPods()})
			if kex.Reachable() {
				wheres = append(wheres, fmt.Sprintf("cluster %s: Kubernetes, %d GPU nodes", cl.Name, len(kex.Nodes())))
			} else {
				wheres = append(wheres, fmt.Sprintf("cluster %s: Kubernetes, UNREACHABLE (its %d known nodes NotReady; it starts when its API server answers)",
					cl.Name, len(kex.Nodes())))
			}
		default:
			c.FakeGPUs = cl.FakeGPUs
			lex, node, err := startLocal(ctx, c, st, log.With("cluster", cl.Name), place)
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
			}
			xs.local, xs.reported = lex, &node
			clusters = append(clusters, multi.Cluster{Name: cl.Name, Executor: lex})
			w, try := localWhere(node)
			xs.try = try
			wheres = append(wheres, fmt.Sprintf("cluster %s: %s", cl.Name, w))
		}
	}
	nc := &nodeClusters{st: st}
	mex, err := multi.New(clusters, multi.Options{NodeCluster: nc.lookup})
	if err != nil {
		return nil, err
	}
	xs.ex, xs.multi, xs.where = mex, mex, strings.Join(wheres, "; ")
	return xs, nil
}

// localWhere says what the local node is, for the start-up banner, and
// what to try on it.
func localWhere(node core.Node) (where, try string) {
	gpus := "no GPUs"
	if len(node.GPUs) > 0 {
		kind := "real"
		if node.GPUs[0].Simulated {
			kind = "simulated"
		}
		gpus = fmt.Sprintf("%d %s GPUs (%s)", len(node.GPUs), kind, node.GPUs[0].Model)
	}
	try = "nvidia-smi"
	if len(node.GPUs) == 0 || node.GPUs[0].Simulated {
		try = "sh -c 'echo GPU $CUDA_VISIBLE_DEVICES, fraction $GPUFLEET_GPU_FRACTION'"
	}
	return fmt.Sprintf("node %s with %s, workload isolation: %s", node.Name, gpus, node.Isolation), try
}

// placer puts a node of cluster in its cluster and pool: the first of the
// cluster's pools whose node selector its labels match. A node no pool
// claims keeps the cluster's own labels (and takes no pool's region).
func placer(cfg config.Config, cluster string) func(*core.Node) {
	return func(n *core.Node) {
		n.Cluster = cluster
		if p, ok := cfg.PoolOf(cluster, n.Labels); ok {
			n.Pool, n.Region, n.Zone, n.PoolKind = p.Name, p.Region, p.Zone, p.Kind
		}
	}
}

// nodeClusters says which cluster a node is in, from the store's nodes
// (read again on a miss: a node's cluster does not change).
type nodeClusters struct {
	st *store.Store
	mu sync.Mutex
	m  map[core.NodeName]string
}

func (c *nodeClusters) lookup(n core.NodeName) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name, ok := c.m[n]; ok {
		return name, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.st.Nodes(ctx)
	if err != nil {
		return "", false
	}
	c.m = make(map[core.NodeName]string, len(nodes))
	for _, nd := range nodes {
		if nd.Cluster != "" {
			c.m[nd.Name] = nd.Cluster
		}
	}
	name, ok := c.m[n]
	return name, ok
}

// close stops the multi executor's forwarders.
func (xs *executors) close() {
	if xs.multi != nil {
		xs.multi.Close()
	}
}

// commandsOnly: no cluster runs images (each is a local executor without a
// container runtime), so a workload with an image is refused at submit.
func (xs *executors) commandsOnly() bool {
	return len(xs.kubes) == 0 && xs.local != nil && !xs.local.RunsImages()
}

// startParallelism is how many placements of a cycle the control loop
// starts at once: the kubernetes executor's Start is one API call per pod,
// so sixteen at a time (client-go's rate limit still applies). The local
// executor's Start is safe for concurrent use (each claim under a lock of
// its own: its doc.go, "Concurrent starts") and mostly waits, for its
// supervisor and sandbox to exec and the kernel to make their namespaces,
// so four per core (GOMAXPROCS, which follows a cgroup's CPU limit), at
// most sixteen: on 2 cores at 32 clients (BenchmarkSubmitToRunning,
// docs/PERFORMANCE.md, 2026-12-05) 4, 8 and 16 at once cut the p50 of one
// at a time (1.6 s) to 0.65, 0.53 and 0.40 s, while the p99 stayed at
// 0.8-1.0 s from 4 on: the cores set the tail.
func (xs *executors) startParallelism() int {
	if len(xs.kubes) > 0 {
		return 16
	}
	return min(16, 4*runtime.GOMAXPROCS(0))
}

// sweeper removes what the executors keep of ended workloads.
func (xs *executors) sweeper() checkpointSweeper {
	var ss sweepers
	if xs.local != nil {
		ss = append(ss, localSweeper{xs.local})
	}
	for _, k := range xs.kubes {
		ss = append(ss, k)
	}
	switch len(ss) {
	case 0:
		return nil
	case 1:
		return ss[0]
	}
	return ss
}

// sampled is the executor whose processes the usage monitor samples: this
// machine's when it runs one, else the server's executor.
func (xs *executors) sampled() executor.Executor {
	if xs.local != nil {
		return xs.local
	}
	return xs.ex
}

// burstPolicy is the scheduler's burst policy from the configuration: the
// wait and the classes, and the pools' GPU-hour prices (micro-units, the
// on-demand rate, else the reserved one) so that the cheapest burst pool
// is tried first.
func burstPolicy(cfg config.Config) sched.BurstPolicy {
	b := sched.BurstPolicy{After: cfg.Burst.After.Duration, Classes: cfg.Burst.Classes, Prices: map[string]int64{}}
	for _, p := range cfg.Pools() {
		if p.Price == nil {
			continue
		}
		if r := cmp.Or(p.Price.OnDemand, p.Price.Reserved); r != nil {
			b.Prices[p.Name] = int64(*r * 1e6)
		}
	}
	return b
}

// fleetOf is the configured clusters and pools, for GET /clusters and
// /pools, and whether each cluster is reachable now: a local one always,
// a Kubernetes one as its executor says (xs.reach).
func fleetOf(cfg config.Config, xs *executors) apiserver.Fleet {
	var f apiserver.Fleet
	for _, c := range cfg.Clusters() {
		f.Clusters = append(f.Clusters, api.Cluster{Name: c.Name, Executor: c.Executor})
	}
	for _, p := range cfg.Pools() {
		f.Pools = append(f.Pools, api.Pool{Name: p.Name, Cluster: p.Cluster, Region: p.Region, Zone: p.Zone, Kind: p.Kind})
	}
	kinds := map[string]string{}
	for _, c := range cfg.Clusters() {
		kinds[c.Name] = c.Executor
	}
	f.Reachable = func(cluster string) (bool, bool) {
		if r := xs.reach[cluster]; r != nil {
			return r(), true
		}
		if kinds[cluster] == "local" {
			return true, true // this machine
		}
		return false, false
	}
	return f
}

// addProvisioner makes the provisioner of a Kubernetes cluster, for its
// elastic burst pools; a cluster whose dynamic client cannot be made has
// none (its burst pools are never grown), with a warning.
func (xs *executors) addProvisioner(cluster string, o kubernetes.ClientOptions, kex *kubernetes.Executor, log *slog.Logger) {
	dyn, err := kubernetes.NewDynamic(o)
	if err == nil {
		var kp *kubernetes.Provisioner
		if kp, err = kex.Provisioner(dyn); err == nil {
			if xs.provisioners == nil {
				xs.provisioners = map[string]burst.Provisioner{}
			}
			xs.provisioners[cluster] = kp
			return
		}
	}
	log.Warn("no provisioner for the cluster's burst pools", "cluster", cluster, "err", err)
}

// elastic is the reconciler that grows burst pools through their
// clusters' provisioners; nil when no burst pool has one.
func (xs *executors) elastic(cfg config.Config, st *store.Store, log *slog.Logger) *burst.Elastic {
	pools := map[string]burst.ElasticPool{}
	grows := false
	for _, p := range cfg.Pools() {
		ep := burst.ElasticPool{Cluster: p.Cluster, Kind: p.Kind, Region: p.Region}
		if p.Price != nil {
			if r := cmp.Or(p.Price.OnDemand, p.Price.Reserved); r != nil {
				ep.Price = *r
			}
		}
		ep.Selector, _ = p.Selector() // checked by Validate
		pools[p.Name] = ep
		if p.Kind == core.PoolBurst && xs.provisioners[p.Cluster] != nil {
			grows = true
		}
	}
	if !grows {
		return nil
	}
	return burst.NewElastic(st, burst.ElasticOptions{Policy: burstPolicy(cfg), Pools: pools, Provisioners: xs.provisioners,
		Logger: log.With("component", "elastic")})
}

// clientOptions are how the server reaches the Kubernetes cluster of cfg.
func clientOptions(cfg config.Config) kubernetes.ClientOptions {
	k := cfg.Kubernetes
	return kubernetes.ClientOptions{Kubeconfig: k.Kubeconfig, Context: k.Context, QPS: k.QPS, Burst: k.Burst}
}

// sandboxProbe runs qualification's probes through the local executor's
// sandbox, exactly as its tasks run.
type sandboxProbe struct{ ex *local.Executor }

func (s sandboxProbe) RunAsTask(ctx context.Context, name string, argv []string, gpus []int, timeout time.Duration) qualify.Result {
	r := s.ex.RunProbe(ctx, name, argv, gpus, timeout)
	return qualify.Result{Stdout: r.Stdout, Stderr: r.Stderr, Exit: r.Exit, Err: r.Err, Duration: r.Duration}
}

// probeSandbox is the local executor as qualification's sandbox; nil
// where this server runs no local executor.
func probeSandbox(ex *local.Executor) qualify.Sandbox {
	if ex == nil {
		return nil
	}
	return sandboxProbe{ex}
}
