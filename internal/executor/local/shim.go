package local

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The supervisor is this package's binary called with shimEnv=1 in its
// environment and the arguments: shimArg, attempt dir, program, argv...
const (
	shimEnv = "GPUFLEET_SHIM"
	shimArg = "gpufleet-shim"
)

// readyFD is the supervisor's end of the pipe on which it reports to Start;
// goFD the pipe on which Start says "go" once the pid file is written.
const (
	readyFD = 3
	goFD    = 4
)

func init() {
	if os.Getenv(shimEnv) != "1" || len(os.Args) < 5 || os.Args[1] != shimArg {
		return
	}
	// syscall.Exit, not os.Exit: the supervisor has nothing to flush, and
	// race-enabled binaries (tests) would otherwise sleep a second on exit.
	syscall.Exit(runShim(os.Args[2], os.Args[3], os.Args[4:]))
}

// runShim supervises one task (see the package documentation) and returns
// the supervisor's own exit status.
func runShim(attemptDir, prog string, argv []string) int {
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

	// 2. Wait for "go": Start sends it once the pid file is on disk. A
	// control plane that died before that never sees this task, so it must
	// not run.
	syscall.CloseOnExec(goFD)
	goPipe := os.NewFile(goFD, "go")
	buf := make([]byte, 3)
	n, _ := io.ReadFull(goPipe, buf)
	goPipe.Close()
	if n != 3 || string(buf) != "go\n" {
		fmt.Fprintf(ready, "err the control plane went away before the task started\n")
		ready.Close()
		return 1
	}

	// 3. Start the task in a process group of its own.
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        argv,
		Env:         withoutVar(os.Environ(), shimEnv),
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		// Start has checked the program already; this is a late failure.
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		werr := writeJSON(filepath.Join(attemptDir, "exit"), exitRecord{Reason: "StartError", Message: msg, FinishedAt: time.Now().UTC()})
		fmt.Fprintf(ready, "err %s\n", msg)
		ready.Close()
		if werr != nil {
			fmt.Fprintf(os.Stderr, "gpufleet: record exit: %v\n", werr)
		}
		return 1
	}
	pid := cmd.Process.Pid
	_, tick, _ := procStat(pid) // unreaped, so readable even if it has exited

	// 4. Report, then wait.
	fmt.Fprintf(ready, "ok %d %d\n", pid, tick)
	ready.Close()
	cmd.Wait()

	// 5. A task ends with its main process: kill what it left behind.
	syscall.Kill(-pid, syscall.SIGKILL)

	// 6. Record the ending.
	rec := recordOf(cmd.ProcessState)
	rec.FinishedAt = time.Now().UTC()
	if err := writeJSON(filepath.Join(attemptDir, "exit"), rec); err != nil {
		fmt.Fprintf(os.Stderr, "gpufleet: record exit: %v\n", err)
		return 1
	}
	return 0
}

// recordOf turns a wait status into an exit record.
func recordOf(ps *os.ProcessState) exitRecord {
	var rec exitRecord
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		code := ps.ExitCode()
		rec.ExitCode = &code
	case ws.Exited():
		code := ws.ExitStatus()
		rec.ExitCode = &code
	case ws.Signaled():
		rec.Signal = signalName(ws.Signal())
		if ws.CoreDump() {
			rec.Message = "core dumped"
		}
	default:
		rec.Message = "ended with wait status " + ps.String()
	}
	return rec
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
