package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A task's environment reaches it, but never the command line of any
// process (the supervisor's, the sandbox's, the task's), which every user
// of the machine may read in /proc.
func TestEnvironmentIsNotInAnyCommandLine(t *testing.T) {
	e := newExecutor(t, "", nil)
	const secret = "s3cr3t-v4lue-9f1c"
	tk := task("env-pipe", "sh", "-c", `echo "got $TOKEN"; sleep 30`)
	tk.Env = map[string]string{"TOKEN": secret}
	start(t, e, tk)
	defer func() {
		e.Stop(t.Context(), tk.WorkloadID, tk.Attempt, 0)
		waitExit(t, e, tk) // its directory is the test's to remove only then
	}()
	waitOutput(t, e, tk.WorkloadID, "got "+secret)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), secret) {
			t.Errorf("%s holds the task's environment: %q", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
}
