package cli

import (
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

func TestTaskRef(t *testing.T) {
	for in, want := range map[string]string{
		"wl-abc_7":   "wl-abc-7",
		"wl-abc-7":   "wl-abc-7",
		"wl-abc":     "wl-abc",
		"wl-abc_":    "wl-abc_",
		"wl-abc_-1":  "wl-abc_-1",
		"train_7":    "train_7", // a name, not an ID
		"wl-abc_x":   "wl-abc_x",
		"wl-abc_012": "wl-abc-012",
	} {
		if got := taskRef(in); got != want {
			t.Errorf("taskRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFoldArrays(t *testing.T) {
	task := func(i int, phase string) api.Workload {
		idx := i
		return api.Workload{ID: api.TaskID("wl-a", i), Name: "sweep", Team: "t",
			Array: &api.ArraySpec{ID: "wl-a", Index: &idx, Start: 0, End: 4, MaxRunning: 2}, Status: api.WorkloadStatus{Phase: phase, Attempts: 1}}
	}
	ws := []api.Workload{{ID: "wl-b", Name: "one", Status: api.WorkloadStatus{Phase: api.PhaseRunning}},
		task(0, api.PhaseSucceeded), task(1, api.PhaseRunning), task(2, api.PhaseRunning), task(3, api.PhasePending), task(4, api.PhasePending),
		{ID: "wl-c", Name: "two"}}
	got := foldArrays(ws)
	if len(got) != 3 || got[0].ID != "wl-b" || got[2].ID != "wl-c" {
		t.Fatalf("folded to %+v", got)
	}
	a := got[1]
	if a.ID != "wl-a" || a.Name != "sweep[0-4%2]" || a.Status.Phase != "Pending 2 Running 2 Succeeded 1" || a.Status.Attempts != 5 {
		t.Errorf("array row %+v", a)
	}
}

func TestWorkloadFileArray(t *testing.T) {
	w, err := decodeWorkloadFile([]byte("command: [python, sweep.py]\narray: {start: 0, end: 99, maxRunning: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Array == nil || w.Array.Start != 0 || w.Array.End != 99 || w.Array.MaxRunning != 10 {
		t.Errorf("array %+v", w.Array)
	}
}
