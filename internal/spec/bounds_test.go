package spec

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// TestNumbersAreBounded: every number of a submitted workload outside its
// documented range is a problem naming its field, and so is a huge
// maxRuntimeSeconds that would wrap a time.Duration (9223372037 s became
// negative, no limit at all; 18446744074 s became 290 ms). The bounds
// themselves are valid.
func TestNumbersAreBounded(t *testing.T) {
	base := func() api.Workload {
		return api.Workload{Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}
	}
	for _, tc := range []struct {
		field string
		edit  func(w *api.Workload, over bool)
	}{
		{"maxRuntimeSeconds", func(w *api.Workload, over bool) { w.MaxRuntimeSeconds = MaxRuntimeSeconds + b2i(over) }},
		{"gracePeriodSeconds", func(w *api.Workload, over bool) { w.GracePeriodSeconds = MaxGracePeriodSeconds + b2i(over) }},
		{"replicas", func(w *api.Workload, over bool) { w.Replicas = MaxReplicas + int(b2i(over)) }},
		{"resources.gpus", func(w *api.Workload, over bool) { w.Resources.GPUs = MaxGPUsPerNode*1000 + api.Milli(1000*b2i(over)) }},
		{"resources.gpuMemoryMiB", func(w *api.Workload, over bool) {
			w.Resources.GPUs, w.Resources.GPUMemoryMiB = 0, MaxGPUMemoryMiB+b2i(over)
		}},
		{"resources.cpu", func(w *api.Workload, over bool) { w.Resources.CPU = MaxMilliCPU + api.Milli(b2i(over)) }},
		{"resources.memoryMiB", func(w *api.Workload, over bool) { w.Resources.MemoryMiB = MaxMemoryMiB + b2i(over) }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			w := base()
			tc.edit(&w, false)
			if p := CheckWorkload(&w); len(p) > 0 {
				t.Errorf("at the bound: %v, want valid", p)
			}
			w = base()
			tc.edit(&w, true)
			if !names(CheckWorkload(&w), tc.field) {
				t.Errorf("one over the bound: %v, want a problem with %s", CheckWorkload(&w), tc.field)
			}
		})
	}
	// The lower bound of a memory request: the least a process starts
	// with; none at all (0) is no limit of its own.
	for mib, ok := range map[int64]bool{0: true, MinMemoryMiB - 1: false, 1: false, MinMemoryMiB: true} {
		w := base()
		w.Resources.MemoryMiB = mib
		if got := names(CheckWorkload(&w), "resources.memoryMiB"); got == ok {
			t.Errorf("memoryMiB %d: %v, want valid %t", mib, CheckWorkload(&w), ok)
		}
	}
	for _, secs := range []int64{9223372037, 18446744074, 1 << 62, -1} {
		w := base()
		w.MaxRuntimeSeconds = secs
		if !names(CheckWorkload(&w), "maxRuntimeSeconds") {
			t.Errorf("maxRuntimeSeconds %d: %v, want a problem with maxRuntimeSeconds", secs, CheckWorkload(&w))
		}
	}
	if d := time.Duration(MaxRuntimeSeconds) * time.Second; d/time.Second != MaxRuntimeSeconds {
		t.Errorf("MaxRuntimeSeconds does not fit a time.Duration")
	}
}

// TestHugeMaxRuntimeDecodes: a number too large for int64 is refused by the
// decoder; one that fits but is over the bound by CheckWorkload. Either way the
// problem names maxRuntimeSeconds.
func TestHugeMaxRuntimeDecodes(t *testing.T) {
	for _, v := range []string{"9223372037", "18446744074", "99999999999999999999", "1e3", "1.5"} {
		b := []byte(fmt.Sprintf(`{"command":["true"],"maxRuntimeSeconds":%s,"resources":{"gpus":1}}`, v))
		w, err := decodeStrict(b)
		if err != nil {
			// encoding/json names the field of a number that does not
			// fit, which the server answers 400 with.
			if got := fmt.Sprint(err); !strings.Contains(got, "maxRuntimeSeconds") {
				t.Errorf("%s: decode error %q does not name maxRuntimeSeconds", v, got)
			}
			continue
		}
		if !names(CheckWorkload(w), "maxRuntimeSeconds") {
			t.Errorf("%s: decoded to %d and validated as %v, want a problem with maxRuntimeSeconds", v, w.MaxRuntimeSeconds, CheckWorkload(w))
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func names(ps []api.FieldError, field string) bool {
	for _, p := range ps {
		if p.Field == field {
			return true
		}
	}
	return false
}
