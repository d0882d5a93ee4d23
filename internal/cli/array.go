package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// arrayArg is how the verbs that take an array document it.
const arrayArg = `A job array (submit --array) is named by its ID: the verb acts on every
task. One task is named ARRAYID-INDEX, which is the task's own workload ID
(wl-4pzi4zb2m4pxh5ys-7); Slurm's form ARRAYID_INDEX is taken too.`

// taskRef turns Slurm's ARRAYID_INDEX into the task's ID, ARRAYID-INDEX;
// any other argument is returned as it is.
func taskRef(arg string) string {
	if i := strings.LastIndexByte(arg, '_'); i > 0 && strings.HasPrefix(arg, "wl-") {
		if _, err := strconv.Atoi(arg[i+1:]); err == nil && arg[i+1:] != "" && arg[i+1] != '-' && arg[i+1] != '+' {
			return arg[:i] + "-" + arg[i+1:]
		}
	}
	return arg
}

// findArray reads the array arg names when it looks like an array's ID
// ("wl-" and one part: a task's ID has its index after a second "-"); nil,
// and no error, when it names no array.
func findArray(ctx context.Context, c *api.Client, arg string) (*api.Array, error) {
	rest, ok := strings.CutPrefix(arg, "wl-")
	if !ok || rest == "" || strings.Contains(rest, "-") {
		return nil, nil
	}
	a, err := c.GetArray(ctx, arg)
	var se *api.StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil, nil
	}
	return a, err
}

// submitArray submits w, whose Array is set, as one request, and prints
// the array's ID (or the array, with -o json or yaml).
func submitArray(ctx context.Context, e *env, c *api.Client, w *api.Workload, key string, out *outputFlag) (*api.Array, error) {
	a, err := c.SubmitArray(ctx, w, key)
	if err != nil {
		return nil, err
	}
	if ok, err := out.structured(e.stdout, a); ok {
		return a, err
	}
	_, err = fmt.Fprintln(e.stdout, a.ID)
	return a, err
}

// phaseOrder is the order array phase counts are printed in.
var phaseOrder = []string{api.PhasePending, api.PhaseRunning, api.PhaseSucceeded, api.PhaseFailed, api.PhaseCancelled}

// formatPhases prints phase counts as "Pending 940 Running 50 Succeeded
// 10", leaving out the phases with none.
func formatPhases(counts map[string]int) string {
	var b strings.Builder
	for _, p := range phaseOrder {
		if n := counts[p]; n > 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s %d", p, n)
		}
	}
	return b.String()
}

// foldArrays replaces the tasks of each job array in a list with one row,
// where the first of them was: its ID is the array's, its name says the
// range ("sweep[0-999%50]"), and its phase counts its tasks by phase
// ("Pending 940 Running 50 Succeeded 10"), of those listed.
func foldArrays(ws []api.Workload) []api.Workload {
	out := make([]api.Workload, 0, len(ws))
	rows := map[string]int{}              // array ID → row in out
	counts := map[string]map[string]int{} // array ID → phase → tasks
	for _, w := range ws {
		a := w.Array
		if a == nil || a.ID == "" {
			out = append(out, w)
			continue
		}
		if _, ok := rows[a.ID]; !ok {
			rows[a.ID] = len(out)
			counts[a.ID] = map[string]int{}
			row := w
			row.ID = a.ID
			row.Name = w.Name + "[" + a.String() + "]"
			row.Status = api.WorkloadStatus{}
			out = append(out, row)
		}
		counts[a.ID][w.Status.Phase]++
		out[rows[a.ID]].Status.Attempts += w.Status.Attempts
	}
	for id, i := range rows {
		out[i].Status.Phase = formatPhases(counts[id])
	}
	return out
}

// cancelArray cancels every task of a and prints what became of them.
func cancelArray(ctx context.Context, e *env, c *api.Client, a *api.Array, text bool) (*api.Array, error) {
	a, err := c.CancelArray(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	if text {
		fmt.Fprintf(e.stdout, "%s cancelled (%d tasks: %s)\n", a.ID, a.Tasks, formatPhases(a.Phases))
	}
	return a, nil
}

// finished counts an array's tasks that have finished.
func finished(a *api.Array) int {
	return a.Phases[api.PhaseSucceeded] + a.Phases[api.PhaseFailed] + a.Phases[api.PhaseCancelled]
}

// waitArray polls an array until every task has finished, backing off as
// waitFinished does. It returns the last array it read even on error.
func waitArray(ctx context.Context, c *api.Client, id string) (*api.Array, error) {
	var last *api.Array
	delay := waitFirstPoll
	for {
		a, err := c.GetArray(ctx, id)
		switch {
		case err == nil:
			last = a
			if finished(a) >= a.Tasks {
				return a, nil
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

// arrayExit is wait's exit status for a finished array: 0 when every task
// succeeded, 1 otherwise, with the tally on standard error.
func arrayExit(e *env, a *api.Array) error {
	if a.Phases[api.PhaseSucceeded] == a.Tasks {
		return nil
	}
	fmt.Fprintf(e.stderr, "%s: %d of %d tasks did not succeed (%s)\n", a.ID, a.Tasks-a.Phases[api.PhaseSucceeded], a.Tasks, formatPhases(a.Phases))
	return exitError{code: 1}
}

// arrayLogs prints the output of every task of a that has one, in index
// order, each under a "==> ID <==" line as tail(1) heads files. Tasks
// that have not run (the server has no log for them) are skipped.
func arrayLogs(ctx context.Context, e *env, c *api.Client, a *api.Array, o api.LogOptions) error {
	if o.Follow {
		return usagef("logs -f follows one task: name it %s-INDEX", a.ID)
	}
	if a.Phases[api.PhasePending] == a.Tasks {
		fmt.Fprintf(e.stderr, "%s: no task has run yet (%d pending)\n", a.ID, a.Tasks)
		return nil
	}
	for i := a.Start; i <= a.End; i++ {
		id := api.TaskID(a.ID, i)
		rc, err := c.LogsWith(ctx, id, o)
		var se *api.StatusError
		if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusConflict || se.Status == http.StatusBadRequest) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		br := bufio.NewReader(rc)
		if _, err := br.Peek(1); err == nil { // a task without output gets no heading
			fmt.Fprintf(e.stdout, "==> %s <==\n", id)
			_, err = io.Copy(e.stdout, br)
		}
		rc.Close()
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}
