package cost

import (
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Money is an exact amount in micro-units of the server's currency.
type Money = quantity.Money

// Outcome is how the attempt an interval belongs to ended.
type Outcome string

const (
	OutcomeOpen      Outcome = ""          // still running, or ended without failure (succeeded, cancelled, stopped)
	OutcomeFailed    Outcome = "Failed"    // the attempt failed (a failed workload's last attempt, a lost task)
	OutcomePreempted Outcome = "Preempted" // the attempt was stopped for another workload (preempted or reclaimed)
)

// Interval is one allocation interval (core.Allocation) with what the
// ledger needs to know about it: a workload held MilliGPU of device GPU of
// Node, in Pool, from Start until End (zero: still held; billed up to the
// window's end or Input.Now, whichever is first).
type Interval struct {
	Workload core.WorkloadID
	Attempt  int
	Pool     string
	Node     core.NodeName
	GPU      int   // device index on the node
	Milli    int64 // share of the device, 1 to 1000
	Start    time.Time
	End      time.Time
	Outcome  Outcome
	// HostMilliCPU and HostMemoryMiB are the host resources of the
	// replica, set on one interval of each replica of each attempt only
	// (so that they are billed once), zero on the others.
	HostMilliCPU  int64
	HostMemoryMiB int64
}

// Workload is what the ledger knows of a workload with intervals or
// outputs.
type Workload struct {
	ID     core.WorkloadID
	Name   string
	Team   core.TeamName
	Owner  string
	Kind   string // job, notebook, service (licencePerWorkload)
	Labels map[string]string
	// Attempts is how many times it started; retries are Attempts-1.
	Attempts int
	// Phase is its phase now: Succeeded and Failed have ended.
	Phase      core.Phase
	FinishedAt time.Time // zero while active
	// Outputs are the reports of completed work (file or API) the input
	// holds, each at the time it was recorded; those in the window count.
	// Reported is whether the workload ever reported any: a Succeeded job
	// that never did counts one accepted output of unit "job", when it
	// finished.
	Outputs  []Output
	Reported bool
	// EgressBytes is the network egress the workload reported.
	EgressBytes int64
}

// Output is completed work a workload reported at one time.
type Output struct {
	At                 time.Time
	Unit               string
	Accepted, Rejected int64
}

// PoolGPUs is a pool's billed devices: for reserved, monthly and owned
// prices, what no workload holds of them is the pool's idle cost.
type PoolGPUs struct {
	Pool string
	GPUs int
}

// Volume is a team's volume as the ledger bills it: SizeBytes (what was
// asked for) in Pool from Created until Deleted (zero: it still exists;
// billed up to the window's end or Input.Now, whichever is first). A
// volume has no pool of its own: the caller sets the server's default
// pool.
type Volume struct {
	Team      core.TeamName
	Name      string
	Pool      string
	SizeBytes int64
	Created   time.Time
	Deleted   time.Time
}

// Input is everything a report or an export is computed from: a window
// [From, To), the server's price versions, the pools' devices, the
// allocation intervals that overlap the window with their workloads, the
// team volumes that existed in it, and the attempts that ran in it.
type Input struct {
	From, To time.Time
	// Now caps intervals still open (End zero); it is the report's clock,
	// passed in (this package reads no clock).
	Now       time.Time
	Currency  string
	Prices    []api.Price // every version of every pool, validated
	Pools     []PoolGPUs
	Intervals []Interval
	Workloads map[core.WorkloadID]*Workload
	Volumes   []Volume
	// Attempts are the attempts that ended in or after the window and ran
	// in it, with what they used of their host: a report's efficiency,
	// which bills nothing.
	Attempts []core.Attempt
}

// Visibility says which rows a caller may see: every team and the idle row
// (an admin), or its teams only.
type Visibility struct {
	All   bool
	Teams map[core.TeamName]bool
}
