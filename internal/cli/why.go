package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// whyAnswer is why's -o json and -o yaml answer: the workload's current
// explanation, every key always present.
type whyAnswer struct {
	ID            string `json:"id"`
	Phase         string `json:"phase"`
	Reason        string `json:"reason"`
	Message       string `json:"message"`
	NominatedNode string `json:"nominatedNode"`
}

func newWhyCmd(e *env) *cobra.Command {
	var out *outputFlag
	var team string
	cmd := &cobra.Command{
		Use:   "why ID|NAME",
		Short: "Say why a workload is pending, where it runs, or how it ended",
		Long: `Print a workload's current explanation alone.

A pending workload shows the scheduler's reason and sentence, e.g.
"QuotaLimit: team vision at its limit (8/8 GPUs)", and the node it waits for
when the workloads it preempted are still stopping. A running one shows where
it runs and, when it is being stopped, why and for which workload. A finished
one shows "Phase (Reason): message".

` + workloadArg,
		Example: `  gpufleet why wl-0042
  gpufleet why wl-0042 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			w, err := resolveWorkload(cmd.Context(), c, e.now(), args[0], team)
			if err != nil {
				return err
			}
			s := w.Status
			ans := whyAnswer{ID: w.ID, Phase: s.Phase, Reason: s.Reason, Message: s.Message, NominatedNode: s.NominatedNode}
			if ok, err := out.structured(e.stdout, ans); ok {
				return err
			}
			hint := notebookHint(cmd.Context(), c, w)
			_, err = fmt.Fprint(e.stdout, explain(w)+hint)
			return err
		},
	}
	addTeamFlag(cmd, &team)
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// explain renders a workload's status as lines of text.
func explain(w *api.Workload) string {
	s := w.Status
	var b strings.Builder
	switch s.Phase {
	case api.PhasePending:
		b.WriteString(joinNonEmpty(": ", s.Reason, s.Message, s.Phase) + "\n")
		if s.NominatedNode != "" {
			fmt.Fprintf(&b, "nominated node: %s\n", s.NominatedNode)
		}
	case api.PhaseRunning:
		b.WriteString("Running")
		if where := describePlacement(s.Placement); where != "" {
			b.WriteString(" on " + where)
		}
		b.WriteString("\n")
		if s.StopRequested != "" {
			b.WriteString("stopping (" + s.StopRequested + ")")
			if s.PreemptedBy != "" && !strings.Contains(s.Message, s.PreemptedBy) {
				b.WriteString(" for " + s.PreemptedBy) // unless the message names it
			}
			if s.Message != "" {
				b.WriteString(": " + s.Message)
			}
			b.WriteString("\n")
		}
	default:
		b.WriteString(s.Phase)
		if s.Reason != "" {
			b.WriteString(" (" + s.Reason + ")")
		}
		if s.Message != "" {
			b.WriteString(": " + s.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// joinNonEmpty joins the non-empty of a and b with sep, or returns def when
// both are empty.
func joinNonEmpty(sep, a, b, def string) string {
	switch {
	case a != "" && b != "":
		return a + sep + b
	case a != "" || b != "":
		return a + b
	}
	return def
}

// describePlacement says where a workload runs, node by node: "gpu1 (gpu
// 3)", "gpu1 (gpus 0,1)", "gpu1 (0.25 of gpu 3)", "gpu1 (20GiB of gpu 3)".
func describePlacement(ps []api.Placement) string {
	var nodes []string
	byNode := map[string][]api.Placement{}
	for _, p := range ps {
		if !slices.Contains(nodes, p.Node) {
			nodes = append(nodes, p.Node)
		}
		byNode[p.Node] = append(byNode[p.Node], p)
	}
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		on := byNode[n]
		switch {
		case len(on) == 1 && on[0].MilliGPU > 0 && on[0].MilliGPU < 1000:
			parts[i] = fmt.Sprintf("%s (%s of gpu %d)", n, quantity.Milli(on[0].MilliGPU), on[0].GPUIndex)
		case len(on) == 1 && on[0].MilliGPU == 0 && on[0].MemoryMiB > 0:
			parts[i] = fmt.Sprintf("%s (%s of gpu %d)", n, formatMiB(on[0].MemoryMiB), on[0].GPUIndex)
		case len(on) == 1:
			parts[i] = fmt.Sprintf("%s (gpu %d)", n, on[0].GPUIndex)
		default:
			idx := make([]string, len(on))
			for j, p := range on {
				idx[j] = strconv.Itoa(p.GPUIndex)
			}
			parts[i] = fmt.Sprintf("%s (gpus %s)", n, strings.Join(idx, ","))
		}
	}
	return strings.Join(parts, ", ")
}
