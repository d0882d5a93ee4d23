package core

import "time"

// GPUSample is what one sample saw of one GPU.
type GPUSample struct {
	Node  NodeName `json:"node"`
	Index int      `json:"index"`
	UUID  string   `json:"uuid,omitempty"`
	// Utilization is the fraction of time a kernel ran, 0..1.
	Utilization   float64 `json:"utilization"`
	MemoryUsedMiB int64   `json:"memoryUsedMiB"`
	// Err is set when the GPU could not be read (nvidia-smi printed
	// "[GPU requires reset]", "[N/A]", ...): the figures are then zero and
	// the GPU is reported unhealthy.
	Err string `json:"err,omitempty"`
	// Xid is the last Xid error the GPU reported (DCGM_FI_DEV_XID_ERROR),
	// 0 for none: a new value is an Xid event.
	Xid int `json:"xid,omitempty"`
}

// WorkloadSample is what one sample saw of one running workload's GPUs.
type WorkloadSample struct {
	ID      WorkloadID `json:"id"`
	Attempt int        `json:"attempt"`
	// Utilization is the mean over the workload's GPUs, 0..1.
	Utilization float64 `json:"utilization"`
	// MemoryUsedMiB is the GPU memory its processes use, all GPUs
	// together.
	MemoryUsedMiB int64 `json:"memoryUsedMiB"`
	// PerGPUMemoryMiB is the memory used on each of its devices, keyed by
	// node and index; memory enforcement compares it with the placement.
	PerGPUMemoryMiB map[GPURef]int64 `json:"-"`
}

// WorkloadUsagePoint is one sample of one workload's GPUs, for its usage
// history.
type WorkloadUsagePoint struct {
	Time    time.Time `json:"time"`
	Attempt int       `json:"attempt"`
	// Utilization is the mean over the workload's GPUs, 0..1.
	Utilization   float64 `json:"utilization"`
	MemoryUsedMiB int64   `json:"memoryUsedMiB"`
}

// GPURef names one device of one node.
type GPURef struct {
	Node  NodeName
	Index int
}

// Sample is one round of utilisation sampling.
type Sample struct {
	At        time.Time
	GPUs      []GPUSample
	Workloads map[WorkloadID]WorkloadSample
}

// UsagePoint is the cluster at one sample time, for the usage history.
type UsagePoint struct {
	Time time.Time `json:"time"`
	// GPUs counts the devices of schedulable and unschedulable nodes.
	GPUs int `json:"gpus"`
	// AllocatedGPUs counts fractions (0.25 + 0.5 = 0.75).
	AllocatedGPUs float64 `json:"allocatedGPUs"`
	// UsedGPUs is the sum of the sampled utilisation over all GPUs.
	UsedGPUs float64 `json:"usedGPUs"`
	// IdleGPUs are the GPUs with nothing allocated.
	IdleGPUs int `json:"idleGPUs"`
	Running  int `json:"running"`
	Pending  int `json:"pending"`
	// QueueWaitSeconds is the mean wait of the workloads pending then.
	QueueWaitSeconds float64 `json:"queueWaitSeconds"`
}
