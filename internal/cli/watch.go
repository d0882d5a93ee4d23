package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// watchInterval is how often get workloads --watch polls the server.
var watchInterval = time.Second

// watchKey is what a watch compares to see that a workload changed.
type watchKey struct {
	phase, reason, message, stop, node string
	attempts, preemptions              int
}

func keyOf(w api.Workload) watchKey {
	s := w.Status
	return watchKey{s.Phase, s.Reason, s.Message, s.StopRequested, placementNodes(s.Placement), s.Attempts, s.Preemptions}
}

// watchWorkloads prints the workloads opts selects, then every one that
// appears or changes, until ctx ends (an interrupt), which is no error. As
// a table it prints the header once; with -o json it prints one compact JSON
// object per line, a workload each time it changes.
func watchWorkloads(ctx context.Context, e *env, c *api.Client, opts api.ListOptions, format string) error {
	seen := map[string]watchKey{}
	first := true
	for {
		ws, err := c.AllWorkloads(ctx, opts)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !retryable(err):
			return err
		}
		var changed []api.Workload
		for _, w := range ws {
			k := keyOf(w)
			if old, ok := seen[w.ID]; !ok || old != k {
				seen[w.ID] = k
				changed = append(changed, w)
			}
		}
		if len(changed) > 0 || first {
			if err := printWatched(e, format, changed, first); err != nil {
				return err
			}
		}
		first = false
		t := time.NewTimer(watchInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func printWatched(e *env, format string, ws []api.Workload, header bool) error {
	if format == outJSON {
		for _, w := range ws {
			b, err := json.Marshal(w)
			if err != nil {
				return err
			}
			if _, err := e.stdout.Write(append(b, '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	var buf bytes.Buffer
	tmp := *e
	tmp.stdout = &buf
	if err := printWorkloads(&tmp, format, ws); err != nil {
		return err
	}
	out := buf.String()
	if !header {
		_, out, _ = strings.Cut(out, "\n") // the header is printed once
	}
	_, err := e.stdout.Write([]byte(out))
	return err
}
