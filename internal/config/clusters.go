package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Cluster is one place work runs: this machine (executor local, real or
// simulated GPUs) or a Kubernetes cluster (a kubeconfig and context).
type Cluster struct {
	Name     string `json:"name"`
	Executor string `json:"executor"`
	// FakeGPUs simulates this machine's GPUs (local only, where none
	// exist): "4xH100-80GB".
	FakeGPUs string `json:"fakeGPUs,omitempty"`
	// Kubeconfig and Context reach a Kubernetes cluster (kubernetes only).
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
}

// Pool is a named set of a cluster's nodes: all of them, or those whose
// labels match NodeSelector ("key=value,key2=value2"), with a region (data
// residency), an optional zone, a kind and a price model.
type Pool struct {
	Name         string `json:"name"`
	Cluster      string `json:"cluster"`
	Region       string `json:"region"`
	Zone         string `json:"zone,omitempty"`
	Kind         string `json:"kind"`
	NodeSelector string `json:"nodeSelector,omitempty"`
	// Price is the pool's price per GPU-hour by model of pricing, as in
	// cost.prices (onDemand, reserved, ...); a burst pool needs one.
	Price *PoolPrice `json:"price,omitempty"`
}

// PoolPrice is a pool's price in the config's short form: GPU-hour rates.
type PoolPrice struct {
	OnDemand *float64 `json:"onDemand,omitempty"`
	Reserved *float64 `json:"reserved,omitempty"`
}

// Burst says when work may go to burst pools.
type Burst struct {
	// After is how long a workload waits for capacity elsewhere before a
	// burst pool may take it (default 2m).
	After Duration `json:"after"`
	// IdleRelease gives back burst capacity idle this long (default 10m).
	IdleRelease Duration `json:"idleRelease"`
	// Classes are the priority classes that may burst (default
	// production and training).
	Classes []string `json:"classes,omitempty"`
}

// DefaultBurst is the burst policy when the configuration gives none.
func DefaultBurst() Burst {
	return Burst{After: Duration{2 * time.Minute}, IdleRelease: Duration{10 * time.Minute}, Classes: []string{"production", "training"}}
}

// Selector parses a pool's node selector into labels.
func (p Pool) Selector() (map[string]string, error) {
	if strings.TrimSpace(p.NodeSelector) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(p.NodeSelector, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: want key=value[,key=value]", p.NodeSelector)
		}
		out[k] = v
	}
	return out, nil
}

// Clusters returns the configured clusters, or, when the configuration
// names none, the one the single-cluster flags describe (--executor,
// --kubeconfig, --fake-gpus), named "local" or "kubernetes".
func (c Config) Clusters() []Cluster {
	if len(c.ClusterList) > 0 {
		return c.ClusterList
	}
	if c.Executor == "kubernetes" {
		return []Cluster{{Name: "kubernetes", Executor: "kubernetes", Kubeconfig: c.Kubernetes.Kubeconfig}}
	}
	return []Cluster{{Name: "local", Executor: "local", FakeGPUs: c.FakeGPUs}}
}

// Pools returns the configured pools, or, when the configuration names
// none, one pool (--pool, default "local") of all of the single cluster.
func (c Config) Pools() []Pool {
	if len(c.PoolList) > 0 {
		return c.PoolList
	}
	return []Pool{{Name: c.Pool, Cluster: c.Clusters()[0].Name, Kind: "owned"}}
}

// PoolOf returns the pool a node of cluster with labels belongs to: the
// first of the cluster's pools whose selector its labels match (a pool
// without selector takes every node of its cluster), or false.
func (c Config) PoolOf(cluster string, labels map[string]string) (Pool, bool) {
	for _, p := range c.Pools() {
		if p.Cluster != cluster {
			continue
		}
		sel, err := p.Selector()
		if err != nil {
			continue
		}
		match := true
		for k, v := range sel {
			if labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return p, true
		}
	}
	return Pool{}, false
}

var poolKinds = []string{"owned", "reserved", "on-demand", "burst"}

// validateClusters checks clusters, pools and the burst policy; each
// problem names its key.
func (c Config) validateClusters() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	clusters := map[string]string{}
	for i, cl := range c.ClusterList {
		at := fmt.Sprintf("clusters[%d]", i)
		switch {
		case !core.ValidName(cl.Name):
			bad("%s.name %q: want lowercase letters, digits and '-'", at, cl.Name)
		case clusters[cl.Name] != "":
			bad("%s.name %q: named twice", at, cl.Name)
		}
		clusters[cl.Name] = cl.Executor
		switch cl.Executor {
		case "local":
			if cl.Kubeconfig != "" || cl.Context != "" {
				bad("%s: kubeconfig and context are for a kubernetes cluster", at)
			}
			if cl.FakeGPUs != "" {
				if _, err := ParseFakeGPUs(cl.FakeGPUs); err != nil {
					bad("%s.fakeGPUs: %v", at, err)
				}
			}
		case "kubernetes":
			if cl.FakeGPUs != "" {
				bad("%s.fakeGPUs: a kubernetes cluster's GPUs are its nodes'", at)
			}
		default:
			bad("%s.executor %q: want local or kubernetes", at, cl.Executor)
		}
	}
	if n := countLocal(c.ClusterList); n > 1 {
		bad("clusters: %d clusters of executor local: this machine is one", n)
	}
	if len(c.ClusterList) > 0 && len(c.PoolList) == 0 {
		bad("pools: clusters are configured, so name their pools (pools: [{name, cluster, region, kind}])")
	}
	pools := map[string]bool{}
	claims := map[string][]string{} // cluster → selectors, to find two pools claiming the same nodes
	for i, p := range c.PoolList {
		at := fmt.Sprintf("pools[%d]", i)
		if p.Name == "" || len(p.Name) > 63 || strings.ContainsAny(p.Name, " \t\n/\\\"'") {
			bad("%s.name %q: want a name of at most 63 characters without spaces, slashes or quotes", at, p.Name)
		} else if pools[p.Name] {
			bad("%s.name %q: named twice", at, p.Name)
		}
		pools[p.Name] = true
		if _, ok := clusters[p.Cluster]; !ok && len(c.ClusterList) > 0 {
			bad("%s.cluster %q: no cluster of that name (clusters: %s)", at, p.Cluster, strings.Join(slices.Sorted(maps.Keys(clusters)), ", "))
		}
		if p.Region == "" || len(p.Region) > 63 || strings.ContainsAny(p.Region, " \t\n/\\\"',") {
			bad("%s.region %q: a pool needs a region (data residency), a name without spaces or commas", at, p.Region)
		}
		if !slices.Contains(poolKinds, p.Kind) {
			bad("%s.kind %q: want one of %s", at, p.Kind, strings.Join(poolKinds, ", "))
		}
		if p.Kind == "burst" && (p.Price == nil || (p.Price.OnDemand == nil && p.Price.Reserved == nil)) {
			bad("%s.price: a burst pool needs a price (price: {onDemand: 4})", at)
		}
		if p.Price != nil {
			for k, v := range map[string]*float64{"onDemand": p.Price.OnDemand, "reserved": p.Price.Reserved} {
				if v != nil && (*v < 0 || *v > 1e6) {
					bad("%s.price.%s %g: want a GPU-hour rate from 0 to 1000000", at, k, *v)
				}
			}
		}
		sel, err := p.Selector()
		if err != nil {
			bad("%s.nodeSelector: %v", at, err)
		}
		key := canonicalSelector(sel)
		if slices.Contains(claims[p.Cluster], key) {
			if key == "" {
				bad("%s: cluster %s already has a pool of all its nodes: two pools claim the same nodes (give each a nodeSelector)", at, p.Cluster)
			} else {
				bad("%s.nodeSelector %q: another pool of cluster %s claims the same nodes", at, p.NodeSelector, p.Cluster)
			}
		}
		claims[p.Cluster] = append(claims[p.Cluster], key)
	}
	for cl := range clusters {
		if len(c.PoolList) > 0 && len(claims[cl]) == 0 {
			bad("clusters: cluster %s has no pool", cl)
		}
	}
	b := c.Burst
	if b.After.Duration < 0 || b.IdleRelease.Duration < 0 {
		bad("burst: durations must not be negative")
	}
	for i, cls := range b.Classes {
		if !slices.ContainsFunc(c.PriorityClasses, func(p PriorityClass) bool { return p.Name == cls }) {
			bad("burst.classes[%d] %q: no priority class of that name", i, cls)
		}
	}
	return errs
}

func countLocal(cs []Cluster) int {
	n := 0
	for _, c := range cs {
		if c.Executor == "local" {
			n++
		}
	}
	return n
}

func canonicalSelector(sel map[string]string) string {
	var kv []string
	for k, v := range sel {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}

// PoolPrices are the on-demand prices the pools carry (pools[].price) as
// the cost ledger's price versions, for the pools that cost.prices does
// not price already: a pool's price is what bursting compares and what
// the cost report bills.
func (c Config) PoolPrices() []api.Price {
	priced := map[string]bool{}
	for _, p := range c.Cost.Prices {
		priced[p.Pool] = true
	}
	var out []api.Price
	for _, p := range c.PoolList {
		if p.Price == nil || priced[p.Name] {
			continue
		}
		rate := p.Price.OnDemand
		if rate == nil {
			rate = p.Price.Reserved
		}
		if rate == nil {
			continue
		}
		out = append(out, api.Price{Pool: p.Name, Kind: "on-demand", Rate: quantity.Money(math.Round(*rate * 1e6))})
	}
	return out
}
