package local_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// TestTaskSeesOnlyItsOwnProcesses: in its PID namespace a task's /proc
// lists its own processes only (not another team's task, running, nor the
// server's), and what it may write there is its own: the init that leads
// the namespace (root) is neither listed nor writable.
func TestTaskSeesOnlyItsOwnProcesses(t *testing.T) {
	e, _ := fullyIsolated(t)
	if !e.Isolation().PIDNamespaces {
		t.Fatalf("isolation %s: want PID namespaces where tasks run under per-team users", e.Isolation())
	}
	victim := task("pidns-victim", "sleep", uniqueSleep())
	victim.Team = "ta"
	start(t, e, victim)
	got := fields(t, e, "pidns-look", "tb", 1, `
echo "PIDS $(ls /proc | grep -E '^[0-9]+$' | wc -l)"
echo "SELF $$"
if echo 500 > /proc/1/oom_score_adj 2>/dev/null; then echo "INIT writable"; else echo "INIT refused"; fi
if echo 100 > /proc/self/oom_score_adj; then echo "OWN written"; else echo "OWN refused"; fi`, nil)
	// sh, and the ls, grep and wc of the pipeline.
	if n, _ := strconv.Atoi(got["PIDS"]); n < 1 || n > 5 {
		t.Errorf("the task lists %s processes in /proc, want its own (1-5)", got["PIDS"])
	}
	if got["INIT"] != "refused" || got["OWN"] != "written" {
		t.Errorf("writes to /proc: init's %s, its own %s; want refused and written", got["INIT"], got["OWN"])
	}
	e.Stop(t.Context(), victim.WorkloadID, 1, 0)
	waitExit(t, e, victim)
}

// TestTaskPath: a task's PATH is the system's, not the server's, so a bare
// command finds what the task's user can run even where the server's PATH
// starts with a directory only the server's user may enter (pyenv under
// /root); the server's configuration and the task's own environment may
// set another, and a directory the task's user cannot enter is passed
// over for the next.
func TestTaskPath(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	private := t.TempDir() // 0700, the server's
	if err := os.WriteFile(filepath.Join(private, "python3"), []byte("#!/bin/sh\necho private\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", private+":"+os.Getenv("PATH"))
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	requireIsolation(t, e)
	tk := task("bare-python", "python3", "-c", "import sys; print(sys.executable)")
	if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("python3: exited %+v; log:\n%s", x, output(t, e, tk.WorkloadID))
	}
	if out := strings.TrimSpace(output(t, e, tk.WorkloadID)); out != "/usr/bin/python3" {
		t.Errorf("bare python3 ran %q, want /usr/bin/python3", out)
	}

	t.Run("a directory the task's user cannot enter is passed over", func(t *testing.T) {
		if !e.Isolation().Users {
			t.Skip("tasks run as the server's user here")
		}
		work := filepath.Join(dir, "workloads", "passed-over", "work")
		closed, open := filepath.Join(work, "closed"), filepath.Join(work, "open")
		for d, mode := range map[string]os.FileMode{closed: 0o700, open: 0o755} {
			if err := os.MkdirAll(d, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "which-one"), []byte("#!/bin/sh\necho "+filepath.Base(d)+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		tk := task("passed-over", "which-one")
		tk.Env = map[string]string{"PATH": closed + ":" + open}
		if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
			t.Fatalf("exited %+v; log:\n%s", x, output(t, e, tk.WorkloadID))
		}
		if out := strings.TrimSpace(output(t, e, tk.WorkloadID)); out != "open" {
			t.Errorf("ran %q, want the program in the directory the task may enter", out)
		}
	})

	t.Run("the server's configuration sets the default", func(t *testing.T) {
		e, err := local.New(local.Options{DataDir: t.TempDir(), Path: "/usr/bin:/bin"})
		if err != nil {
			t.Fatal(err)
		}
		tk := task("configured", "sh", "-c", `echo "$PATH"`)
		run(t, e, tk)
		if out := strings.TrimSpace(output(t, e, tk.WorkloadID)); out != "/usr/bin:/bin" {
			t.Errorf("PATH %q, want the configured /usr/bin:/bin", out)
		}
	})
}

// TestTaskUserAndHome: the task's user has a name, in passwd and group,
// whose home is $HOME, a directory of the workload's own, kept across its
// attempts; /dev/shm holds 1 GiB or the task's memory request, whichever
// is larger.
func TestTaskUserAndHome(t *testing.T) {
	e, dir := fullyIsolated(t)
	const script = `echo "USER $(id -un)"; echo "GROUP $(id -gn)"; echo "PWHOME $(getent passwd $(id -u) | cut -d: -f6)"
echo "HOME $HOME"; echo "KEPT $(cat $HOME/kept 2>/dev/null || echo none)"; echo attempt > $HOME/kept
echo "SHM $(df -k /dev/shm | awk 'NR==2 {print $2}')"`
	first := fields(t, e, "home", "research", 1, script, nil)
	home := filepath.Join(dir, "workloads", "home", "home")
	want := map[string]string{"USER": "gpufleet-research", "GROUP": "gpufleet-research", "PWHOME": home, "HOME": home, "KEPT": "none", "SHM": strconv.Itoa(1 << 20)}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("attempt 1: %s %q, want %q", k, first[k], v)
		}
	}
	second := fields(t, e, "home", "research", 2, script, nil)
	if second["KEPT"] != "attempt" {
		t.Errorf("attempt 2 found %q in HOME, want what attempt 1 left", second["KEPT"])
	}

	t.Run("a memory request larger than 1 GiB sizes /dev/shm", func(t *testing.T) {
		tk := task("big-shm", "sh", "-c", `echo "SHM $(df -k /dev/shm | awk 'NR==2 {print $2}')"`)
		tk.Team, tk.Request = "research", core.Request{MemoryMiB: 3072}
		run(t, e, tk)
		if out := output(t, e, tk.WorkloadID); !strings.Contains(out, "SHM "+strconv.Itoa(3<<20)+"\n") {
			t.Errorf("output %q, want /dev/shm of %d KiB", out, 3<<20)
		}
	})
}
