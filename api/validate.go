package api

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits on a workload spec. They bound what one request can make the
// platform store or run.
const (
	MaxNameLen     = 63
	MaxArgs        = 256
	MaxArgLen      = 16 << 10
	MaxEnv         = 128
	MaxEnvValueLen = 16 << 10
	MaxLabels      = 64
	MaxGPUsPerNode = 8
	MaxReplicas    = 256
	MaxImageLen    = 512
)

// Bounds on the numbers of a workload and of a team's quota. Each is checked
// before the number becomes a duration, a byte count or a sum, so that no
// conversion overflows (maxRuntimeSeconds 9223372037 would wrap to a negative
// time.Duration, and 18446744074 to 290 ms).
const (
	// MaxRuntimeSeconds is the longest maxRuntimeSeconds: 365 days (0 is
	// no limit).
	MaxRuntimeSeconds = 365 * 24 * 3600
	// MaxGracePeriodSeconds is the longest gracePeriodSeconds: one hour.
	MaxGracePeriodSeconds = 3600
	// MaxGPUMemoryMiB is the largest share of one GPU by memory: 1 TiB.
	MaxGPUMemoryMiB = 1 << 20
	// MaxMilliCPU is the most host CPU one replica may ask for: 1024 CPUs.
	MaxMilliCPU = 1024 * 1000
	// MinMemoryMiB is the least host memory a workload may ask for (its
	// memory limit): less and no process starts.
	MinMemoryMiB = 16
	// MaxMemoryMiB is the most host memory one replica may ask for: 16 TiB.
	MaxMemoryMiB = 16 << 20
	// MaxQuotaMilliGPU bounds a team's guarantee, limit and each model
	// guarantee: a million GPUs.
	MaxQuotaMilliGPU = 1_000_000_000
	// MaxTeamWeight bounds a team's weight (at least 1).
	MaxTeamWeight = 1000
	// MaxModelGuarantees bounds how many models a team's guarantee names.
	MaxModelGuarantees = 64
)

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	envRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	labelRE  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`)
	dirPartR = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	// imageRE is a container image reference as the distribution
	// library's grammar has it: [domain[:port]/]path[:tag][@digest]. A
	// container runtime's other transports (docker-archive:PATH, oci:PATH,
	// dir:PATH, containers-storage:...) are not references: with them a
	// root runtime would read host paths, other teams' volumes included,
	// into the image store every team shares (ImageReference refuses them).
	imageRE = regexp.MustCompile(`^` +
		`(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` + // domain
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` + // path
		`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` + // tag
		`(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`) // digest
)

// imageTransports are the transports of containers/image that a
// reference with one path component and a tag would spell (oci:name).
var imageTransports = []string{"containers-storage", "dir", "docker", "docker-archive", "docker-daemon", "oci", "oci-archive", "ostree", "sif", "tarball"}

// ResidencyErrors checks a list of regions (a workload's or a team's
// residency): each a name, none twice, at most MaxLabels.
func ResidencyErrors(regions []string) []FieldError {
	var errs []FieldError
	if len(regions) > MaxLabels {
		errs = append(errs, FieldError{"residency", fmt.Sprintf("at most %d regions", MaxLabels)})
	}
	for i, r := range regions {
		switch {
		case r == "" || len(r) > 63 || strings.ContainsAny(r, " \t\n/\\\"',"):
			errs = append(errs, FieldError{fmt.Sprintf("residency[%d]", i), fmt.Sprintf("%q is not a region's name", r)})
		case slices.Contains(regions[:i], r):
			errs = append(errs, FieldError{fmt.Sprintf("residency[%d]", i), fmt.Sprintf("region %s is named twice", r)})
		}
	}
	return errs
}

// ImageReference says what is wrong with an image reference, or "".
func ImageReference(img string) string {
	if !imageRE.MatchString(img) {
		return "is not an image reference (such as ghcr.io/acme/train:1 or repo/name@sha256:...): a registry, a path and a tag or digest, nothing else"
	}
	if t, _, ok := strings.Cut(img, ":"); ok && !strings.Contains(t, "/") && slices.Contains(imageTransports, t) {
		return fmt.Sprintf("%q names the transport %s, not an image: give a registry reference (registry/path:tag)", img, t)
	}
	return ""
}

// LabelRule says what a label key or value is made of, for errors.
const LabelRule = "at most 63 characters: ASCII letters, digits, '-', '_', '.' and '/', starting and ending with a letter or digit"

// Phases are the phases a workload is in, as lists and filters name them.
var Phases = []string{PhasePending, PhaseRunning, PhaseSucceeded, PhaseFailed, PhaseCancelled}

// ParsePhase returns the phase s names, in any case ("running" is
// Running), or an error listing the phases.
func ParsePhase(s string) (string, error) {
	for _, p := range Phases {
		if strings.EqualFold(strings.TrimSpace(s), p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown phase %q: want one of %s", s, strings.Join(Phases, ", "))
}

// ValidName reports whether s is a DNS-label-like name (lowercase letters,
// digits and '-', at most 63 characters), as used for teams, users and
// workload names.
func ValidName(s string) bool { return len(s) <= MaxNameLen && nameRE.MatchString(s) }

// Validate checks a workload spec as submitted and returns every problem,
// each naming its field. It needs no server state: whether the team or the
// priority class exists is checked by the server. The CLI runs the same check
// before it sends anything.
func (w *Workload) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if w.Name != "" && !ValidName(w.Name) {
		add("name", "must be lowercase letters, digits and '-', starting and ending with a letter or digit, at most %d characters", MaxNameLen)
	}
	if w.Team != "" && !ValidName(w.Team) {
		add("team", "is not a valid team name")
	}
	if w.Priority != "" && !ValidName(w.Priority) {
		add("priority", "is not a valid priority class name")
	}
	switch w.Kind {
	case "", KindJob, KindService, KindNotebook:
	default:
		add("kind", "must be one of job, service, notebook, not %q", w.Kind)
	}

	r := w.Resources
	switch {
	case r.GPUs < 0:
		add("resources.gpus", "must not be negative")
	case r.GPUs > 1000 && r.GPUs%1000 != 0:
		add("resources.gpus", "%s GPUs: above one GPU the count must be whole (1, 2, ... %d); fractions are for sharing a single GPU", r.GPUs, MaxGPUsPerNode)
	case r.GPUs > MaxGPUsPerNode*1000:
		add("resources.gpus", "at most %d GPUs per workload", MaxGPUsPerNode)
	}
	if w.Array != nil {
		errs = append(errs, w.Array.validate()...)
	}
	if w.Replicas < 0 || w.Replicas > MaxReplicas {
		add("replicas", "must be from 1 to %d", MaxReplicas)
	}
	if r.GPUMemoryMiB < 0 || r.GPUMemoryMiB > MaxGPUMemoryMiB {
		add("resources.gpuMemoryMiB", "must be from 0 to %d (1 TiB, a share of one GPU)", MaxGPUMemoryMiB)
	}
	if r.GPUMemoryMiB > 0 && r.GPUs > 0 {
		add("resources.gpuMemoryMiB", "give either gpus or gpuMemoryMiB, not both")
	}
	if r.GPUs == 0 && r.GPUMemoryMiB == 0 {
		add("resources.gpus", "must be positive (a count such as 1 or 2, a fraction such as 0.25, or set gpuMemoryMiB)")
	}
	if r.CPU < 0 || r.CPU > MaxMilliCPU {
		add("resources.cpu", "must be from 0 to %s CPUs", Milli(MaxMilliCPU))
	}
	if r.MemoryMiB < 0 || r.MemoryMiB > MaxMemoryMiB {
		add("resources.memoryMiB", "must be from 0 to %d (16 TiB)", MaxMemoryMiB)
	} else if r.MemoryMiB > 0 && r.MemoryMiB < MinMemoryMiB {
		add("resources.memoryMiB", "%d MiB is below %d MiB, the least a process can start with (it is the workload's memory limit)", r.MemoryMiB, MinMemoryMiB)
	}
	for i, m := range r.GPUModels {
		if strings.TrimSpace(m) == "" || len(m) > 64 {
			add(fmt.Sprintf("resources.gpuModels[%d]", i), "must be a non-empty model name of at most 64 characters")
		}
	}

	switch {
	case len(w.Image) > MaxImageLen:
		add("image", "longer than %d characters", MaxImageLen)
	case w.Image != "" && ImageReference(w.Image) != "":
		add("image", "%s", ImageReference(w.Image))
	}
	switch {
	case len(w.Command) == 0 && w.Image == "":
		add("command", "must not be empty: give the program to run and its arguments (or an image whose entrypoint runs)")
	case len(w.Command) > 0 && w.Command[0] == "":
		add("command[0]", "must not be empty: it is the program to run")
	}
	if len(w.Command) > MaxArgs {
		add("command", "at most %d arguments", MaxArgs)
	}
	for i, a := range w.Command {
		if len(a) > MaxArgLen {
			add(fmt.Sprintf("command[%d]", i), "longer than %d bytes", MaxArgLen)
		}
		if strings.IndexByte(a, 0) >= 0 {
			add(fmt.Sprintf("command[%d]", i), "contains a NUL byte")
		}
	}
	if len(w.Env) > MaxEnv {
		add("env", "at most %d variables", MaxEnv)
	}
	for k, v := range w.Env {
		if !envRE.MatchString(k) || len(k) > 128 {
			add("env."+k, "is not a valid variable name (letters, digits and '_', not starting with a digit)")
		} else if strings.HasPrefix(k, "GPUFLEET_") || k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" {
			add("env."+k, "is set by the platform and cannot be overridden")
		}
		if len(v) > MaxEnvValueLen || strings.IndexByte(v, 0) >= 0 {
			add("env."+k, "value is longer than %d bytes or contains a NUL byte", MaxEnvValueLen)
		}
	}
	if w.WorkingDir != "" {
		ok := !strings.HasPrefix(w.WorkingDir, "/") && len(w.WorkingDir) <= 255
		for _, p := range strings.Split(w.WorkingDir, "/") {
			if p == "" || p == "." || p == ".." || !dirPartR.MatchString(p) {
				ok = false
			}
		}
		if !ok {
			add("workingDir", "must be a relative path of plain names (no '..', no leading '/'); it is created under the workload's own directory")
		}
	}
	if w.MaxRuntimeSeconds < 0 || w.MaxRuntimeSeconds > MaxRuntimeSeconds {
		add("maxRuntimeSeconds", "must be from 0 (no limit) to %d (365 days)", MaxRuntimeSeconds)
	}
	if w.GracePeriodSeconds < 0 || w.GracePeriodSeconds > MaxGracePeriodSeconds {
		add("gracePeriodSeconds", "must be between 0 and %d", MaxGracePeriodSeconds)
	}
	if len(w.Ports) > MaxPorts {
		add("ports", "at most %d ports", MaxPorts)
	}
	seenPort, seenName := map[int]bool{}, map[string]bool{}
	for i, p := range w.Ports {
		at := fmt.Sprintf("ports[%d]", i)
		switch {
		case p.Port < 1 || p.Port > 65535:
			add(at+".port", "%d: want a port from 1 to 65535", p.Port)
		case seenPort[p.Port]:
			add(at+".port", "%d is declared twice", p.Port)
		}
		seenPort[p.Port] = true
		if p.Name != "" {
			if len(p.Name) > 15 || !ValidName(p.Name) {
				add(at+".name", "%q: want lowercase letters, digits and '-', at most 15 characters", p.Name)
			} else if seenName[p.Name] {
				add(at+".name", "%q is declared twice", p.Name)
			}
			seenName[p.Name] = true
		}
	}
	if len(w.SecretEnv)+len(w.SecretFiles) > MaxSecretRefs {
		add("secretEnv", "at most %d secrets, with secretFiles", MaxSecretRefs)
	}
	for _, refs := range []struct {
		field string
		names []string
	}{{"secretEnv", w.SecretEnv}, {"secretFiles", w.SecretFiles}} {
		field, names := refs.field, refs.names
		for i, n := range names {
			if !ValidName(n) {
				add(fmt.Sprintf("%s[%d]", field, i), "%q is not a secret's name", n)
			} else if slices.Contains(names[:i], n) {
				add(fmt.Sprintf("%s[%d]", field, i), "secret %s is named twice", n)
			}
		}
	}
	errs = append(errs, ResidencyErrors(w.Residency)...)
	if len(w.Volumes)+len(w.Mounts) > MaxMounts {
		add("volumes", "at most %d volumes and mounts together", MaxMounts)
	}
	var paths []string
	mountPath := func(at, p string) {
		if problem := CheckMountPath(p); problem != "" {
			add(at, "%s", problem)
			return
		}
		for _, q := range paths {
			if q == p || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
				add(at, "%s overlaps the mount at %s", p, q)
			}
		}
		paths = append(paths, p)
	}
	for i, v := range w.Volumes {
		at := fmt.Sprintf("volumes[%d]", i)
		if !ValidName(v.Name) {
			add(at+".name", "%q is not a volume's name", v.Name)
		}
		mountPath(at+".path", v.Path)
	}
	for i, m := range w.Mounts {
		at := fmt.Sprintf("mounts[%d]", i)
		if !ValidName(m.Dataset) {
			add(at+".dataset", "%q is not a dataset's name", m.Dataset)
		}
		if m.ReadOnly != nil && !*m.ReadOnly {
			add(at+".readOnly", "a dataset is mounted read-only: leave readOnly out or true")
		}
		mountPath(at+".path", m.Path)
	}
	if w.Network != nil {
		errs = append(errs, w.Network.Validate("network")...)
	}
	if rp := w.ReadyPath; rp != "" {
		switch {
		case len(w.Ports) == 0 && w.Kind != KindNotebook:
			add("readyPath", "a readiness check needs a port to probe: declare ports")
		case !strings.HasPrefix(rp, "/") || len(rp) > 256 || strings.ContainsAny(rp, " \t\r\n#"):
			add("readyPath", "%q: want an HTTP path such as /health, at most 256 characters", rp)
		}
	}
	if len(w.Labels) > MaxLabels {
		add("labels", "at most %d labels", MaxLabels)
	}
	for k, v := range w.Labels {
		if len(k) > 63 || !labelRE.MatchString(k) {
			add("labels."+k, "is not a valid label key: %s", LabelRule)
		}
		if len(v) > 63 || (v != "" && !labelRE.MatchString(v)) {
			add("labels."+k, "value %q is not a valid label value: %s (or empty)", v, LabelRule)
		}
	}
	if len(w.NodeSelector) > MaxLabels {
		add("nodeSelector", "at most %d labels", MaxLabels)
	}
	for k, v := range w.NodeSelector {
		if len(k) > 63 || !labelRE.MatchString(k) {
			add("nodeSelector."+k, "is not a valid label key: %s", LabelRule)
		}
		if len(v) > 63 || (v != "" && !labelRE.MatchString(v)) {
			add("nodeSelector."+k, "value %q is not a valid label value: %s (or empty)", v, LabelRule)
		}
	}
	if w.ID != "" {
		add("id", "is set by the server")
	}
	if w.Owner != "" {
		add("owner", "is set by the server")
	}
	if w.Status.Phase != "" || w.Status.Attempts != 0 || len(w.Status.Placement) != 0 {
		add("status", "is set by the server")
	}
	return errs
}

// Validate checks a network policy, each problem under at ("network").
func (n *Network) Validate(at string) []FieldError {
	var errs []FieldError
	switch n.Egress {
	case "", EgressAllow, EgressDeny:
	default:
		errs = append(errs, FieldError{Field: at + ".egress", Problem: fmt.Sprintf("%q: want %s or %s", n.Egress, EgressAllow, EgressDeny)})
	}
	if len(n.Allow) > MaxEgressAllow {
		errs = append(errs, FieldError{Field: at + ".allow", Problem: fmt.Sprintf("at most %d destinations", MaxEgressAllow)})
	}
	for i, d := range n.Allow {
		if problem := DestinationProblem(d); problem != "" {
			errs = append(errs, FieldError{Field: fmt.Sprintf("%s.allow[%d]", at, i), Problem: problem})
		}
	}
	return errs
}

// DestinationProblem says what is wrong with a destination a workload may
// reach ("" when nothing): a CIDR (10.0.0.0/8), an address, or a host
// name, each with an optional :port.
func DestinationProblem(d string) string {
	host := d
	if h, port, err := net.SplitHostPort(d); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: the port must be from 1 to 65535", d)
		}
		host = h
	}
	if _, _, err := net.ParseCIDR(host); err == nil {
		return ""
	}
	if net.ParseIP(host) != nil {
		return ""
	}
	if len(host) > 253 || !hostRE.MatchString(host) {
		return fmt.Sprintf("%q: want a CIDR (10.0.0.0/8), an address or a host name (huggingface.co), with an optional :port", d)
	}
	return ""
}

var hostRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$`)
