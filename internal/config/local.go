package config

import (
	"fmt"
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
	// Path is the PATH a task gets unless its own environment sets one:
	// absolute directories joined by ':' (e.g. to put /opt/conda/bin
	// first); empty means the system's,
	// /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin. Never
	// the server's own PATH.
	Path string `json:"path,omitempty"`
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
