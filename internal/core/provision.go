package core

import (
	"errors"
	"fmt"
)

// ProvisionState is what became of a request for capacity.
type ProvisionState string

const (
	ProvisionPending     ProvisionState = "Pending"     // not yet answered
	ProvisionProvisioned ProvisionState = "Provisioned" // the nodes exist
	ProvisionFailed      ProvisionState = "Failed"      // refused, revoked or gone
)

// ProvisionRequest asks a burst pool of a cluster for the nodes of one
// workload: Count pods of GPUs whole devices each (one for a fraction),
// of GPUModel when the workload allows only one (the exact product, as the
// device reports it or as GPU feature discovery labels it: "NVIDIA H100
// 80GB HBM3" or "NVIDIA-H100-80GB-HBM3"), on nodes with the workload's
// node selector.
type ProvisionRequest struct {
	Cluster, Pool string
	Team          TeamName
	Workload      WorkloadID
	GPUs          int // per pod
	Count         int // pods
	GPUModel      string
	NodeSelector  map[string]string
	// PoolSelector holds the labels that put a node in the pool (the
	// pool's configured node selector), for the new nodes to carry.
	PoolSelector map[string]string
	// MilliCPU and MemoryMiB per pod, when the workload asks for them.
	MilliCPU, MemoryMiB int64
}

// Validate names the first field that is wrong.
func (r ProvisionRequest) Validate() error {
	switch {
	case r.Pool == "":
		return errors.New("provision: pool is empty")
	case r.Workload == "":
		return errors.New("provision: workload is empty")
	case r.GPUs < 1:
		return fmt.Errorf("provision: gpus %d: want at least 1 per pod", r.GPUs)
	case r.Count < 1:
		return fmt.Errorf("provision: count %d: want 1 or more pods", r.Count)
	}
	return nil
}
