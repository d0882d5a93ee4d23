package usage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestDCGM(t *testing.T) {
	body := read(t, "dcgm.txt")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte(body))
	}))
	defer srv.Close()
	snap := &core.Snapshot{Running: []*core.Workload{
		running("train", 1, core.Assignment{Node: "gpu-node-1", GPUIndex: 0, MilliGPU: 1000}, core.Assignment{Node: "gpu-node-1", GPUIndex: 1, MilliGPU: 1000}),
		running("a", 1, core.Assignment{Node: "gpu-node-2", GPUIndex: 0, MilliGPU: 500, MemoryMiB: 12000}),
		running("b", 1, core.Assignment{Node: "gpu-node-2", GPUIndex: 0, MilliGPU: 500, MemoryMiB: 12000}),
		running("unseen", 1, core.Assignment{Node: "gpu-node-3", GPUIndex: 0, MilliGPU: 1000}),
	}}
	d := &DCGM{URL: srv.URL}
	got, err := d.Sample(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	wantGPUs := []core.GPUSample{
		{Node: "gpu-node-1", Index: 0, UUID: "GPU-1b2c3d4e-0000-1111-2222-333344445555", Utilization: 0.91, MemoryUsedMiB: 70123},
		{Node: "gpu-node-1", Index: 1, UUID: "GPU-9f8e7d6c-0000-1111-2222-333344445555", Utilization: 0.03},
		{Node: "gpu-node-2", Index: 0, UUID: "GPU-ccccdddd-0000-1111-2222-333344445555", Utilization: 0.4, MemoryUsedMiB: 9000},
	}
	if diff := cmp.Diff(wantGPUs, got.GPUs); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
	want := map[core.WorkloadID]core.WorkloadSample{
		"train": {ID: "train", Attempt: 1, Utilization: 0.47, MemoryUsedMiB: 70123},
		// a and b share the A10: its memory is not theirs to split.
		"a": {ID: "a", Attempt: 1, Utilization: 0.4},
		"b": {ID: "b", Attempt: 1, Utilization: 0.4},
	}
	if diff := cmp.Diff(want, got.Workloads, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}

	t.Run("an exporter that fails is an error", func(t *testing.T) {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) }))
		defer bad.Close()
		if _, err := (&DCGM{URL: bad.URL}).Sample(context.Background(), snap); err == nil || !strings.Contains(err.Error(), "503") {
			t.Errorf("err = %v, want the 503", err)
		}
		if _, err := ParseDCGM(strings.NewReader("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\" 5\n")); err == nil {
			t.Error("malformed exposition parsed")
		}
	})
}
