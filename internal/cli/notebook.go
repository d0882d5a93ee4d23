package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpufleet/gpufleet/api"
)

// notebookHint is why's extra line for a notebook that has been preempted
// in a preemptible class: what to do about it, naming the classes that are
// never preempted. "" for anything else, or when the classes cannot be read.
func notebookHint(ctx context.Context, c *api.Client, w *api.Workload) string {
	if w.Kind != api.KindNotebook || w.Status.Preemptions == 0 {
		return ""
	}
	classes, err := c.PriorityClasses(ctx)
	if err != nil {
		return ""
	}
	var safe []string
	for _, cl := range classes {
		if cl.Name == w.Priority && !cl.Preemptible {
			return ""
		}
		if !cl.Preemptible {
			safe = append(safe, cl.Name)
		}
	}
	msg := fmt.Sprintf("note: this notebook has been preempted %d times: its class %s is preemptible (its team's higher-priority work, or reclaim over quota, stops it)", w.Status.Preemptions, w.Priority)
	if len(safe) > 0 {
		msg += fmt.Sprintf("; a long-lived notebook belongs in %s, which is never preempted (a team-admin grants it: gpufleet set priority-classes)", strings.Join(safe, " or "))
	}
	return msg + "\n"
}
