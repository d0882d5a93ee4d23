package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// ReasonCUDAInitFailed: CUDA cannot start inside the sandbox workloads run
// in, so every CUDA workload on the node would fail.
const ReasonCUDAInitFailed = "CUDAInitFailed"

// CUDAProbe is what the CUDA probe (cmd/gpufleet-cuda-probe, or its
// python3 stand-in) prints, one line of JSON: the library it loaded, the
// driver's version (1000 × major + 10 × minor), the devices CUDA sees;
// or the call that failed, with the CUresult it returned and the driver's
// name for it ("cuInit", 304, "CUDA_ERROR_OPERATING_SYSTEM"), or the
// loader's message ("dlopen").
type CUDAProbe struct {
	Library       string   `json:"library,omitempty"`
	DriverVersion int      `json:"driverVersion,omitempty"`
	DeviceCount   int      `json:"deviceCount"`
	Devices       []string `json:"devices,omitempty"`
	Call          string   `json:"call,omitempty"`
	Code          int      `json:"code,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// OK reports whether CUDA initialised.
func (p CUDAProbe) OK() bool { return p.Call == "" }

// Problem says, for a failed probe, what failed: "cuInit returned 304
// (CUDA_ERROR_OPERATING_SYSTEM)", or "libcuda.so.1 could not be loaded:
// ...".
func (p CUDAProbe) Problem() string {
	switch {
	case p.OK():
		return ""
	case p.Call == "dlopen":
		return "libcuda.so.1 could not be loaded: " + p.Error
	case p.Call == "dlsym":
		return "libcuda.so.1 lacks " + p.Error
	}
	return fmt.Sprintf("%s returned %d (%s)", p.Call, p.Code, p.Error)
}

// ParseCUDAProbe reads the probe's output: its last line that holds a JSON
// object (a library may print before it).
func ParseCUDAProbe(out string) (CUDAProbe, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var p CUDAProbe
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			return CUDAProbe{}, fmt.Errorf("CUDA probe: %w", err)
		}
		return p, nil
	}
	return CUDAProbe{}, errors.New("CUDA probe: no report in its output")
}

// 4. CUDA in the sandbox: where the probe ran, it initialised CUDA and saw
// every advertised GPU.
func (q *qualifier) checkCUDA(gpus []core.GPU, ev Evidence) {
	if !ev.CUDARan {
		return
	}
	p, err := ParseCUDAProbe(ev.CUDA)
	if err != nil {
		if ev.CUDAErr != nil {
			err = ev.CUDAErr
		}
		q.fail(ReasonCUDAInitFailed, "the CUDA probe did not run in the workloads' sandbox: "+err.Error()+": CUDA workloads would fail here")
		return
	}
	if !p.OK() {
		q.fail(ReasonCUDAInitFailed, "CUDA cannot start in the workloads' sandbox: "+p.Problem()+": every CUDA workload would fail here")
		return
	}
	if p.DeviceCount < len(gpus) {
		q.fail(ReasonCUDAInitFailed, fmt.Sprintf("CUDA sees %d of the %d GPUs in the workloads' sandbox", p.DeviceCount, len(gpus)))
	}
}
