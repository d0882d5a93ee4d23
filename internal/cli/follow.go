package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gpufleet/gpufleet/api"
)

// followToEnd streams a workload's log until it has finished, then exits
// as wait does: with the workload's exit code, its failure on stderr.
func followToEnd(ctx context.Context, e *env, c *api.Client, id string) error {
	rc, err := c.LogsWith(ctx, id, api.LogOptions{Follow: true})
	if err != nil {
		return err
	}
	err = streamed(io.Copy(e.stdout, rc))
	rc.Close()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if ee := (exitError{}); errors.As(err, &ee) {
		return ee // the server ended the stream, and said why
	}
	// The followed log ends when the workload has finished (or the
	// connection broke): ask until its phase says so.
	w, err := waitFinished(ctx, c, id)
	if err != nil {
		return err
	}
	if code := exitCode(w); code != 0 {
		fmt.Fprintln(e.stderr, failureLine(w))
		return exitError{code: code}
	}
	return nil
}

// failureLine is how wait and submit --follow report a workload that did
// not succeed: "ID: Phase (Reason): message".
func failureLine(w *api.Workload) string {
	s := w.Status
	msg := w.ID + ": " + s.Phase
	if s.Reason != "" {
		msg += " (" + s.Reason + ")"
	}
	if s.Message != "" {
		msg += ": " + s.Message
	}
	return msg
}
