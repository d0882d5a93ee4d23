package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// The node lifecycle's verbs: cordon, uncordon and drain (kubectl's),
// node validate, and debug fault for simulated nodes; describe node and
// get evidence read what the lifecycle keeps.

// The wire values of api.Node.State and api.GPU.Health that the verbs
// read.
const (
	nodeDraining = "Draining"
	nodeCordoned = "Cordoned"
	gpuHealthy   = "Healthy"
	gpuSuspect   = "Suspect"
	gpuFailed    = "Failed"
)

// isNodeKind reports whether s names the kind "node", as kubectl spells it.
func isNodeKind(s string) bool { return s == "node" || s == "nodes" || s == "no" }

// nodeArgs reads "[node] NAME" for a verb.
func nodeArgs(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 1 && isNodeKind(args[0]):
			return usagef("%s %s: which node? give its name", verb, args[0])
		case len(args) == 2 && !isNodeKind(args[0]):
			return usagef("%s %q: only nodes can be %s (%s node NAME)", verb, args[0], pastTense(verb), verb)
		case len(args) == 0 || len(args) > 2:
			return usagef("%s takes a node: %s node NAME", verb, verb)
		}
		return nil
	}
}

func pastTense(verb string) string {
	if strings.HasSuffix(verb, "e") {
		return verb + "d"
	}
	return verb + "ed"
}

// nodeVerb is a verb that changes a node's state and prints the kubectl
// form ("node/N cordoned"), or with -o json or yaml the node as the server
// answers it.
func nodeVerb(e *env, verb, short, long, example string, act func(ctx context.Context, c *api.Client, name string) (*api.Node, error)) *cobra.Command {
	var out *outputFlag
	cmd := &cobra.Command{
		Use:     verb + " node NAME",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    nodeArgs(verb),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			name := args[len(args)-1]
			n, err := act(cmd.Context(), c, name)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, n); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "node/%s %s\n", n.Name, pastTense(verb))
			return err
		},
	}
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

func newCordonCmd(e *env) *cobra.Command {
	return nodeVerb(e, "cordon", "Stop new work from landing on a node (admins)",
		`Cordon a Ready node: it takes no new work; what runs there stays. Prints
"node/NAME cordoned". Admins only. A node that is not Ready (already
cordoned, draining, being qualified, failed or lost) is refused (409), the
message saying why.`,
		`  gpufleet cordon node gpu-a`,
		func(ctx context.Context, c *api.Client, name string) (*api.Node, error) {
			return c.CordonNode(ctx, name)
		})
}

func newUncordonCmd(e *env) *cobra.Command {
	return nodeVerb(e, "uncordon", "Return a cordoned or draining node to service (admins)",
		`Uncordon a Cordoned or Draining node: it takes work again. Prints
"node/NAME uncordoned". Admins only. A Failed or Lost node is refused (409):
it returns to service by passing qualification (gpufleet node validate).`,
		`  gpufleet uncordon node gpu-a`,
		func(ctx context.Context, c *api.Client, name string) (*api.Node, error) {
			return c.UncordonNode(ctx, name)
		})
}

// Polling interval of drain --wait.
const drainPoll = 250 * time.Millisecond

func newDrainCmd(e *env) *cobra.Command {
	var out *outputFlag
	var grace, timeout time.Duration
	var wait bool
	cmd := &cobra.Command{
		Use:   "drain node NAME [--grace 5m] [--wait [--timeout D]]",
		Short: "Cordon a node and requeue its running work (admins)",
		Long: `Drain a Ready or Cordoned node: it takes no new work, and each workload
running there gets the checkpoint-friendly stop (SIGTERM, then SIGKILL after
--grace, default each workload's own grace period) and is requeued to run
elsewhere. Admins only.

The node is Draining until its work has stopped, then Cordoned; uncordon
returns it to service. drain prints "node/NAME draining" and, when the
server answers that the node is already Cordoned (nothing was running),
"node/NAME drained". Without --wait it does not wait for running work to
stop; with --wait it does, then prints "node/NAME drained" (--timeout: give
up after that long, exit 124). Draining a node that is already draining is
refused (409).`,
		Example: `  gpufleet drain node gpu-a --grace 5m
  gpufleet drain node gpu-a --wait --timeout 10m`,
		Args: nodeArgs("drain"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			switch {
			case grace < 0:
				return usagef("--grace %s: must not be negative", grace)
			case timeout < 0:
				return usagef("--timeout %s: must not be negative", timeout)
			case timeout > 0 && !wait:
				return usagef("--timeout applies with --wait")
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			name := args[len(args)-1]
			var d api.Drain
			if cmd.Flags().Changed("grace") {
				d.Grace = grace.String()
			}
			ctx := cmd.Context()
			n, err := c.DrainNode(ctx, name, &d)
			if err != nil {
				return err
			}
			text := out.value == "text"
			if text {
				fmt.Fprintf(e.stdout, "node/%s draining\n", n.Name)
			}
			if wait && n.State == nodeDraining {
				if n, err = waitDrained(ctx, c, n, timeout); err != nil {
					return err
				}
			}
			if ok, err := out.structured(e.stdout, n); ok {
				return err
			}
			switch n.State {
			case nodeDraining:
				return nil // still stopping its work; get nodes shows when it is Cordoned
			case nodeCordoned:
				_, err = fmt.Fprintf(e.stdout, "node/%s drained\n", n.Name)
				return err
			}
			return exitError{code: 1, err: fmt.Errorf("node/%s is %s, no longer draining%s", n.Name, n.State, because(n.StateReason, n.StateMessage))}
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&grace, "grace", 0, "time each running workload has between SIGTERM and SIGKILL, e.g. 5m (default: its own grace period)")
	fl.BoolVar(&wait, "wait", false, "wait until the node's work has stopped and it is Cordoned")
	fl.DurationVar(&timeout, "timeout", 0, "with --wait, give up after this long (exit 124; default never)")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// waitDrained polls a draining node until it is no longer Draining.
func waitDrained(ctx context.Context, c *api.Client, n *api.Node, timeout time.Duration) (*api.Node, error) {
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for n.State == nodeDraining {
		select {
		case <-wctx.Done():
			if ctx.Err() == nil {
				return nil, exitError{code: exitTimedOut, err: fmt.Errorf("node/%s still draining after %s", n.Name, timeout)}
			}
			return nil, ctx.Err()
		case <-t.C:
		}
		next, err := c.Node(wctx, n.Name)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				continue // the deadline, reported at the top of the loop
			}
			return nil, err
		}
		n = next
	}
	return n, nil
}

// because renders a state's reason and message as " (Reason: message)".
func because(reason, msg string) string {
	if reason == "" && msg == "" {
		return ""
	}
	return " (" + joinNonEmpty(": ", reason, msg, "") + ")"
}

func newNodeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node validate NAME",
		Short: "Qualify a node (admins)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newNodeValidateCmd(e))
	return cmd
}

func newNodeValidateCmd(e *env) *cobra.Command {
	var out *outputFlag
	var level int
	var gpus []int
	var drain bool
	cmd := &cobra.Command{
		Use:   "validate NAME [--level 1|2|3] [--gpu K ...] [--drain]",
		Short: "Qualify a node again: nvidia-smi, dcgmi discovery and dcgmi diag (admins)",
		Long: `Ask for a qualification of a node: nvidia-smi -L, nvidia-smi topo -m,
dcgmi discovery --list and dcgmi diag -r LEVEL -j, each kept as evidence
(gpufleet get evidence --node NAME). Admins only.

--level is dcgmi diag's run level: 1 (seconds, the default), 2 (about 2
minutes) or 3 (about 15 minutes). --gpu K (repeatable, or K,L) qualifies
those GPUs only, while the node's other GPUs keep serving; without it the
whole node is Validating and takes no new work meanwhile. The qualification
runs once the work on the GPUs under test has ended, or at once with --drain
(or qualification.policy drain), which requeues that work. A GPU that fails
takes no work until it passes again; a node that fails as a whole is Failed.

Prints "node/NAME validation requested" and what it waits for: the running
workloads and until when (their max runtimes), or that it has no bound;
gpufleet describe node NAME shows the outcome, gpufleet uncordon NAME gives a
waiting qualification up.`,
		Example: `  gpufleet node validate gpu-a --level 2
  gpufleet node validate gpu-a --level 2 --drain
  gpufleet node validate gpu-a --gpu 1 --gpu 3`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("node validate takes a node: node validate NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if level < 1 || level > 3 {
				return usagef("--level %d: want 1 (seconds), 2 (about 2 minutes) or 3 (about 15 minutes)", level)
			}
			for _, g := range gpus {
				if g < 0 {
					return usagef("--gpu %d: a GPU index is 0 or more", g)
				}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			n, err := c.ValidateNode(cmd.Context(), args[0], &api.Validate{Level: level, GPUs: gpus, Drain: drain})
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, n); ok {
				return err
			}
			what := ""
			if len(gpus) > 0 {
				what = " of GPU " + joinInts(gpus)
			}
			if _, err = fmt.Fprintf(e.stdout, "node/%s validation requested at level %d%s\n", n.Name, level, what); err != nil || n.Validation == nil {
				return err
			}
			w := n.Validation.Waits
			_, err = fmt.Fprintf(e.stdout, "%s%s.\n", strings.ToUpper(w[:min(1, len(w))]), w[min(1, len(w)):])
			return err
		},
	}
	cmd.Flags().IntVar(&level, "level", 1, "dcgmi diag run level: 1, 2 or 3")
	cmd.Flags().BoolVar(&drain, "drain", false, "requeue the work on the GPUs under test now rather than wait for it to end")
	cmd.Flags().IntSliceVar(&gpus, "gpu", nil, "qualify only this GPU (repeatable, or comma-separated)")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func newDebugCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "debug fault NODE ...",
		Short: "Inject faults on simulated nodes, to see the platform handle them (admins)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newDebugFaultCmd(e))
	return cmd
}

func newDebugFaultCmd(e *env) *cobra.Command {
	var out *outputFlag
	var gpu, xid int
	var diag string
	var heartbeatLost bool
	cmd := &cobra.Command{
		Use:   "fault NODE (--gpu K --diag TEST | --gpu K --xid N | --heartbeat-lost)",
		Short: "Inject a fault on a simulated node (admins)",
		Long: `Inject one fault on a node whose GPUs are all simulated; a node with real
GPUs is refused (403). Admins only.

  --gpu K --diag TEST   GPU K's next dcgmi diag fails TEST (memory, pcie, ...
                        at level 2; diagnostic, targeted_stress, ... at 3):
                        run gpufleet node validate NODE --level 2 to see it
  --gpu K --xid N       GPU K reports Xid N now: a fatal one (48, 74, 79, 95,
                        119, 120, 140) fails the GPU and requeues its
                        workloads; 94 and the memory warnings make it
                        Suspect; an application error (13, 31, 43, 45, 68,
                        109) is an event on the workloads that hold the GPU
  --heartbeat-lost      the node is Lost: its work is requeued and it
                        returns through qualification`,
		Example: `  gpufleet debug fault node-a --gpu 1 --diag memory
  gpufleet debug fault node-a --gpu 0 --xid 79
  gpufleet debug fault node-a --heartbeat-lost`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("debug fault takes a node: debug fault NODE (--gpu K --diag TEST | --gpu K --xid N | --heartbeat-lost)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			set := cmd.Flags().Changed
			faults := 0
			for _, on := range []bool{set("diag"), set("xid"), heartbeatLost} {
				if on {
					faults++
				}
			}
			switch {
			case faults != 1:
				return usagef("give one fault: --gpu K --diag TEST, --gpu K --xid N or --heartbeat-lost")
			case heartbeatLost && set("gpu"):
				return usagef("--heartbeat-lost is a fault of the node: it takes no --gpu")
			case !heartbeatLost && !set("gpu"):
				return usagef("--diag and --xid are faults of a GPU: add --gpu K")
			case set("gpu") && gpu < 0:
				return usagef("--gpu %d: a GPU index is 0 or more", gpu)
			case set("diag") && strings.TrimSpace(diag) == "":
				return usagef("--diag: name a diagnostic test, such as memory")
			case set("xid") && xid < 1:
				return usagef("--xid %d: an Xid code is 1 or more", xid)
			}
			f := api.Fault{Diag: diag, Xid: xid}
			what := "heartbeat lost"
			switch {
			case heartbeatLost:
				f.Heartbeat = "lost"
			case set("diag"):
				f.GPU = &gpu
				what = fmt.Sprintf("GPU %d fails diagnostic test %s at its next qualification", gpu, diag)
			default:
				f.GPU = &gpu
				what = fmt.Sprintf("Xid %d on GPU %d", xid, gpu)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			n, err := c.InjectFault(cmd.Context(), args[0], &f)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, n); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "node/%s fault injected: %s\n", n.Name, what)
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&gpu, "gpu", 0, "the GPU's index")
	fl.StringVar(&diag, "diag", "", "the diagnostic test the GPU's next dcgmi diag fails, e.g. memory")
	fl.IntVar(&xid, "xid", 0, "an Xid error the GPU reports now, e.g. 79 (fatal) or 13 (an application error)")
	fl.BoolVar(&heartbeatLost, "heartbeat-lost", false, "the node loses its heartbeat")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// nodeDescription is describe node's -o json and -o yaml answer: the node,
// all its events and all its evidence, as the API returns them.
type nodeDescription struct {
	Node     *api.Node       `json:"node"`
	Events   []api.NodeEvent `json:"events"`
	Evidence []api.Evidence  `json:"evidence"`
}

// describeNodeCmd is describe node NAME.
func describeNodeCmd(ctx context.Context, e *env, out *outputFlag, name string) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	n, err := c.Node(ctx, name)
	if err != nil {
		return err
	}
	events, err := c.NodeEvents(ctx, name)
	if err != nil {
		return err
	}
	ev, err := c.NodeEvidence(ctx, name)
	if err != nil {
		return err
	}
	d := nodeDescription{Node: n, Events: events, Evidence: ev.Items}
	if d.Events == nil {
		d.Events = []api.NodeEvent{}
	}
	if d.Evidence == nil {
		d.Evidence = []api.Evidence{}
	}
	if ok, err := out.structured(e.stdout, d); ok {
		return err
	}
	return describeNode(e.stdout, e.now(), d)
}

// How much describe node shows of a node's history; get evidence and -o
// json show all of it.
const (
	describeEvents   = 20
	describeEvidence = 20
)

// describeNode writes a node the way kubectl describe does: its state
// with reason and since, its GPUs with health and allocations, the latest
// events and the evidence with each command's result (not its output).
func describeNode(w io.Writer, now time.Time, d nodeDescription) error {
	n := d.Node
	tw := newTabWriter(w)
	kv := func(indent int, key, val string) {
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), key, or(val, "<none>"))
	}
	ago := func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339) + " (" + formatAge(now, *t) + " ago)"
	}
	kv(0, "Name", n.Name)
	kv(0, "State", n.State)
	kv(1, "Reason", n.StateReason)
	kv(1, "Message", n.StateMessage)
	kv(1, "Since", ago(n.StateSince))
	kv(0, "Schedulable", strconv.FormatBool(n.Schedulable))
	qualified := ago(n.LastQualified)
	if qualified != "" && len(d.Evidence) > 0 && d.Evidence[len(d.Evidence)-1].Simulated {
		qualified += " (Simulated: simulated devices, not a qualification)"
	}
	kv(0, "Last qualified", qualified)
	kv(0, "GPUs", gpuModels(n.GPUs)+" ("+or(healthSummary(n.GPUs), "none")+")")
	kv(0, "Pool", n.Pool)
	kv(0, "Region", n.Region)
	if len(n.Labels) > 0 {
		var ls []string
		for k, v := range n.Labels {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		kv(0, "Labels", strings.Join(ls, ","))
	}
	kv(0, "Isolation", n.Isolation)
	if !n.UpdatedAt.IsZero() {
		kv(0, "Updated", ago(&n.UpdatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(n.GPUs) > 0 {
		fmt.Fprintln(w, "Devices:")
		t := newTable(w, "  INDEX", "MODEL", "UUID", "HEALTH", "REASON", "ALLOCATED", "MEMORY", "WORKLOADS")
		for _, g := range n.GPUs {
			var holders []string
			for _, a := range g.Allocations {
				holders = append(holders, a.WorkloadID+"@"+quantity.Milli(a.MilliGPU).String())
			}
			t.row("  "+strconv.Itoa(g.Index), g.Model, g.UUID, or(g.Health, gpuHealthy), joinReason(g.HealthReason, g.HealthMessage),
				quantity.Milli(g.AllocatedMilliGPU).String()+"/1", formatMiB(g.AllocatedMemoryMiB)+"/"+formatMiB(g.MemoryMiB), strings.Join(holders, ","))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	if err := latest(w, "Events", len(d.Events), describeEvents, ""); err != nil || len(d.Events) == 0 {
		return err
	}
	t := newTable(w, "  TIME", "TYPE", "REASON", "OBJECT", "MESSAGE")
	for _, ev := range d.Events[max(0, len(d.Events)-describeEvents):] {
		obj := "node"
		if ev.GPU != nil {
			obj = "gpu/" + strconv.Itoa(*ev.GPU)
		}
		msg := ev.Message
		if ev.From != "" || ev.To != "" {
			msg = strings.TrimSuffix(or(ev.From, "(none)")+" -> "+ev.To+": "+msg, ": ")
		}
		if ev.By != "" && !strings.Contains(msg, "by "+ev.By) {
			msg += " (by " + ev.By + ")"
		}
		t.row("  "+ev.Time.UTC().Format(time.RFC3339), ev.Type, ev.Reason, obj, msg)
	}
	if err := t.flush(); err != nil {
		return err
	}

	if err := latest(w, "Evidence", len(d.Evidence), describeEvidence, "gpufleet get evidence --node "+n.Name); err != nil || len(d.Evidence) == 0 {
		return err
	}
	t = newTable(w, "  RUN", "STARTED", "COMMAND", "EXIT", "DURATION", "RESULT", "MESSAGE")
	for _, ev := range d.Evidence[max(0, len(d.Evidence)-describeEvidence):] {
		t.row("  "+ev.Run, ev.StartedAt.UTC().Format(time.RFC3339), quoteArgs(ev.Command), formatExitCode(ev.ExitCode),
			formatMillis(ev.DurationMs), ev.ResultLabel(), or(ev.Message, ev.Error))
	}
	return t.flush()
}

// latest writes a section's title: "<none>" when it is empty, and how many
// earlier entries are left out, and where to see them.
func latest(w io.Writer, title string, n, shown int, more string) error {
	var err error
	switch {
	case n == 0:
		_, err = fmt.Fprintf(w, "%s:  <none>\n", title)
	case n > shown && more != "":
		_, err = fmt.Fprintf(w, "%s (the latest %d of %d; all: %s):\n", title, shown, n, more)
	case n > shown:
		_, err = fmt.Fprintf(w, "%s (the latest %d of %d; all: -o json):\n", title, shown, n)
	default:
		_, err = fmt.Fprintf(w, "%s:\n", title)
	}
	return err
}

func joinReason(reason, msg string) string {
	if reason != "" && msg != "" {
		return reason + ": " + msg
	}
	return reason + msg
}

// formatMillis renders a duration in milliseconds: "850ms", "2.4s".
func formatMillis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Second {
		d = d.Round(100 * time.Millisecond)
	}
	return d.String()
}

// healthSummary sums up a node's GPU health: "4/4 healthy", or "3/4
// healthy, 1 failed"; "" for a node without GPUs.
func healthSummary(gs []api.GPU) string {
	if len(gs) == 0 {
		return ""
	}
	var healthy, suspect, failed int
	for _, g := range gs {
		switch g.Health {
		case gpuSuspect:
			suspect++
		case gpuFailed:
			failed++
		default: // Healthy, or a server that reports no health
			healthy++
		}
	}
	s := fmt.Sprintf("%d/%d healthy", healthy, len(gs))
	if suspect > 0 {
		s += fmt.Sprintf(", %d suspect", suspect)
	}
	if failed > 0 {
		s += fmt.Sprintf(", %d failed", failed)
	}
	return s
}

// gpuHealth is a GPU's health for get nodes -o wide: "Healthy", or
// "Failed (Xid79)".
func gpuHealth(g api.GPU) string {
	h := or(g.Health, gpuHealthy)
	if g.HealthReason != "" {
		h += " (" + g.HealthReason + ")"
	}
	return h
}

// printEvidence prints get evidence's table: one row per command run,
// oldest first; -o wide adds the GPUs tested and the versions.
func printEvidence(e *env, format string, evs []api.Evidence) error {
	header := []string{"RUN", "STARTED", "COMMAND", "EXIT", "DURATION", "RESULT", "MESSAGE"}
	if format == outWide {
		header = append(header, "GPUS", "DRIVER", "DCGM", "SIMULATED")
	}
	t := newTable(e.stdout, header...)
	for _, ev := range evs {
		row := []string{ev.Run, ev.StartedAt.UTC().Format(time.RFC3339), quoteArgs(ev.Command), formatExitCode(ev.ExitCode),
			formatMillis(ev.DurationMs), ev.ResultLabel(), or(ev.Message, ev.Error)}
		if format == outWide {
			gpus := "all"
			if len(ev.GPUs) > 0 {
				gpus = joinInts(ev.GPUs)
			}
			row = append(row, gpus, ev.DriverVersion, ev.DCGMVersion, strconv.FormatBool(ev.Simulated))
		}
		t.row(row...)
	}
	return t.flush()
}
