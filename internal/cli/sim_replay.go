package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/sim"
	"github.com/gpufleet/gpufleet/internal/trace"
)

func init() {
	simSubcommands = append(simSubcommands, newSimReplayCmd, newSimExportCmd)
}

// traceSource is where replay and export read a trace from: exactly one of
// an openb node and pod list, a JSONL trace, or a live server.
type traceSource struct {
	nodes, pods, jsonl string
	fromServer         bool
}

func (s *traceSource) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&s.nodes, "nodes", "", "openb node list CSV (with --pods)")
	fl.StringVar(&s.pods, "pods", "", "openb pod list CSV (with --nodes)")
	fl.StringVar(&s.jsonl, "trace", "", "gpufleet JSONL trace (docs/TRACE-FORMAT.md)")
	fl.BoolVar(&s.fromServer, "from-server", false, "read the nodes, teams and workloads of the server (--addr, --token; all teams need an admin token)")
}

// check returns a usage error unless exactly one source is given.
func (s *traceSource) check() error {
	n := 0
	if s.nodes != "" || s.pods != "" {
		if s.nodes == "" || s.pods == "" {
			return usagef("--nodes and --pods go together")
		}
		n++
	}
	if s.jsonl != "" {
		n++
	}
	if s.fromServer {
		n++
	}
	if n != 1 {
		return usagef("give one trace: --nodes and --pods, --trace, or --from-server")
	}
	return nil
}

// load reads the trace.
func (s *traceSource) load(ctx context.Context, e *env) (trace.Trace, error) {
	switch {
	case s.jsonl != "":
		f, err := os.Open(s.jsonl)
		if err != nil {
			return trace.Trace{}, fmt.Errorf("--trace: %w", err)
		}
		defer f.Close()
		t, err := trace.ReadJSONL(f)
		if err != nil {
			return trace.Trace{}, fmt.Errorf("--trace %s: %w", s.jsonl, err)
		}
		return t, nil
	case s.fromServer:
		return serverTrace(ctx, e)
	}
	nodes, err := readTrace(s.nodes, "--nodes", trace.ReadNodes)
	if err != nil {
		return trace.Trace{}, err
	}
	pods, err := readTrace(s.pods, "--pods", trace.ReadPods)
	if err != nil {
		return trace.Trace{}, err
	}
	return trace.Trace{
		Source: fmt.Sprintf("openb %s, %s", filepath.Base(s.nodes), filepath.Base(s.pods)),
		Nodes:  nodes,
		Tasks:  trace.FromPods(pods),
	}, nil
}

// serverTrace reads a snapshot of a live server as a trace
// (sim.ServerTrace): its nodes, its teams with their quotas, and every
// workload the caller may see (an admin sees all).
func serverTrace(ctx context.Context, e *env) (trace.Trace, error) {
	c, err := e.client()
	if err != nil {
		return trace.Trace{}, err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("read nodes: %w", err)
	}
	teams, err := c.Teams(ctx)
	if err != nil {
		return trace.Trace{}, fmt.Errorf("read teams: %w", err)
	}
	ws, err := c.AllWorkloads(ctx, api.ListOptions{})
	if err != nil {
		return trace.Trace{}, fmt.Errorf("read workloads: %w", err)
	}
	now := e.now()
	addr, _, _ := e.settings()
	source := fmt.Sprintf("gpufleet server %s at %s", addr, now.UTC().Format(time.RFC3339))
	return sim.ServerTrace(source, now, nodes, teams, ws), nil
}

func newSimExportCmd(e *env) *cobra.Command {
	var src traceSource
	var output, format string
	cmd := &cobra.Command{
		Use:   "export (--nodes NODES.csv --pods PODS.csv | --trace T.jsonl | --from-server) [--out FILE]",
		Short: "Write a trace in gpufleet's JSONL format, from openb CSVs or a live server",
		Long: `Write a trace in gpufleet's JSONL trace format (docs/TRACE-FORMAT.md): a
header line, then one line per node, team and task. 'gpufleet sim replay
--trace FILE' replays it.

From openb CSVs every pod becomes a task: its runtime is deletion − scheduled;
pods that never ran have none, and CPU-only pods ask for no GPU (replay skips
both). From a server (--from-server, with the address and token of the other
client verbs) the nodes, the teams with their quotas and every workload the
token may see become the trace; a workload runs for finished − started, or for
as long as it has run so far when it is running.`,
		Example: `  gpufleet sim export --nodes openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv > openb.jsonl
  gpufleet sim export --from-server --out cluster.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// -o is a format, as in every verb; the file is --out.
			if format != "jsonl" {
				return usagef("-o %q: the output format; sim export writes jsonl (write to a file with --out FILE)", format)
			}
			if err := src.check(); err != nil {
				return err
			}
			t, err := src.load(cmd.Context(), e)
			if err != nil {
				return err
			}
			w := e.stdout
			if output != "-" {
				f, err := os.Create(output)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			if err := trace.WriteJSONL(w, t); err != nil {
				return fmt.Errorf("write trace: %w", err)
			}
			if f, ok := w.(*os.File); ok && w != e.stdout {
				if err := f.Close(); err != nil {
					return err
				}
			}
			fmt.Fprintf(e.stderr, "wrote %d nodes, %d teams and %d tasks to %s\n", len(t.Nodes), len(t.Teams), len(t.Tasks), cmp.Or(strings.TrimPrefix(output, "-"), "stdout"))
			return nil
		},
	}
	src.addFlags(cmd)
	cmd.Flags().StringVar(&output, "out", "-", "file to write (- for stdout)")
	cmd.Flags().StringVarP(&format, "output", "o", "jsonl", "output format: jsonl (the only one)")
	return cmd
}

// replayReport is the -o json answer of 'gpufleet sim replay'.
type replayReport struct {
	Source string             `json:"source"`
	Tasks  int                `json:"tasks"`
	Runs   []sim.ReplayResult `json:"runs"`
}

type replayFlags struct {
	src        traceSource
	policies   []string
	teams      int
	guarantees []float64
	seed       int64
	limit      int
	maxNodes   int
	// Prices: --price-on-demand RATE (per GPU-hour, every pool of the
	// replay's nodes) or --prices FILE (a YAML list of api.Price), in
	// --currency.
	onDemand   string
	pricesFile string
	currency   string
}

func newSimReplayCmd(e *env) *cobra.Command {
	var f replayFlags
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "replay (--nodes NODES.csv --pods PODS.csv | --trace T.jsonl | --from-server)",
		Short: "Replay a trace in virtual time through the scheduler and control loop, per policy",
		Long: `Replay a trace through the store, the control loop and the scheduler that
'gpufleet server' runs, with simulated machines and a virtual clock: each task
is submitted at its submission time, waits in the queue, and once started
runs for its runtime (openb: deletion − scheduled). Nothing sleeps: the clock
jumps from one event to the next.

Each --policy is replayed on its own copy of the cluster: gpufleet shares GPUs
between fractional tasks; reservation rounds every fraction up to a whole GPU,
as a cluster without sharing does. The table shows, per policy, the tasks
completed, the queueing delay from submission to first start (p50, p95, p99),
the mean share of the GPU capacity allocated (reservation counts the whole
GPUs it holds) and requested, preemptions, and the allocated share over time.

Tasks that ask for no GPU, and tasks that never ran in the trace (no runtime),
are skipped and counted. Every task is submitted as a 'training' job unless the
trace names its priority class. --teams N assigns the tasks to teams team-1
... team-N at random (deterministic with --seed), with equal guarantees or
--guarantee percentages of the GPU capacity, so that quotas, reclaim and fair
share act on the trace's arrivals; otherwise the trace's teams are used (tasks
without one are in team 'default'). Progress goes to stderr.

With prices, each policy's replay is also priced by the cost ledger, as
'gpufleet cost report' prices a server: --price-on-demand RATE bills every
GPU-hour held at RATE in every pool of the replay's nodes; --prices FILE gives
price versions (a YAML list of the API's price objects, as a server
configuration's cost.prices lists them, or what 'gpufleet get prices -o yaml'
writes, with its currency), any kind: owned, monthly and reserved GPUs are billed
held or not, so idle time costs too. A node that names no pool is in pool
'local'. The window is the replay's span, from the first submission to the
last completion; a version's effectiveFrom is in virtual time, which starts at
` + sim.ReplayEpoch.Format(time.RFC3339) + `. The cost table shows, per policy,
the total, the cost per completed task (each task that succeeded counts one),
the GPU-hours held, and the idle cost and its share of the total; -o json adds
the rows by team.`,
		Example: `  gpufleet sim replay --nodes openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv
  gpufleet sim replay --trace cluster.jsonl --teams 3 --guarantee 50,30,20 --seed 7 -o json
  gpufleet sim replay --from-server --policy gpufleet
  gpufleet sim replay --trace cluster.jsonl --price-on-demand 2.50
  gpufleet sim replay --trace cluster.jsonl --prices prices.yaml --currency EUR`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			return runReplay(cmd.Context(), e, f, out.value)
		},
	}
	f.src.addFlags(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&f.policies, "policy", []string{sim.ReplayGPUFleet, sim.ReplayReservation}, "policies to replay, comma-separated: "+sim.ReplayGPUFleet+", "+sim.ReplayReservation)
	fl.IntVar(&f.teams, "teams", 0, "assign the tasks to this many teams (team-1 ... team-N), at random with --seed")
	fl.Float64SliceVar(&f.guarantees, "guarantee", nil, "with --teams, each team's guarantee in percent of the GPU capacity, e.g. 40,30,30 (default equal shares)")
	fl.Int64Var(&f.seed, "seed", 42, "seed of the team assignment")
	fl.IntVar(&f.limit, "limit", 0, "replay only the first N tasks that can be replayed (0: all)")
	fl.IntVar(&f.maxNodes, "max-nodes", 0, "keep only the first N nodes with GPUs (0: all), to load a smaller cluster with the same trace")
	fl.StringVar(&f.onDemand, "price-on-demand", "", "price the replay: an on-demand RATE per GPU-hour for every pool of the nodes, e.g. 2.50")
	fl.StringVar(&f.pricesFile, "prices", "", "price the replay with the price versions of a YAML FILE: a list of prices as cost.prices writes them, or the output of 'gpufleet get prices -o yaml'")
	fl.StringVar(&f.currency, "currency", "", "currency of the prices, an ISO 4217 code (default "+sim.ReplayCurrency+")")
	out = addOutputFlag(cmd, outTable, outJSON)
	return cmd
}

func (f *replayFlags) check() error {
	if err := f.src.check(); err != nil {
		return err
	}
	if len(f.policies) == 0 {
		return usagef("--policy: give at least one of %s, %s", sim.ReplayGPUFleet, sim.ReplayReservation)
	}
	for _, p := range f.policies {
		if err := sim.CheckReplayPolicy(p); err != nil {
			return usagef("--policy %v", err)
		}
	}
	switch {
	case f.teams < 0:
		return usagef("--teams %d: must not be negative", f.teams)
	case f.guarantees != nil && f.teams == 0:
		return usagef("--guarantee needs --teams")
	case f.limit < 0:
		return usagef("--limit %d: must not be negative", f.limit)
	case f.maxNodes < 0:
		return usagef("--max-nodes %d: must not be negative", f.maxNodes)
	}
	if err := sim.CheckGuarantees(f.teams, f.guarantees); err != nil {
		return usagef("--guarantee: %v", err)
	}
	switch {
	case f.onDemand != "" && f.pricesFile != "":
		return usagef("--price-on-demand and --prices: give one")
	case f.currency != "" && f.onDemand == "" && f.pricesFile == "":
		return usagef("--currency needs --price-on-demand or --prices")
	case f.currency != "" && !cost.ValidCurrency(f.currency):
		return usagef("--currency %q: want an ISO 4217 code such as USD or EUR", f.currency)
	}
	if f.onDemand != "" {
		m, err := quantity.ParseMoney(f.onDemand)
		if err == nil && (m <= 0 || m > quantity.MaxMoney) {
			err = fmt.Errorf("must be positive and at most %s", quantity.MaxMoney)
		}
		if err != nil {
			return usagef("--price-on-demand %q: %v", f.onDemand, err)
		}
	}
	return nil
}

// prices sets the price versions and the currency of the replay cfg: none
// without a price flag. A --prices file is a YAML list of prices, or what
// 'gpufleet get prices -o yaml' writes (whose currency applies unless
// --currency names one).
func (f *replayFlags) prices(cfg *sim.ReplayConfig) error {
	cfg.Currency = f.currency
	switch {
	case f.onDemand != "":
		m, _ := quantity.ParseMoney(f.onDemand) // checked
		cfg.Prices = sim.OnDemandPrices(cfg.Nodes, m)
		return nil
	case f.pricesFile == "":
		return nil
	}
	b, err := os.ReadFile(f.pricesFile)
	if err != nil {
		return fmt.Errorf("--prices: %w", err)
	}
	var ps []api.Price
	if err := yaml.UnmarshalStrict(b, &ps); err != nil {
		var list api.PriceList
		if yaml.UnmarshalStrict(b, &list) != nil || list.Items == nil {
			return fmt.Errorf("--prices %s: want a YAML list of prices (or the output of 'gpufleet get prices -o yaml'): %w", f.pricesFile, err)
		}
		ps = list.Items
		if cfg.Currency == "" {
			cfg.Currency = list.Currency
		}
	}
	if len(ps) == 0 {
		return fmt.Errorf("--prices %s: no prices", f.pricesFile)
	}
	if cfg.Currency != "" && !cost.ValidCurrency(cfg.Currency) {
		return fmt.Errorf("--prices %s: currency %q: want an ISO 4217 code such as USD or EUR", f.pricesFile, cfg.Currency)
	}
	if err := sim.CheckReplayPrices(ps); err != nil {
		return fmt.Errorf("--prices %s: %w", f.pricesFile, err)
	}
	cfg.Prices = ps
	return nil
}

func runReplay(ctx context.Context, e *env, f replayFlags, format string) error {
	t, err := f.src.load(ctx, e)
	if err != nil {
		return err
	}
	cfg := sim.ReplayConfig{Nodes: sim.GPUNodes(t.Nodes, f.maxNodes), TraceTeams: t.Teams, Tasks: t.Tasks, Teams: f.teams, Guarantees: f.guarantees, Seed: f.seed, Limit: f.limit}
	if err := f.prices(&cfg); err != nil {
		return err
	}

	// The policies run side by side (sim.ReplayPolicies); progress lines
	// go to stderr, at most one per policy and tenth of the tasks.
	last := map[string]int{}
	cfg.Progress = func(pr sim.ReplayProgress) {
		if pr.Total == 0 {
			return
		}
		tenth := pr.Submitted * 10 / pr.Total
		if l, ok := last[pr.Policy]; ok && l == tenth {
			return
		}
		last[pr.Policy] = tenth
		fmt.Fprintf(e.stderr, "replay %s: %d of %d tasks submitted, %d finished, virtual time %s\n",
			pr.Policy, pr.Submitted, pr.Total, pr.Finished, formatSpan(pr.Virtual.Seconds()))
	}
	runs, err := sim.ReplayPolicies(ctx, cfg, f.policies)
	if err != nil {
		return err
	}
	for _, r := range runs {
		fmt.Fprintf(e.stderr, "replay %s: done in %.1fs (%d scheduling cycles)\n", r.Policy, r.Seconds, r.Cycles)
	}
	if c := runs[0].Cost; c != nil && len(c.UnpricedPools) > 0 {
		fmt.Fprintf(e.stderr, "replay: no price names pool %s of the nodes: its GPU time costs nothing\n", strings.Join(c.UnpricedPools, ", "))
	}
	if format == outJSON {
		return printJSON(e.stdout, replayReport{Source: t.Source, Tasks: len(t.Tasks), Runs: runs})
	}
	return printReplayTable(e.stdout, t, runs)
}

// sparkWidth is the number of characters of a utilisation sparkline.
const sparkWidth = 60

func printReplayTable(w io.Writer, t trace.Trace, runs []sim.ReplayResult) error {
	r0 := runs[0]
	fmt.Fprintf(w, "trace: %s\n", cmp.Or(t.Source, "(no source)"))
	fmt.Fprintf(w, "cluster: %d nodes, %d GPUs; %d tasks in the trace, %d replayed", r0.Nodes, r0.CapacityGPUs, len(t.Tasks), r0.Submitted)
	var skipped []string
	if r0.SkippedCPUOnly > 0 {
		skipped = append(skipped, fmt.Sprintf("%d CPU-only", r0.SkippedCPUOnly))
	}
	if r0.SkippedNoRuntime > 0 {
		skipped = append(skipped, fmt.Sprintf("%d that never ran (no runtime)", r0.SkippedNoRuntime))
	}
	if r0.SkippedLimit > 0 {
		skipped = append(skipped, fmt.Sprintf("%d past --limit", r0.SkippedLimit))
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "; skipped %s", strings.Join(skipped, ", "))
	}
	fmt.Fprintf(w, "\nspan: %s to %s of virtual time (%s)\n\n", formatSpan(r0.FirstSubmission), formatSpan(r0.LastCompletion), formatSpan(r0.Makespan))

	tb := newTable(w, "POLICY", "COMPLETED", "NEVER-STARTED", "QUEUE-P50", "QUEUE-P95", "QUEUE-P99", "ALLOCATED", "REQUESTED", "PREEMPTIONS", "MAKESPAN")
	for _, r := range runs {
		tb.row(r.Policy, fmt.Sprintf("%d/%d", r.Completed, r.Submitted), strconv.Itoa(r.NeverStarted),
			formatSpan(r.Queueing.P50), formatSpan(r.Queueing.P95), formatSpan(r.Queueing.P99),
			formatPercent(r.MeanAllocated), formatPercent(r.MeanRequested), strconv.Itoa(r.Preemptions), formatSpan(r.Makespan))
	}
	if err := tb.flush(); err != nil {
		return err
	}

	top := 0.0
	for _, r := range runs {
		for _, s := range r.Utilisation {
			top = max(top, s.Allocated)
		}
	}
	fmt.Fprintf(w, "\nallocated share over time (%d columns; ' ' is 0, █ is %s):\n", sparkWidth, formatPercent(top))
	for _, r := range runs {
		fmt.Fprintf(w, "  %-12s %s\n", r.Policy, sparkline(r.Utilisation, top))
	}
	if err := printReplayCost(w, runs); err != nil {
		return err
	}

	if len(r0.Teams) > 1 {
		fmt.Fprintln(w)
		header := []string{"POLICY", "TEAM", "GUARANTEED", "COMPLETED", "GPU-HOURS", "MEAN-SHARE", "PREEMPTIONS", "QUEUE-P50", "QUEUE-P95", "QUEUE-P99"}
		if r0.Cost != nil {
			header = append(header, "COST")
		}
		tb := newTable(w, header...)
		for _, r := range runs {
			for _, tm := range r.Teams {
				cells := []string{r.Policy, tm.Name, formatPercent(tm.Guaranteed), fmt.Sprintf("%d/%d", tm.Completed, tm.Submitted),
					formatHours(tm.GPUHours), formatPercent(tm.MeanShare), strconv.Itoa(tm.Preemptions),
					formatSpan(tm.Queueing.P50), formatSpan(tm.Queueing.P95), formatSpan(tm.Queueing.P99)}
				if r.Cost != nil {
					cells = append(cells, cost.Amount(teamCost(r.Cost, tm.Name), r.Cost.Currency))
				}
				tb.row(cells...)
			}
		}
		return tb.flush()
	}
	return nil
}

// printReplayCost prints, when the replay was priced, a line per policy:
// the total, the cost per completed task, the GPU-hours held, and the idle
// cost with its share of the total.
func printReplayCost(w io.Writer, runs []sim.ReplayResult) error {
	c0 := runs[0].Cost
	if c0 == nil {
		return nil
	}
	fmt.Fprintf(w, "\ncost in %s, from the first submission to the last completion:\n", c0.Currency)
	tb := newTable(w, "POLICY", "TOTAL", "PER-COMPLETED-TASK", "COMPLETED", "GPU-HOURS", "IDLE", "IDLE-SHARE")
	for _, r := range runs {
		c := r.Cost
		if c == nil {
			continue
		}
		per := ""
		if c.CostPerCompletedTask != nil {
			per = cost.PerUnit(*c.CostPerCompletedTask, c.Currency)
		}
		tb.row(r.Policy, cost.Amount(c.Total, c.Currency), per, strconv.FormatInt(c.CompletedTasks, 10), formatHours(c.GPUHours),
			cost.Amount(c.IdleCost, c.Currency), formatPercent(c.IdleShare()))
	}
	return tb.flush()
}

// teamCost is a team's total in a replay's cost: 0 when its tasks held
// nothing.
func teamCost(c *sim.ReplayCost, team string) quantity.Money {
	for _, row := range c.ByTeam {
		if row.Name == team {
			return row.TotalCost
		}
	}
	return 0
}

// sparkline draws the allocated share of samples in sparkWidth characters,
// each the mean of the samples it covers, scaled so that top is a full
// block.
func sparkline(samples []sim.UtilisationSample, top float64) string {
	if len(samples) == 0 {
		return ""
	}
	levels := []rune(" ▁▂▃▄▅▆▇█")
	width := min(sparkWidth, len(samples))
	var b strings.Builder
	for c := range width {
		lo, hi := c*len(samples)/width, (c+1)*len(samples)/width
		sum := 0.0
		for _, s := range samples[lo:hi] {
			sum += s.Allocated
		}
		v := sum / float64(hi-lo)
		i := 0
		if top > 0 && v > 0 {
			i = max(1, int(math.Round(v/top*float64(len(levels)-1))))
		}
		b.WriteRune(levels[min(i, len(levels)-1)])
	}
	return b.String()
}

// formatHours renders GPU-hours with about three significant digits.
func formatHours(h float64) string {
	switch {
	case h >= 100:
		return strconv.FormatFloat(h, 'f', 0, 64)
	case h >= 1:
		return strconv.FormatFloat(h, 'f', 1, 64)
	}
	return strconv.FormatFloat(h, 'f', 3, 64)
}

// formatSpan renders seconds briefly: 0s, 42s, 12.5m, 3.2h, 4.1d.
func formatSpan(s float64) string {
	switch a := math.Abs(s); {
	case a < 60 && s == math.Trunc(s):
		return strconv.FormatFloat(s, 'f', 0, 64) + "s"
	case a < 60:
		return strconv.FormatFloat(s, 'f', 1, 64) + "s"
	case a < 3600:
		return strconv.FormatFloat(s/60, 'f', 1, 64) + "m"
	case a < 86400:
		return strconv.FormatFloat(s/3600, 'f', 1, 64) + "h"
	}
	return strconv.FormatFloat(s/86400, 'f', 1, 64) + "d"
}
