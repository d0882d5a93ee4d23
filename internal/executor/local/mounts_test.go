package local_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// teamUID is the user a team's tasks run as: the owner of the work
// directory of one of its workloads.
func teamUID(t *testing.T, dir string, id core.WorkloadID) int {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, "workloads", string(id), "work"))
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// A volume is shared by the workloads of its team: what one writes, the
// next reads, and it stays on the host, owned by the team's user.
func TestVolumeIsSharedByTheTeamsWorkloads(t *testing.T) {
	e, dir := fullyIsolated(t)
	removeMountPoint(t, "/mnt/gpufleet-test-vol")
	vol := []core.VolumeMount{{Name: "shared", Path: "/mnt/gpufleet-test-vol"}}
	w := task("vol-writer", "sh", "-c", `echo "from writer $(id -u)" > /mnt/gpufleet-test-vol/note`)
	w.Team, w.Volumes = "ml", vol
	if x := run(t, e, w); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("writer: %+v; log:\n%s", x, output(t, e, w.WorkloadID))
	}
	r := task("vol-reader", "sh", "-c", `cat /mnt/gpufleet-test-vol/note`)
	r.Team, r.Volumes = "ml", vol
	if x := run(t, e, r); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("reader: %+v; log:\n%s", x, output(t, e, r.WorkloadID))
	}
	uid := teamUID(t, dir, w.WorkloadID)
	if got, want := output(t, e, r.WorkloadID), "from writer "+strconv.Itoa(uid)+"\n"; got != want {
		t.Errorf("reader saw %q, want %q", got, want)
	}
	host := filepath.Join(dir, "volumes", "ml", "shared")
	fi, err := os.Stat(filepath.Join(host, "note"))
	if err != nil {
		t.Fatalf("the volume's file is not on the host: %v", err)
	}
	if got := int(fi.Sys().(*syscall.Stat_t).Uid); got != uid {
		t.Errorf("the volume's file is owned by %d, want the team's user %d", got, uid)
	}
	vi, _ := os.Stat(host)
	if vi.Mode().Perm() != 0o700 || int(vi.Sys().(*syscall.Stat_t).Uid) != uid {
		t.Errorf("the volume directory: mode %v owner %d, want 0700 and %d", vi.Mode().Perm(), vi.Sys().(*syscall.Stat_t).Uid, uid)
	}
	refs, err := e.ListVolumes(t.Context())
	if err != nil || len(refs) != 1 || refs[0] != (executor.VolumeRef{Team: "ml", Name: "shared"}) {
		t.Errorf("ListVolumes = %v, %v; want ml/shared", refs, err)
	}
}

// A read-only volume and a dataset can be read and not written.
func TestReadOnlyVolumeAndDataset(t *testing.T) {
	e, dir := fullyIsolated(t)
	removeMountPoint(t, "/mnt/gpufleet-w")
	removeMountPoint(t, "/mnt/gpufleet-ds")
	if err := e.EnsureVolume(t.Context(), "ml", "weights", 1<<20); err != nil {
		t.Fatal(err)
	}
	vdir := filepath.Join(dir, "volumes", "ml", "weights")
	if err := os.WriteFile(filepath.Join(vdir, "w.bin"), []byte("weights\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := t.TempDir()
	if err := os.Chmod(ds, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ds, "train.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tk := task("ro-mounts", "sh", "-c", `
cat /mnt/gpufleet-w/w.bin /mnt/gpufleet-ds/train.csv
if (echo x > /mnt/gpufleet-w/new) 2>/dev/null; then echo "VOLUME writable"; else echo "VOLUME read-only"; fi
if (echo x > /mnt/gpufleet-ds/new) 2>/dev/null; then echo "DATASET writable"; else echo "DATASET read-only"; fi
if rm /mnt/gpufleet-ds/train.csv 2>/dev/null; then echo "DATASET removable"; fi`)
	tk.Team = "ml"
	tk.Volumes = []core.VolumeMount{{Name: "weights", Path: "/mnt/gpufleet-w", ReadOnly: true}}
	tk.Datasets = []executor.Dataset{{Name: "train", HostPath: ds, Path: "/mnt/gpufleet-ds"}}
	if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("%+v; log:\n%s", x, output(t, e, tk.WorkloadID))
	}
	if got, want := output(t, e, tk.WorkloadID), "weights\na,b\nVOLUME read-only\nDATASET read-only\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	for _, p := range []string{filepath.Join(vdir, "new"), filepath.Join(ds, "new")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written through a read-only mount", p)
		}
	}
}

// Secret files are on a tmpfs of the task's own, mode 0400 and owned by
// its user, read-only; nothing of them is left on the host when it ends,
// and no command line holds a value.
func TestSecretFiles(t *testing.T) {
	e, dir := fullyIsolated(t)
	const value = "hf_s3cr3t-file-v4lue"
	tk := task("secret-files", "sh", "-c", `
d=$GPUFLEET_SECRETS_DIR
echo "MODE $(stat -c '%a %u' $d/hf/token)"
echo "FS $(stat -f -c %T $d)"
echo "VALUE $(cat $d/hf/token)"
echo "OTHER $(cat $d/hf/.env)"
if (echo x > $d/hf/token) 2>/dev/null; then echo "WRITE yes"; else echo "WRITE no"; fi
if chmod 644 $d/hf/token 2>/dev/null; then echo "CHMOD yes"; else echo "CHMOD no"; fi
sleep 1`)
	tk.Team = "ml"
	tk.SecretFiles = map[string]map[string][]byte{"hf": {"token": []byte(value), ".env": []byte("A=1")}}
	start(t, e, tk)
	waitOutput(t, e, tk.WorkloadID, "CHMOD")
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), value) {
			t.Errorf("%s holds a secret value", p)
		}
	}
	if x := waitExit(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("%+v; log:\n%s", x, output(t, e, tk.WorkloadID))
	}
	uid := teamUID(t, dir, tk.WorkloadID)
	got := map[string]string{}
	for _, l := range strings.Split(output(t, e, tk.WorkloadID), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = v
		}
	}
	want := map[string]string{"MODE": "400 " + strconv.Itoa(uid), "FS": "tmpfs", "VALUE": value, "OTHER": "A=1", "WRITE": "no", "CHMOD": "no"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	// Nothing of the secrets on the host's disks.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), value) && filepath.Base(p) != "log" {
				t.Errorf("%s holds the secret value", p)
			}
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir, "workloads", string(tk.WorkloadID), "secrets", "hf")); err == nil {
		t.Error("the secrets directory is on the host")
	}
	shm, _ := filepath.Glob("/dev/shm/gpufleet-secrets-*")
	for _, p := range shm {
		if b, _ := os.ReadFile(filepath.Join(p, "hf", "token")); string(b) == value {
			t.Errorf("%s is left in /dev/shm", p)
		}
	}
}

// Mount paths that would cover what the sandbox needs, or that are not
// absolute and clean, and secret names that are not plain, fail Start.
func TestStartRefusesBadMountsAndSecretNames(t *testing.T) {
	e, dir := fullyIsolated(t)
	for _, p := range []string{"/", "/proc", "/sys/x", "/dev", "/usr/local/data", "/etc", "/bin", "/lib", "/lib64",
		"/sbin", "/tmp", "/tmp/x", "/run", "/run/user", dir, filepath.Join(dir, "workloads"), filepath.Dir(dir),
		"data", "/data/../etc", "/data/", "/a:b"} {
		tk := task(core.WorkloadID("bad-mount"), "true")
		tk.Team = "ml"
		tk.Volumes = []core.VolumeMount{{Name: "v", Path: p}}
		err := e.Start(t.Context(), tk)
		if err == nil || !strings.Contains(err.Error(), "volumes[0].path") {
			t.Errorf("volume at %q: Start error %v, want one naming volumes[0].path", p, err)
		}
		tk.Volumes = nil
		tk.Datasets = []executor.Dataset{{Name: "d", HostPath: t.TempDir(), Path: p}}
		if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "datasets[0].path") {
			t.Errorf("dataset at %q: Start error %v, want one naming datasets[0].path", p, err)
		}
	}
	for _, host := range []string{dir, filepath.Join(dir, "workloads"), "/"} {
		tk := task("bad-dataset", "true")
		tk.Datasets = []executor.Dataset{{Name: "d", HostPath: host, Path: "/data"}}
		if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "data directory") {
			t.Errorf("dataset from %s: Start error %v", host, err)
		}
	}
	tk := task("bad-mount", "true")
	tk.Volumes = []core.VolumeMount{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data/b"}}
	if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Errorf("nested mounts: Start error %v", err)
	}
	for _, name := range []string{"../x", "a/b", ".", ".."} {
		tk := task("bad-secret", "true")
		tk.SecretFiles = map[string]map[string][]byte{"s": {name: []byte("v")}}
		if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "not a plain file name") {
			t.Errorf("secret key %q: Start error %v", name, err)
		}
		tk.SecretFiles = map[string]map[string][]byte{name: {"k": []byte("v")}}
		if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "not a plain file name") {
			t.Errorf("secret %q: Start error %v", name, err)
		}
	}
	for _, v := range []core.VolumeMount{{Name: "../x", Path: "/data"}, {Name: ".", Path: "/data"}} {
		tk := task("bad-volume", "true")
		tk.Team, tk.Volumes = "ml", []core.VolumeMount{v}
		if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "not a plain name") {
			t.Errorf("volume name %q: Start error %v", v.Name, err)
		}
	}
}

// VolumeUsage counts file sizes, follows no link and counts a hard-linked
// file once; DeleteVolume removes the volume but nothing a link in it
// points to.
func TestVolumeUsageAndDelete(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	ctx := t.Context()
	if err := e.EnsureVolume(ctx, "ml", "data", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.EnsureVolume(ctx, "ml", "data", 0); err != nil {
		t.Fatalf("EnsureVolume is not idempotent: %v", err)
	}
	if n, err := e.VolumeUsage(ctx, "ml", "data"); err != nil || n != 0 {
		t.Fatalf("empty volume: usage %d, %v", n, err)
	}
	refs, err := e.ListVolumes(ctx)
	if err != nil || len(refs) != 1 {
		t.Fatalf("ListVolumes = %v, %v", refs, err)
	}
	outside := t.TempDir()
	big := filepath.Join(outside, "big")
	if err := os.WriteFile(big, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	vdir := filepath.Join(dir, "volumes", "ml", "data")
	if err := os.MkdirAll(filepath.Join(vdir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(vdir, "a"), make([]byte, 1000), 0o600)
	os.WriteFile(filepath.Join(vdir, "sub", "b"), make([]byte, 234), 0o600)
	os.Link(filepath.Join(vdir, "a"), filepath.Join(vdir, "a-again"))
	os.Symlink(big, filepath.Join(vdir, "link"))
	os.Symlink(outside, filepath.Join(vdir, "dirlink"))
	if n, err := e.VolumeUsage(ctx, "ml", "data"); err != nil || n != 1234 {
		t.Errorf("usage %d, %v; want 1234", n, err)
	}
	if err := e.DeleteVolume(ctx, "ml", "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(vdir); err == nil {
		t.Error("the volume is still there")
	}
	if _, err := os.Stat(big); err != nil {
		t.Errorf("DeleteVolume removed what a link pointed to: %v", err)
	}
	if err := e.DeleteVolume(ctx, "ml", "data"); err != nil {
		t.Errorf("deleting a deleted volume: %v", err)
	}
	if refs, _ := e.ListVolumes(ctx); len(refs) != 0 {
		t.Errorf("ListVolumes after delete = %v", refs)
	}
	for _, bad := range []string{"..", "a/b", ""} {
		if err := e.EnsureVolume(ctx, "ml", bad, 0); err == nil {
			t.Errorf("EnsureVolume %q: no error", bad)
		}
	}
}

// removeMountPoint removes, once the test ends, the empty mount point that
// the sandbox made on the host.
func removeMountPoint(t *testing.T, p string) {
	t.Cleanup(func() { os.Remove(p) })
}

// Without a mount namespace (here: isolation disabled) secret files are in
// a directory of the attempt's own under /dev/shm, removed when it ends;
// volumes and datasets are refused.
func TestSecretFilesWithoutMountNamespace(t *testing.T) {
	e, err := local.New(local.Options{DataDir: t.TempDir(), Isolation: local.Isolation{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	tk := task("shm-secrets", "sh", "-c", `d=$GPUFLEET_SECRETS_DIR; echo "$d"; stat -c '%a' $d/s/k; stat -f -c %T $d; cat $d/s/k`)
	tk.SecretFiles = map[string]map[string][]byte{"s": {"k": []byte("v4lue")}}
	if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("%+v; log:\n%s", x, output(t, e, tk.WorkloadID))
	}
	lines := strings.Split(strings.TrimSpace(output(t, e, tk.WorkloadID)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "/dev/shm/gpufleet-secrets-") || lines[1] != "400" || lines[2] != "tmpfs" || lines[3] != "v4lue" {
		t.Fatalf("output %q", lines)
	}
	if _, err := os.Stat(lines[0]); !os.IsNotExist(err) {
		t.Errorf("%s is left after the end: %v", lines[0], err)
	}
	tk = task("shm-volume", "true")
	tk.Volumes = []core.VolumeMount{{Name: "v", Path: "/data"}}
	if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "volumes need the server to run as root: mount namespaces") {
		t.Errorf("a volume without a mount namespace: Start error %v", err)
	}
}

// ReadVolumeFile reads a regular file of the volume, within a bound; a
// path out of the volume, a link out of it, a FIFO and a file over the
// bound are refused.
func TestReadVolumeFileStaysInTheVolume(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	ctx := t.Context()
	if err := e.EnsureVolume(ctx, "ml", "prompts", 0); err != nil {
		t.Fatal(err)
	}
	vdir := filepath.Join(dir, "volumes", "ml", "prompts")
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("not yours"), 0o600)
	os.MkdirAll(filepath.Join(vdir, "sets"), 0o755)
	os.WriteFile(filepath.Join(vdir, "sets", "a.jsonl"), []byte(`{"prompt":"hi"}`+"\n"), 0o600)
	os.WriteFile(filepath.Join(vdir, "big"), make([]byte, 100), 0o600)
	os.Symlink(secret, filepath.Join(vdir, "link"))
	syscall.Mkfifo(filepath.Join(vdir, "fifo"), 0o600)
	if b, err := e.ReadVolumeFile(ctx, "ml", "prompts", "sets/a.jsonl", 1<<10); err != nil || string(b) != `{"prompt":"hi"}`+"\n" {
		t.Errorf("read %q, %v", b, err)
	}
	for _, tc := range []struct{ file, want string }{
		{"../../../../" + secret, "escape"},
		{"link", "escape"},
		{"fifo", "not a regular file"},
		{"big", "100 bytes"},
		{"none", "no such file"},
	} {
		if b, err := e.ReadVolumeFile(ctx, "ml", "prompts", tc.file, 50); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: read %q, %v; want an error saying %q", tc.file, b, err, tc.want)
		}
	}
	if _, err := e.ReadVolumeFile(ctx, "ml", "../x", "a", 50); err == nil {
		t.Error("a volume name that escapes was read")
	}
}
