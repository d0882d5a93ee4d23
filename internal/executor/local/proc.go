package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufleet/gpufleet/internal/executor"
)

// pidRecord is attempt-N/pid: the supervisor and the task's main process,
// each with its start time (clock ticks since boot, /proc/<pid>/stat field
// 22) to tell it from a later process that reuses the pid.
type pidRecord struct {
	ShimPID   int    `json:"shimPID"`
	ShimStart uint64 `json:"shimStart"`
	PID       int    `json:"pid"`
	Start     uint64 `json:"start"`
	// PIDNS: PID is the init of the task's PID namespace.
	PIDNS bool `json:"pidns,omitempty"`
}

// exitRecord is attempt-N/exit, written by the supervisor once the task has
// ended: {"exitCode":3} or {"signal":"SIGTERM"}, with a reason and message
// when there is more to say.
type exitRecord struct {
	// Reserved marks the placeholder the supervisor writes to
	// attempt-N/exit.reserved before the task starts (see reserveExit).
	Reserved   bool      `json:"reserved,omitempty"`
	ExitCode   *int      `json:"exitCode,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// CPUSeconds and PeakMemoryBytes are what the attempt's cgroup
	// counted.
	CPUSeconds      float64 `json:"cpuSeconds,omitempty"`
	PeakMemoryBytes int64   `json:"peakMemoryBytes,omitempty"`
}

func (r exitRecord) exit(k key) executor.Exit {
	return executor.Exit{
		WorkloadID:      k.id,
		Attempt:         k.attempt,
		ExitCode:        r.ExitCode,
		Signal:          r.Signal,
		Reason:          r.Reason,
		Message:         r.Message,
		CPUSeconds:      r.CPUSeconds,
		PeakMemoryBytes: r.PeakMemoryBytes,
	}
}

// readExit reads attempt-N/exit or, when the supervisor had to record the
// ending in its reservation, attempt-N/exit.reserved; ok is false when
// neither holds an ending.
func readExit(adir string) (r exitRecord, ok bool, err error) {
	err = readJSON(filepath.Join(adir, "exit"), &r)
	if errors.Is(err, fs.ErrNotExist) {
		r = exitRecord{}
		err = readJSON(filepath.Join(adir, exitReserved), &r)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && r.Reserved) {
			return exitRecord{}, false, nil
		}
	}
	return r, err == nil, err
}

// exitReserved is the file, of reservedSize bytes, that the supervisor
// writes before it starts the task, so that recording the ending never
// needs new space on a full disk: the ending overwrites it in place.
const (
	exitReserved = "exit.reserved"
	reservedSize = 4096
)

// reserveExit writes the placeholder record, padded to reservedSize, and
// syncs it, so that its blocks are allocated.
func reserveExit(adir string) error {
	b, _ := json.Marshal(exitRecord{Reserved: true})
	f, err := os.OpenFile(filepath.Join(adir, exitReserved), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(padded(b))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(filepath.Join(adir, exitReserved))
		return fmt.Errorf("reserve the exit record: %w", err)
	}
	return syncDir(adir)
}

// padded returns b followed by spaces up to reservedSize (JSON ignores
// them), or b itself when longer.
func padded(b []byte) []byte {
	if len(b) >= reservedSize {
		return b
	}
	out := make([]byte, reservedSize)
	copy(out, b)
	for i := len(b); i < reservedSize; i++ {
		out[i] = ' '
	}
	out[reservedSize-1] = '\n'
	return out
}

// writeExit records how the task ended: attempt-N/exit, written
// atomically, or, when that fails (no space for a new file), the record
// written over the reservation in place, in blocks already allocated.
func writeExit(adir string, rec exitRecord) error {
	err := writeJSON(filepath.Join(adir, "exit"), rec)
	if err == nil {
		os.Remove(filepath.Join(adir, exitReserved))
		return nil
	}
	b, merr := json.Marshal(rec)
	if merr != nil || len(b) >= reservedSize {
		// Too long for the reservation: keep what matters.
		rec.Message = ""
		b, _ = json.Marshal(rec)
	}
	f, oerr := os.OpenFile(filepath.Join(adir, exitReserved), os.O_WRONLY, 0)
	if oerr != nil {
		return fmt.Errorf("%w; and the reservation: %w", err, oerr)
	}
	_, werr := f.WriteAt(padded(b), 0)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("%w; and the reservation: %w", err, werr)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	return err
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON writes v to path atomically and durably: a temporary file,
// fsync, rename, fsync of the directory.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// procStat reads a process's state letter and start time from
// /proc/<pid>/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name, field 2, is in parentheses and may hold anything.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return f[0][0], start, nil
}

// procAlive reports whether pid is a live (not zombie) process that started
// at start.
func procAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, s, err := procStat(pid)
	return err == nil && s == start && st != 'Z' && st != 'X'
}

// pidfdOpen returns a pidfd for pid, or -1 where pidfds are unavailable or
// the process is gone.
func pidfdOpen(pid int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	return fd
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// waitGone blocks until the process (pid, start) has ended: on its pidfd
// when fd ≥ 0, else by polling /proc every 200 ms. It closes fd.
func waitGone(fd, pid int, start uint64) {
	if fd >= 0 {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, -1)
			if err == nil && n > 0 {
				return
			}
			if err != nil && !errors.Is(err, syscall.EINTR) {
				break // fall back to polling
			}
		}
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for procAlive(pid, start) {
		<-t.C
	}
}

// signalName names a signal the way Exit.Signal does ("SIGTERM").
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}
