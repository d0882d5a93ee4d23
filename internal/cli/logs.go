package cli

import (
	"errors"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

// maxTailLines is the most lines --tail asks for (the server's bound).
const maxTailLines = 100000

func newLogsCmd(e *env) *cobra.Command {
	var follow bool
	var tail int
	var since time.Duration
	var team string
	cmd := &cobra.Command{
		Use:   "logs ID|NAME [-f] [--tail N] [--since DURATION]",
		Short: "Print a workload's output",
		Long: "Print a workload's output.\n\n" + workloadArg + "\n\n" + arrayArg +
			" For an array, each task's output follows a \"==> ID <==\" line, in index\norder (not with -f: follow one task).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			arg := taskRef(args[0])
			a, err := findArray(cmd.Context(), c, arg)
			if err != nil {
				return err
			}
			var w *api.Workload
			if a == nil {
				if w, err = resolveWorkload(cmd.Context(), c, e.now(), arg, team); err != nil {
					return err
				}
			}
			if tail < 0 || tail > maxTailLines {
				return usagef("--tail %d: want a number of lines from 1 to %d", tail, maxTailLines)
			}
			if since < 0 || since > 365*24*time.Hour {
				return usagef("--since %s: want a duration from 1s to 8760h (a year), e.g. 10m", since)
			}
			secs := int64(since / time.Second)
			if since > 0 && secs == 0 {
				secs = 1
			}
			if a != nil {
				return arrayLogs(cmd.Context(), e, c, a, api.LogOptions{Follow: follow, TailLines: tail, SinceSeconds: secs})
			}
			rc, err := c.LogsWith(cmd.Context(), w.ID, api.LogOptions{Follow: follow, TailLines: tail, SinceSeconds: secs})
			if err != nil {
				return err
			}
			defer rc.Close()
			return streamed(io.Copy(e.stdout, rc))
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing until the workload finishes")
	cmd.Flags().IntVar(&tail, "tail", 0, "print only the last N lines (with -f, then follow from there)")
	cmd.Flags().DurationVar(&since, "since", 0, "print only the output of the last DURATION (5s, 10m, 2h; to within a second), then follow with -f")
	addTeamFlag(cmd, &team)
	return cmd
}

// streamed is how a followed log's copy ends: a stream the server closed
// for lost rights fails quietly (its last line said why).
func streamed(_ int64, err error) error {
	var closed *api.StreamClosedError
	if errors.As(err, &closed) {
		return exitError{code: 1}
	}
	return err
}
