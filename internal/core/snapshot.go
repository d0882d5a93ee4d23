package core

// Snapshot is a frozen view of the cluster that the scheduler reads. Nothing
// in it may be modified; clone before changing.
type Snapshot struct {
	Nodes []*Node
	// Usage holds what running workloads hold, per node.
	Usage map[NodeName]*NodeUsage
	// Pending workloads in submission order.
	Pending []*Workload
	// Running workloads.
	Running []*Workload
}

// Plan is what one scheduling cycle decided.
type Plan struct {
	Placements []Placement
	// Unplaced says, for each pending workload that was not placed, why.
	Unplaced []Decision
}

// Placement starts a pending workload on the given devices.
type Placement struct {
	Workload    WorkloadID
	Assignments []Assignment
}

// Decision records why a workload stays pending.
type Decision struct {
	Workload WorkloadID
	Reason   string
	Message  string
}
