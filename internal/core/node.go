package core

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// GPU is one device of a node.
type GPU struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"`
	Simulated bool   `json:"simulated,omitempty"`
	// Domain groups the devices of a node joined by NVLink (or NVSwitch):
	// devices of one domain talk fastest. Devices whose topology is unknown
	// share domain 0.
	Domain int `json:"domain,omitempty"`
	// PCIBusID ("00000000:07:00.0") maps a kernel log's Xid to the device;
	// empty when unknown (simulated GPUs, Kubernetes nodes).
	PCIBusID string `json:"pciBusID,omitempty"`
	// Health is the platform's judgement (GPUHealthy when empty), merged
	// from the node's status when the store reads the node.
	Health string `json:"health,omitempty"`
}

// Node is a machine with GPUs.
type Node struct {
	Name   NodeName `json:"name"`
	Pool   string   `json:"pool,omitempty"`
	Region string   `json:"region,omitempty"`
	// Zone is the zone within the region, when the pool names one.
	Zone string `json:"zone,omitempty"`
	// Cluster names the cluster (executor) the node belongs to; empty
	// for a server with one.
	Cluster string `json:"cluster,omitempty"`
	// PoolKind is the kind of its pool (PoolOwned, PoolReserved,
	// PoolOnDemand, PoolBurst); empty means owned. A burst node takes a
	// workload only as sched.Options.Burst allows.
	PoolKind    string            `json:"poolKind,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	MilliCPU    int64             `json:"milliCPU,omitempty"`
	MemoryMiB   int64             `json:"memoryMiB,omitempty"`
	Schedulable bool              `json:"schedulable"`
	// NotReady: the node's cluster reports it not ready (a Kubernetes
	// node whose kubelet stopped reporting). Past a grace period the
	// lifecycle takes it for Lost.
	NotReady bool `json:"notReady,omitempty"`
	// Isolation says how the node's executor confines workloads (see
	// api.Node.Isolation); informational.
	Isolation string    `json:"isolation,omitempty"`
	GPUs      []GPU     `json:"gpus"`
	UpdatedAt time.Time `json:"updatedAt"`
	// State is the platform's lifecycle state (NodeStatus), merged when the
	// store reads the node; empty for a node without one (Ready).
	State NodeState `json:"state,omitempty"`
	// DrainGrace, while the node drains, caps the grace period of the
	// work it stops (0: each workload's own); merged like State.
	DrainGrace time.Duration `json:"drainGrace,omitempty"`
}

// Kinds of pools.
const (
	PoolOwned    = "owned"
	PoolReserved = "reserved"
	PoolOnDemand = "on-demand"
	PoolBurst    = "burst"
)

// PoolKinds lists the kinds of pools, for messages.
var PoolKinds = []string{PoolOwned, PoolReserved, PoolOnDemand, PoolBurst}

// Burst reports whether the node is in a burst pool.
func (n *Node) Burst() bool { return n.PoolKind == PoolBurst }

// Well-known labels every node carries besides its own.
const (
	LabelPool   = "gpufleet.io/pool"
	LabelRegion = "gpufleet.io/region"
	LabelNode   = "gpufleet.io/node"
	// LabelCluster selects the nodes of one cluster (Node.Cluster) of
	// several: a workload whose pods live in one (Native) runs there.
	LabelCluster = "gpufleet.io/cluster"
)

// Label returns the value of a label, the well-known ones included.
func (n *Node) Label(key string) (string, bool) {
	switch key {
	case LabelPool:
		return n.Pool, n.Pool != ""
	case LabelRegion:
		return n.Region, n.Region != ""
	case LabelNode:
		return string(n.Name), true
	case LabelCluster:
		return n.Cluster, n.Cluster != ""
	}
	v, ok := n.Labels[key]
	return v, ok
}

// Matches reports whether the node carries every label of the selector.
func (n *Node) Matches(selector map[string]string) bool {
	for k, want := range selector {
		if v, ok := n.Label(k); !ok || v != want {
			return false
		}
	}
	return true
}

// Clone returns a deep copy.
func (n *Node) Clone() *Node {
	c := *n
	c.Labels = cloneMap(n.Labels)
	c.GPUs = slices.Clone(n.GPUs)
	return &c
}

// Assignment is one GPU share held by a workload: the exact device and how
// much of it.
type Assignment struct {
	// Replica numbers the replica of a gang the share belongs to (0 for a
	// workload that is not a gang).
	Replica   int      `json:"replica,omitempty"`
	Node      NodeName `json:"node"`
	GPUIndex  int      `json:"gpuIndex"`
	GPUUUID   string   `json:"gpuUUID"`
	MilliGPU  int64    `json:"milliGPU"`
	MemoryMiB int64    `json:"memoryMiB"`
}

// Allocation is one interval during which a workload held a GPU share. End is
// nil while it is held. Usage and cost are computed from these intervals.
type Allocation struct {
	ID         int64      `json:"id"`
	WorkloadID WorkloadID `json:"workloadID"`
	Team       TeamName   `json:"team"`
	Attempt    int        `json:"attempt"`
	Assignment
	Start time.Time  `json:"start"`
	End   *time.Time `json:"end,omitempty"`
	// Pool is the pool of the node when the interval began (empty for
	// intervals recorded before pools were kept, and for a node without
	// one).
	Pool string `json:"pool,omitempty"`
	// Outcome is how the attempt ended, once it has: AllocFailed (it
	// failed, or its node was lost), AllocPreempted (stopped for another
	// workload), or empty (still held, succeeded, cancelled, stopped).
	Outcome string `json:"outcome,omitempty"`
}

// Allocation outcomes.
const (
	AllocFailed    = "Failed"
	AllocPreempted = "Preempted"
)

// Team owns workloads and holds a quota, in milli-GPU.
type Team struct {
	Name TeamName `json:"name"`
	// Guaranteed is the share the team always gets back (by reclaim) when
	// it has demand for it.
	Guaranteed int64 `json:"guaranteedMilliGPU"`
	// Limit is the most the team may hold, borrowing included; Unlimited
	// (-1) for no limit.
	Limit int64 `json:"limitMilliGPU"`
	// Weight is the team's share of capacity beyond the guarantees.
	Weight int64 `json:"weight"`
	// GuaranteedByModel guarantees shares of particular GPU models (by the
	// same name matching as Request.GPUModels: "H100" covers "NVIDIA H100
	// 80GB HBM3"). A workload that asks for exactly one such model is
	// within quota when the team's use of that model stays within it; work
	// on those devices beyond it runs over quota. Guaranteed is the total.
	GuaranteedByModel map[string]int64 `json:"guaranteedByModelMilliGPU,omitempty"`
	// GuaranteedByPool guarantees shares of pools (by Node.Pool, exactly).
	// A workload bound to such a pool (NodeSelector gpufleet.io/pool) is
	// within quota when the team's use of that pool stays within it; work
	// on the pool's nodes beyond it runs over quota. A model guarantee
	// covering a device takes precedence. Guaranteed is the total.
	GuaranteedByPool map[string]int64 `json:"guaranteedByPoolMilliGPU,omitempty"`
	// PriorityClasses are the classes the team's workloads may use; empty
	// means every preemptible class. A class that is never preempted
	// (production) must be granted by name, by an admin or the team's
	// team-admin.
	PriorityClasses []string `json:"priorityClasses,omitempty"`
	// Residency is the regions the team's workloads run in when they
	// name none themselves (data residency, a hard constraint); empty:
	// anywhere.
	Residency []string  `json:"residency,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Clone returns a deep copy of t.
func (t *Team) Clone() *Team {
	c := *t
	c.GuaranteedByModel = maps.Clone(t.GuaranteedByModel)
	c.GuaranteedByPool = maps.Clone(t.GuaranteedByPool)
	c.PriorityClasses = slices.Clone(t.PriorityClasses)
	c.Residency = slices.Clone(t.Residency)
	return &c
}

// AllowsClass reports whether the team may submit workloads of class pc.
func (t *Team) AllowsClass(pc PriorityClass) bool {
	if len(t.PriorityClasses) == 0 {
		return pc.Preemptible
	}
	return slices.Contains(t.PriorityClasses, pc.Name)
}

// ModelKey returns the model guarantee that covers a request asking for
// exactly the model models[0], if the team has one.
func (t *Team) ModelKey(models []string) (string, bool) {
	if len(t.GuaranteedByModel) == 0 || len(models) != 1 {
		return "", false
	}
	for k := range t.GuaranteedByModel {
		if strings.EqualFold(k, models[0]) {
			return k, true
		}
	}
	return "", false
}

// DeviceKey returns the model guarantee that covers a device of this model,
// if any (the alphabetically first when several match).
func (t *Team) DeviceKey(model string) (string, bool) {
	best, found := "", false
	for k := range t.GuaranteedByModel {
		if containsFold(model, k) && (!found || k < best) {
			best, found = k, true
		}
	}
	return best, found
}

// PoolKey returns the pool guarantee that covers a request bound to one
// pool by its node selector (LabelPool), if the team has one.
func (t *Team) PoolKey(req *Request) (string, bool) {
	if len(t.GuaranteedByPool) == 0 {
		return "", false
	}
	p, ok := req.NodeSelector[LabelPool]
	if !ok {
		return "", false
	}
	_, ok = t.GuaranteedByPool[p]
	return p, ok
}

// NodePoolKey returns the pool guarantee that covers work on a node of pool
// pool, if the team has one.
func (t *Team) NodePoolKey(pool string) (string, bool) {
	if pool == "" {
		return "", false
	}
	_, ok := t.GuaranteedByPool[pool]
	return pool, ok
}

// Unlimited marks a team limit that is not set.
const Unlimited int64 = -1

// NewTeam returns a team with no guarantee, no limit and weight 1.
func NewTeam(name TeamName, now time.Time) Team {
	return Team{Name: name, Limit: Unlimited, Weight: 1, CreatedAt: now}
}

// LimitAllows reports whether holding total milli-GPU stays within the
// team's limit.
func (t *Team) LimitAllows(total int64) bool { return t.Limit < 0 || total <= t.Limit }
