package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

// workloadDescription is describe's -o json and -o yaml answer.
type workloadDescription struct {
	Workload *api.Workload    `json:"workload"`
	Events   []describedEvent `json:"events"`
	// Attempts are its attempts that ended, with what each used of its
	// host against its request.
	Attempts *api.AttemptList `json:"attempts"`
}

// describedEvent is an event as the API sends it, except that the message
// is always present, so that every event has time, reason and message.
type describedEvent struct {
	api.Event
	Message string `json:"message"`
}

func describedEvents(events []api.Event) []describedEvent {
	out := make([]describedEvent, len(events))
	for i, ev := range events {
		out[i] = describedEvent{Event: ev, Message: ev.Message}
	}
	return out
}

func newDescribeCmd(e *env) *cobra.Command {
	var out *outputFlag
	var team string
	cmd := &cobra.Command{
		Use:   "describe [workload] ID|NAME | describe node NAME",
		Short: "Show a workload's spec, status, placement and events, or a node's state, GPUs, events and evidence",
		Long: `Show a workload's spec, status, placement and events.

describe node NAME shows a node's state with its reason and since when, its
GPUs with their health and allocations, its latest events and its latest
qualification evidence with each command's result (the raw outputs: get
evidence --node NAME -o json).

` + workloadArg,
		Example: `  gpufleet describe wl-0042
  gpufleet describe workload llm-finetune --team research
  gpufleet describe node gpu-a`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			// describe node NAME (node.go).
			case len(args) == 1 && isNodeKind(args[0]):
				return usagef("describe %s: which node? give its name", args[0])
			case len(args) == 2 && isNodeKind(args[0]):
				return nil
			case len(args) == 1 && isWorkloadKind(args[0]):
				return usagef("describe %s: which workload? give its ID or name", args[0])
			case len(args) == 2 && !isWorkloadKind(args[0]):
				return usagef("describe %q: only workloads and nodes can be described (describe [workload] ID|NAME, describe node NAME)", args[0])
			case len(args) == 0 || len(args) > 2:
				return usagef("describe takes a workload: describe [workload] ID|NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if isNodeKind(args[0]) && len(args) == 2 {
				if team != "" {
					return usagef("--team applies to workloads only")
				}
				return describeNodeCmd(cmd.Context(), e, out, args[1])
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			w, err := resolveWorkload(cmd.Context(), c, e.now(), args[len(args)-1], team)
			if err != nil {
				return err
			}
			events, err := c.Events(cmd.Context(), w.ID)
			if err != nil {
				return err
			}
			if events == nil {
				events = []api.Event{}
			}
			attempts, err := c.Attempts(cmd.Context(), w.ID)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, workloadDescription{Workload: w, Events: describedEvents(events), Attempts: attempts}); ok {
				return err
			}
			return describeWorkload(e.stdout, e.now(), w, events, attempts)
		},
	}
	addTeamFlag(cmd, &team)
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// isWorkloadKind reports whether s names the kind "workload", as describe
// and get spell it.
func isWorkloadKind(s string) bool { return s == "workload" || s == "workloads" || s == "wl" }

// describeWorkload writes a workload the way kubectl describe does: aligned
// "Key: value" lines, nested sections indented, then the events.
func describeWorkload(w io.Writer, now time.Time, wl *api.Workload, events []api.Event, attempts *api.AttemptList) error {
	tw := newTabWriter(w)
	// Every line ends its key with a tab, section titles included, so that
	// the values line up across the sections.
	kv := func(indent int, key, val string) {
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), key, or(val, "<none>"))
	}
	section := func(title string) { fmt.Fprintf(tw, "%s:\t\n", title) }
	kvMap := func(title string, m map[string]string) {
		if len(m) == 0 {
			kv(0, title, "")
			return
		}
		section(title)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			kv(1, k, m[k])
		}
	}
	r := wl.Resources
	s := wl.Status

	kv(0, "ID", wl.ID)
	kv(0, "Name", wl.Name)
	kv(0, "Team", wl.Team)
	kv(0, "Owner", wl.Owner)
	kv(0, "Kind", or(wl.Kind, api.KindJob))
	kv(0, "Priority", wl.Priority)
	created := ""
	if !wl.CreatedAt.IsZero() {
		created = wl.CreatedAt.Format(time.RFC3339) + " (" + formatAge(now, wl.CreatedAt) + " ago)"
	}
	kv(0, "Created", created)
	if n := wl.Native; n != nil { // pods made on the cluster with kubectl or a controller
		section("Kubernetes")
		kv(1, "Namespace", n.Namespace)
		kv(1, "Pods", strings.Join(n.Pods, ", "))
		if n.Group != "" {
			kv(1, "Gang", n.Name+" (by "+n.Group+")")
		}
		if o := n.Owner; o != nil {
			kv(1, "Owner", o.Kind+"/"+o.Name+" ("+o.APIVersion+")")
		}
	}
	if wl.Image != "" { // only the kubernetes executor runs images
		kv(0, "Image", wl.Image)
	}
	kv(0, "Command", quoteArgs(wl.Command))
	kv(0, "Working dir", wl.WorkingDir)
	kv(0, "Max runtime", formatSeconds(wl.MaxRuntimeSeconds, "none"))
	kv(0, "Grace period", formatSeconds(wl.GracePeriodSeconds, "default"))
	section("Resources")
	if r.GPUMemoryMiB > 0 {
		kv(1, "GPU memory", formatMiB(r.GPUMemoryMiB)+" of one GPU")
	} else {
		kv(1, "GPUs", r.GPUs.String())
	}
	kv(1, "GPU models", or(strings.Join(r.GPUModels, ", "), "any"))
	if r.CPU > 0 {
		kv(1, "CPU", r.CPU.String())
	}
	if r.MemoryMiB > 0 {
		kv(1, "Memory", formatMiB(r.MemoryMiB))
	}
	kvMap("Env", wl.Env)
	kvMap("Labels", wl.Labels)

	section("Status")
	kv(1, "Phase", s.Phase)
	kv(1, "Reason", s.Reason)
	kv(1, "Message", s.Message)
	kv(1, "Exit code", formatExitCode(s.ExitCode))
	kv(1, "Attempts", strconv.Itoa(s.Attempts))
	kv(1, "Preemptions", strconv.Itoa(s.Preemptions))
	if s.StopRequested != "" {
		kv(1, "Stop requested", s.StopRequested)
	}
	if s.PreemptedBy != "" {
		kv(1, "Preempted by", s.PreemptedBy)
	}
	if s.NominatedNode != "" {
		kv(1, "Nominated node", s.NominatedNode)
	}
	kv(1, "Started", formatTime(s.StartedAt))
	kv(1, "Finished", formatTime(s.FinishedAt))
	if s.Address != "" {
		kv(1, "Address", s.Address)
	}
	if u := s.Usage; u != nil {
		use := formatUtil(&u.GPUUtilization) + " GPU, " + formatMiB(u.GPUMemoryUsedMiB) + " GPU memory, sampled " + u.SampledAt.UTC().Format(time.RFC3339)
		if u.IdleSince != nil {
			use += ", idle since " + u.IdleSince.UTC().Format(time.RFC3339)
		}
		kv(1, "Usage", use)
	}
	describeAttempts(kv, section, s, attempts)
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(s.Placement) == 0 {
		fmt.Fprintln(w, "Placement:  <none>")
	} else {
		fmt.Fprintln(w, "Placement:")
		t := newTable(w, "  NODE", "GPU", "UUID", "MILLI-GPU", "MEMORY")
		for _, p := range s.Placement {
			t.row("  "+p.Node, strconv.Itoa(p.GPUIndex), p.GPUUUID, strconv.FormatInt(p.MilliGPU, 10), formatMiB(p.MemoryMiB))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "Events:     <none>")
		return err
	}
	fmt.Fprintln(w, "Events:")
	t := newTable(w, "  TIME", "TYPE", "REASON", "MESSAGE")
	for _, ev := range events {
		t.row("  "+ev.Time.Format(time.RFC3339), ev.Type, ev.Reason, eventMessage(ev))
	}
	return t.flush()
}

// eventMessage is an event's message, with its phase change when it has one.
func eventMessage(ev api.Event) string {
	msg := ev.Message
	if ev.From != "" || ev.To != "" {
		change := or(ev.From, "(none)") + " -> " + ev.To
		if msg == "" {
			return change
		}
		msg = change + ": " + msg
	}
	return msg
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// formatSeconds renders a number of seconds as a duration, or def for 0.
func formatSeconds(n int64, def string) string {
	if n == 0 {
		return def
	}
	return (time.Duration(n) * time.Second).String()
}
