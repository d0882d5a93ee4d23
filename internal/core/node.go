package core

import (
	"slices"
	"time"
)

// GPU is one device of a node.
type GPU struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"`
	Simulated bool   `json:"simulated,omitempty"`
}

// Node is a machine with GPUs.
type Node struct {
	Name        NodeName          `json:"name"`
	Pool        string            `json:"pool,omitempty"`
	Region      string            `json:"region,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	MilliCPU    int64             `json:"milliCPU,omitempty"`
	MemoryMiB   int64             `json:"memoryMiB,omitempty"`
	Schedulable bool              `json:"schedulable"`
	GPUs        []GPU             `json:"gpus"`
	UpdatedAt   time.Time         `json:"updatedAt"`
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
}

// Team owns workloads.
type Team struct {
	Name      TeamName  `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}
