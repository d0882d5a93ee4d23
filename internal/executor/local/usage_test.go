package local_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

func TestSimulatedUsageFile(t *testing.T) {
	e, err := local.New(local.Options{DataDir: t.TempDir(), SimulatedUsage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	tk := task("sim-1", "sh", "-c", `echo "utilization=0.8 memoryMiB=2048" > "$`+local.EnvSimUsageFile+`"; echo "file=$`+local.EnvSimUsageFile+`"`)
	tk.Env = map[string]string{local.EnvSimUsageFile: "/tmp/not-this-one"}
	tk.Assignments = []core.Assignment{{Node: "n", GPUIndex: 0, GPUUUID: "GPU-x", MilliGPU: 500, MemoryMiB: 4096}}
	tk.Request.MilliGPU = 500
	run(t, e, tk)
	path := e.UsageFile("sim-1", 1)
	if out := output(t, e, "sim-1"); !strings.Contains(out, "file="+path+"\n") {
		t.Errorf("output %q: want the file %s", out, path)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "utilization=0.8 memoryMiB=2048\n" {
		t.Errorf("usage file = %q, %v", b, err)
	}

	t.Run("a task without GPUs, or an executor for real GPUs, sets none", func(t *testing.T) {
		tk := task("sim-2", "sh", "-c", `echo "file=${`+local.EnvSimUsageFile+`:-none}"`)
		run(t, e, tk)
		if out := output(t, e, "sim-2"); out != "file=none\n" {
			t.Errorf("output %q, want file=none", out)
		}
	})
}

func TestProcesses(t *testing.T) {
	e, err := local.New(local.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	marker := uniqueSleep()
	tk := task("proc-1", "sh", "-c", "sleep "+marker)
	start(t, e, tk)
	// The task's process descends from the one Processes names: the
	// task's first process, or the init of its PID namespace.
	pid := waitProcess(t, marker)
	ps := e.Processes()
	if len(ps) != 1 || ps[0].WorkloadID != "proc-1" || ps[0].Attempt != 1 || ps[0].ShimPID <= 0 || ps[0].ShimPID == ps[0].PID {
		t.Fatalf("Processes() = %+v, want proc-1 attempt 1 with its process and its supervisor", ps)
	}
	if !descends(pid, ps[0].PID) || !descends(ps[0].PID, ps[0].ShimPID) {
		t.Errorf("Processes() = %+v: the task's process %d does not descend from %d, nor that from the supervisor", ps, pid, ps[0].PID)
	}
	e.Stop(t.Context(), "proc-1", 1, time.Second)
	waitExit(t, e, tk)
	if ps := e.Processes(); len(ps) != 0 {
		t.Errorf("Processes() after the end = %+v, want none", ps)
	}
}

// descends reports whether pid is ancestor or one of its descendants.
func descends(pid, ancestor int) bool {
	for range 64 {
		if pid == ancestor {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if pid, err = strconv.Atoi(f[1]); err != nil || pid <= 1 {
			return false
		}
	}
	return false
}
