package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newCancelCmd(e *env) *cobra.Command {
	var out *outputFlag
	var team string
	cmd := &cobra.Command{
		Use:   "cancel ID|NAME...",
		Short: "Cancel workloads",
		Long: `Cancel workloads. A running workload gets SIGTERM, then SIGKILL after its
grace period. Each line says "ID cancelled", or the phase the workload is in
when it was already finished or is still stopping.

` + workloadArg + `

` + arrayArg,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			var got []api.Workload
			failed := 0
			var arrays []api.Array
			for _, id := range args {
				id = taskRef(id)
				a, err := findArray(cmd.Context(), c, id)
				if err == nil && a != nil {
					a, err = cancelArray(cmd.Context(), e, c, a, out.value == "text")
				}
				if a != nil || err != nil {
					if err != nil {
						if len(args) == 1 {
							return err
						}
						fmt.Fprintf(e.stderr, "error: %s: %v\n", id, err)
						failed++
					} else {
						arrays = append(arrays, *a)
					}
					continue
				}
				w, err := resolveWorkload(cmd.Context(), c, e.now(), id, team)
				if err == nil {
					w, err = c.CancelWorkload(cmd.Context(), w.ID)
				}
				if err != nil {
					if len(args) == 1 {
						return err
					}
					fmt.Fprintf(e.stderr, "error: %s: %v\n", id, err)
					failed++
					continue
				}
				got = append(got, *w)
				if out.value != "text" {
					continue
				}
				switch w.Status.Phase {
				case api.PhaseCancelled:
					fmt.Fprintf(e.stdout, "%s cancelled\n", w.ID)
				case api.PhaseSucceeded, api.PhaseFailed:
					fmt.Fprintf(e.stdout, "%s already %s\n", w.ID, w.Status.Phase)
				default:
					fmt.Fprintf(e.stdout, "%s cancelling (%s)\n", w.ID, w.Status.Phase)
				}
			}
			if len(args) == 1 && len(arrays) == 1 {
				if _, err := out.structured(e.stdout, &arrays[0]); err != nil {
					return err
				}
			} else if len(arrays) > 0 && len(got) == 0 {
				if _, err := out.structured(e.stdout, list(arrays)); err != nil {
					return err
				}
			} else if len(args) == 1 && len(got) == 1 {
				if _, err := out.structured(e.stdout, &got[0]); err != nil {
					return err
				}
			} else if _, err := out.structured(e.stdout, list(got)); err != nil {
				return err
			}
			if failed > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	addTeamFlag(cmd, &team)
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}
