package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is this package's binary called with shimEnv=1, alone, as
// its environment and the arguments: shimArg, attempt dir, sandbox spec
// (JSON, or empty to run the program unconfined), envOnFD (the task's
// payload, a JSON envPayload, comes on envFD), program, argv...
const (
	shimEnv = "GPUFLEET_SHIM"
	shimArg = "gpufleet-shim"
)

// readyFD is the supervisor's end of the pipe on which it reports to Start;
// goFD the pipe on which Start says "go" once the pid file is written;
// envFD the pipe on which the task's environment comes, when its argument
// is envOnFD (argv would show it to every user of the machine in /proc).
const (
	readyFD = 3
	goFD    = 4
	envFD   = 5
	envOnFD = "-"
)

// maxEnvBytes bounds a payload read from a pipe.
const maxEnvBytes = 8 << 20

// envPayload is what travels on the environment pipe, from Start to the
// supervisor and from the supervisor to the sandbox: never in argv, which
// any user of the machine may read in /proc.
type envPayload struct {
	// Env is the task's environment, "k=v" (for a container, the
	// runtime's: see container.go).
	Env []string `json:"env"`
	// Files are the secret files, secret name, then key, then value, that
	// the sandbox writes on a tmpfs of its own (sandboxSpec.SecretsDir).
	Files map[string]map[string][]byte `json:"files,omitempty"`
	// Cleanup is a command the supervisor runs once the task has ended,
	// before it records the ending (the container runtime's "rm -f").
	Cleanup []string `json:"cleanup,omitempty"`
}

// readEnv reads the JSON envPayload sent on fd, or parses arg.
func readEnv(arg string, fd uintptr) (envPayload, error) {
	b := []byte(arg)
	if arg == envOnFD {
		f := os.NewFile(fd, "env")
		if f == nil {
			return envPayload{}, errors.New("no environment pipe")
		}
		var err error
		b, err = io.ReadAll(io.LimitReader(f, maxEnvBytes+1))
		f.Close()
		if err != nil {
			return envPayload{}, err
		}
		if len(b) > maxEnvBytes {
			return envPayload{}, fmt.Errorf("the environment and secret files exceed %d bytes", maxEnvBytes)
		}
	}
	var p envPayload
	return p, json.Unmarshal(b, &p)
}

// drainTimeout bounds how long the supervisor keeps copying output after
// the task's process group is gone: a process that left the group may hold
// the pipe open.
const drainTimeout = 2 * time.Second

func init() {
	if os.Getenv(shimEnv) != "1" || len(os.Args) < 7 || os.Args[1] != shimArg {
		return
	}
	// No descriptor the server inherited (from a service manager, a
	// wrapper) reaches the task: all but the report and go pipes close
	// on exec.
	unix.CloseRange(goFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	p, err := readEnv(os.Args[4], envFD)
	if err != nil {
		fmt.Fprintf(os.NewFile(readyFD, "ready"), "err bad environment: %v\n", err)
		syscall.Exit(1)
	}
	// syscall.Exit, not os.Exit: the supervisor has nothing to flush, and
	// race-enabled binaries (tests) would otherwise sleep a second on exit.
	syscall.Exit(runShim(os.Args[2], os.Args[3], p, os.Args[5], os.Args[6:]))
}

// runShim supervises one task (see the package documentation) and returns
// the supervisor's own exit status.
func runShim(attemptDir, specJSON string, p envPayload, prog string, argv []string) int {
	env := p.Env
	// 1. Keep the report pipe from the task, and outlive signals meant for
	// the task. Caught signals revert to their defaults in the task on exec;
	// ignored ones would not, which is why they are caught, not ignored.
	syscall.CloseOnExec(readyFD)
	ready := os.NewFile(readyFD, "ready")
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	refuse := func(msg string) int {
		fmt.Fprintf(ready, "err %s\n", strings.ReplaceAll(msg, "\n", " "))
		ready.Close()
		return 1
	}

	// 2. Wait for "go": Start sends it once the pid file is on disk. A
	// control plane that died before that never sees this task, so it must
	// not run.
	syscall.CloseOnExec(goFD)
	goPipe := os.NewFile(goFD, "go")
	buf := make([]byte, 3)
	n, _ := io.ReadFull(goPipe, buf)
	goPipe.Close()
	if n != 3 || string(buf) != "go\n" {
		return refuse("the control plane went away before the task started")
	}

	// 3. Reserve the exit record, so that the ending can be recorded on a
	// full disk; with no space for it, the task does not start.
	if err := reserveExit(attemptDir); err != nil {
		return refuse(encodeStartError(noSpace(err)))
	}

	// 4. Start the task in a process group of its own, confined by the
	// sandbox when there is a spec, its output on a pipe that only the
	// supervisor writes to the log.
	outR, outW, err := os.Pipe()
	if err != nil {
		return refuse(err.Error())
	}
	// The task leads a session of its own, hence its own process group,
	// which a session leader cannot leave: Stop's signal to the group
	// always reaches it. A sandbox gets the environment and the secret
	// files it writes.
	cmd := &exec.Cmd{Path: prog, Args: argv, Env: env, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	var sb *sandboxCmd
	if specJSON != "" {
		self, err := os.Executable()
		if err != nil {
			return refuse(err.Error())
		}
		if sb, err = newSandboxCmd(self, specJSON, prog, argv, envPayload{Env: env, Files: p.Files}); err != nil {
			return refuse(err.Error())
		}
		cmd = sb.cmd
	}
	cmd.Stdout, cmd.Stderr = outW, outW
	var startErr error
	if sb != nil {
		startErr = sb.start()
	} else {
		startErr = cmd.Start()
	}
	outW.Close()
	if startErr != nil {
		// The sandbox finds and checks the program as the task's user:
		// this is where Start learns that it cannot run.
		outR.Close()
		raw := strings.ReplaceAll(startErr.Error(), "\n", " ")
		werr := writeExit(attemptDir, exitRecord{Reason: "StartError", Message: decodeStartError(raw).Error(), FinishedAt: time.Now().UTC()})
		if werr != nil {
			fmt.Fprintf(os.Stderr, "gpufleet: record exit: %v\n", werr)
		}
		return refuse(raw)
	}
	pid := cmd.Process.Pid
	_, tick, _ := procStat(pid) // unreaped, so readable even if it has exited
	copied := make(chan struct{})
	go func() {
		idx := openLogIndex(filepath.Dir(attemptDir))
		copyOutput(os.Stdout, outR, idx)
		idx.close()
		close(copied)
	}()

	// 5. Report, then wait.
	fmt.Fprintf(ready, "ok %d %d\n", pid, tick)
	ready.Close()
	cmd.Wait()

	// 6. A task ends with its main process: kill what it left behind, and
	// copy what it wrote until the pipe closes (or give up on a process
	// that escaped the group).
	syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-copied:
	case <-time.After(drainTimeout):
		outR.Close()
	}
	if len(p.Cleanup) > 0 {
		// A container outlives its runtime's client when that was killed:
		// remove it before the ending is recorded.
		if err := runCleanup(p.Cleanup, envValue(env, "PATH")); err != nil {
			fmt.Fprintf(os.Stderr, "--- gpufleet: %v ---\n", err)
		}
	}

	// 7. Record the ending.
	rec := recordOf(cmd.ProcessState)
	if sb != nil {
		rec = sb.record()
	}
	rec.FinishedAt = time.Now().UTC()
	if err := writeExit(attemptDir, rec); err != nil {
		fmt.Fprintf(os.Stderr, "gpufleet: record exit: %v\n", err)
		return 1
	}
	return 0
}

// copyOutput copies the task's output to the log until the pipe closes,
// marking the log's time index as it goes. A write that fails (a full disk)
// drops that output but keeps draining the pipe, so the task never blocks
// on it.
func copyOutput(log *os.File, r io.Reader, idx *logIndex) {
	buf := make([]byte, 32<<10)
	dropped := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			idx.mark(log, time.Now())
			if _, werr := log.Write(buf[:n]); werr != nil {
				dropped += n
			} else if dropped > 0 {
				fmt.Fprintf(log, "--- gpufleet: %d bytes of output were lost: the log could not be written ---\n", dropped)
				dropped = 0
			}
		}
		if err != nil {
			return
		}
	}
}

// recordOf turns a process's end into an exit record.
func recordOf(ps *os.ProcessState) exitRecord {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return recordOfStatus(ws)
	}
	code := ps.ExitCode()
	return exitRecord{ExitCode: &code}
}
