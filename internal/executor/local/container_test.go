package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/executor/local/containertest"
)

// containerExecutor returns a fully isolating executor that runs images
// with podman.
func containerExecutor(t *testing.T) (*local.Executor, string, string) {
	t.Helper()
	podman := containertest.Podman(t)
	dir := t.TempDir()
	e, err := local.New(local.Options{DataDir: dir, ContainerRuntime: podman, ContainerArgs: containertest.Args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if !e.RunsImages() {
		t.Fatal("RunsImages is false with a container runtime")
	}
	if st := e.Isolation(); !st.Users {
		t.Skipf("no per-team users here: %s", st)
	}
	return e, dir, podman
}

// containers lists the names of every container podman knows.
func containers(t *testing.T, podman string) []string {
	t.Helper()
	out, err := exec.Command(podman, append(containertest.Args, "ps", "-a", "--format", "{{.Names}}")...).Output()
	if err != nil {
		t.Fatalf("podman ps: %v", err)
	}
	return strings.Fields(string(out))
}

// A container task sees its environment (a secret among it, its port),
// writes its checkpoint directory and a volume, reads a dataset it cannot
// write, finds its secret file with mode 0400, and exits with its code.
func TestContainerTask(t *testing.T) {
	e, dir, podman := containerExecutor(t)
	ds := t.TempDir()
	os.Chmod(ds, 0o755)
	if err := os.WriteFile(filepath.Join(ds, "train.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const secretEnv, secretFile = "env-s3cr3t-in-container", "file-s3cr3t-in-container"
	tk := executor.Task{WorkloadID: "ctr-task", Attempt: 1, Team: "ml", Image: containertest.Image, GracePeriod: 5 * time.Second,
		Command: []string{"sh", "-c", `
echo "TOKEN $TOKEN"
echo "PORT $PORT"
echo "HOME $HOME"
echo "PWD $(pwd)"
echo "UID $(id -u)"
echo "CKPT $GPUFLEET_CHECKPOINT_DIR"
echo saved > $GPUFLEET_CHECKPOINT_DIR/ck
echo kept > /vol/f
echo "DS $(cat /ds/train.csv)"
if (echo x > /ds/new) 2>/dev/null; then echo "DSWRITE yes"; else echo "DSWRITE no"; fi
echo "SMODE $(stat -c %a $GPUFLEET_SECRETS_DIR/hf/token)"
echo "SVALUE $(cat $GPUFLEET_SECRETS_DIR/hf/token)"
echo "OUT $GPUFLEET_OUTPUTS_FILE"
echo "accepted=3 unit=rows" >> $GPUFLEET_OUTPUTS_FILE
exit 7`},
		Ports:       []core.Port{{Port: 8888}},
		Env:         map[string]string{"TOKEN": secretEnv},
		SecretFiles: map[string]map[string][]byte{"hf": {"token": []byte(secretFile)}},
		Volumes:     []core.VolumeMount{{Name: "data", Path: "/vol"}},
		Datasets:    []executor.Dataset{{Name: "train", HostPath: ds, Path: "/ds"}},
	}
	x := run(t, e, tk)
	out := output(t, e, tk.WorkloadID)
	if x.ExitCode == nil || *x.ExitCode != 7 {
		t.Fatalf("exit %+v, want code 7; log:\n%s", x, out)
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			got[k] = v
		}
	}
	uid := teamUID(t, dir, tk.WorkloadID)
	want := map[string]string{
		"TOKEN": secretEnv, "HOME": "/workspace", "PWD": "/workspace", "UID": strconv.Itoa(uid),
		"CKPT": "/gpufleet/checkpoint", "DS": "a,b", "DSWRITE": "no", "SMODE": "400", "SVALUE": secretFile,
		"OUT": "/gpufleet/usage/outputs-attempt-1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if p, err := strconv.Atoi(got["PORT"]); err != nil || p <= 0 {
		t.Errorf("PORT %q", got["PORT"])
	} else if ep, ok := e.Endpoint(tk.WorkloadID, 1, 8888); !ok || !strings.HasSuffix(ep, ":"+got["PORT"]) {
		t.Errorf("Endpoint = %q, %v; want the port the task was given", ep, ok)
	}
	if x.Outputs == nil || x.Outputs.Accepted != 3 {
		t.Errorf("Outputs %+v, want 3 accepted", x.Outputs)
	}
	for p, want := range map[string]string{
		filepath.Join(dir, "workloads", "ctr-task", "checkpoint", "ck"): "saved\n",
		filepath.Join(dir, "volumes", "ml", "data", "f"):                "kept\n",
	} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ds, "new")); err == nil {
		t.Error("the container wrote its dataset")
	}
	shm, _ := filepath.Glob("/dev/shm/gpufleet-secrets-*")
	for _, p := range shm {
		if b, _ := os.ReadFile(filepath.Join(p, "hf", "token")); string(b) == secretFile {
			t.Errorf("%s is left after the end", p)
		}
	}
	for _, n := range containers(t, podman) {
		if n == "gpufleet-ctr-task-1" {
			t.Error("the container is left after the end")
		}
	}
}

// Stop ends a container task within its grace (the init passes SIGTERM on),
// no container is left, and no command line (podman's included) holds a
// secret value.
func TestContainerStop(t *testing.T) {
	e, _, podman := containerExecutor(t)
	const secret = "stop-s3cr3t-v4lue"
	tk := executor.Task{WorkloadID: "ctr-stop", Attempt: 2, Team: "ml", Image: containertest.Image,
		Command: []string{"sh", "-c", `echo "up $TOKEN"; sleep 60`},
		Env:     map[string]string{"TOKEN": secret}}
	start(t, e, tk)
	waitOutput(t, e, tk.WorkloadID, "up "+secret)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	sawPodman := false
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "gpufleet-ctr-stop-2") {
			sawPodman = true
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the secret: %q", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if !sawPodman {
		t.Error("no process runs the container gpufleet-ctr-stop-2")
	}
	began := time.Now()
	const grace = 3 * time.Second
	if err := e.Stop(t.Context(), tk.WorkloadID, tk.Attempt, grace); err != nil {
		t.Fatal(err)
	}
	x := waitExit(t, e, tk)
	if took := time.Since(began); took > grace+2*time.Second {
		t.Errorf("the stop took %s, grace %s", took, grace)
	}
	if x.ExitCode == nil && x.Signal == "" {
		t.Errorf("exit %+v", x)
	}
	for _, n := range containers(t, podman) {
		if n == "gpufleet-ctr-stop-2" {
			t.Error("the container is left after Stop")
		}
	}
}

// A container that ignores SIGTERM is killed after its grace, and the
// runtime's container is removed too.
func TestContainerKilledAfterGrace(t *testing.T) {
	e, _, podman := containerExecutor(t)
	tk := executor.Task{WorkloadID: "ctr-kill", Attempt: 1, Team: "ml", Image: containertest.Image,
		Command: []string{"sh", "-c", `trap '' TERM; echo up; while true; do sleep 1; done`}}
	start(t, e, tk)
	waitOutput(t, e, tk.WorkloadID, "up")
	began := time.Now()
	e.Stop(t.Context(), tk.WorkloadID, tk.Attempt, time.Second)
	x := waitExit(t, e, tk)
	if took := time.Since(began); took > 8*time.Second {
		t.Errorf("the kill took %s", took)
	}
	if x.Signal != "SIGKILL" && (x.ExitCode == nil || *x.ExitCode == 0) {
		t.Errorf("exit %+v, want a kill", x)
	}
	for _, n := range containers(t, podman) {
		if n == "gpufleet-ctr-kill-1" {
			t.Error("the container is left after the kill")
		}
	}
}

// A container task may not set what the runtime (root) reads from its
// environment, take secrets as variables (the runtime keeps a container's
// environment on disk), nor name an image that reads as an option or a
// transport.
func TestContainerRefuses(t *testing.T) {
	e, _, _ := containerExecutor(t)
	for _, tc := range []struct {
		tk   executor.Task
		want string
	}{
		{executor.Task{Image: containertest.Image, Env: map[string]string{"LD_PRELOAD": "/workspace/x.so"}}, "LD_PRELOAD"},
		{executor.Task{Image: containertest.Image, Env: map[string]string{"CONTAINERS_CONF": "/x"}}, "CONTAINERS_CONF"},
		{executor.Task{Image: containertest.Image, SecretEnv: map[string]string{"TOKEN": "v"}}, "secretFiles"},
		{executor.Task{Image: "--privileged"}, "not an image reference"},
		// Transports would make the root runtime read host paths into the
		// image store all teams share.
		{executor.Task{Image: "docker-archive:/srv/volumes/evil/v/evil.tar"}, "not an image reference"},
		{executor.Task{Image: "oci:private"}, "transport oci"},
	} {
		tc.tk.WorkloadID, tc.tk.Attempt, tc.tk.Team = "ctr-refused", 1, "ml"
		if err := e.Start(t.Context(), tc.tk); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start %+v: error %v, want %q", tc.tk, err, tc.want)
		}
	}
}

// When the supervisor of a container task is lost, the executor kills the
// runtime's client and removes the container by its name.
func TestContainerOfALostSupervisorIsRemoved(t *testing.T) {
	e, dir, podman := containerExecutor(t)
	tk := executor.Task{WorkloadID: "ctr-lost", Attempt: 1, Team: "ml", Image: containertest.Image,
		Command: []string{"sh", "-c", `echo up; sleep 60`}}
	start(t, e, tk)
	waitOutput(t, e, tk.WorkloadID, "up")
	p := readPidFile(t, dir, tk.WorkloadID, tk.Attempt)
	if err := syscall.Kill(p.ShimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	x := waitExit(t, e, tk)
	if x.Reason != local.ReasonLost {
		t.Errorf("exit %+v, want Lost", x)
	}
	for _, n := range containers(t, podman) {
		if n == "gpufleet-ctr-lost-1" {
			t.Error("the container of a lost supervisor is left")
		}
	}
}

// A container task is held to its attempt's limits as a process task is:
// its memory request is its memory limit, its CPU request its quota, and
// its processes are bounded, in a cgroup under the server's own.
func TestContainerHasTheAttemptsLimits(t *testing.T) {
	e, _, _ := containerExecutor(t)
	tk := executor.Task{WorkloadID: "ctr-limits", Attempt: 1, Team: "ml", Image: containertest.Image, GracePeriod: 5 * time.Second,
		Request: core.Request{MemoryMiB: 96, MilliCPU: 500},
		Command: []string{"sh", "-c", `
cat /proc/self/cgroup
for f in /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max; do [ -r $f ] && echo "MEM $(cat $f)"; done
for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do [ -r $f ] && echo "PIDS $(cat $f)"; done
true`},
	}
	x := run(t, e, tk)
	out := output(t, e, tk.WorkloadID)
	if x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("exit %+v; log:\n%s", x, out)
	}
	if !strings.Contains(out, "MEM "+strconv.Itoa(96<<20)+"\n") {
		t.Errorf("the container's memory limit is not its request of 96 MiB; log:\n%s", out)
	}
	if !strings.Contains(out, "PIDS "+strconv.Itoa(local.DefaultPidsMax)+"\n") {
		t.Errorf("the container's pids.max is not %d; log:\n%s", local.DefaultPidsMax, out)
	}
}
