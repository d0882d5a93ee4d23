package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// A team volume is the directory DataDir/volumes/<team>/<name>/, mode 0700,
// owned by the team's user (with per-team users). Its size is what it
// holds, measured by VolumeUsage; nothing on this executor enforces the
// size asked for (the control loop compares and reports).

var _ executor.Volumes = (*Executor)(nil)

// volumeNamePattern is what a team or volume name must look like to be
// one component of a path here.
var volumeNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$`)

// maxUsageEntries bounds the walk of VolumeUsage.
const maxUsageEntries = 1 << 20

func (e *Executor) volumesDir() string { return filepath.Join(e.root, "volumes") }

// volumeDir returns DataDir/volumes/<team>/<name>, refusing names that are
// not plain.
func (e *Executor) volumeDir(team core.TeamName, name string) (string, error) {
	if team == "" {
		team = "default" // as for user IDs
	}
	if !volumeNamePattern.MatchString(string(team)) {
		return "", fmt.Errorf("volume team %q is not a plain name", team)
	}
	if !volumeNamePattern.MatchString(name) {
		return "", fmt.Errorf("volume name %q is not a plain name", name)
	}
	return filepath.Join(e.volumesDir(), string(team), name), nil
}

// EnsureVolume implements executor.Volumes: it makes the volume's
// directory, owned by the team's user when tasks run under per-team users.
// The size is not enforced here.
func (e *Executor) EnsureVolume(ctx context.Context, team core.TeamName, name string, sizeBytes int64) error {
	if _, err := e.ensureVolume(team, name); err != nil {
		return fmt.Errorf("ensure volume %s/%s: %w", team, name, err)
	}
	return nil
}

func (e *Executor) ensureVolume(team core.TeamName, name string) (string, error) {
	dir, err := e.volumeDir(team, name)
	if err != nil {
		return "", err
	}
	for _, d := range []string{e.volumesDir(), filepath.Dir(dir)} {
		if err := ownDir(d, -1, -1); err != nil {
			return "", err
		}
	}
	uid, gid := -1, -1
	if e.status.Users {
		if uid, err = e.uids.uid(team); err != nil {
			return "", err
		}
		gid = uid
	}
	if err := ownDir(dir, uid, gid); err != nil {
		return "", err
	}
	return dir, nil
}

// DeleteVolume implements executor.Volumes. The volume's contents are the
// task's, so nothing in it is followed: os.RemoveAll unlinks a symbolic
// link, never its target, and works below the directory by descriptor.
func (e *Executor) DeleteVolume(ctx context.Context, team core.TeamName, name string) error {
	dir, err := e.volumeDir(team, name)
	if err != nil {
		return fmt.Errorf("delete volume %s/%s: %w", team, name, err)
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("delete volume %s/%s: %w", team, name, err)
	}
	if !fi.IsDir() {
		// Not made by EnsureVolume: remove the name only.
		err = os.Remove(dir)
	} else {
		err = os.RemoveAll(dir)
	}
	if err != nil {
		return fmt.Errorf("delete volume %s/%s: %w", team, name, err)
	}
	return nil
}

// ListVolumes implements executor.Volumes: the directories under
// DataDir/volumes/<team>/ with plain names.
func (e *Executor) ListVolumes(ctx context.Context) ([]executor.VolumeRef, error) {
	teams, err := os.ReadDir(e.volumesDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []executor.VolumeRef
	for _, t := range teams {
		if !t.IsDir() || !volumeNamePattern.MatchString(t.Name()) {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(e.volumesDir(), t.Name()))
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		for _, v := range vols {
			if v.IsDir() && volumeNamePattern.MatchString(v.Name()) {
				out = append(out, executor.VolumeRef{Team: core.TeamName(t.Name()), Name: v.Name()})
			}
		}
	}
	return out, nil
}

// VolumeUsage implements executor.Volumes: the sizes of the files the
// volume holds (each hard-linked file once), found by a walk that follows
// no link and stops, with an error, past maxUsageEntries entries or when
// ctx is done.
func (e *Executor) VolumeUsage(ctx context.Context, team core.TeamName, name string) (int64, error) {
	dir, err := e.volumeDir(team, name)
	if err != nil {
		return -1, fmt.Errorf("volume usage %s/%s: %w", team, name, err)
	}
	var total int64
	entries := 0
	seen := map[uint64]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // removed by the task while we walk
			}
			return err
		}
		if entries++; entries > maxUsageEntries {
			return fmt.Errorf("more than %d files", maxUsageEntries)
		}
		if entries%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info() // lstat
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += fi.Size()
		return nil
	})
	if err != nil {
		return -1, fmt.Errorf("volume usage %s/%s: %w", team, name, err)
	}
	return total, nil
}

// reservedPaths are the paths a task's mounts may not be at or below: what
// the sandbox itself needs (with the read-only system paths and the data
// directory, see checkMountPath) and what a container task gets from the
// executor.
var reservedPaths = []string{
	"/proc", "/sys", "/dev", "/usr", "/etc", "/bin", "/sbin", "/tmp", "/run", "/var/run",
	"/boot", "/gpufleet",
}

// checkMountPath refuses a mount path that is not absolute and clean, that
// would cover what the sandbox needs (see reservedPaths; /lib*, the
// read-only system paths, the data directory and its parents), or that
// the container runtime could not parse.
func (e *Executor) checkMountPath(field, p string) error {
	if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%s %q: want an absolute, clean path", field, p)
	}
	if strings.ContainsAny(p, ":,\x00\n") {
		return fmt.Errorf("%s %q: a mount path may not hold ':', ',' or control characters", field, p)
	}
	if p == "/" {
		return fmt.Errorf("%s %q: cannot mount over the root directory", field, p)
	}
	if first, _, _ := strings.Cut(p[1:], "/"); strings.HasPrefix(first, "lib") {
		return fmt.Errorf("%s %q: would cover the system's libraries (/%s)", field, p, first)
	}
	reserved := append(append([]string{}, reservedPaths...), e.iso.readOnly()...)
	for _, r := range reserved {
		if within(p, r) {
			return fmt.Errorf("%s %q: would cover %s, which every task needs", field, p, r)
		}
	}
	if within(p, e.root) || within(e.root, p) {
		return fmt.Errorf("%s %q: would cover the server's data directory %s", field, p, e.root)
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// taskMount is a mount a task asked for: a volume or a dataset.
type taskMount struct {
	field string // "volumes[0]", for errors
	src   string
	dst   string
	ro    bool
}

// taskMounts checks a task's volumes and datasets and returns them as
// mounts; volumes never ensured before are made now (Start ensures them,
// with the team's owner), datasets must be existing directories.
func (e *Executor) taskMounts(t executor.Task) ([]taskMount, error) {
	var out []taskMount
	for i, v := range t.Volumes {
		field := fmt.Sprintf("volumes[%d]", i)
		if err := e.checkMountPath(field+".path", v.Path); err != nil {
			return nil, err
		}
		dir, err := e.ensureVolume(t.Team, v.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		out = append(out, taskMount{field, dir, v.Path, v.ReadOnly})
	}
	for i, d := range t.Datasets {
		field := fmt.Sprintf("datasets[%d]", i)
		if err := e.checkMountPath(field+".path", d.Path); err != nil {
			return nil, err
		}
		if !filepath.IsAbs(d.HostPath) || filepath.Clean(d.HostPath) != d.HostPath || strings.ContainsAny(d.HostPath, ":,\x00\n") {
			return nil, fmt.Errorf("%s: dataset %s: host path %q: want an absolute, clean path without ':' or ','", field, d.Name, d.HostPath)
		}
		if within(d.HostPath, e.root) || within(e.root, d.HostPath) {
			return nil, fmt.Errorf("%s: dataset %s: host path %s would expose the server's data directory %s", field, d.Name, d.HostPath, e.root)
		}
		if fi, err := os.Stat(d.HostPath); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%s: dataset %s: host path %s is not a directory", field, d.Name, d.HostPath)
		}
		out = append(out, taskMount{field, d.HostPath, d.Path, true})
	}
	for i, a := range out {
		for _, b := range out[:i] {
			if within(a.dst, b.dst) || within(b.dst, a.dst) {
				return nil, fmt.Errorf("%s.path %s overlaps %s.path %s", a.field, a.dst, b.field, b.dst)
			}
		}
	}
	return out, nil
}

// ReadVolumeFile reads a file of a team volume, at most limit bytes (an
// acceptance load stage's requests): the path is relative to the volume
// and confined to it (os.Root: no "..", no link out of it), and must name
// a regular file no larger than limit. The volume's contents are the
// task's, so the file is opened without blocking (a FIFO is refused).
func (e *Executor) ReadVolumeFile(ctx context.Context, team core.TeamName, name, file string, limit int64) ([]byte, error) {
	dir, err := e.volumeDir(team, name)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("volume %s/%s holds nothing yet", team, name)
	} else if err != nil {
		return nil, fmt.Errorf("volume %s/%s: %w", team, name, err)
	}
	defer root.Close()
	f, err := root.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, cause(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %v", file, cause(err))
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", file)
	case fi.Size() > limit:
		return nil, fmt.Errorf("%s is %d bytes; at most %d are read", file, fi.Size(), limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
