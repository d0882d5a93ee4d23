package containertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Image is the busybox image that testPodman builds offline.
const Image = "localhost/gpufleet-test:busybox"

// Args are the global arguments that work on this kind of machine
// (no overlay, no crun, no CAP_SYS_RESOURCE for the default ulimits).
var Args = []string{"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs"}

var imageOnce struct {
	sync.Once
	err error
}

// Podman returns podman's path once the test image exists, importing
// it from a rootfs of /bin/busybox the first time. It skips the test when
// podman, runc or busybox is missing, or the server is not root, unless
// GPUFLEET_REQUIRE_PODMAN=1 makes that a failure.
func Podman(t testing.TB) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("GPUFLEET_REQUIRE_PODMAN") == "1" {
			t.Fatalf("GPUFLEET_REQUIRE_PODMAN=1: "+format, args...)
		}
		t.Skipf(format+" (apt-get install -y podman runc busybox-static)", args...)
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		skip("no podman")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		skip("no runc")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		skip("no /bin/busybox")
	}
	if os.Geteuid() != 0 {
		skip("containers need the server to be root")
	}
	imageOnce.Do(func() { imageOnce.err = buildImage(podman) })
	if imageOnce.err != nil {
		t.Fatalf("build the test image: %v", imageOnce.err)
	}
	return podman
}

func buildImage(podman string) error {
	check := exec.Command(podman, append(Args, "image", "exists", Image)...)
	if check.Run() == nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "gpufleet-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "tmp", "etc", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"sh", "echo", "cat", "ls", "env", "sleep", "id", "mkdir", "test", "[", "stat", "rm", "true", "false"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", name)); err != nil {
			return err
		}
	}
	tarball := filepath.Join(dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", root, "-cf", tarball, ".").CombinedOutput(); err != nil {
		return &importError{err, string(out)}
	}
	imp := exec.Command(podman, append(Args, "import", "--change", "ENV=PATH=/bin", tarball, Image)...)
	if out, err := imp.CombinedOutput(); err != nil {
		return &importError{err, string(out)}
	}
	return nil
}

type importError struct {
	err error
	out string
}

func (e *importError) Error() string { return "podman import: " + e.err.Error() + ": " + e.out }
