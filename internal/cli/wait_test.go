package cli

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

func TestWait(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		cancel  bool
		args    []string
		want    result
	}{{
		name:    "success exits 0 and prints nothing",
		command: []string{"exit", "0"},
		want:    result{},
	}, {
		name:    "failure exits with the workload's exit code",
		command: []string{"exit", "3"},
		want:    result{code: 3, stderr: "wl-1: Failed (Error)\n"},
	}, {
		name:    "cancelled without an exit code exits 1",
		command: []string{"sleep"},
		cancel:  true,
		want:    result{code: 1, stderr: "wl-1: Cancelled (Cancelled): cancelled by alice\n"},
	}, {
		name:    "timeout exits 124",
		command: []string{"sleep"},
		args:    []string{"--timeout", "300ms"},
		want:    result{code: 124, stderr: "error: wl-1: still Running after 300ms\n"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			f.submit(api.Workload{Resources: api.Resources{GPUs: 1000}, Command: tt.command})
			f.step()
			if tt.cancel {
				f.run(t, "cancel", "wl-1")
				f.step()
			}
			start := time.Now()
			got := f.run(t, append([]string{"wait", "wl-1"}, tt.args...)...)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

func TestWaitUnknownWorkload(t *testing.T) {
	f := newTestServer(t)
	got := f.run(t, "wait", "wl-7")
	want := result{code: 1, stderr: "error: workload wl-7: not found\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestExitCode(t *testing.T) {
	code := func(n int) *int { return &n }
	tests := []struct {
		name  string
		phase string
		exit  *int
		want  int
	}{
		{"succeeded", api.PhaseSucceeded, code(0), 0},
		{"succeeded without a code", api.PhaseSucceeded, nil, 0},
		{"failed with a code", api.PhaseFailed, code(42), 42},
		{"failed without a code", api.PhaseFailed, nil, 1},
		{"failed yet exited 0 is still a failure", api.PhaseFailed, code(0), 1},
		{"killed by a signal", api.PhaseCancelled, code(137), 137},
		{"a code out of range", api.PhaseFailed, code(-1), 1},
		{"cancelled", api.PhaseCancelled, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &api.Workload{Status: api.WorkloadStatus{Phase: tt.phase, ExitCode: tt.exit}}
			if got := exitCode(w); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}
