package trace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

func TestReadSmallTrace(t *testing.T) {
	f, _ := os.Open("testdata/nodes.csv")
	defer f.Close()
	nodes, err := ReadNodes(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 || len(nodes[1].GPUs) != 8 || nodes[1].GPUs[7].Model != "G2" || nodes[0].MilliCPU != 64000 || len(nodes[2].GPUs) != 0 {
		t.Errorf("nodes: %+v", nodes)
	}
	p, _ := os.Open("testdata/pods.csv")
	defer p.Close()
	pods, err := ReadPods(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Pod{
		{Name: "p-0", QoS: "LS", Phase: "Running", Creation: 0, Deletion: 12537496, Request: core.Request{MilliGPU: 1000, MilliCPU: 12000, MemoryMiB: 16384}},
		{Name: "p-1", QoS: "LS", Phase: "Running", Creation: 427061, Deletion: 12902960, Scheduled: 427061, Request: core.Request{MilliGPU: 460, MilliCPU: 6000, MemoryMiB: 12288}},
		{Name: "p-2", QoS: "BE", Phase: "Succeeded", Creation: 10, Deletion: 20, Scheduled: 12, Request: core.Request{MilliGPU: 8000, GPUModels: []string{"V100M16", "V100M32"}, MilliCPU: 8000, MemoryMiB: 30000}},
		{Name: "p-3", QoS: "BE", Phase: "Failed", Creation: 5, Request: core.Request{MilliCPU: 4000, MemoryMiB: 8192}},
	}
	if diff := cmp.Diff(want, pods); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
}

func TestBadTraceIsRefused(t *testing.T) {
	for name, body := range map[string]string{
		"missing column":  "sn,cpu_milli,gpu,model\nn,1,1,T4\n",
		"bad number":      "sn,cpu_milli,memory_mib,gpu,model\nn,lots,1,1,T4\n",
		"negative GPUs":   "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,-1,T4\n",
		"empty node name": "sn,cpu_milli,memory_mib,gpu,model\n,1,1,1,T4\n",
		"empty file":      "",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadNodes(strings.NewReader(body)); err == nil {
				t.Error("accepted")
			}
		})
	}
	if _, err := ReadPods(strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,1,1,99,0,,LS,Running,0,0,0\n")); err == nil {
		t.Error("num_gpu 99 accepted")
	}
}

// TestReadsTheAlibabaTrace reads the real trace from ../shared when it is
// there, and checks the facts its README states.
func TestReadsTheAlibabaTrace(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "traces", "alibaba-gpu-v2023")
	nf, err := os.Open(filepath.Join(dir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Skipf("trace not found beside the repository: %v", err)
	}
	defer nf.Close()
	nodes, err := ReadNodes(nf)
	if err != nil {
		t.Fatal(err)
	}
	gpus := 0
	for _, n := range nodes {
		gpus += len(n.GPUs)
	}
	if len(nodes) != 1213 || gpus != 6212 {
		t.Errorf("%d nodes with %d GPUs, want 1213 with 6212", len(nodes), gpus)
	}
	pf, err := os.Open(filepath.Join(dir, "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	pods, err := ReadPods(pf)
	if err != nil {
		t.Fatal(err)
	}
	var sharing, total int64
	for _, p := range pods {
		if p.Request.Fractional() {
			sharing++
		}
		total += p.GPUs()
	}
	if len(pods) != 8152 || sharing != 3078 || total != 6086800 {
		t.Errorf("%d pods, %d sharing, %d milli-GPU asked; want 8152, 3078, 6086800", len(pods), sharing, total)
	}
}
