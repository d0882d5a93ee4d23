package local_test

// Attacks found in review of issue 17 (volumes, datasets, secret files,
// containers) that still succeed: each test fails until the production
// code is fixed. Not committed (CI would fail); see the review report.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/executor/local/containertest"
)

// The sandbox makes a mount point with os.MkdirAll, as root, on the host's
// filesystem (a mount namespace does not give it a filesystem of its own),
// following every symbolic link on the way. A link that anyone who can
// write a shared directory (/var/tmp, a user's home, a task confined
// without Landlock) left there sends the server's mkdir anywhere: here
// into a root-only directory; with a link to /etc, it makes /etc/nologin
// (which locks every other user out of the machine) or covers a reserved
// path in the task's view, past checkMountPath's lexical test.
func TestAttackMountPointFollowsPlantedSymlink(t *testing.T) {
	e, _ := fullyIsolated(t)
	target, err := os.MkdirTemp("/var/tmp", "gpufleet-review-target-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(target) })
	if err := os.Chmod(target, 0o700); err != nil { // root's alone
		t.Fatal(err)
	}
	link := target + "-link"
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })

	tk := task("attack-mkdir-link", "true")
	tk.Team = "ml"
	tk.Volumes = []core.VolumeMount{{Name: "v", Path: link + "/made-by-root"}}
	if err := e.Start(t.Context(), tk); err == nil {
		waitExit(t, e, tk)
	}
	if fi, err := os.Lstat(filepath.Join(target, "made-by-root")); err == nil {
		t.Errorf("the server made %s (%v) in a root-only directory by following the link %s -> %s: "+
			"mount points must be made without following links (openat2 RESOLVE_NO_SYMLINKS, or refuse)",
			filepath.Join(target, "made-by-root"), fi.Mode(), link, target)
	}
}

// A container's environment (secretEnv values among it) is in podman's
// container config, which podman keeps in its database and the
// container's userdata under its graph root, on disk, while the
// container exists: secret values must never be written to a disk. The
// executor refuses secret variables for containers (secret files only).
func TestAttackContainerSecretEnvOnDisk(t *testing.T) {
	e, _, podman := containerExecutor(t)
	const value = "review-s3cr3t-env-on-disk-9f3a"
	tk := executor.Task{WorkloadID: "attack-ctr-env", Attempt: 1, Team: "ml", Image: containertest.Image, GracePeriod: 5 * time.Second,
		Command: []string{"sh", "-c", `echo up; sleep 5`}}
	tk.SecretEnv = map[string]string{"TOKEN": value}
	if err := e.Start(t.Context(), tk); err != nil {
		if !strings.Contains(err.Error(), "secretFiles") {
			t.Fatalf("Start refused, but not saying to take the secrets as files: %v", err)
		}
		return // refused: the value never reaches the runtime
	}
	waitOutput(t, e, tk.WorkloadID, "up")
	root := graphRoot(t, podman)
	out, _ := exec.Command("grep", "-rlsa", "--", value, root).Output()
	e.Stop(t.Context(), tk.WorkloadID, tk.Attempt, 0)
	waitExit(t, e, tk)
	if files := strings.Fields(string(out)); len(files) > 0 {
		t.Errorf("a secretEnv value is on disk under podman's graph root %s while the container runs: %v", root, files)
	}
	after, _ := exec.Command("grep", "-rlsa", "--", value, root).Output()
	if files := strings.Fields(string(after)); len(files) > 0 {
		t.Errorf("a secretEnv value is still on disk after the container is removed: %v", files)
	}
}

// graphRoot is podman's storage directory (on disk).
func graphRoot(t *testing.T, podman string) string {
	t.Helper()
	out, err := exec.Command(podman, append(containertest.Args, "info", "--format", "{{.Store.GraphRoot}}")...).Output()
	if err != nil {
		t.Fatalf("podman info: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// An image reference may name a transport (oci:, dir:, docker-archive:,
// oci-archive:, ...) with a host path: the runtime, as root, loads the
// image from anywhere on the host. Both the API's imageRE and the
// executor's check let "oci:/var/lib/gpufleet/volumes/<team>/<volume>"
// through: here a task of team evil runs the image team ml keeps in its
// volume (its private code and weights), which evil cannot read.
func TestAttackContainerImageTransportReadsAnotherTeamsVolume(t *testing.T) {
	podman := containertest.Podman(t)
	dir, err := os.MkdirTemp("", "gpufleet-review-") // lower case: podman names an oci: image after its path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e, err := local.New(local.Options{DataDir: dir, ContainerRuntime: podman, ContainerArgs: containertest.Args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if st := e.Isolation(); !st.Users {
		t.Skipf("no per-team users here: %s", st)
	}
	if err := e.EnsureVolume(t.Context(), "ml", "images", 1<<30); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(dir, "volumes", "ml", "images", "private")
	if out, err := exec.Command(podman, append(containertest.Args, "save", "--format", "oci-dir", "-o", layout, containertest.Image)...).CombinedOutput(); err != nil {
		t.Fatalf("podman save: %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command(podman, append(slicesClone(containertest.Args), "rmi", "-f", "localhost"+layout)...).Run()
	})
	tk := executor.Task{WorkloadID: "attack-ctr-oci", Attempt: 1, Team: "evil", Image: "oci:" + layout, GracePeriod: 5 * time.Second,
		Command: []string{"sh", "-c", `echo "RAN ml's image as $(id -u)"`}}
	if err := e.Start(t.Context(), tk); err != nil {
		t.Logf("refused: %v", err)
		return
	}
	x := waitExit(t, e, tk)
	t.Logf("exit %+v; log:\n%s", x, readLog(t, e, tk.WorkloadID))
	if out := output(t, e, tk.WorkloadID); strings.Contains(out, "RAN ml's image") {
		t.Errorf("a task of team evil ran the image in team ml's volume (%s) through the oci: transport: %+v %q", layout, x, out)
	}
}

// The runtime's image store is shared by every team and podman runs an
// image it has under the name asked for without pulling (pull policy
// "missing"). A docker-archive: reference loads an archive from a team's
// own volume under the names its manifest gives (RepoTags): team evil
// plants an image as docker.io/library/review-victim:1, and team ml's next
// task that names that image runs evil's bytes, with ml's user, volumes
// and secrets.
func TestAttackContainerImagePoisonsSharedStore(t *testing.T) {
	podman := containertest.Podman(t)
	dir, err := os.MkdirTemp("", "gpufleet-review-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e, err := local.New(local.Options{DataDir: dir, ContainerRuntime: podman, ContainerArgs: containertest.Args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if st := e.Isolation(); !st.Users {
		t.Skipf("no per-team users here: %s", st)
	}
	pm := func(args ...string) (string, error) {
		out, err := exec.Command(podman, append(slicesClone(containertest.Args), args...)...).CombinedOutput()
		return string(out), err
	}
	const victim = "docker.io/library/review-victim:1"
	pm("rmi", "-f", victim)
	t.Cleanup(func() { pm("rmi", "-f", victim) })
	// What evil's task could make in its own volume (a docker-archive is
	// a tar of JSON and layers); made here with podman for brevity.
	if err := e.EnsureVolume(t.Context(), "evil", "v", 1<<30); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "volumes", "evil", "v", "evil.tar")
	if out, err := pm("tag", containertest.Image, victim); err != nil {
		t.Fatalf("podman tag: %v %s", err, out)
	}
	if out, err := pm("save", "--format", "docker-archive", "-o", archive, victim); err != nil {
		t.Fatalf("podman save: %v %s", err, out)
	}
	if out, err := pm("untag", containertest.Image, victim); err != nil {
		t.Fatalf("podman untag: %v %s", err, out)
	}
	if _, err := pm("image", "exists", victim); err == nil {
		t.Fatal("the victim's image name is still in the store")
	}
	tk := executor.Task{WorkloadID: "attack-ctr-poison", Attempt: 1, Team: "evil", Image: "docker-archive:" + archive, GracePeriod: 5 * time.Second,
		Command: []string{"true"}}
	if err := e.Start(t.Context(), tk); err != nil {
		t.Logf("refused: %v", err)
		return
	}
	x := waitExit(t, e, tk)
	t.Logf("evil's task: %+v; log:\n%s", x, readLog(t, e, tk.WorkloadID))
	if _, err := pm("image", "exists", victim); err == nil {
		t.Errorf("a task of team evil put an image named %s in the store every team's containers run from "+
			"(a team that names it runs evil's image without a pull)", victim)
		v := executor.Task{WorkloadID: "victim-ctr", Attempt: 1, Team: "ml", Image: victim, GracePeriod: 5 * time.Second,
			Command: []string{"sh", "-c", `echo "ml runs evil's image as $(id -u)"`}}
		start(t, e, v)
		waitExit(t, e, v)
		t.Logf("team ml's task of %s (no registry reachable here): %q", victim, output(t, e, v.WorkloadID))
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
