package apiserver

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
)

// Fleet is the server's static view of where work runs: the configured
// clusters and pools (config clusters:, pools:, or the one of each the
// flags make). What they hold is read from the store at each request,
// whether each cluster is reachable from Reachable.
type Fleet struct {
	Clusters []api.Cluster // name and executor
	Pools    []api.Pool    // name, cluster, region, zone, kind
	// Reachable, when set, says whether the server reaches a cluster
	// now (api.Cluster.Reachable); ok is false for one it cannot say of.
	// It is asked at each GET /clusters and must not block.
	Reachable func(cluster string) (reachable, ok bool)
}

// fleetNodes reads the nodes, the GPUs running work holds on each, and
// whether each takes work now.
func (s *Server) fleetNodes(c *call) ([]*core.Node, map[core.NodeName]int64, error) {
	snap, err := s.opts.Store.Snapshot(c.r.Context())
	if err != nil {
		return nil, nil, err
	}
	held := map[core.NodeName]int64{}
	for _, w := range snap.Running {
		for _, a := range w.Status.Placement {
			held[a.Node] += a.MilliGPU
		}
	}
	return snap.Nodes, held, nil
}

func takesWork(n *core.Node) bool {
	return n.Schedulable && !n.NotReady && (n.State == "" || n.State == core.NodeReady)
}

// pools answers GET /pools (any caller): each pool with its capacity, what
// running work holds of it, its sampled use, its health and its price now.
func (s *Server) pools(c *call) (reply, error) {
	nodes, held, err := s.fleetNodes(c)
	if err != nil {
		return reply{}, err
	}
	var prices []api.Price
	if s.opts.Ledger != nil {
		if prices, err = s.opts.Ledger.Prices(c.r.Context()); err != nil {
			return reply{}, err
		}
	}
	byName := map[string]*api.Pool{}
	var out []api.Pool
	for _, p := range s.opts.Fleet.Pools {
		out = append(out, p)
	}
	for _, n := range nodes {
		if !slices.ContainsFunc(out, func(p api.Pool) bool { return p.Name == n.Pool }) {
			// A node of a pool the configuration does not name (one
			// registered before, or by its cluster's labels).
			out = append(out, api.Pool{Name: n.Pool, Cluster: n.Cluster, Region: n.Region, Zone: n.Zone, Kind: cmp.Or(n.PoolKind, core.PoolOwned)})
		}
	}
	for i := range out {
		byName[out[i].Name] = &out[i]
	}
	now := s.opts.Now()
	for _, n := range nodes {
		p := byName[n.Pool]
		p.Nodes++
		if takesWork(n) {
			p.ReadyNodes++
		}
		p.GPUs += len(n.GPUs)
		p.AllocatedGPUs += quantity.Milli(held[n.Name])
		if s.opts.Usage != nil {
			for _, g := range n.GPUs {
				if smp, ok := s.opts.Usage.GPU(n.Name, g.Index); ok {
					p.UsedGPUs += smp.Utilization
				}
			}
		}
	}
	for i := range out {
		p := &out[i]
		switch {
		case p.Nodes > 0 && p.ReadyNodes == p.Nodes:
			p.Health = api.PoolHealthy
		case p.ReadyNodes > 0:
			p.Health = api.PoolDegraded
		default:
			p.Health = api.PoolUnavailable
		}
		if pr, ok := cost.PriceAt(prices, p.Name, now); ok {
			p.Price, p.Currency = &pr, s.opts.Ledger.Currency
		}
	}
	slices.SortFunc(out, func(a, b api.Pool) int { return strings.Compare(a.Name, b.Name) })
	return reply{status: http.StatusOK, body: api.List[api.Pool]{Items: out}}, nil
}

// clusters answers GET /clusters (any caller): each cluster with its nodes
// and pools, and whether it is reachable now (Fleet.Reachable).
func (s *Server) clusters(c *call) (reply, error) {
	nodes, _, err := s.fleetNodes(c)
	if err != nil {
		return reply{}, err
	}
	out := slices.Clone(s.opts.Fleet.Clusters)
	if out == nil {
		out = []api.Cluster{}
	}
	for i := range out {
		cl := &out[i]
		cl.Pools = []string{}
		if s.opts.Fleet.Reachable != nil {
			if r, ok := s.opts.Fleet.Reachable(cl.Name); ok {
				cl.Reachable = &r
			}
		}
		for _, p := range s.opts.Fleet.Pools {
			if p.Cluster == cl.Name {
				cl.Pools = append(cl.Pools, p.Name)
			}
		}
		for _, n := range nodes {
			// A server with one cluster registered its nodes before
			// clusters had names: they are its.
			if n.Cluster != cl.Name && !(len(out) == 1 && n.Cluster == "") {
				continue
			}
			cl.Nodes++
			if takesWork(n) {
				cl.ReadyNodes++
			}
			cl.GPUs += len(n.GPUs)
		}
	}
	return reply{status: http.StatusOK, body: api.List[api.Cluster]{Items: out}}, nil
}
