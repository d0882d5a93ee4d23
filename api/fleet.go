package api

// Cluster is a place work runs (GET /clusters): this machine or a
// Kubernetes cluster, with its nodes.
type Cluster struct {
	Name     string `json:"name"`
	Executor string `json:"executor"`
	// Nodes and ReadyNodes count its nodes, and those that take work now;
	// GPUs its devices.
	Nodes      int `json:"nodes"`
	ReadyNodes int `json:"readyNodes"`
	GPUs       int `json:"gpus"`
	// Pools names its pools.
	Pools []string `json:"pools"`
	// Reachable says whether the server reaches the cluster now: a local
	// one always; a Kubernetes one while its API server answers (false
	// once it has answered no check for a while, or since the server's
	// start for a cluster of several, until it answers one). Absent when
	// the server cannot say.
	Reachable *bool `json:"reachable,omitempty"`
}

// Pool is a named set of a cluster's nodes (GET /pools) with its region,
// kind and price, and what it holds now.
type Pool struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	// Kind is owned, reserved, on-demand or burst.
	Kind string `json:"kind"`
	// GPUs is its devices; AllocatedGPUs what running work holds of them
	// (fractions included); UsedGPUs the sum of their sampled utilisation
	// (0 when not sampled).
	GPUs          int     `json:"gpus"`
	AllocatedGPUs Milli   `json:"allocatedGPUs"`
	UsedGPUs      float64 `json:"usedGPUs"`
	// Nodes and ReadyNodes count its nodes and those that take work now.
	Nodes      int `json:"nodes"`
	ReadyNodes int `json:"readyNodes"`
	// Health is Healthy when every node takes work, Degraded when some
	// do, Unavailable when none does (or it has no node).
	Health string `json:"health"`
	// Price is its price version in effect now, if any, with its
	// GPUHourRate; Currency is the currency of its figures.
	Price    *Price `json:"price,omitempty"`
	Currency string `json:"currency,omitempty"`
}

// Health of a pool.
const (
	PoolHealthy     = "Healthy"
	PoolDegraded    = "Degraded"
	PoolUnavailable = "Unavailable"
)
