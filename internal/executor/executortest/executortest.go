package executortest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// Options describes what the executor under test can do.
type Options struct {
	// Finish ends a running task with an exit code, for executors that do
	// not run commands. Nil means the executor runs commands for real and
	// the commands end by themselves.
	Finish func(e executor.Executor, id core.WorkloadID, attempt, code int)
	// Timeout bounds every wait for an exit or a log line; 10 s when zero.
	Timeout time.Duration
	// LateStartErrors is set for executors that learn only after Start has
	// returned that a program cannot run (a container runtime starts the
	// process on another machine): there Start may succeed for a program
	// that does not exist, and the failure must then come on Exits with a
	// Reason and no exit code 0.
	LateStartErrors bool
	// Forbidden lists what a task of one team must not be able to read:
	// the platform's files and those of the workload other, of another
	// team, which is running. Paths are absolute or relative to the
	// task's working directory. Executors that run commands set it; the
	// isolation test is skipped without it (an executor that runs no
	// command has nothing to confine).
	Forbidden func(e executor.Executor, other core.WorkloadID) []string
	// Confined checks, for executors that run no commands here, that a
	// started task is set up to be confined (its own namespace, no
	// privilege, no credentials); nil where Forbidden tests it for real.
	Confined func(e executor.Executor, tk executor.Task) error
	// Python is a python3 that tasks can run, for executors that run
	// processes: the test of what ML stacks need of their sandbox runs
	// its checks with it, and is skipped without one.
	Python string
}

// Run runs the conformance suite. newExecutor returns a fresh executor for
// each subtest, with nothing running and no state shared with others; the
// subtests run in parallel, so it must be safe to call concurrently.
func Run(t *testing.T, newExecutor func(t *testing.T) executor.Executor, opts Options) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	tests := []struct {
		name string
		run  func(h *harness)
	}{
		{"exit code 0 is reported once", func(h *harness) { exitCode(h, 0) }},
		{"exit code 3 is reported once", func(h *harness) { exitCode(h, 3) }},
		{"a program that does not exist fails Start and reports no exit", startFailure},
		{"starting an attempt that is running fails", startTwice},
		{"stop ends a running task", stopRunning},
		{"stop kills a task that ignores SIGTERM once its grace has passed", stopIgnored},
		{"stop of an unknown task is no error", stopUnknown},
		{"stop of a finished task is no error and reports nothing", stopFinished},
		{"logs hold the task's output", logs},
		{"logs of an unknown workload are not found", logsUnknown},
		{"adopting an unknown task returns false", adoptUnknown},
		{"adopting a running task returns true and its exit comes once", adoptRunning},
		{"two tasks run at once and are reported separately", twoTasks},
		{"a task reads nothing of the platform's or another team's files", isolation},
		{"a task can do to its own processes what ML stacks do", mlStack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, e: newExecutor(t), opts: opts, live: map[key]bool{}}
			t.Cleanup(h.cleanup)
			tt.run(h)
		})
	}
}

func exitCode(h *harness, code int) {
	tk := h.task("exit", "sh", "-c", fmt.Sprintf("exit %d", code))
	h.start(tk)
	h.finish(tk, code)
	x := h.waitExit(tk)
	if x.ExitCode == nil || *x.ExitCode != code {
		h.t.Errorf("exit: got %s, want exit code %d", describe(x), code)
	}
	if x.Reason != "" || x.Signal != "" {
		h.t.Errorf("exit: got %s, want no reason and no signal", describe(x))
	}
	if x.At.IsZero() {
		h.t.Errorf("exit: At is zero")
	}
	h.expectNoExit(300 * time.Millisecond)
}

func startFailure(h *harness) {
	tk := h.task("nope", "no-such-program", "--flag")
	err := h.e.Start(h.ctx(), tk)
	if err == nil && h.opts.LateStartErrors {
		h.live[key{tk.WorkloadID, tk.Attempt}] = true
		x := h.waitExit(tk)
		if x.Reason == "" || (x.ExitCode != nil && *x.ExitCode == 0) {
			h.t.Errorf("exit of a program that does not exist: got %s, want a failure with a reason", describe(x))
		}
		h.expectNoExit(300 * time.Millisecond)
		return
	}
	if err == nil {
		h.t.Fatalf("Start(%q): got no error, want one", tk.Command)
	}
	h.expectNoExit(300 * time.Millisecond)
}

func startTwice(h *harness) {
	tk := h.task("twice", "sleep", "30")
	h.start(tk)
	if err := h.e.Start(h.ctx(), tk); err == nil {
		h.t.Errorf("second Start of a running attempt: got no error, want one")
	}
	h.stop(tk, 5*time.Second)
	h.waitExit(tk)
}

func stopRunning(h *harness) {
	tk := h.task("stop", "sleep", "30")
	h.start(tk)
	h.stop(tk, 5*time.Second)
	x := h.waitExit(tk)
	if x.ExitCode != nil && *x.ExitCode == 0 {
		h.t.Errorf("exit of a stopped task: got %s, want a failure or a signal", describe(x))
	}
	h.expectNoExit(300 * time.Millisecond)
}

func stopIgnored(h *harness) {
	const grace = 300 * time.Millisecond
	// For sh, "ignore-sigterm" is only $0; the fake reads it as an order.
	tk := h.task("stubborn", "sh", "-c", `trap "" TERM; echo ready; sleep 30`, "ignore-sigterm")
	h.start(tk)
	h.waitLog(tk.WorkloadID, "ready")
	begin := time.Now()
	h.stop(tk, grace)
	x := h.waitExit(tk)
	if d := time.Since(begin); d < grace {
		h.t.Errorf("task ignoring SIGTERM ended %s after Stop, before its grace of %s", d, grace)
	}
	if x.Signal != "SIGKILL" || x.ExitCode != nil {
		h.t.Errorf("exit: got %s, want killed by SIGKILL", describe(x))
	}
}

func stopUnknown(h *harness) {
	if err := h.e.Stop(h.ctx(), "never-started", 1, time.Second); err != nil {
		h.t.Errorf("Stop of an unknown task: %v", err)
	}
	h.expectNoExit(200 * time.Millisecond)
}

func stopFinished(h *harness) {
	tk := h.task("done", "true")
	h.start(tk)
	h.finish(tk, 0)
	h.waitExit(tk)
	if err := h.e.Stop(h.ctx(), tk.WorkloadID, tk.Attempt, time.Second); err != nil {
		h.t.Errorf("Stop of a finished task: %v", err)
	}
	h.expectNoExit(300 * time.Millisecond)
}

func logs(h *harness) {
	tk := h.task("hello", "echo", "hello")
	h.start(tk)
	h.finish(tk, 0)
	h.waitExit(tk)
	text := h.readLogs(tk.WorkloadID)
	if h.opts.Finish == nil && !strings.Contains(text, "hello\n") {
		h.t.Errorf("logs: got %q, want them to contain the output %q", text, "hello\n")
	}
}

func logsUnknown(h *harness) {
	r, err := h.e.Logs("never-started")
	if err == nil {
		r.Close()
		h.t.Fatalf("Logs of an unknown workload: got no error")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		h.t.Errorf("Logs of an unknown workload: got %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func adoptUnknown(h *harness) {
	ok, err := h.e.Adopt(h.ctx(), h.task("stranger", "sleep", "30"))
	if err != nil || ok {
		h.t.Errorf("Adopt of an unknown task: got (%v, %v), want (false, nil)", ok, err)
	}
	h.expectNoExit(200 * time.Millisecond)
}

func adoptRunning(h *harness) {
	tk := h.task("adopted", "sleep", "30")
	h.start(tk)
	ok, err := h.e.Adopt(h.ctx(), tk)
	if err != nil || !ok {
		h.t.Fatalf("Adopt of a running task: got (%v, %v), want (true, nil)", ok, err)
	}
	h.stop(tk, 5*time.Second)
	h.waitExit(tk)
	h.expectNoExit(300 * time.Millisecond)
}

func twoTasks(h *harness) {
	a := h.task("first", "sh", "-c", "sleep 0.3; exit 4")
	b := h.task("second", "sh", "-c", "sleep 0.3; exit 5")
	h.start(a)
	h.start(b)
	h.finish(b, 5)
	h.finish(a, 4)
	got := map[core.WorkloadID]int{}
	for range 2 {
		x := h.nextExit()
		if x.ExitCode == nil {
			h.t.Errorf("exit: got %s, want an exit code", describe(x))
			continue
		}
		if _, dup := got[x.WorkloadID]; dup {
			h.t.Errorf("exit of %s reported twice", x.WorkloadID)
		}
		got[x.WorkloadID] = *x.ExitCode
	}
	if got[a.WorkloadID] != 4 || got[b.WorkloadID] != 5 || len(got) != 2 {
		h.t.Errorf("exit codes: got %v, want map[first:4 second:5]", got)
	}
	h.expectNoExit(300 * time.Millisecond)
}

type key struct {
	id      core.WorkloadID
	attempt int
}

// harness wraps one executor in one subtest. It remembers the tasks started
// and not yet reported, and stops and drains them when the test ends, so
// that no process outlives the test's directories.
type harness struct {
	t    *testing.T
	e    executor.Executor
	opts Options
	live map[key]bool
}

// isolation: a task of team tb tries to read the platform's files and what
// a running task of team ta wrote (its log, its working directory), by
// every path the executor names, and gets none of it, while it can read
// what it wrote itself.
func isolation(h *harness) {
	if h.opts.Forbidden == nil {
		if h.opts.Confined == nil {
			h.t.Skip("the executor runs no commands and says nothing of how it would confine them")
		}
		tk := h.task("confined", "sh", "-c", "cat /etc/passwd")
		tk.Team = "tb"
		h.start(tk)
		if err := h.opts.Confined(h.e, tk); err != nil {
			h.t.Errorf("task of team tb is not confined: %v", err)
		}
		h.finish(tk, 0)
		h.waitExit(tk)
		return
	}
	const marker = "ta-private-4f1c"
	victim := h.task("victim", "sh", "-c", "echo "+marker+"; echo "+marker+" > own-file; sleep 30")
	victim.Team = "ta"
	h.start(victim)
	h.waitLog(victim.WorkloadID, marker)
	script := `echo mine > own-file; echo "OWN $(cat own-file)"
for p in "$@"; do
  if c=$(cat -- "$p" 2>/dev/null) && [ -n "$c" ]; then echo "LEAK $p: $c"; fi
  if ls -- "$p" >/dev/null 2>&1 && [ -d "$p" ]; then echo "LEAK dir $p: $(ls -- "$p" | head -c 200)"; fi
done
echo DONE`
	paths := h.opts.Forbidden(h.e, victim.WorkloadID)
	attacker := h.task("attacker", append([]string{"sh", "-c", script, "sh"}, paths...)...)
	attacker.Team = "tb"
	h.start(attacker)
	if x := h.waitExit(attacker); x.ExitCode == nil || *x.ExitCode != 0 {
		h.t.Errorf("attacker: got %s, want exit code 0", describe(x))
	}
	out := h.readLogs(attacker.WorkloadID)
	if !strings.Contains(out, "OWN mine") || !strings.Contains(out, "DONE") {
		h.t.Fatalf("the attacking task did not run its checks; its log:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "LEAK") || strings.Contains(l, marker) {
			h.t.Errorf("a task of team tb read what it must not: %s", l)
		}
	}
	h.stop(victim, 0)
	h.waitExit(victim)
}

func (h *harness) ctx() context.Context { return h.t.Context() }

func (h *harness) task(id core.WorkloadID, command ...string) executor.Task {
	return executor.Task{WorkloadID: id, Attempt: 1, Command: command, GracePeriod: 5 * time.Second}
}

func (h *harness) start(tk executor.Task) {
	h.t.Helper()
	if err := h.e.Start(h.ctx(), tk); err != nil {
		h.t.Fatalf("Start %s: %v", tk.WorkloadID, err)
	}
	h.live[key{tk.WorkloadID, tk.Attempt}] = true
}

// finish ends a task on an executor that does not run commands; for one
// that does, the command ends by itself.
func (h *harness) finish(tk executor.Task, code int) {
	if h.opts.Finish != nil {
		h.opts.Finish(h.e, tk.WorkloadID, tk.Attempt, code)
	}
}

func (h *harness) stop(tk executor.Task, grace time.Duration) {
	h.t.Helper()
	if err := h.e.Stop(h.ctx(), tk.WorkloadID, tk.Attempt, grace); err != nil {
		h.t.Fatalf("Stop %s: %v", tk.WorkloadID, err)
	}
}

// nextExit returns the next exit, failing the test after the timeout.
func (h *harness) nextExit() executor.Exit {
	h.t.Helper()
	select {
	case x := <-h.e.Exits():
		k := key{x.WorkloadID, x.Attempt}
		if !h.live[k] {
			h.t.Errorf("unexpected exit: %s", describe(x))
		}
		delete(h.live, k)
		return x
	case <-time.After(h.opts.Timeout):
		h.t.Fatalf("no exit within %s", h.opts.Timeout)
		return executor.Exit{}
	}
}

// waitExit returns the exit of tk, which must be the next one.
func (h *harness) waitExit(tk executor.Task) executor.Exit {
	h.t.Helper()
	x := h.nextExit()
	if x.WorkloadID != tk.WorkloadID || x.Attempt != tk.Attempt {
		h.t.Fatalf("exit: got one of %s attempt %d, want %s attempt %d", x.WorkloadID, x.Attempt, tk.WorkloadID, tk.Attempt)
	}
	return x
}

func (h *harness) expectNoExit(d time.Duration) {
	h.t.Helper()
	select {
	case x := <-h.e.Exits():
		h.t.Errorf("unexpected exit: %s", describe(x))
	case <-time.After(d):
	}
}

func (h *harness) readLogs(id core.WorkloadID) string {
	h.t.Helper()
	r, err := h.e.Logs(id)
	if err != nil {
		h.t.Fatalf("Logs %s: %v", id, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		h.t.Fatalf("read logs of %s: %v", id, err)
	}
	return string(b)
}

// waitLog waits until the workload's log contains s, on executors that run
// commands; on others it returns at once.
func (h *harness) waitLog(id core.WorkloadID, s string) {
	h.t.Helper()
	if h.opts.Finish != nil {
		return
	}
	deadline := time.Now().Add(h.opts.Timeout)
	for {
		r, err := h.e.Logs(id)
		if err == nil {
			b, _ := io.ReadAll(r)
			r.Close()
			if strings.Contains(string(b), s) {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("log of %s: no %q within %s", id, s, h.opts.Timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanup kills what is still running and waits for its exits.
func (h *harness) cleanup() {
	for k := range h.live {
		h.e.Stop(context.Background(), k.id, k.attempt, 0)
	}
	deadline := time.After(h.opts.Timeout)
	for len(h.live) > 0 {
		select {
		case x := <-h.e.Exits():
			delete(h.live, key{x.WorkloadID, x.Attempt})
		case <-deadline:
			h.t.Errorf("cleanup: tasks still running after %s: %v", h.opts.Timeout, h.live)
			return
		}
	}
}

func describe(x executor.Exit) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s attempt %d", x.WorkloadID, x.Attempt)
	if x.ExitCode != nil {
		fmt.Fprintf(&b, " code %d", *x.ExitCode)
	} else {
		b.WriteString(" code nil")
	}
	if x.Signal != "" {
		fmt.Fprintf(&b, " signal %s", x.Signal)
	}
	if x.Reason != "" {
		fmt.Fprintf(&b, " reason %s", x.Reason)
	}
	if x.Message != "" {
		fmt.Fprintf(&b, " (%s)", x.Message)
	}
	return b.String()
}
