package api

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNumbersAreBounded: every number of a submitted workload outside its
// documented range is a problem naming its field, and so is a huge
// maxRuntimeSeconds that would wrap a time.Duration (9223372037 s became
// negative, no limit at all; 18446744074 s became 290 ms). The bounds
// themselves are valid.
func TestNumbersAreBounded(t *testing.T) {
	base := func() Workload {
		return Workload{Command: []string{"true"}, Resources: Resources{GPUs: 1000}}
	}
	for _, tc := range []struct {
		field string
		edit  func(w *Workload, over bool)
	}{
		{"maxRuntimeSeconds", func(w *Workload, over bool) { w.MaxRuntimeSeconds = MaxRuntimeSeconds + b2i(over) }},
		{"gracePeriodSeconds", func(w *Workload, over bool) { w.GracePeriodSeconds = MaxGracePeriodSeconds + b2i(over) }},
		{"replicas", func(w *Workload, over bool) { w.Replicas = MaxReplicas + int(b2i(over)) }},
		{"resources.gpus", func(w *Workload, over bool) { w.Resources.GPUs = MaxGPUsPerNode*1000 + Milli(1000*b2i(over)) }},
		{"resources.gpuMemoryMiB", func(w *Workload, over bool) {
			w.Resources.GPUs, w.Resources.GPUMemoryMiB = 0, MaxGPUMemoryMiB+b2i(over)
		}},
		{"resources.cpu", func(w *Workload, over bool) { w.Resources.CPU = MaxMilliCPU + Milli(b2i(over)) }},
		{"resources.memoryMiB", func(w *Workload, over bool) { w.Resources.MemoryMiB = MaxMemoryMiB + b2i(over) }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			w := base()
			tc.edit(&w, false)
			if p := w.Validate(); len(p) > 0 {
				t.Errorf("at the bound: %v, want valid", p)
			}
			w = base()
			tc.edit(&w, true)
			if !names(w.Validate(), tc.field) {
				t.Errorf("one over the bound: %v, want a problem with %s", w.Validate(), tc.field)
			}
		})
	}
	// The lower bound of a memory request: the least a process starts
	// with; none at all (0) is no limit of its own.
	for mib, ok := range map[int64]bool{0: true, MinMemoryMiB - 1: false, 1: false, MinMemoryMiB: true} {
		w := base()
		w.Resources.MemoryMiB = mib
		if got := names(w.Validate(), "resources.memoryMiB"); got == ok {
			t.Errorf("memoryMiB %d: %v, want valid %t", mib, w.Validate(), ok)
		}
	}
	for _, secs := range []int64{9223372037, 18446744074, 1 << 62, -1} {
		w := base()
		w.MaxRuntimeSeconds = secs
		if !names(w.Validate(), "maxRuntimeSeconds") {
			t.Errorf("maxRuntimeSeconds %d: %v, want a problem with maxRuntimeSeconds", secs, w.Validate())
		}
	}
	if d := time.Duration(MaxRuntimeSeconds) * time.Second; d/time.Second != MaxRuntimeSeconds {
		t.Errorf("MaxRuntimeSeconds does not fit a time.Duration")
	}
}

// TestHugeMaxRuntimeDecodes: a number too large for int64 is refused by the
// decoder; one that fits but is over the bound by Validate. Either way the
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
		if !names(w.Validate(), "maxRuntimeSeconds") {
			t.Errorf("%s: decoded to %d and validated as %v, want a problem with maxRuntimeSeconds", v, w.MaxRuntimeSeconds, w.Validate())
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func names(ps []FieldError, field string) bool {
	for _, p := range ps {
		if p.Field == field {
			return true
		}
	}
	return false
}
