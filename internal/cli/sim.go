package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/sim"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// simSubcommands are the verbs under 'gpufleet sim' defined in other files
// (replay and export, in sim_replay.go); each file adds its own in init.
var simSubcommands []func(*env) *cobra.Command

func newSimCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate the scheduler on cluster traces: packing experiments and replays",
	}
	cmd.AddCommand(newSimPackingCmd(e))
	for _, f := range simSubcommands {
		cmd.AddCommand(f(e))
	}
	return cmd
}

// packingFlags are the flags of 'gpufleet sim packing', as given.
type packingFlags struct {
	nodes, pods string
	policies    []string
	seeds       []string
	order       string
	inflate     float64
	report      []float64
	plot        string
	parallel    int
	curve       bool
}

// packingOptions are the flags checked and resolved.
type packingOptions struct {
	policies  []string
	seeds     []int64
	order     string
	report    []float64
	plotFmt   string // "" for no plot
	inflate   float64
	parallel  int
	withCurve bool
}

// packingReport is the -o json answer.
type packingReport struct {
	Runs    []sim.PackingRun    `json:"runs"`
	Summary []sim.PolicySummary `json:"summary"`
}

func newSimPackingCmd(e *env) *cobra.Command {
	var f packingFlags
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "packing --nodes NODES.csv --pods PODS.csv",
		Short: "Run the FGD paper's packing experiment: how much GPU demand each policy places",
		Long: `Place the pods of an openb trace one at a time, none leaving, on the nodes of
an openb node list, with each policy and seed: the packing experiment of the
FGD paper (Weng et al., ATC '23). Each run shuffles the pods with its seed and
appends copies drawn at random until the arrived GPU demand reaches --inflate
times the cluster's GPU capacity. With --order file the pods arrive in the
file's order, each once, with no shuffle and no copies, so that a sequence
another simulator produced is replayed exactly; --inflate then only ends the
run early, with the pod whose arrival reaches it. With --order authors the
pods arrive in the sequence the FGD authors' simulator places for the same
file and seed (their shuffle and their copies, drawn with their generator),
so that each run compares with their published figures for that seed; -o json
adds, at each whole-percent level, the allocation computed as theirs are
(authorsAllocation).

The table shows, for each policy at each --report level of arrived demand, the
GPU demand placed (allocation, mean [min–max] over the seeds), an upper bound
on what any policy, even one that knew every pod in advance, could place of
the same pods (bound: a linear relaxation of the packing, the same for every
policy of a seed), the free GPU capacity no later pod could use (stranded) and
the pods that found no place; then where the first pod failed. -o json prints every run and the same
summary. --plot draws allocation against arrived demand, one line per policy.

Runs go on --parallel workers; progress goes to stderr, results to stdout.`,
		Example: `  gpufleet sim packing --nodes openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv
  gpufleet sim packing --nodes n.csv --pods p.csv --policy gpufleet,fgd --seed 42-44 --plot alloc.svg
  gpufleet sim packing --nodes n.csv --pods p.csv --policy gpufleet --seed 42 -o json
  gpufleet sim packing --nodes n.csv --pods fgd-seed42.csv --order file --policy gpufleet,fgd --seed 42
  gpufleet sim packing --nodes n.csv --pods p.csv --order authors --policy gpufleet,bestfit --seed 42-51`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			opts, err := f.resolve()
			if err != nil {
				return err
			}
			return runPacking(cmd.Context(), e, f, opts, out.value)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodes, "nodes", "", "openb node list CSV (e.g. openb_node_list_gpu_node.csv); required")
	fl.StringVar(&f.pods, "pods", "", "openb pod list CSV (e.g. openb_pod_list_default.csv); required")
	fl.StringSliceVar(&f.policies, "policy", nil, "policies to run, repeatable or comma-separated (default all: "+strings.Join(sim.Policies(), ",")+")")
	fl.StringSliceVar(&f.seeds, "seed", []string{"42-51"}, "seeds, repeatable, comma-separated or a range like 42-51")
	fl.StringVar(&f.order, "order", sim.OrderShuffle, "how the pods arrive: "+sim.OrderShuffle+" (shuffled by the seed, copies appended up to --inflate), "+sim.OrderFile+" (the file's order, each pod once) or "+sim.OrderAuthors+" (the FGD authors' simulator's sequence for the seed)")
	fl.Float64Var(&f.inflate, "inflate", 1.3, "arrived GPU demand to reach, as a multiple of the GPU capacity")
	fl.Float64SliceVar(&f.report, "report", sim.DefaultReport, "arrived-demand levels to report, as fractions of the GPU capacity")
	fl.StringVar(&f.plot, "plot", "", "draw allocation against arrived demand into this .svg or .png file")
	fl.IntVar(&f.parallel, "parallel", runtime.GOMAXPROCS(0), "runs at a time")
	fl.BoolVar(&f.curve, "curve", false, "with -o json, keep each run's point at every 1% of arrived demand")
	out = addOutputFlag(cmd, outTable, outJSON)
	return cmd
}

// resolve checks the flags that need no file and returns them resolved;
// every mistake is a usage error naming its flag.
func (f packingFlags) resolve() (packingOptions, error) {
	o := packingOptions{inflate: f.inflate, parallel: f.parallel, withCurve: f.curve}
	if f.nodes == "" {
		return o, usagef("--nodes is required: an openb node list CSV such as openb_node_list_gpu_node.csv")
	}
	if f.pods == "" {
		return o, usagef("--pods is required: an openb pod list CSV such as openb_pod_list_default.csv")
	}
	policies, err := sim.SelectPolicies(f.policies)
	if err != nil {
		return o, usagef("--policy %v", err)
	}
	o.policies = policies
	seeds, err := parseSeeds(f.seeds)
	if err != nil {
		return o, err
	}
	o.seeds = seeds
	if !slices.Contains(sim.Orders(), f.order) {
		return o, usagef("--order %q: want one of %s", f.order, strings.Join(sim.Orders(), ", "))
	}
	o.order = f.order
	if !(f.inflate > 0) || math.IsInf(f.inflate, 0) {
		return o, usagef("--inflate %g: want a number above 0, such as 1.3", f.inflate)
	}
	if len(f.report) == 0 {
		return o, usagef("--report: want at least one level, such as 0.8,0.9,1,1.1,1.2")
	}
	o.report = slices.Clone(f.report)
	slices.Sort(o.report)
	o.report = slices.Compact(o.report)
	for _, r := range o.report {
		if !(r > 0) || r > f.inflate {
			return o, usagef("--report %g: want levels above 0 and at most --inflate (%g), as fractions of the capacity", r, f.inflate)
		}
	}
	if f.plot != "" {
		o.plotFmt = strings.ToLower(strings.TrimPrefix(filepath.Ext(f.plot), "."))
		if o.plotFmt != "svg" && o.plotFmt != "png" {
			return o, usagef("--plot %s: want a file name ending in .svg or .png", f.plot)
		}
	}
	if f.parallel < 1 {
		return o, usagef("--parallel %d: want 1 or more", f.parallel)
	}
	return o, nil
}

// maxSeeds bounds the runs per policy, against a typo like 42-4200000.
const maxSeeds = 10000

// parseSeeds reads --seed values: numbers and ranges like 42-51, in the order
// given, each seed once.
func parseSeeds(vals []string) ([]int64, error) {
	var seeds []int64
	bad := func(v string) error {
		return usagef("--seed %q: want a whole number ≥ 0, a comma list or a range like 42-51", v)
	}
	for _, v := range vals {
		v = strings.TrimSpace(v)
		lo, hi, isRange := strings.Cut(v, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil || a < 0 {
			return nil, bad(v)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a {
				return nil, bad(v)
			}
		}
		if b-a >= maxSeeds {
			return nil, usagef("--seed %q: more than %d seeds", v, maxSeeds)
		}
		for s := a; s <= b; s++ {
			if !slices.Contains(seeds, s) {
				seeds = append(seeds, s)
			}
		}
		if len(seeds) > maxSeeds {
			return nil, usagef("--seed: more than %d seeds", maxSeeds)
		}
	}
	if len(seeds) == 0 {
		return nil, usagef("--seed: want at least one seed")
	}
	return seeds, nil
}

func runPacking(ctx context.Context, e *env, f packingFlags, o packingOptions, output string) error {
	// 1. Read the trace once; every run shares it (Packing clones the node
	// slice and the packer only reads the nodes).
	nodes, err := readTrace(f.nodes, "--nodes", trace.ReadNodes)
	if err != nil {
		return err
	}
	gpus := sim.GPUCount(nodes)
	if gpus == 0 {
		return fmt.Errorf("--nodes %s: the node list has no GPUs", f.nodes)
	}
	pods, err := readTrace(f.pods, "--pods", trace.ReadPods)
	if err != nil {
		return err
	}

	// 2. Run every policy with every seed on the worker pool.
	runs, err := packingRuns(ctx, e, sim.SweepConfig{Nodes: nodes, Pods: pods, Policies: o.policies, Seeds: o.seeds, Order: o.order, Inflate: o.inflate, Report: o.report, Parallel: o.parallel})
	if err != nil {
		return err
	}
	sums := sim.Summarize(runs, o.report...)

	// 3. The plot first, so that a file that cannot be written is said
	// before the table scrolls it away.
	if o.plotFmt != "" {
		title := fmt.Sprintf("%s on %s (%d GPUs), seeds %s", filepath.Base(f.pods), filepath.Base(f.nodes), gpus, formatSeeds(o.seeds))
		if e.plot == nil {
			return usagef("--plot: this binary leaves the plotting library out; gpufleet-sim draws (go build -o gpufleet-sim ./cmd/gpufleet-sim, then gpufleet-sim sim packing ... --plot %s)", f.plot)
		}
		var buf bytes.Buffer
		if err := e.plot(&buf, o.plotFmt, title, runs); err != nil {
			return fmt.Errorf("--plot %s: %w", f.plot, err)
		}
		if err := os.WriteFile(f.plot, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}

	// 4. The answer.
	if output == outJSON {
		if !o.withCurve {
			for i := range runs {
				runs[i].Curve = nil
			}
		}
		return printJSON(e.stdout, packingReport{Runs: runs, Summary: sums})
	}
	head := fmt.Sprintf("%d runs: %d policies × seeds %s, %s on %s (%d nodes, %d GPUs), inflate %g",
		len(runs), len(o.policies), formatSeeds(o.seeds), filepath.Base(f.pods), filepath.Base(f.nodes), len(nodes), gpus, o.inflate)
	switch o.order {
	case sim.OrderFile:
		head += ", in the file's order"
	case sim.OrderAuthors:
		head += ", in the FGD authors' order"
	}
	return printPackingTable(e.stdout, head, sums)
}

// readTrace opens path and reads it with read, naming the flag in errors.
func readTrace[T any](path, flag string, read func(io.Reader) ([]T, error)) ([]T, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer fh.Close()
	v, err := read(fh)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return v, nil
}

// packingRuns runs cfg's sweep (each policy with each seed, cfg.Parallel at
// a time), showing the progress on stderr.
func packingRuns(ctx context.Context, e *env, cfg sim.SweepConfig) ([]sim.PackingRun, error) {
	prog := newProgress(e, len(cfg.Policies)*len(cfg.Seeds), cfg.Workers())
	defer prog.close()
	cfg.Start, cfg.Advance, cfg.Finish = prog.start, prog.advance, prog.finish
	return sim.Sweep(ctx, cfg)
}

// progress shows on stderr how far the runs are. On a terminal it redraws
// one bar line in place; elsewhere (CI logs, files) it writes a line now and
// then, at most one per finished run.
type progress struct {
	w      io.Writer
	now    func() time.Time
	tty    bool
	total  int
	began  time.Time
	stop   chan struct{}
	exited chan struct{}

	mu       sync.Mutex
	finished int
	inflight map[int]float64 // run → share of its pods placed
	label    string          // the run last started or finished
	lastLine time.Time       // of the last plain line
	drawn    bool            // a bar is on the line
}

// plainEvery is how often, at most, the plain progress lines come.
const plainEvery = 10 * time.Second

func newProgress(e *env, total, workers int) *progress {
	p := &progress{
		w: e.stderr, now: e.now, tty: isTerminal(e.stderr) && e.getenv("TERM") != "dumb", total: total,
		inflight: map[int]float64{}, stop: make(chan struct{}), exited: make(chan struct{}),
	}
	p.began = p.now()
	p.lastLine = p.began
	if !p.tty {
		fmt.Fprintf(p.w, "sim packing: %d runs on %d workers\n", total, workers)
		close(p.exited)
		return p
	}
	// Redraw now and then so that the clock moves between events.
	go func() {
		defer close(p.exited)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func (p *progress) start(i int, label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[i] = 0
	p.label = label
}

func (p *progress) advance(i, done, total int) {
	if !p.tty || total == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[i] = float64(done) / float64(total)
}

func (p *progress) finish(i int, label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inflight, i)
	p.finished++
	p.label = label
	if p.tty {
		p.draw()
		return
	}
	now := p.now()
	if p.finished == p.total || now.Sub(p.lastLine) >= plainEvery {
		p.lastLine = now
		fmt.Fprintf(p.w, "sim packing: %d/%d runs done (last %s), %s\n", p.finished, p.total, label, p.elapsed())
	}
}

func (p *progress) elapsed() string {
	return p.now().Sub(p.began).Round(time.Second).String()
}

// draw rewrites the bar line; the caller holds mu.
func (p *progress) draw() {
	const width = 30
	share := float64(p.finished)
	for _, f := range p.inflight {
		share += f
	}
	filled := int(width * share / float64(max(p.total, 1)))
	bar := strings.Repeat("=", filled)
	if filled < width {
		bar += ">" + strings.Repeat(" ", width-filled-1)
	}
	fmt.Fprintf(p.w, "\r[%s] %d/%d runs  %s  %s\x1b[K", bar, p.finished, p.total, p.label, p.elapsed())
	p.drawn = true
}

// close stops the redraws and ends the bar's line.
func (p *progress) close() {
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	<-p.exited
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// printPackingTable writes the summary: one block per reported level with a
// row per policy, then where pods started to fail, then how sharing compares
// with whole-GPU reservation.
func printPackingTable(w io.Writer, head string, sums []sim.PolicySummary) error {
	fmt.Fprintln(w, head)
	fmt.Fprintln(w)
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "ARRIVED\tPOLICY\tALLOCATION\tBOUND\tSTRANDED\tFAILED PODS")
	levels := 0
	for _, s := range sums {
		levels = max(levels, len(s.Levels))
	}
	for i := range levels {
		if i > 0 {
			fmt.Fprintln(tw, "\t\t\t\t\t")
		}
		first := true
		for _, s := range sums {
			if i >= len(s.Levels) {
				continue
			}
			l := s.Levels[i]
			arrived := ""
			if first {
				arrived = formatLevel(l.Level)
				first = false
			}
			bound := "-"
			if l.Bound != nil {
				bound = formatStat(*l.Bound, formatPercent)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", arrived, s.Policy, formatStat(l.Allocation, formatPercent), bound,
				formatPercent(l.Stranded.Mean), strconv.FormatFloat(l.FailedPods.Mean, 'f', 1, 64))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTabWriter(w)
	fmt.Fprintln(tw, "POLICY\tFIRST FAILURE AT\tPODS\tSECONDS/RUN")
	for _, s := range sums {
		ff := "none failed"
		if s.FirstFailureArrived != nil {
			ff = formatStat(*s.FirstFailureArrived, formatPercent)
			if s.FailedRuns < s.Runs {
				ff += fmt.Sprintf(" (%d of %d runs)", s.FailedRuns, s.Runs)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Policy, ff, strconv.FormatFloat(math.Round(s.Pods.Mean), 'f', -1, 64),
			strconv.FormatFloat(s.Seconds.Mean, 'g', 3, 64))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c, ok := sim.Compare(sums, sim.PolicyGPUFleet, sim.PolicyReservation); ok {
		fmt.Fprintf(w, "\nsharing (%s) serves %.2f× the GPU demand of whole-GPU reservation at %s arrived (allocation %s vs %s)\n",
			sim.PolicyGPUFleet, c.Ratio, formatLevel(c.Level), formatPercent(c.A), formatPercent(c.B))
	}
	return nil
}

// formatPercent renders a fraction as a percentage with one decimal:
// 0.9512 → "95.1%".
func formatPercent(f float64) string {
	return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
}

// formatLevel renders a report level, a fraction, as a percentage with no
// more decimals than it needs: 0.8 → "80%", 1.05 → "105%".
func formatLevel(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}

// formatStat renders "mean [min–max]", or the mean alone when all agree.
func formatStat(s sim.Stat, f func(float64) string) string {
	mean, lo, hi := f(s.Mean), f(s.Min), f(s.Max)
	if lo == hi {
		return mean
	}
	return fmt.Sprintf("%s [%s–%s]", mean, strings.TrimSuffix(lo, "%"), strings.TrimSuffix(hi, "%"))
}

// formatSeeds writes seeds compactly: runs of consecutive seeds as ranges,
// "42-51" or "1,3,5-7".
func formatSeeds(seeds []int64) string {
	var parts []string
	for i := 0; i < len(seeds); {
		j := i
		for j+1 < len(seeds) && seeds[j+1] == seeds[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.FormatInt(seeds[i], 10))
		case j == i+1:
			parts = append(parts, strconv.FormatInt(seeds[i], 10), strconv.FormatInt(seeds[j], 10))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", seeds[i], seeds[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
