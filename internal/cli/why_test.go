package cli

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

func TestWhy(t *testing.T) {
	started := testNow
	exit3 := 3
	tests := []struct {
		name   string
		status api.WorkloadStatus
		want   string
	}{{
		name:   "pending prints the reason and its sentence",
		status: api.WorkloadStatus{Phase: api.PhasePending, Reason: "QuotaLimit", Message: "team vision at its limit (8/8 GPUs; this workload asks for 2)"},
		want:   "QuotaLimit: team vision at its limit (8/8 GPUs; this workload asks for 2)\n",
	}, {
		name: "pending behind preempted workloads names the nominated node",
		status: api.WorkloadStatus{Phase: api.PhasePending, Reason: "Preempting",
			Message: "waiting for 2 preempted workloads to stop", NominatedNode: "gpu1"},
		want: "Preempting: waiting for 2 preempted workloads to stop\nnominated node: gpu1\n",
	}, {
		name:   "pending with a reason alone prints the reason",
		status: api.WorkloadStatus{Phase: api.PhasePending, Reason: "Queued"},
		want:   "Queued\n",
	}, {
		name: "running names the node and its GPUs",
		status: api.WorkloadStatus{Phase: api.PhaseRunning, StartedAt: &started, Attempts: 1, Placement: []api.Placement{
			{Node: "gpu1", GPUIndex: 0, MilliGPU: 1000}, {Node: "gpu1", GPUIndex: 1, MilliGPU: 1000},
			{Node: "gpu2", GPUIndex: 4, MilliGPU: 1000},
		}},
		want: "Running on gpu1 (gpus 0,1), gpu2 (gpu 4)\n",
	}, {
		name:   "running on a fraction names its share",
		status: api.WorkloadStatus{Phase: api.PhaseRunning, Placement: []api.Placement{{Node: "gpu1", GPUIndex: 3, MilliGPU: 250}}},
		want:   "Running on gpu1 (0.25 of gpu 3)\n",
	}, {
		name: "running while being reclaimed says it is stopping, why and for whom",
		status: api.WorkloadStatus{Phase: api.PhaseRunning, Placement: []api.Placement{{Node: "gpu1", GPUIndex: 0, MilliGPU: 1000}},
			StopRequested: "Reclaimed", PreemptedBy: "wl-9", Message: "team research runs over its quota and team vision reclaims its guarantee"},
		want: "Running on gpu1 (gpu 0)\nstopping (Reclaimed) for wl-9: team research runs over its quota and team vision reclaims its guarantee\n",
	}, {
		name: "a message that names the preemptor is not repeated",
		status: api.WorkloadStatus{Phase: api.PhaseRunning, Placement: []api.Placement{{Node: "gpu1", GPUIndex: 0, MilliGPU: 1000}},
			StopRequested: "Preempted", PreemptedBy: "wl-9", Message: "preempted by wl-9 (team research, production)"},
		want: "Running on gpu1 (gpu 0)\nstopping (Preempted): preempted by wl-9 (team research, production)\n",
	}, {
		name: "running while being cancelled says it is stopping",
		status: api.WorkloadStatus{Phase: api.PhaseRunning, Placement: []api.Placement{{Node: "gpu1", GPUIndex: 0, MilliGPU: 1000}},
			StopRequested: "Cancelled", Message: "cancelled by alice"},
		want: "Running on gpu1 (gpu 0)\nstopping (Cancelled): cancelled by alice\n",
	}, {
		name:   "finished prints phase, reason and message",
		status: api.WorkloadStatus{Phase: api.PhaseFailed, Reason: "Error", Message: "exited with code 3", ExitCode: &exit3},
		want:   "Failed (Error): exited with code 3\n",
	}, {
		name:   "succeeded without a message prints phase and reason",
		status: api.WorkloadStatus{Phase: api.PhaseSucceeded, Reason: "Completed"},
		want:   "Succeeded (Completed)\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.addWorkloads(api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"x"}})
			f.setStatus("wl-1", tt.status)
			got := f.run(t, "why", "wl-1")
			if diff := cmp.Diff(result{stdout: tt.want}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWhyJSON(t *testing.T) {
	tests := []struct {
		name   string
		status api.WorkloadStatus
		want   string
	}{{
		name:   "every key is present",
		status: api.WorkloadStatus{Phase: api.PhasePending, Reason: "Unschedulable", Message: "no node with 4 free H100 GPUs (best: gpu1 with 2)"},
		want:   `{"id":"wl-1","phase":"Pending","reason":"Unschedulable","message":"no node with 4 free H100 GPUs (best: gpu1 with 2)","nominatedNode":""}`,
	}, {
		name:   "the nominated node is carried",
		status: api.WorkloadStatus{Phase: api.PhasePending, Reason: "Preempting", Message: "waiting for 1 preempted workload to stop", NominatedNode: "gpu2"},
		want:   `{"id":"wl-1","phase":"Pending","reason":"Preempting","message":"waiting for 1 preempted workload to stop","nominatedNode":"gpu2"}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.addWorkloads(api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"x"}})
			f.setStatus("wl-1", tt.status)
			got := f.run(t, "why", "wl-1", "-o", "json")
			if got.code != 0 {
				t.Fatalf("code %d: %s", got.code, got.stderr)
			}
			if diff := cmp.Diff(decodeJSON(t, tt.want), decodeJSON(t, got.stdout)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWhyUnknownWorkload(t *testing.T) {
	f := newFakeServer(t)
	got := f.run(t, "why", "wl-9")
	want := result{code: 1, stderr: "error: workload \"wl-9\" not found\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDescribeShowsPreemption(t *testing.T) {
	tests := []struct {
		name      string
		status    api.WorkloadStatus
		wantLines []string // regular expressions, each matching a whole line
		notLines  []string
	}{{
		name: "a workload being preempted shows the stop and its preemptor",
		status: api.WorkloadStatus{Phase: api.PhaseRunning, Placement: []api.Placement{{Node: "gpu1", GPUIndex: 0, MilliGPU: 1000}},
			StopRequested: "Preempted", PreemptedBy: "wl-7", Message: "a production workload of its own team needs the capacity"},
		wantLines: []string{`  Stop requested:\s+Preempted`, `  Preempted by:\s+wl-7`},
		notLines:  []string{`  Nominated node:.*`},
	}, {
		name:      "a pending preemptor shows its nominated node",
		status:    api.WorkloadStatus{Phase: api.PhasePending, Reason: "Preempting", NominatedNode: "gpu1"},
		wantLines: []string{`  Nominated node:\s+gpu1`, `  Reason:\s+Preempting`},
		notLines:  []string{`  Stop requested:.*`, `  Preempted by:.*`},
	}, {
		name:     "a plain workload shows none of them",
		status:   api.WorkloadStatus{Phase: api.PhasePending, Reason: "Queued"},
		notLines: []string{`  Stop requested:.*`, `  Preempted by:.*`, `  Nominated node:.*`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.addWorkloads(api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"x"}})
			f.setStatus("wl-1", tt.status)
			got := f.run(t, "describe", "workload", "wl-1")
			if got.code != 0 {
				t.Fatalf("code %d: %s", got.code, got.stderr)
			}
			for _, re := range tt.wantLines {
				if !regexp.MustCompile(`(?m)^` + re + `$`).MatchString(got.stdout) {
					t.Errorf("no line matching %q in:\n%s", re, got.stdout)
				}
			}
			for _, re := range tt.notLines {
				if regexp.MustCompile(`(?m)^` + re + `$`).MatchString(got.stdout) {
					t.Errorf("a line matches %q in:\n%s", re, got.stdout)
				}
			}
		})
	}
}

func TestDescribeJSONEventsCarryTimeReasonAndMessage(t *testing.T) {
	f := newFakeServer(t)
	f.addWorkloads(api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"sleep"}})
	f.run(t, "get", "workload", "wl-1") // started
	f.mu.Lock()
	f.event(f.find("wl-1"), "Warning", "Reclaimed", "", "", "") // an event without a message
	f.mu.Unlock()

	got := f.run(t, "describe", "workload", "wl-1", "-o", "json")
	var d struct {
		Workload map[string]any   `json:"workload"`
		Events   []map[string]any `json:"events"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &d); err != nil {
		t.Fatalf("%v\n%s", err, got.stdout)
	}
	if d.Workload["id"] != "wl-1" || len(d.Events) != 3 {
		t.Fatalf("workload %v with %d events, want wl-1 with 3", d.Workload["id"], len(d.Events))
	}
	for i, ev := range d.Events {
		for _, key := range []string{"time", "reason", "message"} {
			if _, ok := ev[key]; !ok {
				t.Errorf("event %d lacks %q: %v", i, key, ev)
			}
		}
	}
	if last := d.Events[2]; last["reason"] != "Reclaimed" || last["message"] != "" {
		t.Errorf("last event is %v, want Reclaimed with an empty message", last)
	}
}
