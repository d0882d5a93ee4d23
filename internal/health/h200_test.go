package health

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The node of the H200 machine, as discovery advertised it.
var h200 = []core.GPU{{Index: 0, UUID: "GPU-0ba79ed6-f6d3-59ad-f6ce-8ab2e3e621da", Model: "NVIDIA H200", MemoryMiB: 143771, PCIBusID: "00000000:00:06.0"}}

func TestH200Outputs(t *testing.T) {
	listed, err := ParseNvidiaSMIList(fixture(t, "h200/smi-list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ListedGPU{{Index: 0, Model: "NVIDIA H200", UUID: "GPU-0ba79ed6-f6d3-59ad-f6ce-8ab2e3e621da"}}, listed); diff != "" {
		t.Errorf("nvidia-smi -L (-want +got):\n%s", diff)
	}
	topo, err := ParseTopo(fixture(t, "h200/topo.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := Topology{GPUs: []string{"GPU0"}, Link: map[[2]int]string{{0, 0}: "X"}, Domains: map[int]int{0: 0}}
	if diff := cmp.Diff(want, topo); diff != "" {
		t.Errorf("topo -m (-want +got):\n%s", diff)
	}
}

// TestH200Qualification: the H200's real outputs qualify its node, unless
// CUDA cannot start in the workloads' sandbox, as it could not there under
// a read-only /proc: then the node fails and says why.
func TestH200Qualification(t *testing.T) {
	base := Evidence{List: fixture(t, "h200/smi-list.txt"), Topo: fixture(t, "h200/topo.txt")}
	dcgm := "dcgmi is not available: no diagnostics ran"
	for _, tc := range []struct {
		name string
		cuda string
		err  error
		want Verdict
	}{
		{"CUDA starts", `{"library":"/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04","driverVersion":13000,"deviceCount":1,"devices":["NVIDIA H200"]}`, nil,
			Verdict{Pass: true, Reason: ReasonDCGMNotAvailable, Message: dcgm, GPUs: []GPUVerdict{{Index: 0, Health: Healthy}}}},
		{"cuInit returns 304 in the sandbox", `{"library":"/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04","deviceCount":0,"call":"cuInit","code":304,"error":"CUDA_ERROR_OPERATING_SYSTEM"}`, nil,
			Verdict{Reason: ReasonCUDAInitFailed, Message: "CUDA cannot start in the workloads' sandbox: cuInit returned 304 (CUDA_ERROR_OPERATING_SYSTEM): every CUDA workload would fail here",
				GPUs: []GPUVerdict{{Index: 0, Health: Healthy}}}},
		{"no libcuda.so.1", `{"deviceCount":0,"call":"dlopen","error":"libcuda.so.1 not found by the dynamic loader"}`, nil,
			Verdict{Reason: ReasonCUDAInitFailed, Message: "CUDA cannot start in the workloads' sandbox: libcuda.so.1 could not be loaded: libcuda.so.1 not found by the dynamic loader: every CUDA workload would fail here",
				GPUs: []GPUVerdict{{Index: 0, Health: Healthy}}}},
		{"CUDA sees fewer GPUs", `{"driverVersion":13000,"deviceCount":0}`, nil,
			Verdict{Reason: ReasonCUDAInitFailed, Message: "CUDA sees 0 of the 1 GPUs in the workloads' sandbox", GPUs: []GPUVerdict{{Index: 0, Health: Healthy}}}},
		{"the probe could not run", "", errNoExec,
			Verdict{Reason: ReasonCUDAInitFailed, Message: "the CUDA probe did not run in the workloads' sandbox: exec gpufleet-cuda-probe: permission denied: CUDA workloads would fail here",
				GPUs: []GPUVerdict{{Index: 0, Health: Healthy}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := base
			ev.CUDARan, ev.CUDA, ev.CUDAErr = true, tc.cuda, tc.err
			if diff := cmp.Diff(tc.want, Qualify(Advertised{GPUs: h200}, ev, false)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

var errNoExec = errors.New("exec gpufleet-cuda-probe: permission denied")
