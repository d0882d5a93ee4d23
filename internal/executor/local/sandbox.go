package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The sandbox is this package's binary called with sandboxEnv=1 as its
// whole environment and the arguments sandboxArg, the JSON sandboxSpec,
// then envOnFD (the task's environment comes as JSON on sandboxEnvFD), the
// program and its argv (none of the three for a probe). The supervisor
// starts it as the task's process. It makes the task's view of the files
// as root, confines itself and execs the program, so the task's pid is the
// sandbox's; or, when the spec gives the task a PID namespace, it stays as
// the namespace's init (pid 1, see runInit) and starts itself again with
// sandboxExecArg, which confines itself and execs the program.
const (
	sandboxEnv     = "GPUFLEET_SANDBOX"
	sandboxArg     = "gpufleet-sandbox"
	sandboxExecArg = "gpufleet-sandbox-exec"
)

// sandboxErrFD is the sandbox's end of a close-on-exec pipe to the
// supervisor: a successful exec closes it unwritten; a failure writes why.
// sandboxEnvFD is the pipe the task's environment comes on.
// sandboxStatusFD is where the init of a PID namespace reports the wait
// status of the task's first process, as a decimal number, before it
// exits.
const (
	sandboxErrFD    = 3
	sandboxEnvFD    = 4
	sandboxStatusFD = 5
)

// sandboxSpec is what the sandbox does before it execs the task, in order.
type sandboxSpec struct {
	// MountNS: the process was started in a mount namespace of its own
	// (sysProcAttr); the mounts below are made there.
	MountNS bool `json:"mountNS,omitempty"`
	// PIDNS: the process was started as the init of a PID namespace of
	// its own (sysProcAttr), where /proc shows the task's processes only
	// and they may write what the kernel lets a process write about
	// itself there (thread names: CUDA's driver names its threads).
	PIDNS bool `json:"pidNS,omitempty"`
	// Cgroups are the attempt's cgroups, which the sandbox joins first of
	// all, so that everything of the task is in them.
	Cgroups []cgroupDir `json:"cgroups,omitempty"`
	// NetNS is the network namespace to enter (a bind mount of it), first
	// of all; "" keeps the host's network.
	NetNS string `json:"netNS,omitempty"`
	// PrivateTmp mounts an empty tmpfs on /tmp and one of ShmBytes (the
	// kernel's default, half the memory, when 0) on /dev/shm.
	PrivateTmp bool  `json:"privateTmp,omitempty"`
	ShmBytes   int64 `json:"shmBytes,omitempty"`
	// Hide covers each directory (the data directory) with an empty
	// read-only tmpfs, after which Binds bring back the task's own
	// directories at their usual paths.
	Hide  []string `json:"hide,omitempty"`
	Binds []string `json:"binds,omitempty"`
	// Files binds regular files, read-only, over files of the system
	// (the user and group databases, with the task's user in them).
	Files []bindMount `json:"files,omitempty"`
	// HideProcs mounts a /proc where the task sees only its own user's
	// processes (hidepid=invisible); in a PID namespace, that /proc shows
	// the namespace's processes only.
	HideProcs bool `json:"hideProcs,omitempty"`
	// UID and GID to run as, with no supplementary groups; -1 keeps the
	// server's.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Landlock restricts the task to reading and writing RW, reading and
	// executing RO, and using Devices; signals and abstract sockets reach
	// only its own domain.
	Landlock bool     `json:"landlock,omitempty"`
	RW       []string `json:"rw,omitempty"`
	RO       []string `json:"ro,omitempty"`
	Devices  []string `json:"devices,omitempty"`
	// Dir is the working directory.
	Dir string `json:"dir,omitempty"`
	// Mounts bind a team volume or a dataset at a path of the task's
	// choosing, after Hide and Binds (MountNS only).
	Mounts []bindMount `json:"mounts,omitempty"`
	// SecretsDir, when set (MountNS only), gets a tmpfs of its own, sized
	// to fit, where the sandbox writes the payload's secret files
	// (<dir>/<secret>/<key>, 0400, owned by UID) and which it then makes
	// read-only.
	SecretsDir string `json:"secretsDir,omitempty"`
}

// bindMount binds Src (a directory) at Dst, read-only when RO.
type bindMount struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
	RO  bool   `json:"ro,omitempty"`
}

func init() {
	if os.Getenv(sandboxEnv) != "1" || len(os.Args) < 3 {
		return
	}
	switch os.Args[1] {
	case sandboxArg, sandboxExecArg:
	default:
		return
	}
	// Everything below runs on this thread, whose credentials and Landlock
	// domain the program inherits through execve.
	runtime.LockOSThread()
	var spec sandboxSpec
	if err := json.Unmarshal([]byte(os.Args[2]), &spec); err != nil {
		sandboxFail(fmt.Errorf("sandbox: bad spec: %w", err))
	}
	probe := len(os.Args) == 3
	if !probe && len(os.Args) < 5 {
		sandboxFail(fmt.Errorf("sandbox: no program"))
	}
	// The environment came as data: the sandbox runs as root with none of
	// it, and the task gets it only in the exec. The secret files are
	// written (on a tmpfs of the task's own) before the privileges go.
	var p envPayload
	if !probe {
		var err error
		if p, err = readEnv(os.Args[3], sandboxEnvFD); err != nil {
			sandboxFail(fmt.Errorf("sandbox: bad environment: %w", err))
		}
	}
	// Only stdin, stdout and stderr reach the program.
	unix.CloseRange(sandboxErrFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if os.Args[1] == sandboxArg && len(spec.Cgroups) > 0 {
		if err := joinCgroups(spec.Cgroups); err != nil {
			sandboxFail(err)
		}
		if spec.PIDNS {
			// The OOM killer takes the task's processes, never its init,
			// which must live to report how the task ended.
			os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0o644)
		}
	}
	if os.Args[1] == sandboxArg && spec.NetNS != "" {
		if err := enterNetNS(spec.NetNS); err != nil {
			sandboxFail(err)
		}
	}
	if os.Args[1] == sandboxArg && spec.MountNS {
		if err := spec.mount(p.Files); err != nil {
			sandboxFail(err)
		}
	}
	if os.Args[1] == sandboxArg && spec.PIDNS {
		syscall.Exit(runInit(p.Env, probe))
	}
	if err := spec.confine(); err != nil {
		sandboxFail(err)
	}
	if probe {
		syscall.Exit(0)
	}
	sandboxFail(execProgram(os.Args[4], os.Args[5:], p.Env, spec.RO))
}

// sandboxFail reports err to the supervisor (or, for a probe, on stderr)
// and exits 127, as a shell does for a program it cannot run.
func sandboxFail(err error) {
	f := os.NewFile(sandboxErrFD, "sandbox-err")
	if f == nil || len(os.Args) == 3 {
		f = os.Stderr
	}
	fmt.Fprintln(f, encodeStartError(err))
	syscall.Exit(127)
}

// confine drops the process's privileges on this thread, for the program
// it execs: the Landlock ruleset, built while every path may still be
// opened, then the task's user, no_new_privs, the ruleset enforced, and
// the working directory.
func (s sandboxSpec) confine() error {
	rfd, rflags := -1, uint32(0)
	if s.Landlock {
		var err error
		rfd, rflags, err = s.ruleset()
		if err != nil {
			return fmt.Errorf("sandbox: Landlock: %w", err)
		}
	}
	if s.UID >= 0 {
		if err := setIDs(s.UID, s.GID); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	if rfd >= 0 {
		if err := ll.LandlockRestrictSelf(rfd, rflags); err != nil {
			return fmt.Errorf("sandbox: landlock_restrict_self: %w", err)
		}
		unix.Close(rfd)
	}
	if s.Dir != "" {
		if err := unix.Chdir(s.Dir); err != nil {
			return fmt.Errorf("sandbox: working directory %s: %w", s.Dir, err)
		}
	}
	return nil
}

// mount makes the task's view of the filesystem, in its own mount
// namespace: the directories to bring back are opened first, then the data
// directory is covered and they are bound again at their own paths.
func (s sandboxSpec) mount(files map[string]map[string][]byte) error {
	fds := make([]int, len(s.Binds))
	for i, dir := range s.Binds {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("sandbox: open %s: %w", dir, err)
		}
		fds[i] = fd
	}
	// The sources of the task's mounts, opened before the data directory
	// (where volumes live) is covered.
	mfds := make([]int, len(s.Mounts))
	for i, m := range s.Mounts {
		fd, err := unix.Open(m.Src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("sandbox: open %s: %w", m.Src, err)
		}
		mfds[i] = fd
	}
	// The files to bind over the system's, opened likewise.
	ffds := make([]int, len(s.Files))
	for i, f := range s.Files {
		fd, err := unix.Open(f.Src, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("sandbox: open %s: %w", f.Src, err)
		}
		ffds[i] = fd
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV
	if s.PrivateTmp {
		for _, dir := range []string{"/tmp", "/dev/shm"} {
			if _, err := os.Stat(dir); err != nil {
				continue
			}
			opts := "mode=1777"
			if dir == "/dev/shm" && s.ShmBytes > 0 {
				opts += ",size=" + strconv.FormatInt(s.ShmBytes, 10)
			}
			if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
				return fmt.Errorf("sandbox: private %s: %w", dir, err)
			}
		}
	}
	for _, dir := range s.Hide {
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue // a link (/var/run), or under a directory hidden already
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", flags|unix.MS_NOEXEC, "mode=0755,size=1m"); err != nil {
			return fmt.Errorf("sandbox: hide %s: %w", dir, err)
		}
	}
	for i, dir := range s.Binds {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		src := "/proc/self/fd/" + strconv.Itoa(fds[i])
		if err := unix.Mount(src, dir, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("sandbox: bind %s: %w", dir, err)
		}
		unix.Close(fds[i])
	}
	for i, m := range s.Mounts {
		if err := bindAt(mfds[i], m); err != nil {
			return err
		}
		unix.Close(mfds[i])
	}
	if s.SecretsDir != "" {
		if err := writeSecrets(s.SecretsDir, files, s.UID, s.GID); err != nil {
			return err
		}
	}
	// The covering tmpfs only holds mount points: make it read-only.
	for _, dir := range s.Hide {
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags|unix.MS_NOEXEC, "mode=0755,size=1m")
		}
	}
	for i, f := range s.Files {
		if err := bindFile(ffds[i], f); err != nil {
			return err
		}
		unix.Close(ffds[i])
	}
	if s.HideProcs || s.PIDNS {
		// A /proc of this PID namespace (the host's, without one), where
		// other users' processes do not show. Without a PID namespace this
		// is best effort: where procfs refuses the option the task still
		// cannot read other users' process details (ptrace access rules).
		// With one it must work, since the task may write to this /proc.
		err := unix.Mount("proc", "/proc", "proc", flags|unix.MS_NOEXEC, "hidepid=invisible")
		if err != nil && s.PIDNS {
			return fmt.Errorf("sandbox: mount /proc of the PID namespace: %w", err)
		}
	}
	return nil
}

// bindFile binds the file open as fd over the file f.Dst, read-only. A
// system without f.Dst keeps it missing: the sandbox never creates files
// outside its own directories.
func bindFile(fd int, f bindMount) error {
	fi, err := os.Stat(f.Dst)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, f.Dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("sandbox: bind %s over %s: %w", f.Src, f.Dst, err)
	}
	const ro = unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("", f.Dst, "", ro, ""); err != nil {
		return fmt.Errorf("sandbox: remount %s read-only: %w", f.Dst, err)
	}
	return nil
}

// ruleset builds the Landlock ruleset: every filesystem access right the
// kernel knows is handled (so denied unless a rule grants it), and signals
// and abstract UNIX sockets are scoped to the task's own domain. Network
// access is not handled here.
func (s sandboxSpec) ruleset() (int, uint32, error) {
	cfg := landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS, Scoped: landlock.V7.Scoped}.BestEffort()
	rules := []landlock.Rule{
		landlock.RODirs(s.RO...).IgnoreIfMissing(),
		landlock.RWDirs(s.RW...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles(s.Devices...).WithIoctlDev().IgnoreIfMissing(),
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, err
	}
	if fd < 0 {
		return -1, 0, fmt.Errorf("the kernel offers nothing to restrict")
	}
	return fd, flags, nil
}

// setIDs drops to uid and gid with no supplementary groups, on this thread
// only (raw system calls, not the all-threads wrappers): the program that
// this thread execs inherits them, and the capabilities of root are gone
// with the switch.
func setIDs(uid, gid int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("sandbox: setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("sandbox: setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("sandbox: setresuid %d: %w", uid, e)
	}
	return nil
}

// check is filepath.Join's guard: every path in a spec is absolute
// and clean, so the sandbox never resolves one against its own directory.
func (s sandboxSpec) check() error {
	lists := [][]string{s.Hide, s.Binds, s.RW, s.RO, s.Devices, nonEmpty(s.NetNS)}
	for _, m := range append(slices.Clone(s.Mounts), s.Files...) {
		lists = append(lists, []string{m.Src, m.Dst})
	}
	for _, c := range s.Cgroups {
		lists = append(lists, []string{c.Dir})
	}
	if s.SecretsDir != "" {
		lists = append(lists, []string{s.SecretsDir})
	}
	for _, list := range lists {
		for _, p := range list {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return fmt.Errorf("sandbox path %q is not absolute and clean", p)
			}
		}
	}
	return nil
}

// enterNetNS moves the calling thread into the network namespace kept at
// path; the process's children inherit it.
func enterNetNS(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: network namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("sandbox: enter network namespace %s: %w", path, err)
	}
	return nil
}

func nonEmpty(p string) []string {
	if p == "" {
		return nil
	}
	return []string{p}
}
