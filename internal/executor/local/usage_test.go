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
	tk := task("proc-1", "sh", "-c", "echo $$; exec sleep 30")
	start(t, e, tk)
	out := waitOutput(t, e, "proc-1", "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(out))
	ps := e.Processes()
	if len(ps) != 1 || ps[0].WorkloadID != "proc-1" || ps[0].Attempt != 1 || ps[0].PID != pid || ps[0].ShimPID <= 0 || ps[0].ShimPID == pid {
		t.Errorf("Processes() = %+v, want proc-1 attempt 1 with pid %d and its supervisor", ps, pid)
	}
	e.Stop(t.Context(), "proc-1", 1, time.Second)
	waitExit(t, e, tk)
	if ps := e.Processes(); len(ps) != 0 {
		t.Errorf("Processes() after the end = %+v, want none", ps)
	}
}
