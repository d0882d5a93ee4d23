package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// ReasonLost is the Exit reason when a task's supervisor ended without
// recording how the task ended.
const ReasonLost = "Lost"

// readyTimeout bounds how long Start waits for the supervisor to report that
// the task has started.
const readyTimeout = 30 * time.Second

// Options configures an Executor.
type Options struct {
	// DataDir is the root of the executor's files; workloads live under
	// DataDir/workloads/<id>/. Required.
	DataDir string
	// Logger receives the executor's logs; nothing is logged when nil.
	Logger *slog.Logger
	// Now is the clock for log headers and Exit.At; time.Now when nil.
	Now func() time.Time
	// SimulatedUsage gives each task that holds GPUs the path of a file
	// in $GPUFLEET_SIM_USAGE_FILE where it writes its own utilisation and
	// memory (for simulated GPUs; see UsageFile).
	SimulatedUsage bool
	// Isolation says how tasks are confined; the zero value confines them
	// as far as this machine allows (see Executor.Isolation).
	Isolation Isolation
	// ContainerRuntime is the container runtime that runs tasks with an
	// image: "podman" or "docker", or a path to one; empty runs no image
	// (see RunsImages). It must run as root, as the server does.
	ContainerRuntime string
	// ContainerArgs go after the runtime's binary, before its verb, in
	// every call ("--storage-driver", "vfs", "--runtime", "runc", ...).
	ContainerArgs []string
	// PortHosts: the server's proxy serves each port at the root of a
	// host of its own (proxy.baseURL), so GPUFLEET_BASE_URL is "/".
	PortHosts bool
	// Path is the PATH a task gets unless its own environment sets one
	// (DefaultPath when empty): never the server's, which may lead to
	// directories only the server's user can use.
	Path string
	// Network is each workload's network namespace (per-team users only).
	Network Network
	// Reserve is the memory, in bytes, kept from all tasks together for
	// the server and the system (DefaultReserve when 0); PidsMax bounds
	// each attempt's processes (DefaultPidsMax when 0). Per-team users
	// only: each attempt runs in a cgroup of its own.
	Reserve int64
	PidsMax int64
}

// DefaultReserve is the memory kept from tasks: a tenth of the machine's,
// and at least 1 GiB.
func DefaultReserve(total int64) int64 { return max(1<<30, total/10) }

// DefaultPath is a task's PATH unless the server's configuration or the
// task's environment says otherwise: the system's directories.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Executor runs tasks as supervised OS processes. It is safe for concurrent
// use.
type Executor struct {
	dir  string // DataDir/workloads, absolute
	self string // the binary that acts as the supervisor
	path string // PATH given to tasks
	// rtPath is the server's own PATH, where the container runtime finds
	// its helpers.
	rtPath string
	log    *slog.Logger
	now    func() time.Time
	out    *executor.Outbox
	// simUsage: tasks get EnvSimUsageFile.
	simUsage bool
	// portHosts: Options.PortHosts.
	portHosts bool
	// root is DataDir, absolute: hidden from sandboxed tasks.
	root string
	iso  Isolation
	// status is what probing found; uids gives teams their user IDs when
	// status.Users.
	status IsolationStatus
	uids   *teamIDs
	// slot is this server's share of the host's user IDs and addresses
	// (per-team users only); net the workloads' network namespaces, nil
	// where they run on the host's network.
	slot *claim
	net  *netManager
	// cg gives each attempt a cgroup; nil where the machine lets none be
	// made (status says why).
	cg      *cgroups
	pidsMax int64
	// rt runs tasks with an image; nil when none is configured.
	rt *containerRuntime

	mu    sync.Mutex
	tasks map[key]*task
}

var _ executor.Executor = (*Executor)(nil)

type key struct {
	id      core.WorkloadID
	attempt int
}

// task is a started or adopted task that has not yet been reported ended.
type task struct {
	key  key
	dir  string // attempt-N directory
	pid  int    // the task's main process and process group; 0 while starting
	shim int    // the supervisor, leader of the task's session
	// pidns: pid is the init of the task's PID namespace, which passes
	// signals on to every process of the task.
	pidns bool
	done  chan struct{}
}

// New returns an executor rooted at opts.DataDir, creating the directory.
func New(opts Options) (*Executor, error) {
	if opts.DataDir == "" {
		return nil, errors.New("local executor: data directory is required")
	}
	root, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	if err := opts.Isolation.Validate(); err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	dir := filepath.Join(root, "workloads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("local executor: find own binary for the supervisor: %w", err)
	}
	rt, err := newRuntime(opts.ContainerRuntime, opts.ContainerArgs)
	if err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	if err := opts.Network.validate(); err != nil {
		return nil, fmt.Errorf("local executor: %w", err)
	}
	status := probe(self, opts.Isolation)
	var uids *teamIDs
	var slot *claim
	var nm *netManager
	var cg *cgroups
	if status.Users {
		if slot, uids, nm, err = claimAndSetUp(root, opts, &status); err != nil {
			return nil, fmt.Errorf("local executor: %w", err)
		}
		total := memTotal()
		reserve := opts.Reserve
		if reserve <= 0 {
			reserve = DefaultReserve(total)
		}
		if reserve >= total {
			slot.release()
			return nil, fmt.Errorf("local executor: local.reserve of %d MiB leaves nothing of the machine's %d MiB to tasks", reserve>>20, total>>20)
		}
		if cg, err = newCgroups(slot.slot, total-reserve); err != nil {
			status.Problems = append(status.Problems, err.Error()+": tasks run without memory, CPU and process limits")
			cg = nil
		} else {
			status.Cgroups = "cgroup v1"
			if cg.v2 {
				status.Cgroups = "cgroup v2"
			}
		}
	}
	pidsMax := opts.PidsMax
	if pidsMax <= 0 {
		pidsMax = DefaultPidsMax
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	path := opts.Path
	if path == "" {
		path = DefaultPath
	}
	rtPath := os.Getenv("PATH")
	if rtPath == "" {
		rtPath = DefaultPath
	}
	return &Executor{
		dir:    dir,
		self:   self,
		path:   path,
		rtPath: rtPath,
		log:    opts.Logger.With("executor", "local"),
		now:    opts.Now,
		out:    executor.NewOutbox(64),
		tasks:  map[key]*task{},

		simUsage:  opts.SimulatedUsage,
		portHosts: opts.PortHosts,
		root:      root,
		iso:       opts.Isolation,
		status:    status,
		uids:      uids,
		slot:      slot,
		net:       nm,
		cg:        cg,
		pidsMax:   pidsMax,
		rt:        rt,
	}, nil
}

// Isolation says how this executor confines tasks.
func (e *Executor) Isolation() IsolationStatus { return e.status }

// claimAndSetUp takes this server's slot of the host's user IDs and
// addresses, loads its teams' user IDs from that slot, and sets up the
// workloads' network there unless it is off (a host that refuses network
// namespaces keeps tasks on its network, which status then says).
func claimAndSetUp(root string, opts Options, status *IsolationStatus) (*claim, *teamIDs, *netManager, error) {
	first, last := opts.Isolation.first(), opts.Isolation.last()
	n := uidSlots(first, last)
	if !opts.Network.Off {
		n = min(n, opts.Network.slots())
	}
	usable := func(slot int) error {
		if opts.Network.Off {
			return nil
		}
		if o := hostOverlap(opts.Network.subnet(slot)); o != "" {
			return fmt.Errorf("local.network.cidr: %s overlaps the host's network %s", opts.Network.subnet(slot), o)
		}
		return nil
	}
	uidsFile := filepath.Join(root, "team-uids.json")
	prefer, err := preferredSlot(uidsFile, first)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := claimSlot(root, n, prefer, usable)
	if err != nil {
		return nil, nil, nil, err
	}
	lo, hi := slotRange(first, last, c.slot)
	uids, err := loadTeamIDs(uidsFile, lo, hi)
	if err != nil {
		c.release()
		return nil, nil, nil, err
	}
	if opts.Network.Off {
		return c, uids, nil, nil
	}
	if err := usable(c.slot); err != nil {
		c.release()
		return nil, nil, nil, err
	}
	if nm := c.sharedNet(); nm != nil {
		status.Network = nm.subnet.String()
		return c, uids, nm, nil
	}
	nm, err := newNetManager(opts.Network, c.slot, root, c.prior != "")
	if err == nil {
		c.setNet(nm)
	}
	if err != nil {
		status.Problems = append(status.Problems, "network namespaces: "+err.Error()+": tasks share the host's network")
		return c, uids, nil, nil
	}
	status.Network = nm.subnet.String()
	return c, uids, nm, nil
}

// Close lets go of this server's slot of the host's user IDs and
// addresses; tasks that run go on (another server of this data directory
// adopts them), and no other data directory takes the slot while they do.
func (e *Executor) Close() error {
	e.slot.releaseAfter(func() {
		if e.net != nil {
			e.net.close()
		}
	})
	return nil
}

var idPattern = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// workloadDir returns DataDir/workloads/<id>, refusing IDs that are not
// plain names.
func (e *Executor) workloadDir(id core.WorkloadID) (string, error) {
	if !idPattern.MatchString(string(id)) {
		return "", fmt.Errorf("invalid workload ID %q: want ^[a-z0-9-]{1,64}$", id)
	}
	return filepath.Join(e.dir, string(id)), nil
}

func (e *Executor) attemptDir(id core.WorkloadID, attempt int) (string, error) {
	wdir, err := e.workloadDir(id)
	if err != nil {
		return "", err
	}
	if attempt < 1 {
		return "", fmt.Errorf("invalid attempt %d: want 1 or more", attempt)
	}
	return filepath.Join(wdir, "attempt-"+strconv.Itoa(attempt)), nil
}

// Start implements executor.Executor. It returns once the task's process is
// running, or with an error when it could not be started; in that case no
// Exit is delivered.
func (e *Executor) Start(ctx context.Context, t executor.Task) error {
	if err := e.start(ctx, t); err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return fmt.Errorf("start %s attempt %d: %w: %w", t.WorkloadID, t.Attempt, executor.ErrNoSpace, err)
		}
		return fmt.Errorf("start %s attempt %d: %w", t.WorkloadID, t.Attempt, err)
	}
	return nil
}

// containerGPUs numbers a container's GPUs as it sees them, from 0 (the
// runtime gives it only its own), in CUDA_VISIBLE_DEVICES;
// NVIDIA_VISIBLE_DEVICES keeps the host's indices, which the runtime's
// NVIDIA hook reads.
func containerGPUs(env []string, t executor.Task) []string {
	n := len(strings.Split(envValue(env, "CUDA_VISIBLE_DEVICES"), ","))
	if envValue(env, "CUDA_VISIBLE_DEVICES") == "" {
		return env
	}
	idx := make([]string, n)
	for i := range idx {
		idx[i] = strconv.Itoa(i)
	}
	return withVar(env, "CUDA_VISIBLE_DEVICES", strings.Join(idx, ","))
}

// launch starts the supervisor, waits for its report, writes the pid file
// and starts the goroutine that waits for the supervisor's end.
func (e *Executor) launch(ctx context.Context, tk *task, dir, spec, prog string, argv []string, payload envPayload, logf *os.File) error {
	adir := tk.dir
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	if len(b) > maxEnvBytes {
		return fmt.Errorf("the environment and secret files take %d bytes, over the limit of %d", len(b), maxEnvBytes)
	}
	envJSON := string(b)
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	goR, goW, err := os.Pipe()
	if err != nil {
		w.Close()
		return err
	}
	defer goW.Close()
	// The environment goes on a pipe, not in argv, which any user of the
	// machine may read in /proc (a token in --env must not be).
	envR, envW, err := os.Pipe()
	if err != nil {
		w.Close()
		goR.Close()
		return err
	}
	cmd := &exec.Cmd{
		Path: e.self,
		Args: append([]string{e.self, shimArg, adir, spec, envOnFD, prog}, argv...),
		// The supervisor (and the sandbox) run as the server's user, so
		// nothing of the task's environment may reach them (LD_PRELOAD,
		// GCONV_PATH, GODEBUG...): it travels as data and is applied only
		// in the exec of the task.
		Env:         []string{shimEnv + "=1"},
		Dir:         dir,
		Stdout:      logf,
		Stderr:      logf,
		ExtraFiles:  []*os.File{w, goR, envR},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	w.Close()
	goR.Close()
	envR.Close()
	if err != nil {
		envW.Close()
		return fmt.Errorf("start supervisor: %w", err)
	}
	go func() {
		envW.WriteString(envJSON)
		envW.Close()
	}()
	shimPID := cmd.Process.Pid
	// The supervisor is our unreaped child, so /proc has it even if it has
	// already exited.
	_, shimTick, _ := procStat(shimPID)

	// The supervisor starts the task only once told to, and we tell it only
	// once its pid file is on disk: a control plane killed at any point
	// either finds the supervisor after a restart, or the supervisor sees
	// the pipe close without "go" and exits without running anything. So an
	// attempt never runs unseen, and is never run twice.
	if err := writeJSON(filepath.Join(adir, "pid"), pidRecord{ShimPID: shimPID, ShimStart: shimTick, PIDNS: tk.pidns}); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		forgetAttempt(adir)
		return err
	}
	if _, err := goW.WriteString("go\n"); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("start supervisor: %w", err)
	}
	goW.Close()

	report := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
		report <- string(b)
	}()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	var line string
	select {
	case line = <-report:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = errors.New("the supervisor did not report within " + readyTimeout.String())
	}
	if err != nil {
		// Give up: kill the supervisor and, if it got that far, the task.
		cmd.Process.Kill()
		if pid, tick, ok := parseReady(<-report); ok && pid > 0 && procAlive(pid, tick) {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		cmd.Wait()
		return err
	}
	pid, tick, ok := parseReady(line)
	if !ok {
		cmd.Wait()
		msg := strings.TrimSpace(strings.TrimPrefix(line, "err "))
		if msg == "" {
			msg = "the supervisor exited before starting the task"
		}
		return decodeStartError(msg)
	}
	rec := pidRecord{ShimPID: shimPID, ShimStart: shimTick, PID: pid, Start: tick, PIDNS: tk.pidns}
	if err := writeJSON(filepath.Join(adir, "pid"), rec); err != nil {
		// Without a pid file the task could not be adopted after a restart:
		// do not run it, and leave no record that it ran (removing frees
		// space, where the disk is full), so that a restart finds an
		// attempt that never started, not one killed.
		syscall.Kill(-pid, syscall.SIGKILL)
		cmd.Wait()
		forgetAttempt(adir)
		return err
	}
	e.mu.Lock()
	tk.pid, tk.shim = pid, shimPID
	e.mu.Unlock()
	go func() {
		cmd.Wait() // its status says nothing about the task's
		e.finish(tk, rec, "supervisor "+cmd.ProcessState.String())
	}()
	e.log.Info("task started", "workload", tk.key.id, "attempt", tk.key.attempt, "pid", pid, "supervisor", shimPID)
	return nil
}

// forgetAttempt removes what says an attempt started (its pid file, its
// exit record and reservation), for one whose start failed: it never ran.
func forgetAttempt(adir string) {
	for _, name := range []string{"pid", "pid.tmp", "exit", "exit.tmp", exitReserved} {
		os.Remove(filepath.Join(adir, name))
	}
}

// parseReady parses the supervisor's report "ok <pid> <start>".
func parseReady(line string) (pid int, tick uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "ok" {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(f[1])
	s, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, s, true
}

// finish reports the end of a task whose supervisor is gone: what the exit
// file says, or Lost.
func (e *Executor) finish(tk *task, rec pidRecord, how string) {
	x := executor.Exit{WorkloadID: tk.key.id, Attempt: tk.key.attempt}
	r, ok, err := readExit(tk.dir)
	switch {
	case ok:
		x = r.exit(tk.key)
	default:
		if err != nil {
			how += "; " + err.Error()
		}
		x.Reason = ReasonLost
		x.Message = "the task's supervisor ended without recording its exit (" + how + ")"
		if rec.PID > 0 && procAlive(rec.PID, rec.Start) {
			syscall.Kill(-rec.PID, syscall.SIGKILL)
		}
		e.log.Warn("task lost", "workload", tk.key.id, "attempt", tk.key.attempt, "detail", how)
	}
	withOutputs(&x, tk.dir) // a lost task's report counts too
	withMetrics(&x, tk.dir, tk.key.attempt)
	e.endAttempt(tk.key.id, tk.dir, !ok)
	x.At = e.now()
	e.forget(tk)
	e.out.Put(x)
}

// endAttempt removes what an attempt leaves outside its directory once it
// has ended: its secrets directory under /dev/shm and, when its supervisor
// was lost (it removes the container before it records the ending), its
// container.
func (e *Executor) endAttempt(id core.WorkloadID, adir string, lost bool) {
	if lost {
		e.removeLeftoverContainer(adir)
		// The supervisor removes the cgroup; without it, this does.
		var dirs []cgroupDir
		if readJSON(cgroupsFile(adir), &dirs) == nil {
			killCgroup(dirs)
			removeCgroup(dirs)
		}
	}
	if e.net != nil {
		e.net.detach(id)
	}
	if err := removeShmSecrets(adir); err != nil {
		e.log.Warn("remove secret files", "dir", adir, "err", err)
	}
}

func (e *Executor) forget(tk *task) {
	e.mu.Lock()
	if e.tasks[tk.key] == tk {
		delete(e.tasks, tk.key)
	}
	e.mu.Unlock()
	close(tk.done)
}

// Stop implements executor.Executor: SIGTERM to the task's process group,
// then SIGKILL after grace if it has not ended. Stopping a task that this
// executor does not know is not an error.
func (e *Executor) Stop(ctx context.Context, id core.WorkloadID, attempt int, grace time.Duration) error {
	e.mu.Lock()
	tk := e.tasks[key{id, attempt}]
	e.mu.Unlock()
	if tk == nil {
		return nil
	}
	e.signal(tk, syscall.SIGTERM)
	if grace <= 0 {
		e.signal(tk, syscall.SIGKILL)
		return nil
	}
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-tk.done:
		case <-t.C:
			e.signal(tk, syscall.SIGKILL)
		}
	}()
	return nil
}

// signal sends sig to the task's process group while the task is running.
func (e *Executor) signal(tk *task, sig syscall.Signal) {
	e.mu.Lock()
	pid := tk.pid
	e.mu.Unlock()
	select {
	case <-tk.done:
		return
	default:
	}
	if pid <= 0 {
		return // still starting; kill(-0) would signal our own group
	}
	target := -pid
	if tk.pidns {
		// The namespace's init passes it on to every process once.
		target = pid
	}
	if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		e.log.Warn("signal task", "workload", tk.key.id, "attempt", tk.key.attempt, "signal", sig.String(), "err", err)
	}
}

// Adopt implements executor.Executor. It reports true when the attempt's
// exit is recorded (the Exit is delivered at once) or its supervisor is
// still alive (the Exit is delivered when it ends), and false otherwise,
// after killing a task whose supervisor has gone. Adopting a task that this
// executor already tracks returns true and changes nothing.
func (e *Executor) Adopt(ctx context.Context, t executor.Task) (bool, error) {
	ok, err := e.adopt(t)
	if err != nil {
		return false, fmt.Errorf("adopt %s attempt %d: %w", t.WorkloadID, t.Attempt, err)
	}
	return ok, nil
}

func (e *Executor) adopt(t executor.Task) (bool, error) {
	adir, err := e.attemptDir(t.WorkloadID, t.Attempt)
	if err != nil {
		return false, err
	}
	k := key{t.WorkloadID, t.Attempt}
	e.mu.Lock()
	_, known := e.tasks[k]
	e.mu.Unlock()
	if known {
		return true, nil
	}

	// 1. Ended while we were away: report the record.
	deliver := func(r exitRecord) (bool, error) {
		x := r.exit(k)
		withOutputs(&x, adir)
		withMetrics(&x, adir, k.attempt)
		e.endAttempt(k.id, adir, false)
		x.At = e.now()
		e.out.Put(x)
		e.log.Info("adopted ended task", "workload", k.id, "attempt", k.attempt)
		return true, nil
	}
	if r, ok, err := readExit(adir); err != nil {
		return false, err
	} else if ok {
		return deliver(r)
	}

	// 2. Never started here (or its files are gone).
	var rec pidRecord
	if err := readJSON(filepath.Join(adir, "pid"), &rec); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}

	// 3. Open a pidfd before checking the start time, so that what we watch
	// is the process we checked.
	fd := pidfdOpen(rec.ShimPID)
	if !procAlive(rec.ShimPID, rec.ShimStart) {
		closeFD(fd)
		if r, ok, err := readExit(adir); err != nil {
			return false, err
		} else if ok {
			return deliver(r) // it ended just now
		}
		if rec.PID > 0 && procAlive(rec.PID, rec.Start) {
			syscall.Kill(-rec.PID, syscall.SIGKILL)
			e.log.Warn("killed task whose supervisor is gone", "workload", k.id, "attempt", k.attempt, "pid", rec.PID)
		}
		e.endAttempt(k.id, adir, true)
		return false, nil
	}

	// 4. Still running: watch the supervisor.
	tk := &task{key: k, dir: adir, pid: rec.PID, shim: rec.ShimPID, pidns: rec.PIDNS, done: make(chan struct{})}
	e.mu.Lock()
	if _, ok := e.tasks[k]; ok {
		e.mu.Unlock()
		closeFD(fd)
		return true, nil
	}
	e.tasks[k] = tk
	e.mu.Unlock()
	go func() {
		waitGone(fd, rec.ShimPID, rec.ShimStart)
		e.finish(tk, rec, "supervisor pid "+strconv.Itoa(rec.ShimPID)+" is gone")
	}()
	e.log.Info("adopted running task", "workload", k.id, "attempt", k.attempt, "pid", rec.PID)
	return true, nil
}

// Exits implements executor.Executor. Delivery never blocks the executor: a
// slow reader only makes the queue grow.
func (e *Executor) Exits() <-chan executor.Exit { return e.out.C }

// Logs implements executor.Executor. The error wraps fs.ErrNotExist when the
// workload has no log.
func (e *Executor) Logs(id core.WorkloadID) (io.ReadCloser, error) {
	wdir, err := e.workloadDir(id)
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", id, err)
	}
	f, err := os.Open(filepath.Join(wdir, "log"))
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", id, err)
	}
	return f, nil
}

// workingDir creates and returns work/rel, refusing a rel that leaves work,
// through ".." or through a symbolic link. What it creates is given to uid
// and gid (unless -1), the task's.
func workingDir(work, rel string, uid, gid int) (string, error) {
	if rel == "" {
		return work, nil
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("working directory %q is not a local path", rel)
	}
	root, err := os.OpenRoot(work)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if err := root.MkdirAll(rel, 0o750); err != nil {
		return "", fmt.Errorf("working directory %q: %w", rel, err)
	}
	if uid >= 0 {
		// Each component, through the root: a link cannot lead out.
		for p := filepath.Clean(rel); p != "."; p = filepath.Dir(p) {
			if err := root.Lchown(p, uid, gid); err != nil {
				return "", fmt.Errorf("working directory %q: %w", rel, err)
			}
		}
	}
	return filepath.Join(work, rel), nil
}

// lookPath resolves a program the way a shell would for the task: a name
// with a slash is taken relative to the working directory, any other name is
// searched in the task's PATH (whose relative entries are skipped).
func lookPath(name, path, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", &exec.Error{Name: name, Err: err}
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return exec.ErrNotFound
		}
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// Gateway is the address of this server's bridge, on which it should
// serve its API for the workloads (ServeAPIOn); false where workloads run
// on the host's network.
func (e *Executor) Gateway() (netip.Addr, bool) {
	if e.net == nil {
		return netip.Addr{}, false
	}
	return e.net.gateway, true
}

// ServeAPIOn tells the executor that the server serves its API on the
// gateway at port: workloads may reach it there, and get its address in
// $GPUFLEET_ADDR.
func (e *Executor) ServeAPIOn(port int) error {
	if e.net == nil {
		return nil
	}
	return e.net.serveAPI(port)
}

// Forwarding says how the host forwards the workloads' traffic, for the
// server's log; "" where workloads run on the host's network.
func (e *Executor) Forwarding() string {
	if e.net == nil {
		return ""
	}
	return e.net.Forwarding()
}
