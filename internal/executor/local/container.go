package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// Paths inside a container (see the package documentation, Containers).
const (
	containerWork       = "/workspace"
	containerCheckpoint = "/gpufleet/checkpoint"
	containerUsage      = "/gpufleet/usage"
	containerSecrets    = "/gpufleet/secrets"
)

// cleanupTimeout bounds the runtime's "rm -f" after a container task.
const cleanupTimeout = 30 * time.Second

// runtimeKind is the flavour of a container runtime's command line.
type runtimeKind int

const (
	runtimePodman runtimeKind = iota
	runtimeDocker
)

// containerRuntime is the configured runtime: its binary and the global
// arguments that go before every verb.
type containerRuntime struct {
	path string
	args []string
	kind runtimeKind
	// init: the runtime has an init to run as the container's PID 1
	// (docker's own; podman's catatonit, where installed).
	init bool
}

// podmanInits are where podman looks for catatonit by default.
var podmanInits = []string{"/usr/libexec/podman/catatonit", "/usr/local/libexec/podman/catatonit", "/usr/bin/catatonit"}

// newRuntime resolves Options.ContainerRuntime: a path or a name in PATH
// whose base name says its flavour (podman or docker).
func newRuntime(name string, args []string) (*containerRuntime, error) {
	if name == "" {
		return nil, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("containerRuntime %q: %w", name, err)
	}
	if p, err = filepath.Abs(p); err != nil {
		return nil, fmt.Errorf("containerRuntime %q: %w", name, err)
	}
	rt := &containerRuntime{path: p, args: slices.Clone(args)}
	switch base := filepath.Base(p); {
	case strings.Contains(base, "podman"):
		rt.kind = runtimePodman
		rt.init = len(existing(podmanInits)) > 0
	case strings.Contains(base, "docker"):
		rt.kind = runtimeDocker
		rt.init = true
	default:
		return nil, fmt.Errorf("containerRuntime %q: want a podman or docker binary", name)
	}
	return rt, nil
}

// RunsImages reports whether this executor runs workloads with an image
// (in containers, through Options.ContainerRuntime); without, the server
// must refuse them at submit.
func (e *Executor) RunsImages() bool { return e.rt != nil }

// containerName names an attempt's container.
func containerName(k key) string {
	return "gpufleet-" + string(k.id) + "-" + strconv.Itoa(k.attempt)
}

// removeArgv is the command that removes a container, whatever its state.
func (rt *containerRuntime) removeArgv(name string) []string {
	argv := append([]string{rt.path}, rt.args...)
	argv = append(argv, "rm", "-f")
	if rt.kind == runtimePodman {
		argv = append(argv, "--time", "0")
	}
	return append(argv, name)
}

// remove removes a leftover container (after a lost supervisor).
func (rt *containerRuntime) remove(name, path string) error {
	return runCleanup(rt.removeArgv(name), path)
}

// runCleanup runs argv (a runtime's "rm -f") with only PATH in its
// environment, for at most cleanupTimeout. "No such container" is success.
func runCleanup(argv []string, path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + path}
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(strings.ToLower(string(out)), "no such container") {
		return fmt.Errorf("remove container: %s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runtimeOnly are environment variables that the container runtime (root)
// would read itself, so a task may not set them: they would change what
// the runtime loads, runs or trusts. Prefixes end with '_'.
var runtimeOnly = []string{
	"PATH", "HOME", "TMPDIR", "TMP", "GCONV_PATH", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS",
	"NLSPATH", "LOCPATH", "TZDIR", "GODEBUG", "GOTRACEBACK", "GOGC", "GOMEMLIMIT", "GOMAXPROCS",
	"NOTIFY_SOCKET", "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
	"all_proxy", "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "REGISTRY_AUTH_FILE",
	"LD_", "MALLOC_", "GLIBC_", "CONTAINERS_", "CONTAINER_", "PODMAN_", "DOCKER_", "BUILDAH_",
	"STORAGE_", "XDG_", "DBUS_", "LISTEN_", "_CONTAINERS_", "REGISTRIES_",
}

func isRuntimeOnly(name string) bool {
	for _, r := range runtimeOnly {
		if name == r || (strings.HasSuffix(r, "_") && strings.HasPrefix(name, r)) {
			return true
		}
	}
	return false
}

// containerCommand builds the runtime's command line and environment for a
// task: env is the task's environment with container paths; mounts are
// its volumes and datasets; secrets the host directory of its secret files
// ("" for none). Values never go in argv: a variable is passed by name
// (-e NAME) and the runtime takes its value from its own environment, which
// holds the task's variables and the runtime's PATH. HOME, which the
// runtime would read, is passed with its value (the platform's, never a
// secret); a task that sets a variable the runtime reads (runtimeOnly) is
// refused.
func (e *Executor) containerCommand(t executor.Task, k key, own dirs, workDir string, env []string,
	mounts []taskMount, secrets, netns string, uid, gid int) (argv, rtEnv []string, err error) {
	rt := e.rt
	if problem := core.ImageReference(t.Image); problem != "" {
		return nil, nil, fmt.Errorf("image %s", problem)
	}
	if len(t.SecretEnv) > 0 {
		// A runtime keeps a container's environment in its state on disk,
		// after the container too: secrets go as files.
		return nil, nil, fmt.Errorf("secret environment variables are not given to containers (the runtime keeps a container's environment on disk): take the secrets as files (secretFiles)")
	}
	if uid < 0 {
		return nil, nil, fmt.Errorf("containers need per-team users (the server as root): this executor confines tasks with %s", e.status)
	}
	for _, name := range slices.Concat(slices.Collect(maps.Keys(t.Env)), slices.Collect(maps.Keys(t.SecretEnv))) {
		if isRuntimeOnly(name) {
			return nil, nil, fmt.Errorf("environment variable %s cannot be set for a container task: the container runtime, which runs as root, would read it", name)
		}
	}
	argv = append([]string{rt.path}, rt.args...)
	network := "host"
	if netns != "" {
		// The workload's own network namespace, as its processes' would be.
		network = "ns:" + netns
	}
	argv = append(argv, "run", "--rm", "--name", containerName(k),
		"--network", network,
		"--user", strconv.Itoa(uid)+":"+strconv.Itoa(gid),
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
	)
	if e.cg != nil {
		argv = append(argv, e.cg.containerArgs(e.limitsOf(t))...)
	}
	if rt.init {
		// An init as PID 1 passes SIGTERM on to the task, which as PID 1
		// would ignore it unless it handles it.
		argv = append(argv, "--init")
	}
	argv = append(argv,
		"-w", workDir,
		"-v", own.work+":"+containerWork,
		"-v", own.checkpoint+":"+containerCheckpoint,
		"-v", own.usage+":"+containerUsage,
	)
	for _, m := range mounts {
		v := m.src + ":" + m.dst
		if m.ro {
			v += ":ro"
		}
		argv = append(argv, "-v", v)
	}
	if secrets != "" {
		argv = append(argv, "-v", secrets+":"+containerSecrets+":ro")
	}
	for _, p := range append([]string{own.work, own.checkpoint, own.usage, secrets}, e.root) {
		if strings.Contains(p, ":") {
			return nil, nil, fmt.Errorf("the data directory %s holds ':', which a container runtime cannot mount", e.root)
		}
	}
	// Simulated GPUs (SimulatedUsage) have no device to pass.
	if gpus := gpuIndices(t.Assignments); len(gpus) > 0 && !e.simUsage {
		if rt.kind == runtimeDocker {
			ids := make([]string, len(gpus))
			for i, g := range gpus {
				ids[i] = strconv.Itoa(g)
			}
			// docker parses --gpus as CSV: a list needs the quotes.
			argv = append(argv, "--gpus", `"device=`+strings.Join(ids, ",")+`"`)
		} else {
			for _, g := range gpus {
				argv = append(argv, "--device", "nvidia.com/gpu="+strconv.Itoa(g))
			}
		}
	}
	rtEnv = []string{"PATH=" + e.rtPath}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH":
			// The image's own PATH applies.
		case name == "HOME":
			argv = append(argv, "-e", kv)
		case isRuntimeOnly(name):
			return nil, nil, fmt.Errorf("environment variable %s cannot be passed to a container", name)
		default:
			argv = append(argv, "-e", name)
			rtEnv = append(rtEnv, name+"="+value)
		}
	}
	if rt.kind == runtimeDocker {
		argv = append(argv, t.Image)
	} else {
		// The docker transport, said explicitly: podman reads nothing but
		// a registry's (or its store's) image of that name.
		argv = append(argv, "docker://"+t.Image)
	}
	argv = append(argv, t.Command...)
	return argv, rtEnv, nil
}

// containerRecord is attempt-N/container: the name of the attempt's
// container, so that a cleanup after a lost supervisor (or a restart)
// knows there is one to remove.
func containerRecord(adir string) string { return filepath.Join(adir, "container") }

// removeLeftoverContainer removes the attempt's container, if it ran one
// and it is still there.
func (e *Executor) removeLeftoverContainer(adir string) {
	b, err := os.ReadFile(containerRecord(adir))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			e.log.Warn("read container record", "dir", adir, "err", err)
		}
		return
	}
	name := strings.TrimSpace(string(b))
	if e.rt == nil || !strings.HasPrefix(name, "gpufleet-") {
		return
	}
	if err := e.rt.remove(name, e.rtPath); err != nil {
		e.log.Warn("remove leftover container", "container", name, "err", err)
	}
}
