package local

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
)

// dirs are a workload's directories that its tasks may write, all under
// DataDir/workloads/<id>/ and kept across attempts.
type dirs struct {
	work       string // the default working directory and HOME
	checkpoint string // $GPUFLEET_CHECKPOINT_DIR
	usage      string // the simulated usage files, one per attempt
	tmp        string // $TMPDIR where the task has no private /tmp
}

func taskDirs(wdir string) dirs {
	return dirs{
		work:       filepath.Join(wdir, "work"),
		checkpoint: filepath.Join(wdir, "checkpoint"),
		usage:      filepath.Join(wdir, "usage"),
		tmp:        filepath.Join(wdir, "tmp"),
	}
}

func (d dirs) list() []string { return []string{d.work, d.checkpoint, d.usage, d.tmp} }

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

// sandbox returns the sandbox spec for a task, as JSON, or "" when tasks
// run unconfined. mounts are its volumes and datasets (which need a mount
// namespace); secrets is where its secret files are: the tmpfs that the
// sandbox mounts when inNS, else a directory under /dev/shm; "" for none.
func (e *Executor) sandbox(own dirs, uid, gid int, dir string, gpus []int, mounts []taskMount, secrets string, inNS bool) (string, error) {
	st := e.status
	if !st.Users && st.Landlock == 0 {
		return "", nil
	}
	spec := sandboxSpec{UID: uid, GID: gid, Dir: dir}
	rw := own.list()
	var ro []string
	for _, m := range mounts {
		spec.Mounts = append(spec.Mounts, bindMount{Src: m.src, Dst: m.dst, RO: m.ro})
		if m.ro {
			ro = append(ro, m.dst)
		} else {
			rw = append(rw, m.dst)
		}
	}
	if secrets != "" {
		ro = append(ro, secrets)
		if inNS {
			spec.SecretsDir = secrets
		}
	}
	if st.Users {
		spec.MountNS = true
		spec.PrivateTmp = true
		spec.HideProcs = true
		// /run holds the host's service sockets (and secrets, on some
		// hosts): the task gets an empty one, but for the NVIDIA
		// persistence daemon's socket.
		spec.Hide = []string{"/run", e.root}
		spec.Binds = append(existing([]string{"/run/nvidia-persistenced"}), own.list()...)
		rw = append(rw, "/tmp", "/dev/shm")
	}
	if st.Landlock > 0 {
		spec.Landlock = true
		spec.RW = rw
		spec.RO = append(e.iso.readOnly(), ro...)
		spec.Devices = devices(gpus)
	}
	if err := spec.check(); err != nil {
		return "", err
	}
	b, err := json.Marshal(spec)
	return string(b), err
}
