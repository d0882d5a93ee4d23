package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Local configures the local executor's confinement of tasks (see
// SECURITY.md and internal/executor/local).
type Local struct {
	// Isolation is "auto" (the default: each team's tasks under a user ID
	// of their own, restricted by Landlock, as far as the machine allows)
	// or "off" (tasks run as the server's user, unconfined).
	Isolation string `json:"isolation,omitempty"`
	// UIDRange is the range of user IDs given to teams, "FIRST-LAST";
	// empty means 200000-265535.
	UIDRange string `json:"uidRange,omitempty"`
	// ReadOnlyPaths replaces the system paths tasks may read and execute
	// (/usr, /etc, /proc, ...) when set.
	ReadOnlyPaths []string `json:"readOnlyPaths,omitempty"`
	// AllowSharedUID lets the server start with several teams although it
	// cannot confine their tasks from each other (not root, or no
	// Landlock): for a single user's machine only. --allow-shared-uid.
	AllowSharedUID bool `json:"allowSharedUID,omitempty"`
	// CheckpointRetention is how long a workload's checkpoint directory
	// is kept after it ends (default 168h; "0" keeps it until the workload
	// is deleted with its team).
	CheckpointRetention *Duration `json:"checkpointRetention,omitempty"`
	// ContainerRuntime runs workloads that name an image in containers:
	// "podman" or "docker" (looked up in PATH), or the absolute path of
	// one of them. Empty: no containers, and a workload with an image is
	// refused at submit. --container-runtime.
	ContainerRuntime string `json:"containerRuntime,omitempty"`
	// ContainerArgs are global arguments given to the runtime before its
	// command ("--storage-driver", "vfs", ...), for hosts that need them.
	ContainerArgs []string `json:"containerArgs,omitempty"`
	// Network is each workload's network namespace on this machine (the
	// server as root): its address range, and its outbound traffic.
	Network LocalNetwork `json:"network,omitempty"`
	// Path is the PATH a task gets unless its own environment sets one:
	// absolute directories joined by ':' (e.g. to put /opt/conda/bin
	// first); empty means the system's,
	// /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin. Never
	// the server's own PATH.
	Path string `json:"path,omitempty"`
}

// LocalNetwork configures the workloads' network namespaces: each workload
// gets an address of CIDR (a /24 of it per server of the host), reaches
// its own team's declared ports, the API on its gateway and, unless its
// egress is denied, the outside, NAT'ed; nothing else of the host's, nor
// of other teams'.
type LocalNetwork struct {
	// Off keeps workloads on the host's network (not recommended: they
	// then reach each other's listeners and the host's services).
	Off bool `json:"off,omitempty"`
	// CIDR is a private IPv4 range of /8 to /24 (default 10.233.0.0/16).
	CIDR string `json:"cidr,omitempty"`
	// Egress is "allow" (the default) or "deny"; Allow lists the CIDRs
	// still reachable when it is denied.
	Egress string   `json:"egress,omitempty"`
	Allow  []string `json:"allow,omitempty"`
	// Teams overrides Egress and Allow per team.
	Teams map[string]TeamEgress `json:"teams,omitempty"`
}

// TeamEgress is one team's outbound traffic.
type TeamEgress struct {
	Egress string   `json:"egress,omitempty"`
	Allow  []string `json:"allow,omitempty"`
}

// DefaultCheckpointRetention is how long checkpoints outlive their
// workload unless configured.
const DefaultCheckpointRetention = 7 * 24 * time.Hour

// Retention returns the checkpoint retention (0: kept).
func (l Local) Retention() time.Duration {
	if l.CheckpointRetention == nil {
		return DefaultCheckpointRetention
	}
	return l.CheckpointRetention.Duration
}

// UIDs parses UIDRange; zeros mean the executor's default.
func (l Local) UIDs() (first, last int, err error) {
	if l.UIDRange == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(l.UIDRange, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("local.uidRange %q: want FIRST-LAST, e.g. 200000-265535", l.UIDRange)
	}
	if first < 1000 || last < first || last > 1<<31-2 {
		return 0, 0, fmt.Errorf("local.uidRange %q: want 1000 <= FIRST <= LAST < 2147483647", l.UIDRange)
	}
	return first, last, nil
}

func (l Local) validate() []error {
	var errs []error
	switch l.Isolation {
	case "", "auto", "off":
	default:
		errs = append(errs, fmt.Errorf("local.isolation %q: want \"auto\" or \"off\"", l.Isolation))
	}
	if l.CheckpointRetention != nil && l.CheckpointRetention.Duration < 0 {
		errs = append(errs, fmt.Errorf("local.checkpointRetention %s: must not be negative", l.CheckpointRetention))
	}
	if _, _, err := l.UIDs(); err != nil {
		errs = append(errs, err)
	}
	if rt := l.ContainerRuntime; rt != "" {
		if base := filepath.Base(rt); (base != "podman" && base != "docker") || (strings.Contains(rt, "/") && !filepath.IsAbs(rt)) {
			errs = append(errs, fmt.Errorf("local.containerRuntime %q: want podman or docker, or the absolute path of one", rt))
		}
	}
	for i, a := range l.ContainerArgs {
		if !strings.HasPrefix(a, "-") && (i == 0 || !strings.HasPrefix(l.ContainerArgs[i-1], "-")) {
			errs = append(errs, fmt.Errorf("local.containerArgs[%d] %q: want global options (--storage-driver vfs), not a command", i, a))
		}
	}
	errs = append(errs, l.Network.validate()...)
	if l.Path != "" {
		for i, d := range strings.Split(l.Path, ":") {
			if !filepath.IsAbs(d) {
				errs = append(errs, fmt.Errorf("local.path: entry %d %q is not an absolute directory", i+1, d))
			}
		}
	}
	for i, p := range l.ReadOnlyPaths {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("local.readOnlyPaths[%d] %q: want an absolute path", i, p))
		}
	}
	return errs
}

func (n LocalNetwork) validate() []error {
	var errs []error
	if n.CIDR != "" {
		p, err := netip.ParsePrefix(n.CIDR)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("local.network.cidr %q: not a CIDR: %v", n.CIDR, err))
		case !p.Addr().Is4() || !p.Addr().IsPrivate() || p.Bits() < 8 || p.Bits() > 24:
			errs = append(errs, fmt.Errorf("local.network.cidr %s: want a private IPv4 range of /8 to /24", n.CIDR))
		}
	}
	check := func(field, egress string, allow []string) {
		switch egress {
		case "", "allow", "deny":
		default:
			errs = append(errs, fmt.Errorf("%s.egress %q: want allow or deny", field, egress))
		}
		for i, a := range allow {
			if p, err := netip.ParsePrefix(a); err != nil || !p.Addr().Is4() {
				errs = append(errs, fmt.Errorf("%s.allow[%d] %q: want an IPv4 CIDR such as 192.0.2.0/24", field, i, a))
			}
		}
	}
	check("local.network", n.Egress, n.Allow)
	for team, e := range n.Teams {
		check("local.network.teams."+team, e.Egress, e.Allow)
	}
	return errs
}
