package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

// Polling intervals of wait: the first, and the cap it backs off to.
const (
	waitFirstPoll = 200 * time.Millisecond
	waitMaxPoll   = time.Second
)

// exitTimedOut is wait's exit code when --timeout passes, as timeout(1).
const exitTimedOut = 124

func newWaitCmd(e *env) *cobra.Command {
	var timeout time.Duration
	var out *outputFlag
	var team string
	cmd := &cobra.Command{
		Use:   "wait ID|NAME [--timeout DURATION]",
		Short: "Wait for a workload to finish and exit with its exit code",
		Long: `Wait until a workload has finished (Succeeded, Failed or Cancelled).

The exit status is the workload's exit code when it has one, 0 for
Succeeded, and 1 for Failed or Cancelled without one (or with 0). A failure
is reported on standard error as "ID: Failed (reason): message". After
--timeout (0: never) wait exits with 124.

` + workloadArg + `

` + arrayArg + ` For an array, wait exits 0 once every task has
succeeded, and 1 (with the tasks counted by phase on standard error) once
all have finished and some did not.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout %s: must not be negative", timeout)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			arg := taskRef(args[0])
			if a, err := findArray(cmd.Context(), c, arg); err != nil {
				return err
			} else if a != nil {
				a, err = waitArray(ctx, c, a.ID)
				if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil && a != nil {
					return exitError{code: exitTimedOut, err: fmt.Errorf("%s: %d of %d tasks still not finished after %s (%s)", arg, a.Tasks-finished(a), a.Tasks, timeout, formatPhases(a.Phases))}
				}
				if err != nil {
					return err
				}
				if _, err := out.structured(e.stdout, a); err != nil {
					return err
				}
				return arrayExit(e, a)
			}
			w, err := resolveWorkload(cmd.Context(), c, e.now(), arg, team)
			if err != nil {
				return err
			}
			w, err = waitFinished(ctx, c, w.ID)
			if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil {
				msg := fmt.Errorf("%s: still not finished after %s", args[0], timeout)
				if w != nil {
					msg = fmt.Errorf("%s: still %s after %s", args[0], w.Status.Phase, timeout)
				}
				return exitError{code: exitTimedOut, err: msg}
			}
			if err != nil {
				return err
			}
			if _, err := out.structured(e.stdout, w); err != nil {
				return err
			}
			code := exitCode(w)
			if code != 0 {
				s := w.Status
				msg := w.ID + ": " + s.Phase
				if s.Reason != "" {
					msg += " (" + s.Reason + ")"
				}
				if s.Message != "" {
					msg += ": " + s.Message
				}
				fmt.Fprintln(e.stderr, msg)
				return exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long, e.g. 10m (0: wait for ever)")
	addTeamFlag(cmd, &team)
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// waitFinished polls the workload until its phase is terminal, backing off
// from waitFirstPoll to waitMaxPoll. Answers that say the server is
// briefly unavailable are retried. It returns the last workload it read even
// on error.
func waitFinished(ctx context.Context, c *api.Client, id string) (*api.Workload, error) {
	var last *api.Workload
	delay := waitFirstPoll
	for {
		w, err := c.GetWorkload(ctx, id)
		switch {
		case err == nil:
			last = w
			if terminal(w.Status.Phase) {
				return w, nil
			}
		case !retryable(err):
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			return last, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*3/2, waitMaxPoll)
	}
}

func terminal(phase string) bool {
	return phase == api.PhaseSucceeded || phase == api.PhaseFailed || phase == api.PhaseCancelled
}

// retryable reports whether an error says the server will likely answer
// again soon.
func retryable(err error) bool {
	var se *api.StatusError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// exitCode is wait's exit status for a finished workload: its own exit code
// when it has one, except that a workload that did not succeed never exits
// 0; 1 when it has none and did not succeed. Codes outside 0-255 (a process
// killed by a signal may carry -1) become 1.
func exitCode(w *api.Workload) int {
	failed := w.Status.Phase != api.PhaseSucceeded
	code := 0
	if failed {
		code = 1
	}
	if c := w.Status.ExitCode; c != nil {
		code = *c
		if code < 0 || code > 255 {
			code = 1
		}
	}
	if failed && code == 0 {
		code = 1
	}
	return code
}
