package cli

import (
	"io"

	"github.com/spf13/cobra"
)

func newLogsCmd(e *env) *cobra.Command {
	var follow bool
	var team string
	cmd := &cobra.Command{
		Use:   "logs ID|NAME [-f]",
		Short: "Print a workload's output",
		Long:  "Print a workload's output.\n\n" + workloadArg,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			w, err := resolveWorkload(cmd.Context(), c, e.now(), args[0], team)
			if err != nil {
				return err
			}
			rc, err := c.Logs(cmd.Context(), w.ID, follow)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(e.stdout, rc)
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the workload finishes")
	addTeamFlag(cmd, &team)
	return cmd
}
