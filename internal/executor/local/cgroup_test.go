package local_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// limited returns an executor whose attempts run in cgroups, with pidsMax
// processes each, skipping (or failing, where isolation is required) where
// the machine gives none.
func limited(t *testing.T, pidsMax int64) *local.Executor {
	t.Helper()
	e, err := local.New(local.Options{DataDir: t.TempDir(), PidsMax: pidsMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if e.Isolation().Cgroups == "" {
		requireOrSkip(t, "cgroups", e.Isolation())
	}
	return e
}

// TestCgroupLimits: an attempt's memory request is its limit (a task that
// allocates past it ends OOMKilled, saying the limit), its CPU time and
// peak memory are measured, and its processes are bounded.
func TestCgroupLimits(t *testing.T) {
	e := limited(t, 64)
	py := systemPython(t)

	t.Run("past its memory request, the OOM killer ends it", func(t *testing.T) {
		tk := task("cg-hog", py, "-c", "b = bytearray(1 << 30); print(len(b))")
		tk.Team, tk.Request = "ta", core.Request{MemoryMiB: 256}
		x := run(t, e, tk)
		if x.Reason != "OOMKilled" || !strings.Contains(x.Message, "256 MiB") || x.ExitCode != nil && *x.ExitCode == 0 {
			t.Errorf("exit %+v, want OOMKilled naming the limit of 256 MiB", x)
		}
		if x.PeakMemoryBytes < 128<<20 || x.PeakMemoryBytes > 300<<20 {
			t.Errorf("peak memory %d bytes, want about the limit of 256 MiB", x.PeakMemoryBytes)
		}
	})

	t.Run("its CPU time is counted", func(t *testing.T) {
		tk := task("cg-busy", py, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass")
		tk.Team = "ta"
		x := run(t, e, tk)
		if x.ExitCode == nil || *x.ExitCode != 0 || x.CPUSeconds < 0.4 || x.CPUSeconds > 5 {
			t.Errorf("exit %+v, want code 0 and about 0.5 CPU-seconds", x)
		}
	})

	t.Run("the tasks together weigh a quarter of the server", func(t *testing.T) {
		// The parent of the task's own cpu cgroup is the slot's.
		tk := task("cg-weight", "/bin/sh", "-c", `p=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}cpu\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup)
if [ -n "$p" ]; then cat "/sys/fs/cgroup/cpu$p/../cpu.shares"; else cat "/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)/../cpu.weight"; fi`)
		tk.Team = "ta"
		run(t, e, tk)
		got := strings.TrimSpace(output(t, e, tk.WorkloadID))
		if got != "256" && got != "25" {
			t.Errorf("the slot's CPU weight is %q, want 256 (v1 cpu.shares) or 25 (v2 cpu.weight)", got)
		}
	})

	t.Run("a fork storm stops at its bound", func(t *testing.T) {
		storm := `import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("STOPPED", n, e.errno)
print("FORKED", n)`
		tk := task("cg-storm", py, "-c", storm)
		tk.Team = "ta"
		run(t, e, tk)
		out := output(t, e, tk.WorkloadID)
		f := strings.Fields(out[strings.Index(out, "FORKED"):])
		if n, err := strconv.Atoi(f[1]); err != nil || n >= 64 || !strings.Contains(out, "STOPPED") {
			t.Errorf("the storm forked %s processes, want it stopped below the bound of 64:\n%s", f[1], out)
		}
	})
}

// requireOrSkip skips a test that needs what the machine does not give,
// unless GPUFLEET_REQUIRE_ISOLATION=1 (CI) makes that a failure.
func requireOrSkip(t *testing.T, what string, st local.IsolationStatus) {
	t.Helper()
	if os.Getenv("GPUFLEET_REQUIRE_ISOLATION") == "1" {
		t.Fatalf("%s are required (GPUFLEET_REQUIRE_ISOLATION=1) but this machine gives %s", what, st)
	}
	t.Skipf("no %s here: %s", what, st)
}
