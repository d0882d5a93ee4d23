package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/spec"
)

// submitFlags holds submit's flags as typed; they are parsed into the
// workload after the file is read, so that only the flags given override it.
type submitFlags struct {
	file           string
	name           string
	team           string
	priority       string
	kind           string
	image          string
	gpus           string
	gpuMemory      string
	gpuModels      []string
	cpu            string
	memory         string
	env            []string
	labels         []string
	selector       []string
	replicas       int
	pool, region   string
	workdir        string
	maxRuntime     string
	gracePeriod    string
	idempotencyKey string
	follow         bool
	ports          []string // --port (open.go)
	readyPath      string   // --ready-path
	secretEnv      []string // --secret-env
	secretFiles    []string // --secret-file
	volumes        []string // --volume NAME:/path[:ro]
	mounts         []string // --mount DATASET:/path[:ro]
	array          string   // --array START-END[%MAX] (array.go)
}

func newSubmitCmd(e *env) *cobra.Command {
	var f submitFlags
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "submit [flags] [--] COMMAND [ARG...]",
		Short: "Submit a workload and print its ID",
		Long: `Submit a workload and print its ID.

The spec is read from -f first (YAML or JSON with the API's field names, '-'
for standard input); flags given on the command line override it, and the
command after the flags replaces the file's. Without --gpus, --gpu-memory or
-f the workload asks for one GPU. The spec is checked here, with the same
rules as the server's, before anything is sent.

Flags end at the first argument that is not a flag, so the command's own
flags need no '--'.

Sizes (--memory, --gpu-memory, and gpuMemoryMiB and memoryMiB in -f) take
MiB, GiB or TiB, also written M, G, T, Mi, Gi, Ti, MB, GB or TB, in any case.
All are powers of 1024: 20G = 20GB = 20GiB = 20480MiB (Kubernetes reads G and
GB as 10^9; gpufleet does not). A bare number is MiB.

Ports (--port, and ports in -f) are the ports the workload serves on, each
a number or NAME=NUMBER; the server proxies /w/ID/PORT/ to each for the
workload's team (gpufleet open prints the URL), and a notebook that declares
none gets 8888. In -f, ports is a list of numbers, "NAME=NUMBER" strings or
the API's {name, port} mappings.

--array START-END[%MAX] submits a job array in one request: a task, an
ordinary workload with env GPUFLEET_ARRAY_INDEX=<index> and
GPUFLEET_ARRAY_ID=<array>, for each index, all stored or none; at most MAX
of them run at once (the others wait with reason ArrayLimit). It prints the
array's ID; task i is ARRAYID-i. In -f, array: {start, end, maxRunning}.

In -f, command may also be one line ("command: python train.py --epochs 3"):
it is split into words as a shell would, but no shell runs it.`,
		Example: `  gpufleet submit --team research --gpus 2 python train.py --epochs 3
  gpufleet submit --gpus 0.25 --name notebook --kind notebook -- jupyter lab
  gpufleet submit --gpu-memory 20GiB --gpu-model H100 -- ./serve
  gpufleet submit --image ghcr.io/acme/serve:2 --kind service
  gpufleet submit --kind service --port http=8000 --gpus 0.5 -- ./serve
  gpufleet submit -f workload.yaml
  gpufleet submit --array 0-999%50 --gpus 1 -- python sweep.py`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			w, err := buildWorkload(cmd, e, &f, args)
			if err != nil {
				return err
			}
			if f.array != "" {
				if w.Array, err = spec.ParseArray(f.array); err != nil {
					return usagef("--array %v", err)
				}
			}
			if w.Array != nil && f.follow {
				return usagef("--follow follows one workload, not an array: wait for it with gpufleet wait ARRAYID")
			}
			if errs := spec.CheckWorkload(w); len(errs) > 0 {
				return withFlags(&api.Error{Code: api.CodeInvalid, Message: "invalid workload, nothing was submitted", Fields: errs}, cmd.Flags().Changed)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			c.OnWarning = func(msg string) { fmt.Fprintln(e.stderr, "warning: "+msg) }
			if w.Array != nil {
				_, err := submitArray(cmd.Context(), e, c, w, f.idempotencyKey, out)
				return withFlags(err, cmd.Flags().Changed)
			}
			got, err := c.SubmitWorkload(cmd.Context(), w, f.idempotencyKey)
			if err != nil {
				return withFlags(err, cmd.Flags().Changed)
			}
			if f.follow {
				// The ID goes to stderr: stdout is the workload's output.
				fmt.Fprintln(e.stderr, got.ID)
				return followToEnd(cmd.Context(), e, c, got.ID)
			}
			if ok, err := out.structured(e.stdout, got); ok {
				return err
			}
			_, err = fmt.Fprintln(e.stdout, got.ID)
			return err
		},
	}
	// Stop at the first non-flag argument: the rest is the workload's argv.
	cmd.Flags().SetInterspersed(false)
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "read the workload spec from a YAML or JSON file ('-' for standard input)")
	fl.StringVar(&f.name, "name", "", "workload name")
	fl.StringVar(&f.team, "team", "", "team the workload runs for (default: the server picks your only team)")
	fl.StringVar(&f.priority, "priority", "", "priority class")
	fl.StringVar(&f.kind, "kind", "", "job, service or notebook (default job)")
	fl.StringVar(&f.image, "image", "", "container image, for the kubernetes executor or a server with --container-runtime (default: the server's); with an image the command may be left out")
	fl.StringVar(&f.gpus, "gpus", "", "GPUs: a count (1, 2, 8) or a share of one GPU (0.5, 0.25) (default 1)")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "", "a share of one GPU by memory instead of --gpus, e.g. 20GiB or 20GB (the same: see Sizes)")
	fl.StringArrayVar(&f.gpuModels, "gpu-model", nil, "acceptable GPU model, e.g. H100 (repeatable)")
	fl.StringVar(&f.cpu, "cpu", "", "CPUs, e.g. 2 or 0.5")
	fl.StringVar(&f.memory, "memory", "", "host memory, e.g. 8G, 8GiB or 512MiB (see Sizes)")
	fl.StringArrayVar(&f.env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	fl.StringArrayVar(&f.labels, "label", nil, "label key=value (repeatable)")
	fl.IntVar(&f.replicas, "replicas", 0, "run a gang of this many replicas, each with the requested resources, all or nothing")
	fl.StringArrayVar(&f.selector, "node-selector", nil, "run only on nodes with this label key=value (repeatable)")
	fl.StringVar(&f.pool, "pool", "", "run only on nodes of this pool")
	fl.StringVar(&f.region, "region", "", "data residency: run only in these regions, REGION[,REGION...] (a hard constraint)")
	fl.StringVar(&f.workdir, "workdir", "", "working directory, relative to the workload's own directory")
	fl.StringVar(&f.maxRuntime, "max-runtime", "", "stop the workload after it has run this long, e.g. 1h (default no limit)")
	fl.StringVar(&f.gracePeriod, "grace-period", "", "time between SIGTERM and SIGKILL on cancel or preemption, e.g. 30s")
	fl.StringVar(&f.idempotencyKey, "idempotency-key", "", "a retry with the same key returns the first submission instead of a second workload")
	fl.StringArrayVar(&f.ports, "port", nil, "a port the workload serves on, PORT or NAME=PORT, e.g. 8888 or http=8000 (repeatable; the first is PORT, the service's URL)")
	fl.StringArrayVar(&f.secretEnv, "secret-env", nil, "a secret of the team whose keys become environment variables (repeatable)")
	fl.StringArrayVar(&f.secretFiles, "secret-file", nil, "a secret of the team whose keys become files $GPUFLEET_SECRETS_DIR/NAME/KEY, mode 0400 (repeatable)")
	fl.StringArrayVar(&f.volumes, "volume", nil, "mount a team volume, NAME:/path or NAME:/path:ro (repeatable; gpufleet create volume)")
	fl.StringArrayVar(&f.mounts, "mount", nil, "mount a dataset the server allows, read-only, DATASET:/path[:ro] (repeatable)")
	fl.StringVar(&f.readyPath, "ready-path", "", "an HTTP path the first port answers 2xx on once the workload is ready (/health); the proxy sends it nothing until then")
	fl.StringVar(&f.array, "array", "", "submit a job array, one task per index, START-END[%MAX] as Slurm's (0-999%50: 1000 tasks, at most 50 running at once); each task gets env GPUFLEET_ARRAY_INDEX and GPUFLEET_ARRAY_ID, and the array's ID is printed")
	fl.BoolVar(&f.follow, "follow", false, "then print the workload's output until it finishes and exit with its exit code, as wait does (the ID goes to stderr)")
	out = addOutputFlag(cmd, "id", outJSON, outYAML)
	return cmd
}

// buildWorkload reads -f, then applies the flags that were given and the
// command.
func buildWorkload(cmd *cobra.Command, e *env, f *submitFlags, args []string) (*api.Workload, error) {
	w := &api.Workload{}
	if f.file != "" {
		var err error
		if w, err = readWorkloadFile(e, f.file); err != nil {
			return nil, err
		}
	}
	set := cmd.Flags().Changed
	if set("name") {
		w.Name = f.name
	}
	if set("team") {
		w.Team = f.team
	}
	if set("priority") {
		w.Priority = f.priority
	}
	if set("kind") {
		w.Kind = f.kind
	}
	if set("image") {
		w.Image = f.image
	}
	var err error
	if w.Env, err = mergeKV(w.Env, f.env, "--env"); err != nil {
		return nil, err
	}
	if w.Labels, err = mergeKV(w.Labels, f.labels, "--label"); err != nil {
		return nil, err
	}
	for _, apply := range []func(*api.Workload, *submitFlags, func(string) bool) error{
		applyResourceFlags, applyPlacementFlags, applyRuntimeFlags, applyStorageFlags,
	} {
		if err := apply(w, f, set); err != nil {
			return nil, err
		}
	}
	if len(args) > 0 {
		w.Command = args
	}
	return w, nil
}

// applyResourceFlags sets what the workload asks for: GPUs (one whole GPU
// when neither the file nor a flag says), GPU memory, models, CPU, memory.
func applyResourceFlags(w *api.Workload, f *submitFlags, set func(string) bool) error {
	switch {
	case set("gpus"):
		q, err := quantity.ParseMilli(f.gpus)
		if err != nil {
			return usagef("--gpus %q: %v", f.gpus, err)
		}
		w.Resources.GPUs = q
		if !set("gpu-memory") {
			w.Resources.GPUMemoryMiB = 0 // the flag replaces the file's GPU ask
		}
	case f.file == "" && !set("gpu-memory"):
		w.Resources.GPUs = 1000
	}
	if set("gpu-memory") {
		m, err := quantity.ParseMemoryMiB(f.gpuMemory)
		if err != nil {
			return usagef("--gpu-memory %q: %v", f.gpuMemory, err)
		}
		w.Resources.GPUMemoryMiB = m
		if !set("gpus") {
			w.Resources.GPUs = 0
		}
	}
	if set("gpu-model") {
		w.Resources.GPUModels = f.gpuModels
	}
	if set("cpu") {
		q, err := quantity.ParseMilli(f.cpu)
		if err != nil {
			return usagef("--cpu %q: %v", f.cpu, err)
		}
		w.Resources.CPU = q
	}
	if set("memory") {
		m, err := quantity.ParseMemoryMiB(f.memory)
		if err != nil {
			return usagef("--memory %q: %v", f.memory, err)
		}
		w.Resources.MemoryMiB = m
	}
	return nil
}

// applyPlacementFlags sets where the workload may run: replicas, node
// selector, pool and regions.
func applyPlacementFlags(w *api.Workload, f *submitFlags, set func(string) bool) error {
	if set("replicas") {
		// 0 would be sent as absent (one replica): refuse it here, as the
		// server refuses "replicas": 0.
		if f.replicas < 1 {
			return usagef("--replicas %d: a gang has at least one replica", f.replicas)
		}
		w.Replicas = f.replicas
	}
	var err error
	if w.NodeSelector, err = mergeKV(w.NodeSelector, f.selector, "--node-selector"); err != nil {
		return err
	}
	if f.pool != "" {
		if w.NodeSelector == nil {
			w.NodeSelector = map[string]string{}
		}
		w.NodeSelector["gpufleet.io/pool"] = f.pool
	}
	if set("region") { // residency: the flag replaces the file's
		w.Residency = nil
		for _, r := range strings.Split(f.region, ",") {
			if r = strings.TrimSpace(r); r != "" {
				w.Residency = append(w.Residency, r)
			}
		}
	}
	return nil
}

// applyRuntimeFlags sets how the workload runs: working directory, limits
// on its time, ports, readiness, secrets.
func applyRuntimeFlags(w *api.Workload, f *submitFlags, set func(string) bool) error {
	var err error
	if set("workdir") {
		w.WorkingDir = f.workdir
	}
	if set("max-runtime") {
		if w.MaxRuntimeSeconds, err = parseSeconds(f.maxRuntime); err != nil {
			return usagef("--max-runtime %q: %v", f.maxRuntime, err)
		}
	}
	if set("grace-period") {
		if w.GracePeriodSeconds, err = parseSeconds(f.gracePeriod); err != nil {
			return usagef("--grace-period %q: %v", f.gracePeriod, err)
		}
	}
	if set("port") { // the flags replace the file's ports
		w.Ports = nil
		for _, s := range f.ports {
			p, err := parsePort(s)
			if err != nil {
				return usagef("--port %q: %v", s, err)
			}
			w.Ports = append(w.Ports, p)
		}
	}
	if set("ready-path") {
		w.ReadyPath = f.readyPath
	}
	if set("secret-env") {
		w.SecretEnv = f.secretEnv
	}
	if set("secret-file") {
		w.SecretFiles = f.secretFiles
	}
	return nil
}

// applyStorageFlags sets the workload's volumes and dataset mounts; each
// flag replaces what the file says.
func applyStorageFlags(w *api.Workload, f *submitFlags, set func(string) bool) error {
	if set("volume") { // the flags replace the file's volumes
		w.Volumes = nil
		for _, s := range f.volumes {
			name, path, ro, err := parseMountFlag(s)
			if err != nil {
				return usagef("--volume %q: %v", s, err)
			}
			w.Volumes = append(w.Volumes, api.VolumeMount{Name: name, Path: path, ReadOnly: ro})
		}
	}
	if set("mount") {
		w.Mounts = nil
		for _, s := range f.mounts {
			name, path, _, err := parseMountFlag(s)
			if err != nil {
				return usagef("--mount %q: %v", s, err)
			}
			if strings.HasSuffix(s, ":rw") {
				return usagef("--mount %q: a dataset is mounted read-only", s)
			}
			w.Mounts = append(w.Mounts, api.Mount{Dataset: name, Path: path})
		}
	}
	return nil
}

// parseMountFlag reads NAME:/path or NAME:/path:ro (or :rw).
func parseMountFlag(s string) (name, path string, readOnly bool, err error) {
	parts := strings.Split(s, ":")
	switch {
	case len(parts) == 3 && (parts[2] == "ro" || parts[2] == "rw"):
		readOnly = parts[2] == "ro"
	case len(parts) != 2:
		return "", "", false, fmt.Errorf("want NAME:/path or NAME:/path:ro")
	}
	name, path = parts[0], parts[1]
	if !core.ValidName(name) {
		return "", "", false, fmt.Errorf("%q is not a name (lowercase letters, digits and '-')", name)
	}
	if problem := core.CheckMountPath(path); problem != "" {
		return "", "", false, errors.New(problem)
	}
	return name, path, readOnly, nil
}

// readInput reads the file name, or standard input for "-" (at most 4
// MiB).
func readInput(e *env, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(e.stdin, 4<<20))
	}
	return os.ReadFile(name)
}

// readWorkloadFile reads a YAML or JSON workload spec (decodeWorkloadFile).
func readWorkloadFile(e *env, name string) (*api.Workload, error) {
	b, err := readInput(e, name)
	if err != nil {
		return nil, err
	}
	if name == "-" {
		name = "standard input"
	}
	w, err := decodeWorkloadFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return w, nil
}

// mergeKV adds KEY=VALUE pairs to m, replacing keys it already has.
func mergeKV(m map[string]string, pairs []string, flag string) (map[string]string, error) {
	if len(pairs) == 0 {
		return m, nil
	}
	out := maps.Clone(m)
	if out == nil {
		out = make(map[string]string, len(pairs))
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want KEY=VALUE", flag, p)
		}
		out[k] = v
	}
	return out, nil
}

// parseSeconds reads a duration such as 1h30m or a bare number of seconds.
func parseSeconds(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 90s, 30m or 2h")
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("want whole seconds")
	}
	return int64(d / time.Second), nil
}
