package local

import (
	"encoding/json"
	"fmt"
	"os"
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
