package local

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Secret files ($GPUFLEET_SECRETS_DIR/<secret>/<key>, mode 0400, owned by
// the task's user) are never written to a disk. In a mount namespace the
// sandbox mounts a tmpfs of the task's own at the workload's secrets/ path
// (inside the data directory, so it exists only in the task's view), writes
// the values it got on the environment pipe and makes the tmpfs read-only
// before it drops its privileges; the tmpfs goes with the namespace when
// the task ends. Otherwise (no root, or a container) Start writes them in
// a fresh 0700 directory under /dev/shm, recorded in attempt-N/secrets-dir
// and removed when the attempt's end is delivered.

// shmSecretsPrefix starts the name of every secrets directory under
// /dev/shm; cleanup removes nothing else.
const shmSecretsPrefix = "gpufleet-secrets-"

// shmDir is where secrets go without a mount namespace (a variable for
// nothing but clarity: it is always /dev/shm).
const shmDir = "/dev/shm"

// checkSecretFiles refuses secret and key names that are not one plain path
// component (the API checks them too; the executor does not trust it).
func checkSecretFiles(files map[string]map[string][]byte) error {
	for secret, keys := range files {
		if err := plainName("secretFiles", secret); err != nil {
			return err
		}
		for k := range keys {
			if err := plainName("secretFiles["+secret+"]", k); err != nil {
				return err
			}
		}
	}
	return nil
}

// plainName refuses a name that is not one path component.
func plainName(field, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%s: %q is not a plain file name", field, name)
	}
	return nil
}

// secretsSize is the size of the tmpfs that holds files: their bytes, a
// page per file and directory, and some room.
func secretsSize(files map[string]map[string][]byte) int {
	n := 64 << 10
	for _, keys := range files {
		n += 4096
		for _, v := range keys {
			n += 4096 + len(v)
		}
	}
	return n
}

// writeSecrets mounts a tmpfs at dir and writes files there, owned by uid
// and gid (unless -1), then remounts it read-only. It runs in the
// sandbox, as root, in the task's mount namespace.
func writeSecrets(dir string, files map[string]map[string][]byte, uid, gid int) error {
	if err := checkSecretFiles(files); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sandbox: secrets: %w", err)
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	opts := "mode=0700,size=" + strconv.Itoa(secretsSize(files))
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("sandbox: secrets tmpfs at %s: %w", dir, err)
	}
	if err := fillSecrets(dir, files, uid, gid); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, opts); err != nil {
		return fmt.Errorf("sandbox: secrets read-only: %w", err)
	}
	return nil
}

// fillSecrets writes files under dir, which it gives (and every directory
// and file it makes) to uid and gid unless they are -1: directories 0500,
// files 0400.
func fillSecrets(dir string, files map[string]map[string][]byte, uid, gid int) error {
	own := func(p string, mode os.FileMode) error {
		if uid >= 0 {
			if err := os.Lchown(p, uid, gid); err != nil {
				return err
			}
		}
		return os.Chmod(p, mode)
	}
	for _, secret := range slices.Sorted(maps.Keys(files)) {
		sdir := filepath.Join(dir, secret)
		if err := os.Mkdir(sdir, 0o700); err != nil {
			return fmt.Errorf("secret %s: %w", secret, err)
		}
		for key, v := range files[secret] {
			p := filepath.Join(sdir, key)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o400)
			if err != nil {
				return fmt.Errorf("secret %s key %s: %w", secret, key, err)
			}
			_, werr := f.Write(v)
			if err := f.Close(); werr == nil {
				werr = err
			}
			if werr == nil {
				werr = own(p, 0o400)
			}
			if werr != nil {
				return fmt.Errorf("secret %s key %s: %w", secret, key, werr)
			}
		}
		if err := own(sdir, 0o500); err != nil {
			return fmt.Errorf("secret %s: %w", secret, err)
		}
	}
	return own(dir, 0o500)
}

// shmSecrets writes files in a new directory under /dev/shm (a tmpfs),
// owned by uid and gid unless -1, records its path in the attempt's
// directory, and returns it.
func shmSecrets(adir string, files map[string]map[string][]byte, uid, gid int) (string, error) {
	if err := checkSecretFiles(files); err != nil {
		return "", err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(shmDir, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return "", fmt.Errorf("secret files need %s to be a tmpfs (they are never written to a disk)", shmDir)
	}
	dir, err := os.MkdirTemp(shmDir, shmSecretsPrefix)
	if err != nil {
		return "", fmt.Errorf("secret files: %w", err)
	}
	if err := os.WriteFile(filepath.Join(adir, "secrets-dir"), []byte(dir), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := fillSecrets(dir, files, uid, gid); err != nil {
		removeShmSecrets(adir)
		return "", fmt.Errorf("secret files: %w", err)
	}
	return dir, nil
}

// removeShmSecrets removes the attempt's secrets directory under /dev/shm,
// if it has one; the record names nothing but such a directory.
func removeShmSecrets(adir string) error {
	rec := filepath.Join(adir, "secrets-dir")
	b, err := os.ReadFile(rec)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	dir := string(b)
	if filepath.Dir(dir) != shmDir || !strings.HasPrefix(filepath.Base(dir), shmSecretsPrefix) {
		return fmt.Errorf("%s names %q, not a secrets directory", rec, dir)
	}
	// RemoveAll never follows a link that the task left there.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Remove(rec)
}

// bindAt binds the directory open at fd at m.Dst (made if missing), with
// nosuid and nodev, read-only when m.RO. It is not recursive: a mount
// below the source does not come along (and so cannot stay writable under
// a read-only bind).
func bindAt(fd int, m bindMount) error {
	dst, err := mountPoint(m.Dst)
	if err != nil {
		return fmt.Errorf("sandbox: mount point %s: %w", m.Dst, err)
	}
	defer unix.Close(dst)
	// Mounted on the descriptor of the directory made, not on its path,
	// which a link could redirect between the two.
	at := "/proc/self/fd/" + strconv.Itoa(dst)
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, at, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("sandbox: bind %s at %s: %w", m.Src, m.Dst, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if m.RO {
		flags |= unix.MS_RDONLY
	}
	// The mount, opened again without following links, is what is made
	// read-only.
	mounted, err := mountPoint(m.Dst)
	if err != nil {
		return fmt.Errorf("sandbox: mount point %s: %w", m.Dst, err)
	}
	defer unix.Close(mounted)
	if err := unix.Mount("", "/proc/self/fd/"+strconv.Itoa(mounted), "", flags, ""); err != nil {
		return fmt.Errorf("sandbox: remount %s (read-only %t): %w", m.Dst, m.RO, err)
	}
	return nil
}

// mountPoint opens the directory at the absolute path p, making each
// missing component (mode 0755, as root, on the host's filesystem), one
// at a time from /, without following any symbolic link: a link planted on
// the way (in /var/tmp, a home directory) fails the start instead of
// making the server create a directory where the link points.
func mountPoint(p string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		if part == "" || part == "." || part == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("%q is not a clean absolute path", p)
		}
		if err := unix.Mkdirat(fd, part, 0o755); err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return -1, err
		}
		next, err := unix.Openat2(fd, part, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH})
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("%s: %w (a mount point is made without following links)", part, err)
		}
		fd = next
	}
	return fd, nil
}
