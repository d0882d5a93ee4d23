package usage

import (
	"strings"
	"testing"
)

// The exporter's DCGM_FI_DEV_XID_ERROR is each GPU's last Xid.
func TestDCGMXid(t *testing.T) {
	body := `# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="node-1"} 10
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",Hostname="node-1"} 20
# TYPE DCGM_FI_DEV_XID_ERROR gauge
DCGM_FI_DEV_XID_ERROR{gpu="0",UUID="GPU-a",Hostname="node-1"} 0
DCGM_FI_DEV_XID_ERROR{gpu="1",UUID="GPU-b",Hostname="node-1"} 79
`
	gpus, err := ParseDCGM(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || gpus[0].Xid != 0 || gpus[1].Xid != 79 || gpus[1].Utilization != 0.2 {
		t.Errorf("gpus %+v", gpus)
	}
}
