package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// deviceFiles are the device nodes every sandboxed task may open for
// reading and writing (those that exist): the usual character devices and
// the NVIDIA control devices that CUDA opens whatever its GPUs. A GPU's own
// device, /dev/nvidiaN, is granted only to the tasks it is assigned to.
var deviceFiles = []string{
	"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
	"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
}

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
	// PIDNamespaces: each task runs in a PID namespace of its own, whose
	// /proc shows its processes only and which ends with its first
	// process (root only).
	PIDNamespaces bool
	// Landlock is the Landlock ABI version the kernel offers and tasks are
	// restricted with; 0 when tasks are not restricted.
	Landlock int
	// Cgroups says how attempts' resources are limited ("cgroup v1",
	// "cgroup v2"); empty when they are not.
	Cgroups string
	// Network is the range of the workloads' addresses when each runs in
	// a network namespace of its own ("10.233.4.0/24"); empty when tasks
	// share the host's network.
	Network string
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
	if s.PIDNamespaces {
		parts = append(parts, "PID namespaces")
	}
	if s.Network != "" {
		parts = append(parts, "network namespaces "+s.Network)
	}
	if s.Cgroups != "" {
		parts = append(parts, s.Cgroups)
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
	// Everything first, then without one part at a time, to tell which
	// part fails.
	spec := sandboxSpec{UID: iso.first(), GID: iso.first(), MountNS: true, PIDNS: true, PrivateTmp: true, HideProcs: true,
		Landlock: st.Landlock > 0, RO: iso.readOnly(), RW: []string{"/proc"}}
	err := runProbe(self, spec)
	if err != nil {
		noPID := spec
		noPID.PIDNS, noPID.RW = false, nil
		noLandlock := spec
		noLandlock.Landlock = false
		switch {
		case runProbe(self, noPID) == nil:
			st.Problems = append(st.Problems, "PID namespaces: "+err.Error()+": tasks see the host's processes and cannot name their threads (CUDA does)")
			spec = noPID
		case spec.Landlock && runProbe(self, noLandlock) == nil:
			st.Problems = append(st.Problems, "Landlock: "+err.Error())
			st.Landlock = 0
			spec = noLandlock
		default:
			st.Problems = append(st.Problems, "per-team users and mount namespaces: "+err.Error())
			return st
		}
	}
	st.Users, st.PIDNamespaces = true, spec.PIDNS
	if clash := uidClash(iso.first(), iso.last()); clash != "" {
		st.Problems = append(st.Problems, clash)
	}
	return st
}

// uidClash says which user on this host could act as a team: one whose own
// or subordinate IDs (/etc/passwd, /etc/subuid, /etc/subgid) fall in the
// teams' range; "" when none does.
func uidClash(first, last int) string {
	var clashes []string
	for _, f := range []struct {
		path   string
		ranges func(line string) (name string, lo, hi int, ok bool)
	}{
		{"/etc/passwd", func(l string) (string, int, int, bool) {
			p := strings.Split(l, ":")
			if len(p) < 4 {
				return "", 0, 0, false
			}
			uid, err := strconv.Atoi(p[2])
			return p[0], uid, uid, err == nil
		}},
		{"/etc/subuid", subRange},
		{"/etc/subgid", subRange},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if name, lo, hi, ok := f.ranges(strings.TrimSpace(l)); ok && lo <= last && hi >= first {
				clashes = append(clashes, fmt.Sprintf("%s in %s", name, f.path))
			}
		}
	}
	if len(clashes) == 0 {
		return ""
	}
	return fmt.Sprintf("the team user IDs %d-%d overlap %s: set local.uidRange to a free range", first, last, strings.Join(clashes, ", "))
}

// subRange parses "name:first:count" of /etc/subuid and /etc/subgid.
func subRange(l string) (string, int, int, bool) {
	p := strings.Split(l, ":")
	if len(p) != 3 {
		return "", 0, 0, false
	}
	lo, err1 := strconv.Atoi(p[1])
	n, err2 := strconv.Atoi(p[2])
	return p[0], lo, lo + n - 1, err1 == nil && err2 == nil && n > 0
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

// devices lists the device files a task may use: the common ones, the
// NVIDIA capability devices (MIG), and /dev/nvidiaN for each GPU index it
// was assigned (the driver numbers its device nodes by minor number, which
// nvidia-smi's PCI-ordered index matches unless the driver was told
// otherwise).
func devices(gpus []int) []string {
	paths := slices.Clone(deviceFiles)
	for _, i := range gpus {
		paths = append(paths, "/dev/nvidia"+strconv.Itoa(i))
	}
	out := existing(paths)
	caps, _ := filepath.Glob("/dev/nvidia-caps/*")
	out = append(out, caps...)
	slices.Sort(out)
	return slices.Compact(out)
}

// sysProcAttr is how the supervisor starts the sandbox process: leading a
// session and process group of its own (the task's, which it cannot leave)
// and, when asked, in mount, IPC and UTS namespaces of its own (Go makes
// its mounts private, so nothing the sandbox mounts is seen outside; System
// V shared memory and semaphores are the task's own) and as the init of a
// PID namespace of its own.
func (s sandboxSpec) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if s.MountNS {
		a.Unshareflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
	}
	if s.PIDNS {
		a.Cloneflags = pidNSFlags
	}
	return a
}
