package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

func TestDescribeWorkload(t *testing.T) {
	f := newTestServer(t)
	f.submit(api.Workload{Name: "train", Team: "research", Resources: api.Resources{GPUs: 250, CPU: 2000, MemoryMiB: 8192},
		Command: []string{"sleep", "--msg", "it's fine"}, Env: map[string]string{"B": "2", "A": "1"}, MaxRuntimeSeconds: 3600})
	f.step() // starts it
	f.sample(nil, core.WorkloadSample{ID: "wl-1", Attempt: 1, Utilization: 0.4, MemoryUsedMiB: 2048})

	got := f.run(t, "describe", "workload", "wl-1")
	want := "" +
		"ID:             wl-1\n" +
		"Name:           train\n" +
		"Team:           research\n" +
		"Owner:          alice\n" +
		"Kind:           job\n" +
		"Priority:       training\n" +
		"Created:        2025-06-01T11:50:00Z (10m ago)\n" +
		"Command:        sleep --msg 'it'\\''s fine'\n" +
		"Working dir:    <none>\n" +
		"Max runtime:    1h0m0s\n" +
		"Grace period:   default\n" +
		"Resources:\n" +
		"  GPUs:         0.25\n" +
		"  GPU models:   any\n" +
		"  CPU:          2\n" +
		"  Memory:       8GiB\n" +
		"Env:\n" +
		"  A:            1\n" +
		"  B:            2\n" +
		"Labels:         <none>\n" +
		"Status:\n" +
		"  Phase:        Running\n" +
		"  Reason:       Scheduled\n" +
		"  Message:      placed on gpu1 gpu 0 (250 milli-GPU, 20480 MiB)\n" +
		"  Exit code:    <none>\n" +
		"  Attempts:     1\n" +
		"  Preemptions:  0\n" +
		"  Started:      2025-06-01T12:00:00Z\n" +
		"  Finished:     <none>\n" +
		"  Usage:        40% GPU, 2GiB GPU memory, sampled 2025-06-01T12:00:00Z\n" +
		"Placement:\n" +
		"  NODE  GPU  UUID   MILLI-GPU  MEMORY\n" +
		"  gpu1  0    GPU-0  250        20GiB\n" +
		"Events:\n" +
		"  TIME                  TYPE    REASON     MESSAGE\n" +
		"  2025-06-01T11:50:00Z  Normal  Submitted  (none) -> Pending: submitted by alice to team research\n" +
		"  2025-06-01T12:00:00Z  Normal  Scheduled  Pending -> Running: attempt 1 placed on gpu1 gpu 0 (250 milli-GPU, 20480 MiB)\n"
	if diff := cmp.Diff(result{stdout: want}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	got = f.run(t, "describe", "workload", "wl-1", "-o", "json")
	var d struct {
		Workload api.Workload `json:"workload"`
		Events   []api.Event  `json:"events"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &d); err != nil {
		t.Fatalf("%v\n%s", err, got.stdout)
	}
	events, err := f.admin().Events(context.Background(), "wl-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(events, d.Events); diff != "" || d.Workload.ID != "wl-1" {
		t.Errorf("workload %q, events (-want +got):\n%s", d.Workload.ID, diff)
	}
}

func TestLogs(t *testing.T) {
	f := newTestServer(t)
	f.submit(api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"echo", "hi"}})
	f.step()
	got := f.run(t, "logs", "wl-1", "-f")
	if diff := cmp.Diff(result{stdout: "started attempt 1: echo hi\nattempt 1 exited with code 0\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCancel(t *testing.T) {
	f := newTestServer(t)
	f.submit(
		api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"sleep"}},
		api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"exit", "0"}},
	)
	f.step()
	f.run(t, "wait", "wl-2")

	got := f.run(t, "cancel", "wl-1", "wl-2", "wl-9")
	want := result{
		code:   1,
		stdout: "wl-1 cancelling (Running)\nwl-2 already Succeeded\n",
		stderr: "error: wl-9: workload wl-9: not found\n",
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCreate(t *testing.T) {
	f := newTestServer(t)
	admin := f.vars(t, adminToken)

	got := runCLI(t, invocation{args: []string{"create", "team", "nlp"}, vars: admin})
	if diff := cmp.Diff(result{stdout: "team/nlp created\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("create team (-want +got):\n%s", diff)
	}

	got = runCLI(t, invocation{args: []string{"create", "user", "bob", "--team", "nlp", "--team", "vision"}, vars: admin})
	lines := strings.Split(strings.TrimSuffix(got.stdout, "\n"), "\n")
	bobToken := lines[len(lines)-1]
	if got.code != 0 || !strings.HasPrefix(bobToken, "gpf_") {
		t.Fatalf("create user: got %+v, want the token on the last line", got)
	}
	bob := runCLI(t, invocation{args: []string{"submit", "--team", "nlp", "--", "x"}, vars: f.vars(t, bobToken)})
	if bob.stdout != "wl-1\n" {
		t.Errorf("the new user's token does not work: %+v", bob)
	}

	got = f.run(t, "create", "team", "x")
	want := result{code: 1, stderr: "error: creating teams needs the admin role\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("non-admin (-want +got):\n%s", diff)
	}
}

func TestExitCodesForUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no verb prints help", nil, 0},
		{"unknown verb", []string{"launch"}, 2},
		{"unknown flag", []string{"logs", "--tail"}, 2},
		{"missing argument", []string{"wait"}, 2},
		{"create without a kind", []string{"create"}, 2},
		{"describe a team", []string{"describe", "team", "research"}, 2},
		{"set without a kind", []string{"set"}, 2},
		{"set quota without a team", []string{"set", "quota"}, 2},
		{"apply with an argument", []string{"apply", "fleet.yaml"}, 2},
		{"why without an ID", []string{"why"}, 2},
		{"why with an unknown output", []string{"why", "wl-1", "-o", "xml"}, 2},
		{"server with a bad address", []string{"server", "--addr", "nope"}, 2},
		{"version", []string{"version"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			if got := f.run(t, tt.args...); got.code != tt.want {
				t.Errorf("got code %d (stderr %q), want %d", got.code, got.stderr, tt.want)
			}
		})
	}
}
