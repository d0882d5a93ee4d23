package sched

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// mention must write what core.Mention writes: core.Redact finds the
// mentions a victim's message holds by that form.
func TestMentionAsCore(t *testing.T) {
	for _, w := range []core.Workload{
		{ID: "wl-abc123", Spec: core.Spec{Team: "team-a", Priority: "production"}},
		{ID: "wl-7-12", Spec: core.Spec{Team: "ml", Priority: "batch"}},
		{ID: "wl-%s%d", Spec: core.Spec{Team: "t%v", Priority: "100%"}},
		{},
	} {
		if got, want := mention(&w), core.Mention(&w); got != want {
			t.Errorf("mention(%q, %q, %q) = %q, core.Mention %q", w.ID, w.Team, w.Priority, got, want)
		}
	}
}
