package local

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// dirs are a workload's directories that its tasks may write, all under
// DataDir/workloads/<id>/ and kept across attempts.
type dirs struct {
	work       string // the default working directory
	home       string // $HOME: caches (pip, Triton, torch.compile, HuggingFace)
	checkpoint string // $GPUFLEET_CHECKPOINT_DIR
	usage      string // the simulated usage files, one per attempt
	tmp        string // $TMPDIR where the task has no private /tmp
}

func taskDirs(wdir string) dirs {
	return dirs{
		work:       filepath.Join(wdir, "work"),
		home:       filepath.Join(wdir, "home"),
		checkpoint: filepath.Join(wdir, "checkpoint"),
		usage:      filepath.Join(wdir, "usage"),
		tmp:        filepath.Join(wdir, "tmp"),
	}
}

func (d dirs) list() []string { return []string{d.work, d.home, d.checkpoint, d.usage, d.tmp} }

// ownDir creates dir, mode 0700, and gives it to uid and gid (unless -1).
// It refuses a dir that is a symbolic link: the task owns the directory
// above none of these, but a mistake there must not make the server chown
// what a link points to.
func ownDir(dir string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &os.PathError{Op: "prepare", Path: dir, Err: os.ErrInvalid}
	}
	if uid >= 0 {
		if err := os.Lchown(dir, uid, gid); err != nil {
			return err
		}
	}
	return os.Chmod(dir, 0o700)
}

// gpuIndices lists the indices of the GPUs a task was assigned, once each.
func gpuIndices(as []core.Assignment) []int {
	var out []int
	for _, a := range as {
		if !slices.Contains(out, a.GPUIndex) {
			out = append(out, a.GPUIndex)
		}
	}
	return out
}

// view is what a task's sandbox is made of, besides what the executor's
// isolation status gives every task.
type view struct {
	own      dirs
	uid, gid int
	dir      string // working directory
	gpus     []int  // indices of its GPUs
	mounts   []taskMount
	// secrets is where its secret files are: the tmpfs that the sandbox
	// mounts when inNS, else a directory under /dev/shm; "" for none.
	secrets string
	inNS    bool
	// shmBytes sizes its /dev/shm; files are bound over the system's
	// (its user in the user and group databases).
	shmBytes int64
	files    []bindMount
	// netns is its network namespace ("": the host's network); cgroups
	// its cgroups (none: no limits).
	netns   string
	cgroups []cgroupDir
}

// sandbox returns the sandbox spec for a task, or nil when tasks run
// unconfined.
func (e *Executor) sandbox(v view) (*sandboxSpec, error) {
	st := e.status
	if !st.Users && st.Landlock == 0 {
		return nil, nil
	}
	spec := sandboxSpec{UID: v.uid, GID: v.gid, Dir: v.dir}
	rw := v.own.list()
	var ro []string
	for _, m := range v.mounts {
		spec.Mounts = append(spec.Mounts, bindMount{Src: m.src, Dst: m.dst, RO: m.ro})
		if m.ro {
			ro = append(ro, m.dst)
		} else {
			rw = append(rw, m.dst)
		}
	}
	if v.secrets != "" {
		ro = append(ro, v.secrets)
		if v.inNS {
			spec.SecretsDir = v.secrets
		}
	}
	if st.Users {
		spec.MountNS = true
		spec.PIDNS = st.PIDNamespaces
		spec.PrivateTmp = true
		spec.ShmBytes = v.shmBytes
		spec.HideProcs = true
		// /run holds the host's service sockets (and secrets, on some
		// hosts): the task gets an empty one, but for the NVIDIA
		// persistence daemon's socket.
		spec.Hide = []string{"/run", e.root}
		spec.Binds = append(existing([]string{"/run/nvidia-persistenced"}), v.own.list()...)
		spec.Files = v.files
		spec.NetNS = v.netns
		spec.Cgroups = v.cgroups
		rw = append(rw, "/tmp", "/dev/shm")
		if spec.PIDNS {
			// The /proc of the task's own PID namespace, where a process
			// writes what the kernel lets it write about itself.
			rw = append(rw, "/proc")
		}
	}
	if st.Landlock > 0 {
		spec.Landlock = true
		spec.RW = rw
		spec.RO = append(e.iso.readOnly(), ro...)
		spec.Devices = devices(v.gpus)
	}
	if err := spec.check(); err != nil {
		return nil, err
	}
	return &spec, nil
}

// shmBytes is the size of a task's /dev/shm: 1 GiB, or its memory request
// when that is larger (DataLoader workers and NCCL pass tensors through
// it; the 64 MiB of a container's default is a classic failure).
func shmBytes(r core.Request) int64 {
	const floor = 1 << 30
	return max(floor, r.MemoryMiB*int64(r.Count())<<20)
}
