package apiserver

import (
	"cmp"
	"net/http"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

func (s *Server) nodes(c *call) (reply, error) {
	u := c.u
	snap, err := s.opts.Store.Snapshot(c.r.Context())
	if err != nil {
		return reply{}, err
	}
	// Who holds what, per device, among the workloads the caller may see.
	type devKey struct {
		node  core.NodeName
		index int
	}
	holders := map[devKey][]api.GPUAllocation{}
	foreign := map[devKey]bool{} // devices holding a workload of a team the caller cannot see
	for _, w := range snap.Running {
		if !u.InTeam(w.Team) {
			if !u.Admin {
				for _, a := range w.Status.Placement {
					foreign[devKey{a.Node, a.GPUIndex}] = true
				}
			}
			continue
		}
		for _, a := range w.Status.Placement {
			k := devKey{a.Node, a.GPUIndex}
			holders[k] = append(holders[k], api.GPUAllocation{WorkloadID: string(w.ID), Team: string(w.Team), MilliGPU: a.MilliGPU, MemoryMiB: a.MemoryMiB})
		}
	}
	statuses, err := s.opts.Store.NodeStatuses(c.r.Context())
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Node]{Items: []api.Node{}}
	for _, n := range snap.Nodes {
		if name := c.r.PathValue("name"); name != "" && core.NodeName(name) != n.Name {
			continue
		}
		an := api.Node{Name: string(n.Name), Pool: n.Pool, Region: n.Region, Zone: n.Zone, Cluster: n.Cluster, PoolKind: cmp.Or(n.PoolKind, core.PoolOwned), Labels: n.Labels, CPU: quantity.Milli(n.MilliCPU), Isolation: n.Isolation,
			MemoryMiB: n.MemoryMiB, Schedulable: n.Schedulable, GPUs: []api.GPU{}, UpdatedAt: n.UpdatedAt, State: string(core.NodeReady)}
		st, hasStatus := statuses[n.Name]
		if hasStatus {
			an.State, an.StateReason, an.StateMessage, an.LastQualified = string(st.State), st.Reason, st.Message, st.LastQualified
			if v := st.Validate; v != nil {
				an.Validation = &api.NodeValidation{Level: v.Level, GPUs: v.GPUs, Drain: v.Drain, RequestedBy: v.By, RequestedAt: v.At.UTC(), Waits: v.Waits}
			}
			if !st.Since.IsZero() {
				since := st.Since
				an.StateSince = &since
			}
		}
		usage := snap.Usage[n.Name]
		for _, g := range n.GPUs {
			var gu core.GPUUse
			if usage != nil {
				gu = usage.GPUs[g.Index]
			}
			ag := api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryMiB: g.MemoryMiB,
				Simulated: g.Simulated, Domain: g.Domain, AllocatedMilliGPU: gu.MilliGPU, AllocatedMemoryMiB: gu.MemoryMiB,
				Allocations: holders[devKey{n.Name, g.Index}], Health: core.GPUHealthy}
			if gs, ok := st.GPUs[g.Index]; hasStatus && ok {
				ag.Health, ag.HealthReason, ag.HealthMessage = gs.Health, gs.Reason, gs.Message
			}
			s.withGPUUsage(&ag, n, foreign[devKey{n.Name, g.Index}])
			an.GPUs = append(an.GPUs, ag)
		}
		out.Items = append(out.Items, an)
	}
	if name := c.r.PathValue("name"); name != "" {
		if len(out.Items) == 0 {
			return reply{}, notFound("node", name)
		}
		return reply{status: http.StatusOK, body: out.Items[0]}, nil
	}
	return reply{status: http.StatusOK, body: out}, nil
}

func (s *Server) priorityClasses(*call) (reply, error) {
	out := api.List[api.PriorityClass]{Items: []api.PriorityClass{}}
	for _, c := range s.sortedClasses() {
		out.Items = append(out.Items, api.PriorityClass{Name: c.Name, Value: c.Value, Preemptible: c.Preemptible, MayBorrow: c.MayBorrow, IdleOnly: c.IdleOnly})
	}
	return reply{status: http.StatusOK, body: out}, nil
}
