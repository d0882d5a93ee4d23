package core

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func feasibleNode(name string, count int, model string, mib int64) *Node {
	n := &Node{Name: NodeName(name), Schedulable: true, MilliCPU: 32000, MemoryMiB: 256 << 10}
	for i := range count {
		n.GPUs = append(n.GPUs, GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: model, MemoryMiB: mib})
	}
	return n
}

// TestFeasible: a request no node could hold even empty names the field
// and the biggest that fits (issue 13).
func TestFeasible(t *testing.T) {
	fleet := []*Node{feasibleNode("h", 4, "NVIDIA H100 80GB HBM3", 81920), feasibleNode("a", 4, "NVIDIA A10", 24576)}
	cordoned := feasibleNode("c", 8, "NVIDIA H100 80GB HBM3", 81920)
	cordoned.Schedulable = false
	east, west := feasibleNode("e", 1, "H100", 81920), feasibleNode("w", 1, "H100", 81920)
	east.Region, east.Labels, west.Region, west.Labels = "us-east", map[string]string{"rack": "r1"}, "us-west", map[string]string{"rack": "r2"}
	regions := []*Node{east, west}
	tests := []struct {
		name  string
		nodes []*Node
		req   Request
		want  *Infeasible // nil: feasible
	}{
		{"a fraction", fleet, Request{MilliGPU: 250}, nil},
		{"a whole node", fleet, Request{MilliGPU: 4000}, nil},
		{"a gang across nodes", fleet, Request{MilliGPU: 4000, Replicas: 2}, nil},
		{"memory that fits the largest GPU", fleet, Request{GPUMemoryMiB: 81920}, nil},
		{"a cordoned node counts", []*Node{cordoned}, Request{MilliGPU: 8000}, nil},
		{"an empty fleet holds everything", nil, Request{MilliGPU: 64000}, nil},
		{"200 GiB on 80 GB GPUs", fleet, Request{GPUMemoryMiB: 200 << 10},
			&Infeasible{"resources.gpuMemoryMiB", "204800 MiB on one GPU: the biggest has 81920 MiB"}},
		{"a model the fleet lacks", fleet, Request{MilliGPU: 1000, GPUModels: []string{"B200"}},
			&Infeasible{"resources.gpuModels", "no node has a GPU of model B200 (the fleet has NVIDIA A10, NVIDIA H100 80GB HBM3)"}},
		{"8 GPUs on 4-GPU nodes", fleet, Request{MilliGPU: 8000},
			&Infeasible{"resources.gpus", "8 GPUs on one node: the biggest node has 4"}},
		{"whole A10s by memory beyond the A10 count", fleet, Request{GPUMemoryMiB: 24576, GPUModels: []string{"A10"}, Replicas: 5},
			&Infeasible{"replicas", "5 replicas: the fleet could hold at most 4, even empty"}},
		{"a gang larger than the fleet", fleet, Request{MilliGPU: 4000, Replicas: 3},
			&Infeasible{"replicas", "3 replicas: the fleet could hold at most 2, even empty"}},
		{"more CPU than a node has", fleet, Request{MilliGPU: 1000, MilliCPU: 64000},
			&Infeasible{"resources.cpu", "64000 milli-CPU on one node: the biggest node has 32000"}},
		{"a selector no node matches", fleet, Request{MilliGPU: 1000, NodeSelector: map[string]string{"gpufleet.io/pool": "west"}},
			&Infeasible{"nodeSelector.gpufleet.io/pool", "no node is in pool west (no node has a pool)"}},
		{"a region the fleet lacks", regions, Request{MilliGPU: 1000, NodeSelector: map[string]string{"gpufleet.io/region": "eu-west"}},
			&Infeasible{"nodeSelector.gpufleet.io/region", "no node is in region eu-west (the fleet's regions: us-east, us-west)"}},
		{"a residency the fleet lacks", regions, Request{MilliGPU: 1000, Regions: []string{"eu-west", "eu-central"}},
			&Infeasible{"residency", "no node is in region eu-west or eu-central (the fleet's regions: us-east, us-west)"}},
		{"a residency with no regions at all", fleet, Request{MilliGPU: 1000, Regions: []string{"eu-west"}},
			&Infeasible{"residency", "no node is in region eu-west (no node has a region)"}},
		{"a residency one node meets", regions, Request{MilliGPU: 1000, Regions: []string{"eu-west", "us-west"}}, nil},
		{"residency first, then the selector within it", regions, Request{MilliGPU: 1000, Regions: []string{"us-west"}, NodeSelector: map[string]string{"rack": "r1"}},
			&Infeasible{"nodeSelector.rack", "no node has the label rack=r1 (the fleet has rack=r2)"}},
		{"residency narrows what fits", regions, Request{MilliGPU: 2000, Regions: []string{"us-west"}},
			&Infeasible{"resources.gpus", "2 GPUs on one node: the biggest node has 1"}},
		{"a label value the fleet lacks", regions, Request{MilliGPU: 1000, NodeSelector: map[string]string{"gpufleet.io/region": "us-east", "rack": "r9"}},
			&Infeasible{"nodeSelector.rack", "no node has the label rack=r9 (the fleet has rack=r1, rack=r2)"}},
		{"labels on different nodes", regions, Request{MilliGPU: 1000, NodeSelector: map[string]string{"gpufleet.io/region": "us-east", "rack": "r2"}},
			&Infeasible{"nodeSelector", "no node has the labels gpufleet.io/region=us-east, rack=r2 together"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Feasible(tt.nodes, tt.req)
			var got *Infeasible
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not an *Infeasible", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Feasible (-want +got):\n%s", diff)
			}
		})
	}
}
