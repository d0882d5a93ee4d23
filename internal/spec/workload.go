package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// dirPartRE is one element of a workload's working directory.
var dirPartRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// problems collects field problems in the order they are found; the
// checks of one spec's sections are its methods.
type problems api.FieldErrors

func (p *problems) add(field, format string, args ...any) {
	(*api.FieldErrors)(p).Add(field, format, args...)
}

// CheckWorkload checks a workload spec as submitted and returns every
// problem, each naming its field. It needs no server state: whether the
// team or the priority class exists is checked by the server. The CLI runs
// the same check before it sends anything. The sections are checked in the
// order of the spec's fields.
func CheckWorkload(w *api.Workload) []api.FieldError {
	var p problems
	p.identity(w)
	p.resources(w)
	p.program(w)
	p.lifetime(w)
	p.ports(w.Ports)
	p.secrets(w)
	p = append(p, ResidencyErrors(w.Residency)...)
	p.storage(w)
	if w.Network != nil {
		p = append(p, CheckNetwork("network", w.Network)...)
	}
	p.readyPath(w)
	p.labels("labels", w.Labels)
	p.labels("nodeSelector", w.NodeSelector)
	p.serverOwned(w)
	return p
}

// identity checks the names: the workload's, its team's, its priority
// class's, and its kind.
func (p *problems) identity(w *api.Workload) {
	if w.Name != "" && !core.ValidName(w.Name) {
		p.add("name", "must be lowercase letters, digits and '-', starting and ending with a letter or digit, at most %d characters", core.MaxNameLen)
	}
	if w.Team != "" && !core.ValidName(w.Team) {
		p.add("team", "is not a valid team name")
	}
	if w.Priority != "" && !core.ValidName(w.Priority) {
		p.add("priority", "is not a valid priority class name")
	}
	switch w.Kind {
	case "", api.KindJob, api.KindService, api.KindNotebook:
	default:
		p.add("kind", "must be one of job, service, notebook, not %q", w.Kind)
	}
}

// resources checks what each replica asks for, the array and the replicas.
func (p *problems) resources(w *api.Workload) {
	r := w.Resources
	switch {
	case r.GPUs < 0:
		p.add("resources.gpus", "must not be negative")
	case r.GPUs > 1000 && r.GPUs%1000 != 0:
		p.add("resources.gpus", "%s GPUs: above one GPU the count must be whole (1, 2, ... %d); fractions are for sharing a single GPU", r.GPUs, MaxGPUsPerNode)
	case r.GPUs > MaxGPUsPerNode*1000:
		p.add("resources.gpus", "at most %d GPUs per workload", MaxGPUsPerNode)
	}
	if w.Array != nil {
		*p = append(*p, CheckArray(w.Array)...)
	}
	if w.Replicas < 0 || w.Replicas > MaxReplicas {
		p.add("replicas", "must be from 1 to %d", MaxReplicas)
	}
	if r.GPUMemoryMiB < 0 || r.GPUMemoryMiB > MaxGPUMemoryMiB {
		p.add("resources.gpuMemoryMiB", "must be from 0 to %d (1 TiB, a share of one GPU)", MaxGPUMemoryMiB)
	}
	if r.GPUMemoryMiB > 0 && r.GPUs > 0 {
		p.add("resources.gpuMemoryMiB", "give either gpus or gpuMemoryMiB, not both")
	}
	if r.GPUs == 0 && r.GPUMemoryMiB == 0 {
		p.add("resources.gpus", "must be positive (a count such as 1 or 2, a fraction such as 0.25, or set gpuMemoryMiB)")
	}
	if r.CPU < 0 || r.CPU > MaxMilliCPU {
		p.add("resources.cpu", "must be from 0 to %s CPUs", quantity.Milli(MaxMilliCPU))
	}
	if r.MemoryMiB < 0 || r.MemoryMiB > MaxMemoryMiB {
		p.add("resources.memoryMiB", "must be from 0 to %d (16 TiB)", MaxMemoryMiB)
	} else if r.MemoryMiB > 0 && r.MemoryMiB < MinMemoryMiB {
		p.add("resources.memoryMiB", "%d MiB is below %d MiB, the least a process can start with (it is the workload's memory limit)", r.MemoryMiB, MinMemoryMiB)
	}
	for i, m := range r.GPUModels {
		if strings.TrimSpace(m) == "" || len(m) > 64 {
			p.add(fmt.Sprintf("resources.gpuModels[%d]", i), "must be a non-empty model name of at most 64 characters")
		}
	}
}

// program checks what runs: the image, the command, its environment and
// its working directory.
func (p *problems) program(w *api.Workload) {
	switch {
	case len(w.Image) > MaxImageLen:
		p.add("image", "longer than %d characters", MaxImageLen)
	case w.Image != "" && core.ImageReference(w.Image) != "":
		p.add("image", "%s", core.ImageReference(w.Image))
	}
	switch {
	case len(w.Command) == 0 && w.Image == "":
		p.add("command", "must not be empty: give the program to run and its arguments (or an image whose entrypoint runs)")
	case len(w.Command) > 0 && w.Command[0] == "":
		p.add("command[0]", "must not be empty: it is the program to run")
	}
	if len(w.Command) > MaxArgs {
		p.add("command", "at most %d arguments", MaxArgs)
	}
	for i, a := range w.Command {
		if len(a) > MaxArgLen {
			p.add(fmt.Sprintf("command[%d]", i), "longer than %d bytes", MaxArgLen)
		}
		if strings.IndexByte(a, 0) >= 0 {
			p.add(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
		}
	}
	if len(w.Env) > MaxEnv {
		p.add("env", "at most %d variables", MaxEnv)
	}
	for k, v := range w.Env {
		if !core.EnvNameRE.MatchString(k) || len(k) > 128 {
			p.add("env."+k, "is not a valid variable name (letters, digits and '_', not starting with a digit)")
		} else if strings.HasPrefix(k, "GPUFLEET_") || k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" {
			p.add("env."+k, "is set by the platform and cannot be overridden")
		}
		if len(v) > MaxEnvValueLen || strings.IndexByte(v, 0) >= 0 {
			p.add("env."+k, "value is longer than %d bytes or contains a NUL byte", MaxEnvValueLen)
		}
	}
	if w.WorkingDir != "" {
		ok := !strings.HasPrefix(w.WorkingDir, "/") && len(w.WorkingDir) <= 255
		for _, part := range strings.Split(w.WorkingDir, "/") {
			if part == "" || part == "." || part == ".." || !dirPartRE.MatchString(part) {
				ok = false
			}
		}
		if !ok {
			p.add("workingDir", "must be a relative path of plain names (no '..', no leading '/'); it is created under the workload's own directory")
		}
	}
}

// lifetime checks how long the workload may run and how long it has to
// stop.
func (p *problems) lifetime(w *api.Workload) {
	if w.MaxRuntimeSeconds < 0 || w.MaxRuntimeSeconds > MaxRuntimeSeconds {
		p.add("maxRuntimeSeconds", "must be from 0 (no limit) to %d (365 days)", MaxRuntimeSeconds)
	}
	if w.GracePeriodSeconds < 0 || w.GracePeriodSeconds > MaxGracePeriodSeconds {
		p.add("gracePeriodSeconds", "must be between 0 and %d", MaxGracePeriodSeconds)
	}
}

// ports checks the declared ports: numbers and names, none twice.
func (p *problems) ports(ports []api.Port) {
	if len(ports) > MaxPorts {
		p.add("ports", "at most %d ports", MaxPorts)
	}
	seenPort, seenName := map[int]bool{}, map[string]bool{}
	for i, port := range ports {
		at := fmt.Sprintf("ports[%d]", i)
		switch {
		case port.Port < 1 || port.Port > 65535:
			p.add(at+".port", "%d: want a port from 1 to 65535", port.Port)
		case seenPort[port.Port]:
			p.add(at+".port", "%d is declared twice", port.Port)
		}
		seenPort[port.Port] = true
		if port.Name != "" {
			if len(port.Name) > 15 || !core.ValidName(port.Name) {
				p.add(at+".name", "%q: want lowercase letters, digits and '-', at most 15 characters", port.Name)
			} else if seenName[port.Name] {
				p.add(at+".name", "%q is declared twice", port.Name)
			}
			seenName[port.Name] = true
		}
	}
}

// secrets checks the secrets the workload names: names, none twice in a
// list, at most MaxSecretRefs in all.
func (p *problems) secrets(w *api.Workload) {
	if len(w.SecretEnv)+len(w.SecretFiles) > MaxSecretRefs {
		p.add("secretEnv", "at most %d secrets, with secretFiles", MaxSecretRefs)
	}
	for _, refs := range []struct {
		field string
		names []string
	}{{"secretEnv", w.SecretEnv}, {"secretFiles", w.SecretFiles}} {
		for i, n := range refs.names {
			if !core.ValidName(n) {
				p.add(fmt.Sprintf("%s[%d]", refs.field, i), "%q is not a secret's name", n)
			} else if slices.Contains(refs.names[:i], n) {
				p.add(fmt.Sprintf("%s[%d]", refs.field, i), "secret %s is named twice", n)
			}
		}
	}
}

// storage checks the volumes and datasets mounted: names, paths that the
// platform does not keep, no two that overlap.
func (p *problems) storage(w *api.Workload) {
	if len(w.Volumes)+len(w.Mounts) > MaxMounts {
		p.add("volumes", "at most %d volumes and mounts together", MaxMounts)
	}
	var paths []string
	mountPath := func(at, path string) {
		if problem := core.CheckMountPath(path); problem != "" {
			p.add(at, "%s", problem)
			return
		}
		for _, q := range paths {
			if q == path || strings.HasPrefix(path, q+"/") || strings.HasPrefix(q, path+"/") {
				p.add(at, "%s overlaps the mount at %s", path, q)
			}
		}
		paths = append(paths, path)
	}
	for i, v := range w.Volumes {
		at := fmt.Sprintf("volumes[%d]", i)
		if !core.ValidName(v.Name) {
			p.add(at+".name", "%q is not a volume's name", v.Name)
		}
		mountPath(at+".path", v.Path)
	}
	for i, m := range w.Mounts {
		at := fmt.Sprintf("mounts[%d]", i)
		if !core.ValidName(m.Dataset) {
			p.add(at+".dataset", "%q is not a dataset's name", m.Dataset)
		}
		if m.ReadOnly != nil && !*m.ReadOnly {
			p.add(at+".readOnly", "a dataset is mounted read-only: leave readOnly out or true")
		}
		mountPath(at+".path", m.Path)
	}
}

// readyPath checks the readiness path: an HTTP path, on a workload with a
// port to probe.
func (p *problems) readyPath(w *api.Workload) {
	rp := w.ReadyPath
	switch {
	case rp == "":
	case len(w.Ports) == 0 && w.Kind != api.KindNotebook:
		p.add("readyPath", "a readiness check needs a port to probe: declare ports")
	case !strings.HasPrefix(rp, "/") || len(rp) > 256 || strings.ContainsAny(rp, " \t\r\n#"):
		p.add("readyPath", "%q: want an HTTP path such as /health, at most 256 characters", rp)
	}
}

// labels checks a map of labels (labels, nodeSelector): at most MaxLabels,
// keys and values by LabelRule, values possibly empty.
func (p *problems) labels(field string, labels map[string]string) {
	if len(labels) > MaxLabels {
		p.add(field, "at most %d labels", MaxLabels)
	}
	for k, v := range labels {
		if len(k) > 63 || !core.LabelRE.MatchString(k) {
			p.add(field+"."+k, "is not a valid label key: %s", core.LabelRule)
		}
		if len(v) > 63 || (v != "" && !core.LabelRE.MatchString(v)) {
			p.add(field+"."+k, "value %q is not a valid label value: %s (or empty)", v, core.LabelRule)
		}
	}
}

// serverOwned refuses the fields only the server sets.
func (p *problems) serverOwned(w *api.Workload) {
	if w.ID != "" {
		p.add("id", "is set by the server")
	}
	if w.Owner != "" {
		p.add("owner", "is set by the server")
	}
	if w.Status.Phase != "" || w.Status.Attempts != 0 || len(w.Status.Placement) != 0 {
		p.add("status", "is set by the server")
	}
}

// ResidencyErrors checks a list of regions (a workload's or a team's
// residency): each a name, none twice, at most MaxLabels.
func ResidencyErrors(regions []string) []api.FieldError {
	var p problems
	if len(regions) > MaxLabels {
		p.add("residency", "at most %d regions", MaxLabels)
	}
	for i, r := range regions {
		switch {
		case r == "" || len(r) > 63 || strings.ContainsAny(r, " \t\n/\\\"',"):
			p.add(fmt.Sprintf("residency[%d]", i), "%q is not a region's name", r)
		case slices.Contains(regions[:i], r):
			p.add(fmt.Sprintf("residency[%d]", i), "region %s is named twice", r)
		}
	}
	return p
}

// CheckNetwork checks a network policy, each problem under at ("network").
func CheckNetwork(at string, n *api.Network) []api.FieldError {
	var p problems
	switch n.Egress {
	case "", api.EgressAllow, api.EgressDeny:
	default:
		p.add(at+".egress", "%q: want %s or %s", n.Egress, api.EgressAllow, api.EgressDeny)
	}
	if len(n.Allow) > MaxEgressAllow {
		p.add(at+".allow", "at most %d destinations", MaxEgressAllow)
	}
	for i, d := range n.Allow {
		if problem := core.DestinationProblem(d); problem != "" {
			p.add(fmt.Sprintf("%s.allow[%d]", at, i), "%s", problem)
		}
	}
	return p
}
