package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
)

func newAcceptCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "accept run|list|get|report|decide",
		Short: "Prove a workload on real capacity in stages: acceptance cards and their runs",
		Long: `An acceptance card (kind: AcceptanceCard) names a brief, a target pool or
GPU model, and stages in order (smoke, functional, load, failure, review),
each one or more workloads on the target whose metrics are judged by the
stage's criteria ("p95_latency_ms <= 200"; a criterion whose metric nobody
reported fails). The server runs the stages and keeps the run: its metrics,
each criterion's value and verdict, and the review's decision.`,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("accept %q: want run, list, get, report or decide", args[0])
			}
			return usagef("accept what? want run, list, get, report or decide")
		},
	}
	cmd.AddCommand(newAcceptRunCmd(e), newAcceptListCmd(e), newAcceptGetCmd(e), newAcceptReportCmd(e), newAcceptDecideCmd(e))
	return cmd
}

// readCard reads a card file and the brief file it names (relative to the
// card), which goes to the server inline.
func readCard(e *env, name string) (*api.AcceptanceCard, error) {
	b, err := readInput(e, name)
	if err != nil {
		return nil, err
	}
	card, err := accept.ParseCard(b)
	if err != nil {
		return nil, usagef("%s: %v", name, err)
	}
	if card.BriefFile != "" {
		p := card.BriefFile
		if !filepath.IsAbs(p) && name != "-" {
			p = filepath.Join(filepath.Dir(name), p)
		}
		bb, err := os.ReadFile(p)
		if err != nil {
			return nil, usagef("%s: briefFile: %v", name, err)
		}
		var brief api.WorkloadBrief
		if err := decodeBrief(bb, &brief); err != nil {
			return nil, usagef("%s: briefFile %s: %v", name, card.BriefFile, err)
		}
		card.Brief, card.BriefFile = &brief, ""
	}
	return card, nil
}

func newAcceptRunCmd(e *env) *cobra.Command {
	var pool, team string
	var cont bool
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "run CARD.yaml [--pool P] [--continue]",
		Short: "Run an acceptance card's stages on the server, with progress; exit 1 when it fails",
		Long: `Run a card: the server submits each stage's workloads (as you, in the
card's team, pinned to its target), disrupts a failure stage's workload once
it runs (requeue, stop, or drain for admins), drives a load stage's workload
with its own load generator, measures the platform's metrics (exit_code,
queue_wait_seconds, restarts, recovery_seconds, gpu_memory_peak_mib,
memory_headroom_ratio) next to those the workload wrote, and judges each
criterion. Stages run in order and the run stops at the first failing one
unless --continue. The progress goes to standard error; the result to
standard output. The exit status is 0 when the card passed, 1 when it
failed.

The metrics file: a stage workload writes one JSON object a line to the
file $GPUFLEET_METRICS_FILE names, read when the attempt ends (64 KiB,
64 names; a name is lowercase letters, digits and _):

  {"name": "p95_latency_ms", "value": 182, "unit": "ms"}
  {"name": "step_ms", "value": 41.5, "unit": "ms"}
  {"name": "step_ms", "value": 39.0, "unit": "ms"}

A name written once is that value. A name written more than once is a
series: the bare name keeps the last value, and p50_NAME, p95_NAME,
p99_NAME (nearest rank: the sample at rank ceil(p/100 x n), so p95 of the
samples 1..100 is 95), mean_NAME and count_NAME are derived for criteria
("p95_step_ms <= 50"), unless the workload wrote that name itself.

A load stage with a load: section needs no load test of its own: once its
workload serves, gpufleet sends it requests through the proxy's path
(protocol openai, streamed, or http), step by step at each concurrency,
and reports requests_total, error_rate, requests_per_second,
output_tokens_per_second, and p50_, p95_, p99_, mean_ and count_ of
latency_ms, ttft_ms, itl_ms and tpot_ms (with several steps, each step's
are also cN.NAME). A failure stage fails when its workload ended before it
was disrupted, or did not run again after. docs/ACCEPTANCE.md has the
whole format and an example card.`,
		Example: `  gpufleet accept run card.yaml
  gpufleet accept run card.yaml --pool local --continue -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			card, err := readCard(e, args[0])
			if err != nil {
				return err
			}
			if team != "" {
				card.Team = team
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			run, err := c.StartAcceptance(ctx, &api.AcceptanceRunRequest{Card: *card, Continue: cont, Pool: pool})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "acceptance run %s of card %s started\n", run.ID, card.Name)
			seen := map[string]string{}
			for {
				for _, s := range run.Stages {
					if seen[s.Name] != s.Status {
						seen[s.Name] = s.Status
						fmt.Fprintf(e.stderr, "  stage %-16s %s%s\n", s.Name, s.Status, stageNote(s))
					}
				}
				if run.Status != api.RunRunning {
					break
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
				if run, err = c.AcceptanceRun(ctx, run.ID); err != nil {
					return err
				}
			}
			if ok, err := out.structured(e.stdout, run); ok {
				if err == nil && run.Status != api.RunPassed {
					return exitError{code: 1}
				}
				return err
			}
			if err := printRun(e, run); err != nil {
				return err
			}
			if run.Status != api.RunPassed {
				return exitError{code: 1, err: fmt.Errorf("acceptance run %s %s: %s", run.ID, strings.ToLower(run.Status), run.Message)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "run on this pool instead of the card's target pool")
	cmd.Flags().BoolVar(&cont, "continue", false, "run every stage even after one fails")
	addTeamFlag(cmd, &team)
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

// stageNote is what a progress line says besides the status.
func stageNote(s api.StageRun) string {
	switch {
	case s.Status == api.StageRunning && len(s.Workloads) > 0:
		return " (" + strings.Join(s.Workloads, ", ") + ")"
	case s.Message != "" && s.Status != api.StageRunning:
		return ": " + s.Message
	}
	return ""
}

func newAcceptListCmd(e *env) *cobra.Command {
	var team string
	var out *outputFlag
	cmd := &cobra.Command{
		Use:     "list [--team T]",
		Short:   "List the acceptance runs of your teams, newest first",
		Example: `  gpufleet accept list -o json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			runs, err := c.AcceptanceRuns(cmd.Context(), team)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, list(runs)); ok {
				return err
			}
			t := newTable(e.stdout, "ID", "CARD", "TEAM", "STATUS", "DECISION", "AGE")
			for _, r := range runs {
				d := "-"
				if r.Decision != nil {
					d = r.Decision.Decision
				}
				t.row(r.ID, r.Card.Name, r.Team, r.Status, d, formatAge(e.now(), r.StartedAt))
			}
			return t.flush()
		},
	}
	addTeamFlag(cmd, &team)
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

func newAcceptGetCmd(e *env) *cobra.Command {
	var out *outputFlag
	cmd := &cobra.Command{
		Use:     "get RUN",
		Short:   "Show an acceptance run: each stage, its metrics and each criterion's value and verdict",
		Example: `  gpufleet accept get ar-abc123 -o json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			run, err := c.AcceptanceRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, run); ok {
				return err
			}
			return printRun(e, run)
		},
	}
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

func newAcceptReportCmd(e *env) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "report RUN [-f report.html]",
		Short: "Write an acceptance run's self-contained HTML report",
		Long: `Write the run's HTML report (charts of the load stage, each criterion with
its value and verdict, the qualification evidence of the nodes used, and
the readiness checklist) to standard output or a file.`,
		Example: `  gpufleet accept report ar-abc123 -f report.html`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			rc, err := c.AcceptanceReport(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer rc.Close()
			var w io.Writer = e.stdout
			if file != "" {
				f, err := os.Create(file)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			_, err = io.Copy(w, rc)
			return err
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write the report to this file (default: standard output)")
	return cmd
}

func newAcceptDecideCmd(e *env) *cobra.Command {
	var d api.Decision
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "decide RUN --decision extend|reserve|dedicate|scale|reject [--note TEXT] [--override]",
		Short: "Record the review's decision on an ended acceptance run (team-admins)",
		Long: `Record a decision on an ended run. Each decision is appended to the run's
decisions, never replacing one; "decision" in -o json is the latest. extend,
reserve, dedicate and scale commit capacity: on a run that did not pass they
are refused unless --override, with a --note saying why. The audit trail
records the decision and its note.`,
		Example: `  gpufleet accept decide ar-abc123 --decision reserve --note "p95 182 ms at 16 users; reserve 2 H100 for Q1"
  gpufleet accept decide ar-def456 --decision extend --override --note "TTFT target relaxed to 400 ms by the product owner"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if fe := accept.CheckDecision(&d); len(fe) > 0 {
				return fieldUsage(fe)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			run, err := c.DecideAcceptance(cmd.Context(), args[0], &d)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, run); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "acceptance run %s: %s, by %s at %s (%d decisions recorded)\n", run.ID, accept.DecisionSummary(*run.Decision),
				run.Decision.By, run.Decision.At.Format(time.RFC3339), len(run.Decisions))
			return err
		},
	}
	cmd.Flags().StringVar(&d.Decision, "decision", "", "extend, reserve, dedicate, scale or reject")
	cmd.Flags().StringVar(&d.Note, "note", "", "why")
	cmd.Flags().BoolVar(&d.Override, "override", false, "record extend, reserve, dedicate or scale on a run that did not pass (needs --note)")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

// printRun prints a run: its status, then each stage with its criteria.
func printRun(e *env, r *api.AcceptanceRun) error {
	fmt.Fprintf(e.stdout, "Run:      %s\nCard:     %s\nTeam:     %s\nStatus:   %s\n", r.ID, r.Card.Name, r.Team, r.Status)
	if r.Message != "" {
		fmt.Fprintf(e.stdout, "Message:  %s\n", r.Message)
	}
	decisions := r.Decisions
	if len(decisions) == 0 && r.Decision != nil {
		decisions = []api.Decision{*r.Decision}
	}
	for i, d := range decisions {
		label := "Decision: "
		if i > 0 {
			label = "          "
		}
		fmt.Fprintf(e.stdout, "%s%s, by %s at %s\n", label, accept.DecisionSummary(d), d.By, d.At.Format(time.RFC3339))
	}
	fmt.Fprintln(e.stdout)
	t := newTable(e.stdout, "STAGE", "TYPE", "STATUS", "CRITERION", "VALUE", "VERDICT")
	for _, s := range r.Stages {
		if len(s.Criteria) == 0 {
			t.row(s.Name, s.Type, s.Status, "-", "-", "-")
			continue
		}
		for i, c := range s.Criteria {
			name, typ, status := s.Name, s.Type, s.Status
			if i > 0 {
				name, typ, status = "", "", ""
			}
			v := "-"
			if c.Value != nil {
				v = strconv.FormatFloat(*c.Value, 'g', 6, 64)
			}
			verdict := c.Verdict
			if c.Verdict != api.VerdictPass && c.Reason != "" {
				verdict += ": " + c.Reason
			}
			t.row(name, typ, status, c.Expression, v, verdict)
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	return printLoadSteps(e.stdout, r)
}

// loadStepColumns are the figures accept get shows of each load step.
var loadStepColumns = []struct{ head, metric string }{
	{"REQUESTS", "requests_total"}, {"ERROR RATE", "error_rate"}, {"REQ/S", "requests_per_second"},
	{"TOKENS/S", "output_tokens_per_second"}, {"P50 TTFT MS", "p50_ttft_ms"}, {"P95 TTFT MS", "p95_ttft_ms"},
	{"P95 ITL MS", "p95_itl_ms"}, {"P95 LATENCY MS", "p95_latency_ms"},
}

// printLoadSteps prints each load stage's steps, one row a concurrency.
func printLoadSteps(w io.Writer, r *api.AcceptanceRun) error {
	for _, s := range r.Stages {
		if len(s.Steps) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nLoad steps of stage %s:\n", s.Name)
		head := []string{"CONCURRENCY"}
		for _, c := range loadStepColumns {
			head = append(head, c.head)
		}
		t := newTable(w, head...)
		for _, st := range s.Steps {
			row := []string{strconv.Itoa(st.Concurrency)}
			for _, c := range loadStepColumns {
				v := "-"
				if i := slices.IndexFunc(st.Metrics, func(m api.Metric) bool { return m.Name == c.metric }); i >= 0 {
					v = strconv.FormatFloat(st.Metrics[i].Value, 'g', 4, 64)
				}
				row = append(row, v)
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}
