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
	// Teams with their quotas. A workload of a team not listed gets no
	// guarantee and no limit.
	Teams []Team
	// Classes are the priority classes; nil means DefaultPriorityClasses.
	Classes []PriorityClass
	// BudgetExceeded names the teams whose hard budget is spent, each with
	// the message their waiting work shows ("spent 120 of 100 USD; the
	// month resets at ..."): their pending work of preemptible classes
	// waits.
	BudgetExceeded map[TeamName]string
}

// Plan is what one scheduling cycle decided.
type Plan struct {
	Placements []Placement
	// Unplaced says, for each pending workload that was not placed, why.
	Unplaced []Decision
	// Preemptions are running workloads to stop so that a pending one can
	// run; each victim appears once.
	Preemptions []Preemption
	// Shares is each team's fair share of the capacity (milli-GPU), with its
	// usage and pending demand, as this cycle computed them.
	Shares []TeamShare
}

// Preemption stops a running workload for a pending one. Reason is
// "Preempted" (by a higher priority class of its own team, or any class for
// batch) or "Reclaimed" (its team ran over quota or above its fair share).
type Preemption struct {
	Victim    WorkloadID
	Attempt   int
	Preemptor WorkloadID
	Reason    string
	Message   string
}

// TeamShare is a team's standing in one cycle.
type TeamShare struct {
	Team      TeamName `json:"team"`
	Usage     int64    `json:"usageMilliGPU"`
	Pending   int64    `json:"pendingMilliGPU"`
	FairShare int64    `json:"fairShareMilliGPU"`
}

// Placement starts a pending workload on the given devices.
type Placement struct {
	Workload    WorkloadID
	Assignments []Assignment
}

// Decision records why a workload stays pending: Reason is a short
// CamelCase code, Message a sentence for people.
type Decision struct {
	Workload WorkloadID
	Reason   string
	Message  string
	// Nominated is the node a preemptor waits for, while its victims stop;
	// empty otherwise.
	Nominated NodeName
}
