package local_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
		t.Cleanup(func() { e.Close() })
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

// TestRunProbe: a program run by RunProbe runs as a task does (its own
// user, not root; its PID namespace; the GPUs given), and a program beside
// the server's binary, outside the paths tasks may execute, is installed
// where the sandbox can run it.
func TestRunProbe(t *testing.T) {
	e, dir := fullyIsolated(t)
	res := e.RunProbe(t.Context(), "look", []string{"sh", "-c", `echo "UID $(id -u) NAME $(id -un) PROCS $(ls /proc | grep -cE '^[0-9]+$') GPUS $CUDA_VISIBLE_DEVICES"`}, []int{0, 2}, 10*time.Second)
	if res.Err != nil || res.Exit == nil || *res.Exit != 0 {
		t.Fatalf("RunProbe: %+v (stderr %q)", res, res.Stderr)
	}
	f := strings.Fields(string(res.Stdout))
	if len(f) != 8 || f[1] == "0" || f[3] != "gpufleet-probe" || f[7] != "0,2" {
		t.Errorf("the probe saw %q, want a user of the range named gpufleet-probe and GPUs 0,2", res.Stdout)
	}
	if n, _ := strconv.Atoi(f[5]); e.Isolation().PIDNamespaces && (n < 1 || n > 5) {
		t.Errorf("the probe lists %s processes, want its own (1-5) in its PID namespace", f[5])
	}

	t.Run("a helper outside the system paths is installed", func(t *testing.T) {
		helper := filepath.Join(t.TempDir(), "helper")
		if err := os.WriteFile(helper, []byte("#!/bin/sh\necho helped \"$@\"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		res := e.RunProbe(t.Context(), "helper", []string{helper, "x"}, nil, 10*time.Second)
		if res.Err != nil || strings.TrimSpace(string(res.Stdout)) != "helped x" {
			t.Errorf("RunProbe of a helper: %+v (stdout %q, stderr %q)", res, res.Stdout, res.Stderr)
		}
		if fi, err := os.Stat(filepath.Join(dir, "bin", "helper")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("installed helper: %v, %v", fi, err)
		}
	})

	t.Run("a missing program and a timeout are errors", func(t *testing.T) {
		if res := e.RunProbe(t.Context(), "missing", []string{"no-such-probe"}, nil, 10*time.Second); !errors.Is(res.Err, exec.ErrNotFound) {
			t.Errorf("RunProbe of a missing program: %+v, want an error wrapping exec.ErrNotFound", res)
		}
		res := e.RunProbe(t.Context(), "slow", []string{"sleep", "30"}, nil, 200*time.Millisecond)
		if res.Err == nil || !strings.Contains(res.Err.Error(), "timed out") || res.Duration > 10*time.Second {
			t.Errorf("RunProbe past its timeout: %+v, want a timeout", res)
		}
	})
}

// TestCUDAProbeInTheSandbox: the CUDA probe, run by RunProbe, initialises
// a stand-in driver that behaves as NVIDIA's does at cuInit (it names a
// thread it starts through /proc/self/task/TID/comm, and fails with 304
// where it may not), so CUDA starts in the sandbox tasks run in.
func TestCUDAProbeInTheSandbox(t *testing.T) {
	e, dir := fullyIsolated(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool to build the probe")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the stand-in driver")
	}
	// Both go to DataDir/bin, the directory the probe's sandbox shows,
	// with a wrapper that points the loader there.
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	probeDir, _ := filepath.Abs(filepath.Join("..", "..", "..", "cmd", "gpufleet-cuda-probe"))
	for _, c := range [][]string{
		{goTool, "build", "-o", filepath.Join(bin, "gpufleet-cuda-probe"), probeDir},
		{cc, "-shared", "-fPIC", "-o", filepath.Join(bin, "libcuda.so.1"), filepath.Join(probeDir, "testdata", "fakecuda.c"), "-lpthread"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	wrapper := filepath.Join(bin, "cuda-probe")
	script := "#!/bin/sh\nLD_LIBRARY_PATH=" + bin + " exec " + filepath.Join(bin, "gpufleet-cuda-probe") + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	res := e.RunProbe(t.Context(), "cuda-init", []string{wrapper}, []int{0}, time.Minute)
	want := `{"library":"` + filepath.Join(bin, "libcuda.so.1") + `","driverVersion":13000,"deviceCount":1,"devices":["Fake GPU"]}`
	if res.Err != nil || res.Exit == nil || *res.Exit != 0 || strings.TrimSpace(string(res.Stdout)) != want {
		t.Errorf("the probe in the sandbox: %+v\nstdout %s\nstderr %s\nwant %s", res, res.Stdout, res.Stderr, want)
	}
}
