package core

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The rules of the names and strings a workload spec carries: names of
// teams, users, workloads and secrets; label keys and values; environment
// variable names; image references; mount paths; the destinations a
// network policy allows. The API server and the CLI check a submission
// with them (package spec), and the executors check again what they run.

var (
	// LabelRE is what a label key or value is made of (LabelRule), and a
	// region's or a model's name.
	LabelRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$`)
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

// ValidName reports whether s is a DNS-label-like name (lowercase letters,
// digits and '-', at most 63 characters, starting and ending with a letter
// or digit), as used for teams, users and workload names. It is the
// regular expression ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ written out: a submit
// checks several names, and the expression's matcher was about 1 µs of a
// submit's CPU.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxNameLen || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// LabelRule says what a label key or value is made of, for errors.
const LabelRule = "at most 63 characters: ASCII letters, digits, '-', '_', '.' and '/', starting and ending with a letter or digit"

// EnvNameRE matches the keys that can become environment variables.
var EnvNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// imageTransports are the transports of containers/image that a
// reference with one path component and a tag would spell (oci:name).
var imageTransports = []string{"containers-storage", "dir", "docker", "docker-archive", "docker-daemon", "oci", "oci-archive", "ostree", "sif", "tarball"}

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

// reservedMountPaths are the directories a mount may not cover or sit
// inside: the system a workload runs on, and the platform's own paths
// (/gpufleet: a container's checkpoint, usage and secret directories).
var reservedMountPaths = []string{"/bin", "/boot", "/dev", "/etc", "/gpufleet", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var/lib/gpufleet", "/var/run"}

// CheckMountPath says what is wrong with the path of a mount, or "".
func CheckMountPath(p string) string {
	switch {
	case p == "":
		return "a mount needs a path"
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q: want an absolute path such as /data", p)
	case len(p) > 256:
		return "a path is at most 256 characters"
	case strings.ContainsAny(p, "\x00:,\\") || slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Sprintf("%q: a path may not hold '..', ':', ',' or a backslash", p)
	case path.Clean(p) != p:
		return fmt.Sprintf("%q: want a clean path (%s)", p, path.Clean(p))
	case p == "/":
		return "a mount cannot cover /"
	}
	for _, r := range reservedMountPaths {
		switch {
		case p == r || strings.HasPrefix(p, r+"/"):
			return fmt.Sprintf("%q is inside %s, which the platform keeps", p, r)
		case strings.HasPrefix(r, p+"/"):
			return fmt.Sprintf("%q covers %s, which the platform keeps", p, r)
		}
	}
	return ""
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
