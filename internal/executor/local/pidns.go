package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the init of a task's PID namespace passes on
// to every process of the task.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// runInit is the sandbox as the init (pid 1) of the task's PID namespace,
// once the task's view of the files is made: it starts the sandbox's
// second stage (this binary again, with sandboxExecArg), which confines
// itself and execs the program, then
//
//   - passes each signal in forwarded to every process of the namespace
//     (kill(-1)): the kernel delivers to an init only the signals it
//     handles, and Stop's SIGTERM must reach the whole task, whatever
//     session or group its processes moved to;
//   - reaps every process the namespace's orphans leave to it;
//   - when the first process of the task ends, reports its wait status on
//     sandboxStatusFD and exits, whereupon the kernel kills what is left
//     in the namespace before the supervisor sees the init gone.
//
// The init keeps the server's user and no program's code runs in it; it
// shows in no /proc of the task (hidepid=invisible hides root's processes
// from the task's user). It returns its own exit status: for a probe (no
// program), that of the second stage.
func runInit(env []string, probe bool) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	args := []string{os.Args[0], sandboxExecArg, os.Args[2]}
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	var envW *os.File
	if !probe {
		errW := os.NewFile(sandboxErrFD, "sandbox-err")
		envR, w, err := os.Pipe()
		if err != nil {
			sandboxFail(fmt.Errorf("sandbox: %w", err))
		}
		envW = w
		args = append(append(args, envOnFD), os.Args[4:]...)
		files = append(files, errW, envR)
	}
	// /proc/self/exe: the binary's path may not exist in the task's view
	// (a test binary under /tmp).
	// The task leads a session of its own, so it cannot join the init's
	// process group.
	proc, err := os.StartProcess("/proc/self/exe", args, &os.ProcAttr{Env: []string{sandboxEnv + "=1"}, Files: files,
		Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		sandboxFail(fmt.Errorf("sandbox: start the task: %w", err))
	}
	if !probe {
		// The second stage holds the error pipe now: the supervisor sees
		// it close when the program is exec'd.
		files[3].Close()
		files[4].Close()
		go func() {
			json.NewEncoder(envW).Encode(envPayload{Env: env})
			envW.Close()
		}()
	}
	go func() {
		for s := range sigs {
			syscall.Kill(-1, s.(syscall.Signal))
		}
	}()
	ws := reapUntil(proc.Pid)
	if probe {
		return exitStatusOf(ws)
	}
	if f := os.NewFile(sandboxStatusFD, "status"); f != nil {
		fmt.Fprintf(f, "%d\n", uint32(ws))
		f.Close()
	}
	return exitStatusOf(ws)
}

// reapUntil reaps every child of the init until main ends, and returns
// main's wait status.
func reapUntil(main int) syscall.WaitStatus {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil:
			// No child left, which cannot be while main runs.
			return ws
		case pid == main:
			return ws
		}
	}
}

// exitStatusOf is the exit status a shell would give for ws.
func exitStatusOf(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// readStatus reads the wait status an init reported on r; ok is false when
// it reported none (it was killed).
func readStatus(b []byte) (syscall.WaitStatus, bool) {
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, false
	}
	return syscall.WaitStatus(n), true
}

// recordOfStatus turns a wait status into an exit record.
func recordOfStatus(ws syscall.WaitStatus) exitRecord {
	var rec exitRecord
	switch {
	case ws.Exited():
		code := ws.ExitStatus()
		rec.ExitCode = &code
	case ws.Signaled():
		rec.Signal = signalName(ws.Signal())
		if ws.CoreDump() {
			rec.Message = "core dumped"
		}
	default:
		rec.Message = fmt.Sprintf("ended with wait status %#x", uint32(ws))
	}
	return rec
}

// pidNSFlags are the clone flags of a task's sandbox that gets a PID
// namespace.
const pidNSFlags = unix.CLONE_NEWPID

// sandboxCmd runs a program through the sandbox: the supervisor's way to
// start a task, and RunProbe's.
type sandboxCmd struct {
	cmd *exec.Cmd
	// errR is where the sandbox says why the program could not start;
	// statusR, for a PID namespace, how its first process ended.
	errR, statusR *os.File
	envW          *os.File
	env           []byte
	// cgroups are the attempt's, from the spec.
	cgroups []cgroupDir
}

// newSandboxCmd prepares the sandbox for prog and argv, confined by the
// spec, with the payload (environment and secret files) to send it; self
// is the binary that acts as the sandbox. The caller sets the command's
// output.
func newSandboxCmd(self, specJSON, prog string, argv []string, payload envPayload) (*sandboxCmd, error) {
	var spec sandboxSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return nil, fmt.Errorf("bad sandbox spec: %w", err)
	}
	env, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	fail := func(err error) (*sandboxCmd, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	s := &sandboxCmd{env: env, cgroups: spec.Cgroups}
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}
	envR, envW, err := pipe()
	if err != nil {
		return fail(err)
	}
	s.errR, s.envW = errR, envW
	s.cmd = &exec.Cmd{
		Path:        self,
		Args:        append([]string{self, sandboxArg, specJSON, envOnFD, prog}, argv...),
		Env:         []string{sandboxEnv + "=1"},
		ExtraFiles:  []*os.File{errW, envR},
		SysProcAttr: spec.sysProcAttr(),
	}
	if spec.PIDNS {
		// The namespace's init reports how the task's first process
		// ended: the init's own status would not say.
		statusR, statusW, err := pipe()
		if err != nil {
			return fail(err)
		}
		s.statusR = statusR
		s.cmd.ExtraFiles = append(s.cmd.ExtraFiles, statusW)
	}
	return s, nil
}

// start starts the sandbox and returns once it has exec'd the program, or
// with what the sandbox wrote of why it could not (encodeStartError), after
// the sandbox has exited.
func (s *sandboxCmd) start() error {
	err := s.cmd.Start()
	for _, f := range s.cmd.ExtraFiles {
		f.Close()
	}
	if err != nil {
		s.envW.Close()
		s.close()
		return err
	}
	go func() {
		s.envW.Write(s.env)
		s.envW.Close()
	}()
	// The sandbox closes its end unwritten when the exec succeeds.
	b, _ := io.ReadAll(io.LimitReader(s.errR, 4096))
	if msg := strings.TrimSpace(string(b)); msg != "" {
		s.cmd.Wait()
		s.close()
		killCgroup(s.cgroups)
		removeCgroup(s.cgroups)
		return errors.New(msg)
	}
	return nil
}

// record is how the program ended, once the command's Wait has returned,
// with what its cgroups counted; they are removed then.
func (s *sandboxCmd) record() exitRecord {
	defer s.close()
	rec := recordOf(s.cmd.ProcessState)
	if s.statusR != nil {
		b, _ := io.ReadAll(io.LimitReader(s.statusR, 64))
		if ws, ok := readStatus(b); ok {
			rec = recordOfStatus(ws)
		}
	}
	if len(s.cgroups) > 0 {
		killCgroup(s.cgroups) // a task ends with its first process
		withCgroupStats(&rec, readCgStats(s.cgroups))
		removeCgroup(s.cgroups)
	}
	return rec
}

// withCgroupStats adds what the attempt's cgroups counted to its record:
// its CPU time and peak memory, and, where the OOM killer ended one of its
// processes and the task did not succeed, the reason.
func withCgroupStats(rec *exitRecord, st cgStats) {
	rec.CPUSeconds, rec.PeakMemoryBytes = st.CPUSeconds, st.PeakBytes
	if st.OOMKills == 0 {
		return
	}
	msg := fmt.Sprintf("the OOM killer ended %d process(es) of the task: it used all of its memory limit of %s", st.OOMKills, formatBytes(st.LimitBytes))
	if rec.ExitCode != nil && *rec.ExitCode == 0 {
		rec.Message = strings.TrimPrefix(rec.Message+"; "+msg, "; ")
		return
	}
	rec.Reason, rec.Message = "OOMKilled", msg
}

// formatBytes writes a size in MiB or GiB.
func formatBytes(b int64) string {
	if b >= 1<<30 && b%(1<<30) == 0 {
		return strconv.FormatInt(b>>30, 10) + " GiB"
	}
	return strconv.FormatInt(b>>20, 10) + " MiB"
}

func (s *sandboxCmd) close() {
	s.errR.Close()
	if s.statusR != nil {
		s.statusR.Close()
	}
}
