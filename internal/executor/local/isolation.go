package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Default range of the user IDs given to teams (one each, with a group of
// the same number), chosen above the ranges that distributions hand to
// people and to containers' /etc/subuid by default.
const (
	DefaultUIDFirst = 200000
	DefaultUIDLast  = 265535
)

// DefaultReadOnlyPaths are the system paths a sandboxed task may read and
// execute (those that exist): programs, libraries, configuration and the
// kernel's views of processes and devices. Nothing under them is writable
// by the task.
var DefaultReadOnlyPaths = []string{
	"/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
	"/proc", "/sys", "/run/nvidia-persistenced",
}

// deviceFiles are the device nodes a sandboxed task may open for reading
// and writing (those that exist), besides the NVIDIA devices found at
// start.
var deviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// Isolation configures how tasks are confined. The zero value confines
// them as far as this machine allows (see Probe).
type Isolation struct {
	// Disabled runs tasks as the server's user, unconfined: for a single
	// user on a laptop only.
	Disabled bool
	// UIDFirst and UIDLast bound the user IDs given to teams; zero means
	// DefaultUIDFirst and DefaultUIDLast.
	UIDFirst, UIDLast int
	// ReadOnlyPaths replaces DefaultReadOnlyPaths when not nil.
	ReadOnlyPaths []string
}

// IsolationStatus says how this executor confines tasks.
type IsolationStatus struct {
	// Users: each team's tasks run under a user and group of their own,
	// with no supplementary groups, in a mount namespace of their own
	// (private /tmp and /dev/shm, the data directory hidden but for the
	// task's own directories).
	Users bool
	// Landlock is the Landlock ABI version the kernel offers and tasks are
	// restricted with; 0 when tasks are not restricted.
	Landlock int
	// Problems says why isolation is weaker than full; empty when full.
	Problems []string
}

// Full reports whether tasks run under per-team users and are restricted
// by Landlock.
func (s IsolationStatus) Full() bool { return s.Users && s.Landlock > 0 }

// String describes the status in a few words, for logs, nodes and errors.
func (s IsolationStatus) String() string {
	var parts []string
	if s.Users {
		parts = append(parts, "per-team users")
	}
	if s.Landlock > 0 {
		parts = append(parts, fmt.Sprintf("Landlock ABI %d", s.Landlock))
	}
	if len(parts) == 0 {
		parts = append(parts, "none")
	}
	out := strings.Join(parts, " + ")
	if len(s.Problems) > 0 {
		out += " (" + strings.Join(s.Problems, "; ") + ")"
	}
	return out
}

// landlockABI returns the kernel's Landlock ABI version, 0 when it has none.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// probe finds how far this machine lets the executor confine tasks: it
// runs the sandbox once, with every restriction it means to use, around no
// program, and drops what fails.
func probe(self string, iso Isolation) IsolationStatus {
	if iso.Disabled {
		return IsolationStatus{Problems: []string{"isolation disabled by configuration"}}
	}
	st := IsolationStatus{Landlock: landlockABI()}
	if st.Landlock == 0 {
		st.Problems = append(st.Problems, "the kernel has no Landlock (Linux 5.13 or newer with lsm=landlock): tasks can read what the server's user can")
	}
	if os.Geteuid() != 0 {
		st.Problems = append(st.Problems, "the server is not root, so it cannot run tasks under per-team users")
		if st.Landlock > 0 {
			if err := runProbe(self, sandboxSpec{UID: -1, GID: -1, Landlock: true, RO: iso.readOnly()}); err != nil {
				st.Problems = append(st.Problems, "Landlock: "+err.Error())
				st.Landlock = 0
			}
		}
		return st
	}
	spec := sandboxSpec{UID: iso.first(), GID: iso.first(), MountNS: true, PrivateTmp: true, Landlock: st.Landlock > 0, RO: iso.readOnly()}
	if err := runProbe(self, spec); err != nil && spec.Landlock {
		// Try without Landlock, to tell which part fails.
		spec.Landlock = false
		if err2 := runProbe(self, spec); err2 == nil {
			st.Problems = append(st.Problems, "Landlock: "+err.Error())
			st.Landlock = 0
			st.Users = true
			return st
		}
		st.Problems = append(st.Problems, "per-team users and mount namespaces: "+err.Error())
		return st
	} else if err != nil {
		st.Problems = append(st.Problems, "per-team users and mount namespaces: "+err.Error())
		return st
	}
	st.Users = true
	return st
}

// runProbe runs the sandbox with spec and no program.
func runProbe(self string, spec sandboxSpec) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, sandboxArg, string(b))
	cmd.Env = []string{sandboxEnv + "=1"}
	cmd.SysProcAttr = spec.sysProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(msg)
	}
	return nil
}

func (iso Isolation) first() int {
	if iso.UIDFirst == 0 {
		return DefaultUIDFirst
	}
	return iso.UIDFirst
}

func (iso Isolation) last() int {
	if iso.UIDLast == 0 {
		return DefaultUIDLast
	}
	return iso.UIDLast
}

func (iso Isolation) readOnly() []string {
	if iso.ReadOnlyPaths != nil {
		return existing(iso.ReadOnlyPaths)
	}
	return existing(DefaultReadOnlyPaths)
}

// Validate checks the range and the paths.
func (iso Isolation) Validate() error {
	first, last := iso.first(), iso.last()
	if first < 1000 || last < first || last > 1<<31-2 {
		return fmt.Errorf("uidRange %d-%d: want 1000 <= first <= last < 2147483647", first, last)
	}
	for _, p := range iso.ReadOnlyPaths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("readOnlyPaths: %q is not an absolute path", p)
		}
	}
	return nil
}

// existing keeps the paths that exist, cleaned.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

// devices lists the device files a task may use: the usual character
// devices and every NVIDIA device node.
func devices() []string {
	out := existing(deviceFiles)
	nv, _ := filepath.Glob("/dev/nvidia*")
	for _, p := range nv {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			out = append(out, p)
		}
	}
	caps, _ := filepath.Glob("/dev/nvidia-caps/*")
	out = append(out, caps...)
	slices.Sort(out)
	return slices.Compact(out)
}

// sysProcAttr is how the supervisor starts the sandbox process: in a process
// group of its own (the task's) and, when asked, a mount namespace of its
// own (Go makes its mounts private, so nothing the sandbox mounts is seen
// outside).
func (s sandboxSpec) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if s.MountNS {
		a.Unshareflags = syscall.CLONE_NEWNS
	}
	return a
}
