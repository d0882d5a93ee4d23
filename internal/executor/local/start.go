package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gpufleet/gpufleet/internal/executor"
)

// starting is one Start in progress: what it has worked out so far, and
// what to undo if it fails.
type starting struct {
	e         *Executor
	t         executor.Task
	tk        *task
	adir      string // attempt-N
	wdir      string // the workload's directory
	own       dirs
	uid, gid  int // the task's user; -1: the server's
	container bool
	dir       string // working directory, as the server sees it
	// in maps a path of the server's to the task's (a container sees its
	// directories at paths of its own).
	in      func(string) string
	env     []string
	wnet    *workloadNet
	secrets string
	payload envPayload
	undo    []func()
}

func (e *Executor) start(ctx context.Context, t executor.Task) error {
	// 1. Check the task and reserve its key.
	s := &starting{e: e, t: t, uid: -1, gid: -1, container: t.Image != "" && e.rt != nil, in: func(p string) string { return p }}
	if err := s.check(); err != nil {
		return err
	}
	if err := s.reserve(); err != nil {
		return err
	}
	started := false
	defer func() {
		if !started {
			for i := len(s.undo) - 1; i >= 0; i-- {
				s.undo[i]()
			}
		}
	}()
	// 2. The attempt's directories, which only its team's user may enter.
	if err := s.prepare(); err != nil {
		return err
	}
	// 3. The log, where later failures are written too, for the user.
	logf, err := os.OpenFile(filepath.Join(s.wdir, "log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- gpufleet: attempt %d started %s ---\n", t.Attempt, e.now().UTC().Format(time.RFC3339))
	fail := func(err error) error {
		fmt.Fprintf(logf, "--- gpufleet: attempt %d failed to start: %v ---\n", t.Attempt, err)
		return err
	}
	// 4. Working directory, environment, network, ports, secrets, program.
	for _, step := range []func() error{s.environment, s.network, s.ports, s.secretFiles} {
		if err := step(); err != nil {
			return fail(err)
		}
	}
	prog, argv, spec, err := s.program()
	if err != nil {
		return fail(err)
	}
	s.payload.Env = s.env
	// 5. Start the supervisor and wait until it has started the task.
	if err := e.launch(ctx, s.tk, s.dir, spec, prog, argv, s.payload, logf); err != nil {
		return fail(err)
	}
	started = true
	return nil
}

// check refuses a task this executor cannot run, naming why.
func (s *starting) check() error {
	t, e := s.t, s.e
	if len(t.Command) == 0 && t.Image != "" && !s.container {
		return fmt.Errorf("the local executor runs a command, not an image: the workload names image %q and no command (start the server with a container runtime, run it with --executor kubernetes, or give a command)", t.Image)
	}
	if (len(t.Command) == 0 && !s.container) || (len(t.Command) > 0 && t.Command[0] == "") {
		return errors.New("empty command")
	}
	if err := checkEnv(t.SecretEnv); err != nil {
		return err
	}
	if err := checkSecretFiles(t.SecretFiles); err != nil {
		return err
	}
	if (len(t.Volumes) > 0 || len(t.Datasets) > 0) && !s.container && !e.status.Users {
		return fmt.Errorf("volumes need the server to run as root: mount namespaces (this executor confines tasks with %s)", e.status)
	}
	if err := checkEnv(t.Env); err != nil {
		return err
	}
	if t.WorkingDir != "" && !filepath.IsLocal(t.WorkingDir) {
		return fmt.Errorf("working directory %q is not a local path", t.WorkingDir)
	}
	var err error
	s.adir, err = e.attemptDir(t.WorkloadID, t.Attempt)
	s.wdir = filepath.Dir(s.adir)
	return err
}

// reserve takes the attempt's key: one Start of an attempt at a time.
func (s *starting) reserve() error {
	e := s.e
	k := key{s.t.WorkloadID, s.t.Attempt}
	tk := &task{key: k, dir: s.adir, done: make(chan struct{})}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.tasks[k]; ok {
		return fmt.Errorf("attempt is already running: %w", fs.ErrExist)
	}
	e.tasks[k] = tk
	s.tk = tk
	s.undo = append(s.undo, func() { e.forget(tk) })
	return nil
}

// prepare makes the attempt's directory (an attempt runs at most once),
// the task's own directories, given to its team's user, and its working
// directory, and removes what an earlier attempt left for this one.
func (s *starting) prepare() error {
	e, t := s.e, s.t
	if _, err := os.Stat(filepath.Join(s.adir, "pid")); err == nil {
		return fmt.Errorf("attempt was started before: %w", fs.ErrExist)
	}
	if err := os.MkdirAll(s.adir, 0o700); err != nil {
		return err
	}
	// A report left for this attempt before it ran (by an earlier attempt,
	// say) is not this attempt's.
	for _, p := range []string{filepath.Join(s.adir, "exit"), filepath.Join(s.adir, exitReserved), metricsFile(s.adir), outputsFile(s.adir), stopFile(s.adir)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if e.status.Users {
		uid, err := e.uids.uid(t.Team)
		if err != nil {
			return err
		}
		s.uid, s.gid = uid, uid
	}
	s.own = taskDirs(s.wdir)
	for _, d := range s.own.list() {
		if err := ownDir(d, s.uid, s.gid); err != nil {
			return err
		}
	}
	var err error
	s.dir, err = workingDir(s.own.work, t.WorkingDir, s.uid, s.gid)
	return err
}

// environment builds the task's environment and, for a task under a user
// of its team's, its user and group databases.
func (s *starting) environment() error {
	e, t, own := s.e, s.t, s.own
	home := own.home
	if s.container {
		s.in = func(p string) string {
			for host, c := range map[string]string{own.work: containerWork, own.checkpoint: containerCheckpoint, own.usage: containerUsage} {
				if rel, err := filepath.Rel(host, p); err == nil && filepath.IsLocal(rel) || p == host {
					return filepath.Join(c, rel)
				}
			}
			return p
		}
		home = s.in(s.dir)
	}
	env := taskEnv(t, e.path, home)
	if s.container {
		env = containerGPUs(env, t)
	}
	env = withVar(env, EnvCheckpointDir, s.in(own.checkpoint))
	if !e.status.Users && !s.container {
		// No private /tmp: give the task its own.
		env = withVar(env, "TMPDIR", own.tmp)
	}
	if e.simUsage && len(t.Assignments) > 0 {
		env = withVar(env, EnvSimUsageFile, s.in(e.usageFile(s.adir)))
	}
	env = withVar(env, EnvOutputsFile, s.in(outputsFile(s.adir)))
	env = withVar(env, EnvMetricsFile, s.in(metricsFile(s.adir)))
	s.env = withVar(env, EnvStopFile, s.in(stopFile(s.adir)))
	if e.status.Users && !s.container {
		name := userName(t.Team)
		s.env = withVar(withVar(s.env, "USER", name), "LOGNAME", name)
	}
	return nil
}

// network gives the workload its network namespace, where workloads have
// one, and tells the task where the API is.
func (s *starting) network() error {
	e := s.e
	if e.net == nil {
		return nil
	}
	w, err := e.net.attach(s.t.WorkloadID, s.t.Team, s.t.Ports, s.t.Network)
	if err != nil {
		return err
	}
	s.wnet = w
	s.undo = append(s.undo, func() { e.net.detach(s.t.WorkloadID) })
	if api := e.net.apiAddr(); api != "" {
		s.env = withVar(s.env, EnvAPIAddr, api)
	}
	return nil
}

// ports says where the task serves its declared ports: the declared ports
// themselves at its own address, or free ports of the host where it has
// none.
func (s *starting) ports() error {
	t := s.t
	if len(t.Ports) == 0 {
		return nil
	}
	rec := portsRecord{UID: -1}
	var host map[int]int
	var err error
	switch {
	case s.wnet != nil:
		host, rec.Host = declaredPorts(t.Ports), s.wnet.Addr.String()
	default:
		if host, err = allocatePorts(t.Ports); err != nil {
			return err
		}
		if s.e.status.Users {
			rec.UID = s.uid // the listener's owner is checked only when teams have users
		}
	}
	if err := writePorts(s.adir, host, rec); err != nil {
		return err
	}
	s.env = portEnv(s.env, t.WorkloadID, t.Ports, host, s.e.portHosts)
	return nil
}

// secretFiles places the task's secret files: on the sandbox's own tmpfs
// in a mount namespace, else under /dev/shm (removed when the attempt's
// end is delivered).
func (s *starting) secretFiles() error {
	t := s.t
	if len(t.SecretFiles) == 0 {
		return nil
	}
	if s.e.status.Users && !s.container {
		s.secrets = filepath.Join(s.wdir, "secrets")
		s.payload.Files = t.SecretFiles
		s.env = withVar(s.env, executor.EnvSecretsDir, s.secrets)
		return nil
	}
	var err error
	if s.secrets, err = shmSecrets(s.adir, t.SecretFiles, s.uid, s.gid); err != nil {
		return err
	}
	s.undo = append(s.undo, func() { removeShmSecrets(s.adir) })
	dir := s.secrets
	if s.container {
		dir = containerSecrets
	}
	s.env = withVar(s.env, executor.EnvSecretsDir, dir)
	return nil
}

// program returns what the supervisor runs: the container runtime with
// its arguments, or the task's program with the sandbox's spec (found and
// checked by the sandbox, as the task's user sees the files; unconfined,
// here, as the server sees them).
func (s *starting) program() (prog string, argv []string, spec string, err error) {
	e, t := s.e, s.t
	mounts, err := e.taskMounts(t)
	if err != nil {
		return "", nil, "", err
	}
	var netns string
	if s.wnet != nil {
		netns = s.wnet.NS
	}
	if s.container {
		k := s.tk.key
		argv, env, err := e.containerCommand(t, k, s.own, s.in(s.dir), s.env, mounts, s.secrets, netns, s.uid, s.gid)
		if err != nil {
			return "", nil, "", err
		}
		s.env = env
		s.payload.Cleanup = e.rt.removeArgv(containerName(k))
		if err := os.WriteFile(containerRecord(s.adir), []byte(containerName(k)), 0o600); err != nil {
			return "", nil, "", err
		}
		return e.rt.path, argv, "", nil
	}
	v := view{own: s.own, uid: s.uid, gid: s.gid, dir: s.dir, gpus: gpuIndices(t.Assignments), mounts: mounts,
		secrets: s.secrets, inNS: e.status.Users, shmBytes: shmBytes(t.Request), netns: netns}
	if e.status.Users {
		if v.files, err = userDB(s.adir, userName(t.Team), s.uid, s.gid, s.own.home); err != nil {
			return "", nil, "", err
		}
	}
	if v.cgroups, err = e.attemptCgroup(s.adir, t); err != nil {
		return "", nil, "", err
	}
	s.undo = append(s.undo, func() { killCgroup(v.cgroups); removeCgroup(v.cgroups) })
	sb, err := e.sandbox(v)
	if err != nil {
		return "", nil, "", err
	}
	if sb == nil {
		prog, err := lookPath(t.Command[0], envValue(s.env, "PATH"), s.dir)
		return prog, t.Command, "", err
	}
	b, err := json.Marshal(sb)
	if err != nil {
		return "", nil, "", err
	}
	s.tk.pidns = sb.PIDNS
	return t.Command[0], t.Command, string(b), nil
}
