package cli

import (
	"io"

	"github.com/spf13/cobra"
)

func newLogsCmd(e *env) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ID [-f]",
		Short: "Print a workload's output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			rc, err := c.Logs(cmd.Context(), args[0], follow)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(e.stdout, rc)
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the workload finishes")
	return cmd
}
