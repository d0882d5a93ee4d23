package apiserver

import (
	"errors"
	"math/big"
	"net/http"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/plan"
)

// planWorkload answers POST /plan: the advice for a workload brief (the
// body) on this fleet. Any caller may ask; the answer names no team and no
// workload, only which kinds of GPU are free now and how many workloads
// wait. A bad brief is a 400 naming the field.
func (s *Server) planWorkload(c *call) (reply, error) {
	var b api.WorkloadBrief
	if err := decode(c.r, &b); err != nil {
		return reply{}, err
	}
	c.setObject(b.Model.Name)
	f, err := s.planFleet(c)
	if err != nil {
		return reply{}, err
	}
	p, err := plan.Advise(b, f, s.opts.Now().UTC())
	var fe api.FieldErrors
	if errors.As(err, &fe) {
		return reply{}, &fieldErrors{fields: fe}
	}
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: p}, nil
}

// planFleet builds the plan's view of the fleet from the store: each
// node, whether it takes work (schedulable, ready, in a state that takes
// work) or is being registered or qualified (capacity to come, none of it
// free now), its GPUs' health and the share of each nobody holds, and, with a
// ledger, each pool's rate per GPU-hour now (cost.GPUHourRate of the
// version in effect) and the currency.
func (s *Server) planFleet(c *call) (plan.Fleet, error) {
	ctx := c.r.Context()
	snap, err := s.opts.Store.Snapshot(ctx)
	if err != nil {
		return plan.Fleet{}, err
	}
	f := plan.Fleet{Pending: len(snap.Pending), Prices: map[string]*big.Rat{}}
	defaultPool := ""
	var prices []api.Price
	if l := s.opts.Ledger; l != nil {
		f.Currency, defaultPool = l.Currency, l.DefaultPool
		if prices, err = l.Prices(ctx); err != nil {
			return plan.Fleet{}, err
		}
	}
	now := s.opts.Now().UTC()
	for _, n := range snap.Nodes {
		pn := plan.Node{Name: string(n.Name), Pool: n.Pool, Region: n.Region,
			Schedulable: n.Schedulable && !n.NotReady && n.State.Takes(),
			Qualifying:  !n.NotReady && (n.State == core.NodeRegistering || n.State == core.NodeValidating)}
		if pn.Pool == "" {
			pn.Pool = defaultPool
		}
		if _, seen := f.Prices[pn.Pool]; !seen {
			if p, ok := cost.PriceAt(prices, pn.Pool, now); ok {
				f.Prices[pn.Pool] = cost.GPUHourRate(p)
			}
		}
		usage := snap.Usage[n.Name]
		for _, g := range n.GPUs {
			var use core.GPUUse
			if usage != nil {
				use = usage.GPUs[g.Index]
			}
			free := 1000 - use.MilliGPU
			if g.MemoryMiB > 0 && use.MemoryMiB > 0 {
				free = min(free, (g.MemoryMiB-use.MemoryMiB)*1000/g.MemoryMiB)
			}
			pn.GPUs = append(pn.GPUs, plan.GPU{Model: g.Model, MemoryMiB: g.MemoryMiB, Domain: g.Domain,
				Healthy: g.Health == "" || g.Health == core.GPUHealthy, FreeMilli: max(free, 0)})
		}
		f.Nodes = append(f.Nodes, pn)
	}
	return f, nil
}
