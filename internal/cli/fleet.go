package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// printClusters writes the clusters as a table; REACHABLE is yes or no,
// - when the server does not say.
func printClusters(e *env, cs []api.Cluster) error {
	t := newTable(e.stdout, "NAME", "EXECUTOR", "REACHABLE", "NODES", "READY", "GPUS", "POOLS")
	for _, c := range cs {
		reachable := "-"
		if c.Reachable != nil {
			reachable = yesNo(*c.Reachable)
		}
		t.row(c.Name, c.Executor, reachable, strconv.Itoa(c.Nodes), strconv.Itoa(c.ReadyNodes), strconv.Itoa(c.GPUs), strings.Join(c.Pools, ","))
	}
	return t.flush()
}

// printPools writes the pools as a table; PRICE is the price in effect,
// each figure with its currency and what it is per (describePrice).
func printPools(e *env, ps []api.Pool) error {
	t := newTable(e.stdout, "NAME", "CLUSTER", "REGION", "KIND", "GPUS", "ALLOCATED", "USED", "PRICE", "HEALTH")
	for _, p := range ps {
		price := "-"
		if p.Price != nil {
			price = describePrice(*p.Price, p.Currency)
		}
		region := p.Region
		if p.Zone != "" {
			region += "/" + p.Zone
		}
		t.row(p.Name, dash(p.Cluster), dash(region), p.Kind, strconv.Itoa(p.GPUs), p.AllocatedGPUs.String(),
			strconv.FormatFloat(p.UsedGPUs, 'f', 2, 64), price, p.Health)
	}
	return t.flush()
}

func printServers(e *env, ss []api.Server) error {
	t := newTable(e.stdout, "NAME", "ADDR", "PID", "LEADER", "LEASE EXPIRES", "LAST SEEN")
	for _, sv := range ss {
		leader, expires := "", "-"
		if sv.Leader {
			leader = "*"
		}
		if sv.LeaseExpiresAt != nil {
			expires = sv.LeaseExpiresAt.UTC().Format(time.RFC3339)
		}
		t.row(sv.Name, sv.Addr, strconv.Itoa(sv.PID), leader, expires, sv.LastSeen.UTC().Format(time.RFC3339))
	}
	return t.flush()
}
