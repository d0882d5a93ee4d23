package local_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"

	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/executortest"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/testwait"
	"golang.org/x/sys/unix"
)

func TestConformance(t *testing.T) {
	var dirs sync.Map // *local.Executor → its data directory
	executortest.Run(t, func(t *testing.T) executor.Executor {
		dir := t.TempDir()
		// The platform's secrets, as the server keeps them.
		for _, name := range []string{"admin-token", "gpufleet.db"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("platform-secret-"+name), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		e, err := local.New(local.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		requireIsolation(t, e)
		dirs.Store(e, dir)
		return e
	}, executortest.Options{Forbidden: func(e executor.Executor, other core.WorkloadID) []string {
		v, _ := dirs.Load(e)
		dir := v.(string)
		var pids []string
		for _, p := range e.(*local.Executor).Processes() {
			if p.WorkloadID == other {
				pids = append(pids, strconv.Itoa(p.PID))
			}
		}
		return forbiddenPaths(dir, other, pids...)
	}, Python: testPython()})
}

// testPython is a python3 that a sandboxed task can run: the system's, in
// /usr/bin; "" where there is none.
func testPython() string {
	for _, p := range []string{"/usr/bin/python3", "/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// forbiddenPaths are the ways a task could reach the platform's files in
// dir, and the workload other's, whose processes are pids.
func forbiddenPaths(dir string, other core.WorkloadID, pids ...string) []string {
	w := filepath.Join(dir, "workloads", string(other))
	paths := []string{
		filepath.Join(dir, "admin-token"), filepath.Join(dir, "gpufleet.db"),
		"../../../admin-token", "../../../gpufleet.db",
		"/proc/1/root" + filepath.Join(dir, "admin-token"),
		"/proc/self/root" + filepath.Join(dir, "admin-token"),
		filepath.Join(w, "log"), filepath.Join(w, "work", "own-file"), filepath.Join(w, "work"),
		"../../" + string(other) + "/log", "../../" + string(other) + "/work/own-file",
	}
	for _, pid := range pids {
		paths = append(paths, "/proc/"+pid+"/environ", "/proc/"+pid+"/root"+filepath.Join(dir, "admin-token"),
			"/proc/"+pid+"/cwd/own-file")
	}
	return paths
}

// requireIsolation skips a test that needs full isolation where the
// machine cannot give it (not root, no Landlock), unless
// GPUFLEET_REQUIRE_ISOLATION=1 (CI) makes that a failure.
func requireIsolation(t *testing.T, e *local.Executor) {
	t.Helper()
	if st := e.Isolation(); !st.Full() {
		if os.Getenv("GPUFLEET_REQUIRE_ISOLATION") == "1" {
			t.Fatalf("isolation is required (GPUFLEET_REQUIRE_ISOLATION=1) but this machine gives %s", st)
		}
		t.Logf("isolation is not full here: %s", st)
	}
}

// newExecutor returns a local executor on dir (a fresh temporary directory
// when dir is empty).
func newExecutor(t *testing.T, dir string, now func() time.Time) *local.Executor {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	e, err := local.New(local.Options{DataDir: dir, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

const timeout = 10 * time.Second

func task(id core.WorkloadID, command ...string) executor.Task {
	return executor.Task{WorkloadID: id, Attempt: 1, Command: command, GracePeriod: 5 * time.Second}
}

func start(t *testing.T, e *local.Executor, tk executor.Task) {
	t.Helper()
	if err := e.Start(t.Context(), tk); err != nil {
		t.Fatalf("Start %s: %v", tk.WorkloadID, err)
	}
}

// waitExit returns the next exit of e, which must be tk's.
func waitExit(t *testing.T, e *local.Executor, tk executor.Task) executor.Exit {
	t.Helper()
	select {
	case x := <-e.Exits():
		if x.WorkloadID != tk.WorkloadID || x.Attempt != tk.Attempt {
			t.Fatalf("exit: got %s attempt %d, want %s attempt %d", x.WorkloadID, x.Attempt, tk.WorkloadID, tk.Attempt)
		}
		return x
	case <-time.After(timeout):
		t.Fatalf("no exit of %s within %s", tk.WorkloadID, timeout)
		return executor.Exit{}
	}
}

// run starts tk and waits for its end.
func run(t *testing.T, e *local.Executor, tk executor.Task) executor.Exit {
	t.Helper()
	start(t, e, tk)
	return waitExit(t, e, tk)
}

func readLog(t *testing.T, e *local.Executor, id core.WorkloadID) string {
	t.Helper()
	r, err := e.Logs(id)
	if err != nil {
		t.Fatalf("Logs %s: %v", id, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// output is the log without the executor's own lines.
func output(t *testing.T, e *local.Executor, id core.WorkloadID) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.SplitAfter(readLog(t, e, id), "\n") {
		if !strings.HasPrefix(l, "--- gpufleet:") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// waitOutput waits until the task's output contains s. The output is a
// file that nothing signals the growth of: testwait reads it again.
func waitOutput(t *testing.T, e *local.Executor, id core.WorkloadID, s string) string {
	t.Helper()
	var out string
	testwait.Until(t, timeout, fmt.Sprintf("%q in the output of %s", s, id), func() (bool, string) {
		out = output(t, e, id)
		return strings.Contains(out, s), out
	})
	return out
}

// pidFile is attempt-N/pid.
type pidFile struct {
	ShimPID   int    `json:"shimPID"`
	ShimStart uint64 `json:"shimStart"`
	PID       int    `json:"pid"`
	Start     uint64 `json:"start"`
}

func attemptDir(dir string, id core.WorkloadID, attempt int) string {
	return filepath.Join(dir, "workloads", string(id), fmt.Sprintf("attempt-%d", attempt))
}

func readPidFile(t *testing.T, dir string, id core.WorkloadID, attempt int) pidFile {
	t.Helper()
	var p pidFile
	b, err := os.ReadFile(filepath.Join(attemptDir(dir, id, attempt), "pid"))
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.ShimPID <= 0 || p.PID <= 0 {
		t.Fatalf("pid file of %s attempt %d: %+v, %v", id, attempt, p, err)
	}
	return p
}

// stat returns fields 3 (state), 5 (process group), 6 (session) and 22
// (start time) of /proc/<pid>/stat; ok is false when there is no process.
func stat(pid int) (state string, pgrp, session int, start uint64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, 0, false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	pgrp, _ = strconv.Atoi(f[2])
	session, _ = strconv.Atoi(f[3])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return f[0], pgrp, session, start, true
}

// waitDead waits until pid is gone or a zombie: on a pidfd, which the
// kernel makes readable when the process exits (any process, not only a
// child of the test's).
func waitDead(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone already
	}
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for end := time.Now().Add(timeout); ; {
		n, err := unix.Poll(fds, int(max(time.Until(end), 0).Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll on the pidfd of %d: %v", pid, err)
		}
		if n == 0 {
			st, _, _, _, _ := stat(pid)
			t.Fatalf("process %d still alive (state %s) after %s", pid, st, timeout)
		}
		return
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("GPUFLEET_TEST_CANARY", "leaked")
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	gpu := func(i int, uuid string, milli, mem int64) core.Assignment {
		return core.Assignment{Node: "n1", GPUIndex: i, GPUUUID: uuid, MilliGPU: milli, MemoryMiB: mem}
	}
	tests := []struct {
		name string
		id   core.WorkloadID
		req  core.Request
		as   []core.Assignment
		env  map[string]string
		want map[string]string // on top of the base variables
	}{{
		name: "no GPUs hides every device",
		id:   "cpu-only",
		want: map[string]string{"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "", "GPUFLEET_GPU_UUIDS": ""},
	}, {
		name: "whole GPUs are listed in assignment order",
		id:   "two-gpus",
		req:  core.Request{MilliGPU: 2000},
		as:   []core.Assignment{gpu(5, "GPU-5", 1000, 81920), gpu(1, "GPU-1", 1000, 81920)},
		want: map[string]string{"CUDA_VISIBLE_DEVICES": "5,1", "NVIDIA_VISIBLE_DEVICES": "5,1", "GPUFLEET_GPU_UUIDS": "GPU-5,GPU-1"},
	}, {
		name: "a fraction sets the share and its memory limit",
		id:   "quarter",
		req:  core.Request{MilliGPU: 250},
		as:   []core.Assignment{gpu(3, "GPU-3", 250, 20480)},
		want: map[string]string{
			"CUDA_VISIBLE_DEVICES": "3", "NVIDIA_VISIBLE_DEVICES": "3", "GPUFLEET_GPU_UUIDS": "GPU-3",
			"GPUFLEET_GPU_FRACTION": "0.25", "GPUFLEET_GPU_MEMORY_LIMIT_MIB": "20480",
		},
	}, {
		name: "a memory request is a fraction too",
		id:   "by-memory",
		req:  core.Request{GPUMemoryMiB: 10240},
		as:   []core.Assignment{gpu(0, "GPU-0", 125, 10240)},
		want: map[string]string{
			"CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "0", "GPUFLEET_GPU_UUIDS": "GPU-0",
			"GPUFLEET_GPU_FRACTION": "0.125", "GPUFLEET_GPU_MEMORY_LIMIT_MIB": "10240",
		},
	}, {
		name: "the task's variables are kept but platform variables win",
		id:   "own-env",
		req:  core.Request{MilliGPU: 1000},
		as:   []core.Assignment{gpu(2, "GPU-2", 1000, 81920)},
		env: map[string]string{
			"MY_VAR": "a b=c", "LANG": "en_US.UTF-8", "CUDA_VISIBLE_DEVICES": "0,1,2,3",
			"GPUFLEET_ATTEMPT": "9", "GPUFLEET_GPU_FRACTION": "1", "GPUFLEET_SHIM": "1",
		},
		want: map[string]string{
			"MY_VAR": "a b=c", "LANG": "en_US.UTF-8",
			"CUDA_VISIBLE_DEVICES": "2", "NVIDIA_VISIBLE_DEVICES": "2", "GPUFLEET_GPU_UUIDS": "GPU-2",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := task(tt.id, "env")
			tk.Request, tk.Assignments, tk.Env = tt.req, tt.as, tt.env
			if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
				t.Fatalf("env exited with %+v", x)
			}
			got := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(output(t, e, tt.id)), "\n") {
				k, v, _ := strings.Cut(l, "=")
				got[k] = v
			}
			want := map[string]string{
				"PATH":                    local.DefaultPath,
				"HOME":                    filepath.Join(dir, "workloads", string(tt.id), "home"),
				"LANG":                    "C.UTF-8",
				"GPUFLEET_WORKLOAD_ID":    string(tt.id),
				"GPUFLEET_ATTEMPT":        "1",
				"CUDA_DEVICE_ORDER":       "PCI_BUS_ID",
				"GPUFLEET_CHECKPOINT_DIR": filepath.Join(dir, "workloads", string(tt.id), "checkpoint"),
				"GPUFLEET_OUTPUTS_FILE":   filepath.Join(dir, "workloads", string(tt.id), "usage", "outputs-attempt-1"),
				"GPUFLEET_METRICS_FILE":   filepath.Join(dir, "workloads", string(tt.id), "usage", "metrics-attempt-1"),
				"GPUFLEET_STOP_FILE":      filepath.Join(dir, "workloads", string(tt.id), "usage", "stop-attempt-1"),
			}
			if !e.Isolation().Users {
				// Without a private /tmp the task gets its own.
				want["TMPDIR"] = filepath.Join(dir, "workloads", string(tt.id), "tmp")
			} else {
				// The team's user, by the name its passwd entry gives.
				want["USER"], want["LOGNAME"] = "gpufleet-default", "gpufleet-default"
			}
			maps.Copy(want, tt.want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("environment (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProcessGroupAndSession(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	tk := task("group", "sleep", "30")
	start(t, e, tk)
	p := readPidFile(t, dir, tk.WorkloadID, 1)

	_, pgrp, _, start, ok := stat(p.PID)
	if !ok || start != p.Start {
		t.Fatalf("task process %d: alive %v, start %d, pid file says %d", p.PID, ok, start, p.Start)
	}
	if pgrp != p.PID || pgrp == syscall.Getpgrp() {
		t.Errorf("task process group: got %d, want its own (%d), not the server's (%d)", pgrp, p.PID, syscall.Getpgrp())
	}
	_, shimGrp, shimSession, shimStart, ok := stat(p.ShimPID)
	if !ok || shimStart != p.ShimStart {
		t.Fatalf("supervisor %d: alive %v, start %d, pid file says %d", p.ShimPID, ok, shimStart, p.ShimStart)
	}
	if shimSession != p.ShimPID || shimGrp != p.ShimPID {
		t.Errorf("supervisor: session %d, group %d; want it to lead both (%d)", shimSession, shimGrp, p.ShimPID)
	}

	if err := e.Stop(t.Context(), tk.WorkloadID, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, e, tk); x.Signal != "SIGTERM" || x.ExitCode != nil || x.Reason != "" {
		t.Errorf("exit: got %+v, want killed by SIGTERM", x)
	}
	b, err := os.ReadFile(filepath.Join(attemptDir(dir, tk.WorkloadID, 1), "exit"))
	if err != nil || !strings.Contains(string(b), `"signal":"SIGTERM"`) {
		t.Errorf("exit file: got %q, %v; want it to record SIGTERM", b, err)
	}
}

func TestStopKillsTheWholeGroupAfterGrace(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	marker := uniqueSleep()
	tk := task("stubborn", "sh", "-c", `trap "" TERM; sleep `+marker+` & echo "bg $!"; wait`)
	start(t, e, tk)
	waitOutput(t, e, tk.WorkloadID, "bg ")
	bg := waitProcess(t, marker)
	if err := e.Stop(t.Context(), tk.WorkloadID, 1, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, e, tk); x.Signal != "SIGKILL" || x.ExitCode != nil || x.Reason != "" {
		t.Errorf("exit: got %+v, want killed by SIGKILL, as recorded by the supervisor", x)
	}
	waitDead(t, bg)
}

func TestProcessesLeftBehindDieWithTheTask(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	marker := uniqueSleep()
	// The task ends once the test has seen its background process, which
	// it leaves running (in a session of its own, as a daemon would).
	gate := filepath.Join(dir, "workloads", "leaver", "work", "go")
	tk := task("leaver", "sh", "-c", `setsid sleep `+marker+` & while [ ! -e go ]; do sleep 0.02; done`)
	start(t, e, tk)
	bg := waitProcess(t, marker)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("exit: got %+v, want code 0", x)
	}
	waitDead(t, bg)
}

// uniqueSleep returns a duration for sleep(1), about 30 s, that no other
// process on the machine is likely to sleep: waitProcess finds the
// process by it, whatever PID namespace it runs in.
func uniqueSleep() string {
	return fmt.Sprintf("30.%09d", time.Now().UnixNano()%1e9)
}

// waitProcess waits for a process whose command line holds arg and returns
// its pid as this test sees it.
func waitProcess(t *testing.T, arg string) int {
	t.Helper()
	var pids []int
	testwait.Until(t, timeout, fmt.Sprintf("a process with %q", arg), func() (bool, string) {
		pids = processesWith(arg)
		return len(pids) > 0, "none in /proc"
	})
	return pids[0]
}

// processesWith lists the processes whose command line holds arg.
func processesWith(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err == nil && slices.Contains(strings.Split(string(b), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	work := filepath.Join(dir, "workloads", "wd", "work")

	t.Run("a relative working directory is created under work", func(t *testing.T) {
		tk := task("wd", "pwd")
		tk.WorkingDir = "sub/dir"
		run(t, e, tk)
		if got, want := strings.TrimSpace(output(t, e, "wd")), filepath.Join(work, "sub", "dir"); got != want {
			t.Errorf("pwd: got %q, want %q", got, want)
		}
	})
	t.Run("a program given as ./name is found in the working directory", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(work, "sub", "dir", "run.sh"), []byte("#!/bin/sh\necho ran \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		tk := task("wd", "./run.sh", "x")
		tk.Attempt, tk.WorkingDir = 2, "sub/dir"
		run(t, e, tk)
		if got := output(t, e, "wd"); !strings.Contains(got, "ran x\n") {
			t.Errorf("output: got %q, want it to contain %q", got, "ran x\n")
		}
	})
	t.Run("a symbolic link out of work is refused", func(t *testing.T) {
		if err := os.Symlink(t.TempDir(), filepath.Join(work, "escape")); err != nil {
			t.Fatal(err)
		}
		tk := task("wd", "pwd")
		tk.Attempt, tk.WorkingDir = 3, "escape/inside"
		if err := e.Start(t.Context(), tk); err == nil {
			waitExit(t, e, tk)
			t.Errorf("Start with a working directory through a link out of work: got no error")
		}
	})
}

func TestStartRefuses(t *testing.T) {
	// The files are in the workload's own working directory, where a
	// sandboxed task sees them too.
	const plain, garbage = "./plain", "./garbage"
	files := map[string][]byte{plain: []byte("echo hi\n"), garbage: {0x7f, 'E', 'L', 'F', 0, 0, 0, 0}}
	modes := map[string]os.FileMode{plain: 0o644, garbage: 0o755}
	tests := []struct {
		name string
		edit func(*executor.Task)
		is   error // when set, the error must wrap it
	}{
		{"a program that does not exist", func(tk *executor.Task) { tk.Command = []string{"nosuchprog-gpufleet"} }, exec.ErrNotFound},
		{"a program missing from the working directory", func(tk *executor.Task) { tk.Command = []string{"./missing"} }, exec.ErrNotFound},
		{"a program not found in the task's own PATH", func(tk *executor.Task) { tk.Env = map[string]string{"PATH": "/nonexistent"} }, exec.ErrNotFound},
		{"a file that is not executable", func(tk *executor.Task) { tk.Command = []string{plain} }, fs.ErrPermission},
		{"a file that exec cannot run", func(tk *executor.Task) { tk.Command = []string{garbage} }, nil},
		{"an empty command", func(tk *executor.Task) { tk.Command = nil }, nil},
		{"a workload ID with capitals", func(tk *executor.Task) { tk.WorkloadID = "Bad" }, nil},
		{"a workload ID that is a path", func(tk *executor.Task) { tk.WorkloadID = "../x" }, nil},
		{"a workload ID too long", func(tk *executor.Task) { tk.WorkloadID = core.WorkloadID(strings.Repeat("a", 65)) }, nil},
		{"attempt zero", func(tk *executor.Task) { tk.Attempt = 0 }, nil},
		{"a working directory with ..", func(tk *executor.Task) { tk.WorkingDir = "a/../../b" }, nil},
		{"an absolute working directory", func(tk *executor.Task) { tk.WorkingDir = "/tmp" }, nil},
		{"an environment variable name with =", func(tk *executor.Task) { tk.Env = map[string]string{"A=B": "c"} }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			work := filepath.Join(dir, "workloads", "refused", "work")
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range files {
				if err := os.WriteFile(filepath.Join(work, name), b, modes[name]); err != nil {
					t.Fatal(err)
				}
			}
			e := newExecutor(t, dir, nil)
			tk := task("refused", "true")
			tt.edit(&tk)
			err := e.Start(t.Context(), tk)
			if err == nil {
				waitExit(t, e, tk)
				t.Fatalf("Start: got no error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Start: got %v, want an error wrapping %v", err, tt.is)
			}
			select {
			case x := <-e.Exits():
				t.Errorf("unexpected exit after a failed Start: %+v", x)
			case <-time.After(200 * time.Millisecond):
			}
		})
	}
}

func TestStartFailureIsLogged(t *testing.T) {
	e := newExecutor(t, "", nil)
	err := e.Start(t.Context(), task("missing", "nosuchprog-gpufleet"))
	want := `exec: "nosuchprog-gpufleet": executable file not found in $PATH`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start: got %v, want an error containing %q", err, want)
	}
	if got := readLog(t, e, "missing"); !strings.Contains(got, "failed to start: "+want) {
		t.Errorf("log: got %q, want it to record the failure", got)
	}
}

func TestAnAttemptRunsOnce(t *testing.T) {
	e := newExecutor(t, "", nil)
	tk := task("once", "true")
	run(t, e, tk)
	if err := e.Start(t.Context(), tk); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Start of an ended attempt: got %v, want an error wrapping fs.ErrExist", err)
	}
	tk.Attempt = 2
	run(t, e, tk)
}

func TestLogHoldsEveryAttempt(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	e := newExecutor(t, "", func() time.Time { return now })
	tk := task("logged", "sh", "-c", `echo out; echo err >&2; exit 1`)
	run(t, e, tk)
	now = now.Add(time.Minute)
	tk.Attempt, tk.Command = 2, []string{"echo", "second"}
	run(t, e, tk)
	want := "--- gpufleet: attempt 1 started 2026-11-30T08:00:00Z ---\nout\nerr\n" +
		"--- gpufleet: attempt 2 started 2026-11-30T08:01:00Z ---\nsecond\n"
	if got := readLog(t, e, "logged"); got != want {
		t.Errorf("log:\ngot  %q\nwant %q", got, want)
	}
	if _, err := e.Logs("Not-Valid"); err == nil {
		t.Errorf("Logs of an invalid ID: got no error")
	}
}

func TestExitCarriesTheExecutorsClock(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	e := newExecutor(t, "", func() time.Time { return at })
	if x := run(t, e, task("clock", "true")); !x.At.Equal(at) {
		t.Errorf("Exit.At: got %v, want %v", x.At, at)
	}
}

func TestAdopt(t *testing.T) {
	t.Run("a running task is watched until it ends", func(t *testing.T) {
		dir := t.TempDir()
		a := newExecutor(t, dir, nil)
		tk := task("survivor", "sh", "-c", "sleep 1; exit 0")
		start(t, a, tk)
		// a "crashes": it is dropped without stopping anything.
		b := newExecutor(t, dir, nil)
		ok, err := b.Adopt(t.Context(), tk)
		if err != nil || !ok {
			t.Fatalf("Adopt: got (%v, %v), want (true, nil)", ok, err)
		}
		if x := waitExit(t, b, tk); x.ExitCode == nil || *x.ExitCode != 0 || x.Reason != "" {
			t.Errorf("exit seen by the new executor: got %+v, want code 0", x)
		}
		waitExit(t, a, tk) // a is still this process's parent of the supervisor
	})

	t.Run("an adopted task can be stopped", func(t *testing.T) {
		dir := t.TempDir()
		a := newExecutor(t, dir, nil)
		tk := task("adoptee", "sleep", "30")
		start(t, a, tk)
		b := newExecutor(t, dir, nil)
		if ok, err := b.Adopt(t.Context(), tk); err != nil || !ok {
			t.Fatalf("Adopt: got (%v, %v), want (true, nil)", ok, err)
		}
		if err := b.Stop(t.Context(), tk.WorkloadID, 1, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if x := waitExit(t, b, tk); x.Signal != "SIGTERM" || x.ExitCode != nil {
			t.Errorf("exit: got %+v, want killed by SIGTERM", x)
		}
		waitExit(t, a, tk)
	})

	t.Run("a task that ended meanwhile reports its recorded exit", func(t *testing.T) {
		dir := t.TempDir()
		a := newExecutor(t, dir, nil)
		tk := task("finished", "sh", "-c", "exit 7")
		run(t, a, tk)
		b := newExecutor(t, dir, nil)
		ok, err := b.Adopt(t.Context(), tk)
		if err != nil || !ok {
			t.Fatalf("Adopt: got (%v, %v), want (true, nil)", ok, err)
		}
		if x := waitExit(t, b, tk); x.ExitCode == nil || *x.ExitCode != 7 {
			t.Errorf("exit: got %+v, want code 7", x)
		}
	})

	t.Run("a task whose supervisor was killed is lost", func(t *testing.T) {
		dir := t.TempDir()
		a := newExecutor(t, dir, nil)
		tk := task("orphan", "sleep", "30")
		start(t, a, tk)
		p := readPidFile(t, dir, tk.WorkloadID, 1)
		if err := syscall.Kill(p.ShimPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if x := waitExit(t, a, tk); x.Reason != local.ReasonLost || x.ExitCode != nil {
			t.Errorf("exit: got %+v, want reason %s", x, local.ReasonLost)
		}
		waitDead(t, p.PID)
		b := newExecutor(t, dir, nil)
		if ok, err := b.Adopt(t.Context(), tk); err != nil || ok {
			t.Errorf("Adopt: got (%v, %v), want (false, nil)", ok, err)
		}
	})

	t.Run("adopting kills a task left without its supervisor", func(t *testing.T) {
		dir := t.TempDir()
		sleeper := exec.Command("sleep", "30")
		sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- sleeper.Wait() }()
		t.Cleanup(func() { sleeper.Process.Kill() })
		_, _, _, sleeperStart, _ := stat(sleeper.Process.Pid)
		gone := exec.Command("true") // a supervisor that has ended
		if err := gone.Run(); err != nil {
			t.Fatal(err)
		}
		adir := attemptDir(dir, "stray", 1)
		if err := os.MkdirAll(adir, 0o750); err != nil {
			t.Fatal(err)
		}
		rec := pidFile{ShimPID: gone.Process.Pid, ShimStart: 1, PID: sleeper.Process.Pid, Start: sleeperStart}
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(filepath.Join(adir, "pid"), b, 0o640); err != nil {
			t.Fatal(err)
		}

		e := newExecutor(t, dir, nil)
		if ok, err := e.Adopt(t.Context(), task("stray", "sleep", "30")); err != nil || ok {
			t.Errorf("Adopt: got (%v, %v), want (false, nil)", ok, err)
		}
		select {
		case <-done:
		case <-time.After(timeout):
			t.Errorf("the stray task was not killed")
		}
	})
}

// TestShimRunsNothingWithoutGo: a supervisor whose control plane goes away
// before saying "go" (so before the pid file could be relied on) exits
// without running the task, so that a restarted control plane, finding no
// trace of it, can requeue the attempt without running it twice.
func TestShimRunsNothingWithoutGo(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Skip("no touch")
	}
	readyR, readyW, _ := os.Pipe()
	goR, goW, _ := os.Pipe()
	cmd := exec.Command(self, "gpufleet-shim", dir, "", "[]", touch, "touch", marker)
	cmd.Env = []string{"GPUFLEET_SHIM=1"}
	cmd.ExtraFiles = []*os.File{readyW, goR}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readyW.Close()
	goR.Close()
	goW.Close() // the control plane is gone before "go"
	report, _ := io.ReadAll(readyR)
	err = cmd.Wait()
	if err == nil {
		t.Error("supervisor exited 0 without being told to go")
	}
	if !strings.HasPrefix(string(report), "err ") {
		t.Errorf("report %q, want an error", report)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the task ran although the control plane never said go")
	}
	if _, err := os.Stat(filepath.Join(dir, "exit")); err == nil {
		t.Error("an exit record was written for a task that never ran")
	}
}

// TestStartRefusesAnImageAlone: the local executor runs commands; a task
// with an image and no command fails to start, and the error says why (the
// control loop records it as Failed, reason StartError, with this message).
func TestStartRefusesAnImageAlone(t *testing.T) {
	e := newExecutor(t, "", nil)
	tk := task("image-only")
	tk.Image = "ghcr.io/acme/serve:2"
	err := e.Start(t.Context(), tk)
	if err == nil || !strings.Contains(err.Error(), "not an image") || !strings.Contains(err.Error(), tk.Image) {
		t.Fatalf("Start: got %v, want an error saying the local executor runs no image %s", err, tk.Image)
	}
	// With a command the image is ignored and the command runs.
	tk = task("image-and-command", "true")
	tk.Image = "ghcr.io/acme/serve:2"
	start(t, e, tk)
	if x := waitExit(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Errorf("exit: %+v", x)
	}
}
