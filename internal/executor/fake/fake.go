package fake

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// Command conventions (see the package documentation).
const (
	NoSuchProgram = "no-such-program"
	IgnoreSIGTERM = "ignore-sigterm"
)

// exitBuffer is the capacity of the Exits channel. Up to this many unread
// exits are on the channel as soon as the call that caused them returns,
// which keeps single-goroutine simulations deterministic; beyond it exits
// queue in memory and reach the channel asynchronously, in order.
const exitBuffer = 1024

// Options configures a fake Executor.
type Options struct {
	// Now is the fake's clock. When nil, time.Now is used and a task that
	// ignores SIGTERM is killed by a real timer once its grace has passed.
	// With a clock of your own, kills fall due when the clock passes them
	// and are delivered by Tick, which every method calls first.
	Now func() time.Time
}

// Executor is the in-memory executor. It is safe for concurrent use.
type Executor struct {
	now        func() time.Time
	realTimers bool
	out        *executor.Outbox

	mu      sync.Mutex
	running map[key]*task
	latest  map[core.WorkloadID]executor.Task
	logs    map[core.WorkloadID]*bytes.Buffer
}

var _ executor.Executor = (*Executor)(nil)

type key struct {
	id      core.WorkloadID
	attempt int
}

type task struct {
	t        executor.Task
	stopping bool
	killAt   time.Time // when stopping a task that ignores SIGTERM
	// cpuSeconds and peakBytes are what the task used so far (Use),
	// reported with its end.
	cpuSeconds float64
	peakBytes  int64
}

// New returns an empty fake executor.
func New(opts Options) *Executor {
	f := &Executor{
		now:     opts.Now,
		out:     executor.NewOutbox(exitBuffer),
		running: map[key]*task{},
		latest:  map[core.WorkloadID]executor.Task{},
		logs:    map[core.WorkloadID]*bytes.Buffer{},
	}
	if f.now == nil {
		f.now, f.realTimers = time.Now, true
	}
	return f
}

// Start implements executor.Executor. It fails for an empty command (but
// for a native task, whose pods exist already), a command whose argv[0]
// is "no-such-program" (wrapping exec.ErrNotFound), and an attempt that is
// already running.
func (f *Executor) Start(ctx context.Context, t executor.Task) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked()
	k := key{t.WorkloadID, t.Attempt}
	fail := func(err error) error { return fmt.Errorf("start %s attempt %d: %w", t.WorkloadID, t.Attempt, err) }
	switch {
	case t.WorkloadID == "":
		return fail(errors.New("empty workload ID"))
	case len(t.Command) == 0 && t.Native == nil:
		return fail(errors.New("empty command"))
	case f.running[k] != nil:
		return fail(fmt.Errorf("attempt is already running: %w", fs.ErrExist))
	case len(t.Command) > 0 && t.Command[0] == NoSuchProgram:
		err := &exec.Error{Name: t.Command[0], Err: exec.ErrNotFound}
		f.logf(t.WorkloadID, "attempt %d failed to start: %v", t.Attempt, err)
		return fail(err)
	}
	t = cloneTask(t)
	f.running[k] = &task{t: t}
	f.latest[t.WorkloadID] = t
	f.logf(t.WorkloadID, "started attempt %d: %s", t.Attempt, strings.Join(t.Command, " "))
	return nil
}

// Finish ends a running task with an exit code and delivers its Exit. It
// reports whether the task was running.
func (f *Executor) Finish(id core.WorkloadID, attempt, exitCode int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked()
	tk := f.running[key{id, attempt}]
	if tk == nil {
		return false
	}
	code := exitCode
	f.endLocked(tk, executor.Exit{ExitCode: &code, At: f.now()})
	return true
}

// Use adds CPU time to a running task and raises its peak memory to
// peakBytes if that is higher, as a cgroup counts them; its Exit reports
// what it used. It reports whether the task was running.
func (f *Executor) Use(id core.WorkloadID, attempt int, cpuSeconds float64, peakBytes int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	tk := f.running[key{id, attempt}]
	if tk == nil {
		return false
	}
	tk.cpuSeconds += cpuSeconds
	tk.peakBytes = max(tk.peakBytes, peakBytes)
	return true
}

// End ends a running task with the reason an executor gives when the task
// went without exiting by itself (kubernetes: "Lost" for a node gone,
// "PodDeleted" for a native pod deleted by its owner), and delivers its
// Exit. It reports whether the task was running.
func (f *Executor) End(id core.WorkloadID, attempt int, reason, message string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked()
	tk := f.running[key{id, attempt}]
	if tk == nil {
		return false
	}
	f.endLocked(tk, executor.Exit{Reason: reason, Message: message, At: f.now()})
	return true
}

// Stop implements executor.Executor. A task ends at once with Signal
// "SIGTERM", unless its command has the "ignore-sigterm" argument: then it
// ends with "SIGKILL" once grace has passed on the fake's clock. Stopping a
// task that is not running is not an error.
func (f *Executor) Stop(ctx context.Context, id core.WorkloadID, attempt int, grace time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked()
	tk := f.running[key{id, attempt}]
	if tk == nil {
		return nil
	}
	now := f.now()
	if len(tk.t.Command) == 0 || !slices.Contains(tk.t.Command[1:], IgnoreSIGTERM) {
		f.logf(id, "attempt %d stopped (SIGTERM)", attempt)
		f.endLocked(tk, executor.Exit{Signal: "SIGTERM", At: now})
		return nil
	}
	f.logf(id, "attempt %d ignores SIGTERM; killing it after %s", attempt, grace)
	if grace <= 0 {
		f.endLocked(tk, executor.Exit{Signal: "SIGKILL", At: now})
		return nil
	}
	killAt := now.Add(grace)
	if tk.stopping && !killAt.Before(tk.killAt) {
		return nil // an earlier stop kills it sooner
	}
	tk.stopping, tk.killAt = true, killAt
	if f.realTimers {
		time.AfterFunc(grace, f.Tick)
	}
	return nil
}

// Tick delivers the kills that have fallen due on the fake's clock. Call it
// after advancing a clock of your own; with the real clock it runs by itself.
func (f *Executor) Tick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked()
}

func (f *Executor) tickLocked() {
	now := f.now()
	var due []*task
	for _, tk := range f.running {
		if tk.stopping && !now.Before(tk.killAt) {
			due = append(due, tk)
		}
	}
	slices.SortFunc(due, func(a, b *task) int {
		return cmp.Or(a.killAt.Compare(b.killAt), compareTasks(a.t, b.t))
	})
	for _, tk := range due {
		f.endLocked(tk, executor.Exit{Signal: "SIGKILL", At: tk.killAt})
	}
}

// endLocked removes a running task and delivers its exit.
func (f *Executor) endLocked(tk *task, x executor.Exit) {
	x.WorkloadID, x.Attempt = tk.t.WorkloadID, tk.t.Attempt
	x.CPUSeconds, x.PeakMemoryBytes = tk.cpuSeconds, tk.peakBytes
	delete(f.running, key{x.WorkloadID, x.Attempt})
	switch {
	case x.ExitCode != nil:
		f.logf(x.WorkloadID, "attempt %d exited with code %d", x.Attempt, *x.ExitCode)
	case x.Reason != "":
		f.logf(x.WorkloadID, "attempt %d ended: %s: %s", x.Attempt, x.Reason, x.Message)
	default:
		f.logf(x.WorkloadID, "attempt %d killed by %s", x.Attempt, x.Signal)
	}
	f.out.Put(x)
}

// Adopt implements executor.Executor: true for a task that is running.
func (f *Executor) Adopt(ctx context.Context, t executor.Task) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked()
	return f.running[key{t.WorkloadID, t.Attempt}] != nil, nil
}

// Exits implements executor.Executor.
func (f *Executor) Exits() <-chan executor.Exit { return f.out.C }

// Logs implements executor.Executor: the lines the fake wrote for the
// workload ("started attempt 1: ...", "attempt 1 exited with code 0"). The
// error wraps fs.ErrNotExist for a workload never started.
func (f *Executor) Logs(id core.WorkloadID) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.logs[id]
	if b == nil {
		return nil, fmt.Errorf("logs of %s: %w", id, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(bytes.Clone(b.Bytes()))), nil
}

// Running returns the running tasks (stopping ones included), ordered by
// workload ID and attempt.
func (f *Executor) Running() []executor.Task {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked()
	out := make([]executor.Task, 0, len(f.running))
	for _, tk := range f.running {
		out = append(out, cloneTask(tk.t))
	}
	slices.SortFunc(out, compareTasks)
	return out
}

// Task returns the most recently started attempt of a workload, running or
// not.
func (f *Executor) Task(id core.WorkloadID) (executor.Task, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.latest[id]
	if !ok {
		return executor.Task{}, false
	}
	return cloneTask(t), true
}

func (f *Executor) logf(id core.WorkloadID, format string, args ...any) {
	b := f.logs[id]
	if b == nil {
		b = &bytes.Buffer{}
		f.logs[id] = b
	}
	fmt.Fprintf(b, format+"\n", args...)
}

func compareTasks(a, b executor.Task) int {
	return cmp.Or(cmp.Compare(a.WorkloadID, b.WorkloadID), cmp.Compare(a.Attempt, b.Attempt))
}

func cloneTask(t executor.Task) executor.Task {
	t.Command = slices.Clone(t.Command)
	t.Env = maps.Clone(t.Env)
	t.Request.GPUModels = slices.Clone(t.Request.GPUModels)
	t.Assignments = slices.Clone(t.Assignments)
	t.Network.Allow = slices.Clone(t.Network.Allow)
	return t
}
