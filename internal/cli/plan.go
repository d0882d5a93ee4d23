package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/plan"
)

// poolLabel is the label every node carries with its pool (the server's
// core.LabelPool), which a spec's nodeSelector pins a pool with.
const poolLabel = "gpufleet.io/pool"

// briefFlags are the flags for a brief's common fields; each one given
// overrides the file's field.
type briefFlags struct {
	file, workload, model, precision, duration, owner string
	parameters, layers, kvHeads, headDim, hidden      int64
	context, concurrency, batch                       int64
	throughput                                        float64
	residency                                         []string
}

func newPlanCmd(e *env) *cobra.Command {
	var bf briefFlags
	var spec, card bool
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "plan -f brief.yaml [--model NAME] [--workload KIND] [-o table|json|yaml] [--spec | --card]",
		Short: "Advice for a workload brief: the memory it needs and the least exclusive allocation that carries it",
		Long: `Start from the workload, not from a GPU list. A brief (kind: WorkloadBrief, in
YAML or JSON, or flags) says what must be completed: the model (a catalogue
name such as llama-3-8b, or its shape), the precision, the context length,
the concurrency or batch, targets, residency and owner. The plan answers with
the GPU memory it needs, one line per term with its formula (weights, KV
cache, activations, gradients and optimizer state, overhead), and the
candidates of this fleet, least exclusive first: a fraction of one GPU, one
GPU, several GPUs in one NVLink domain, several nodes; each with the request
to make (GPUS as submit --gpus takes it), its cost per hour and per unit, and
the wait now. docs/PLAN.md gives the formulas and their sources.

-o json or -o yaml prints the plan as the API returns it. --spec prints a
workload spec for the best candidate that 'gpufleet submit -f' accepts (edit
its command first); --card an acceptance card skeleton for it.`,
		Example: `  gpufleet plan --model llama-3-8b --workload inference --context 8192 --concurrency 16
  gpufleet plan -f brief.yaml -o json
  gpufleet plan -f brief.yaml --spec > serve.yaml && gpufleet submit -f serve.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if spec && card {
				return usagef("give --spec or --card, not both")
			}
			if (spec || card) && cmd.Flags().Changed("output") {
				return usagef("--spec and --card print YAML of their own: leave -o out")
			}
			b, src, err := bf.brief(e, cmd)
			if err != nil {
				return err
			}
			if fe := plan.CheckBrief(b); len(fe) > 0 {
				return usageError{briefErrors(bf.name(), src, fe)}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			p, err := c.Plan(cmd.Context(), b)
			if err != nil {
				var ae *api.Error
				if errors.As(err, &ae) && len(ae.Fields) > 0 {
					return briefErrors(bf.name(), src, ae.Fields)
				}
				return err
			}
			switch {
			case spec || card:
				best := plan.Best(p)
				if best == nil {
					return fmt.Errorf("nothing in the fleet fits, so there is no spec to print: %s", p.Verdict)
				}
				if spec {
					return printYAML(e.stdout, planSpec(p, best))
				}
				card, err := planCard(p, best)
				if err != nil {
					return err
				}
				return printYAML(e.stdout, card)
			}
			if ok, err := out.structured(e.stdout, p); ok {
				return err
			}
			return printPlanTable(e.stdout, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&bf.file, "file", "f", "", "the brief, YAML or JSON (- for standard input)")
	fl.StringVar(&bf.workload, "workload", "", "the workload kind: "+strings.Join(api.BriefWorkloads, ", ")+" (default inference without -f)")
	fl.StringVar(&bf.model, "model", "", "a catalogue model: llama-3-8b, llama-3-70b, mistral-7b, mixtral-8x7b, qwen2-7b, gemma-2-9b, phi-3-mini")
	fl.Int64Var(&bf.parameters, "parameters", 0, "the model's parameter count (instead of, or over, --model)")
	fl.Int64Var(&bf.layers, "layers", 0, "the model's layers")
	fl.Int64Var(&bf.kvHeads, "kv-heads", 0, "the model's KV heads")
	fl.Int64Var(&bf.headDim, "head-dim", 0, "the model's head dimension")
	fl.Int64Var(&bf.hidden, "hidden", 0, "the model's hidden size")
	fl.StringVar(&bf.precision, "precision", "", "the precision: "+strings.Join(api.Precisions, ", ")+" (default bf16)")
	fl.Int64Var(&bf.context, "context", 0, "the context length, tokens of one sequence")
	fl.Int64Var(&bf.concurrency, "concurrency", 0, "the sequences served at once (serving)")
	fl.Int64Var(&bf.batch, "batch", 0, "the sequences of one step (training)")
	fl.Float64Var(&bf.throughput, "throughput", 0, "the throughput target, units a second (prices one unit)")
	fl.StringSliceVar(&bf.residency, "residency", nil, "the regions the data may be in (comma-separated)")
	fl.StringVar(&bf.duration, "duration", "", "the expected duration (8h, 3d; prices the run)")
	fl.StringVar(&bf.owner, "owner", "", "the owner, a team or user")
	fl.BoolVar(&spec, "spec", false, "print a workload spec for the best candidate, for 'gpufleet submit -f'")
	fl.BoolVar(&card, "card", false, "print an acceptance card skeleton (YAML) for the best candidate")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

// brief reads the file (if any) and lays the flags given over it. src is
// the file's text, for line numbers in errors.
func (bf *briefFlags) brief(e *env, cmd *cobra.Command) (*api.WorkloadBrief, []byte, error) {
	var b api.WorkloadBrief
	var src []byte
	if bf.file != "" {
		var err error
		if bf.file == "-" {
			src, err = io.ReadAll(io.LimitReader(e.stdin, 1<<20))
		} else {
			src, err = os.ReadFile(bf.file)
		}
		if err != nil {
			return nil, nil, err
		}
		if err := decodeBrief(src, &b); err != nil {
			var fe api.FieldErrors
			if errors.As(err, &fe) {
				return nil, nil, usageError{briefErrors(bf.name(), src, fe)}
			}
			return nil, nil, usageError{fmt.Errorf("%s: %w", bf.name(), err)}
		}
	}
	ch := cmd.Flags().Changed
	set := func(flag string, dst *int64, v int64) {
		if ch(flag) {
			*dst = v
		}
	}
	if ch("workload") {
		b.Workload = bf.workload
	}
	if ch("model") {
		b.Model.Name = bf.model
	}
	if ch("precision") {
		b.Precision = bf.precision
	}
	set("parameters", &b.Model.Parameters, bf.parameters)
	set("layers", &b.Model.Layers, bf.layers)
	set("kv-heads", &b.Model.KVHeads, bf.kvHeads)
	set("head-dim", &b.Model.HeadDim, bf.headDim)
	set("hidden", &b.Model.Hidden, bf.hidden)
	set("context", &b.ContextLength, bf.context)
	set("concurrency", &b.Concurrency, bf.concurrency)
	set("batch", &b.Batch, bf.batch)
	if ch("throughput") {
		b.Targets.ThroughputPerSecond = bf.throughput
	}
	if ch("residency") {
		b.Residency = bf.residency
	}
	if ch("duration") {
		b.ExpectedDuration = bf.duration
	}
	if ch("owner") {
		b.Owner = bf.owner
	}
	if bf.file == "" && b.Workload == "" {
		b.Workload = api.BriefInference
	}
	return &b, src, nil
}

func (bf *briefFlags) name() string {
	if bf.file == "-" {
		return "standard input"
	}
	return bf.file
}

// decodeBrief reads a brief written as YAML or JSON strictly (a field the
// API does not know is an error naming it). A whole parameter count
// written with an exponent (parameters: 8.03e9) is taken as the integer
// it is.
func decodeBrief(src []byte, b *api.WorkloadBrief) error {
	j, err := yaml.YAMLToJSONStrict(src)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		return fmt.Errorf("%s", strings.TrimPrefix(msg, "yaml: "))
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || string(j) == "null" {
		return fmt.Errorf("is empty: a brief is expected (kind: WorkloadBrief, workload, model, ...)")
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("must be a brief, a mapping of fields (workload, model, ...), not a list or a single value")
	}
	if m, ok := doc["model"].(map[string]any); ok {
		for k, v := range m {
			if n, ok := v.(json.Number); ok && strings.ContainsAny(n.String(), "eE") {
				if r, ok := new(big.Rat).SetString(n.String()); ok && r.IsInt() && r.Num().IsInt64() {
					m[k] = r.Num().Int64()
				}
			}
		}
	}
	if j, err = json.Marshal(doc); err != nil {
		return err
	}
	return api.DecodeStrict(j, b)
}

// briefErrors renders a brief's problems on one line, each naming its
// field and, in a file, the line it is on ("brief.yaml:4: precision:
// ...").
func briefErrors(file string, src []byte, fe []api.FieldError) error {
	parts := make([]string, len(fe))
	for i, f := range fe {
		msg := f.Field + ": " + fileWords.Replace(f.Problem)
		switch {
		case f.Field == "body":
			msg = fileWords.Replace(f.Problem)
		case f.Problem == "unknown field":
			msg = fmt.Sprintf("unknown field %q", f.Field)
		}
		if n := lineOf(src, f.Field); n > 0 {
			msg = fmt.Sprintf("%s:%d: %s", file, n, msg)
		} else if len(src) > 0 && i == 0 {
			msg = file + ": " + msg
		}
		parts[i] = msg
	}
	return fmt.Errorf("%s", strings.Join(parts, "; "))
}

// lineOf finds the line of a field path ("model.parameters",
// "residency[0]") in a brief's YAML or JSON: the line of its first part,
// then of each next part at or after it. 0 when it is not found (the
// field was a flag, or the file does not name it).
func lineOf(src []byte, field string) int {
	if len(src) == 0 || field == "" || field == "body" {
		return 0
	}
	if i := strings.IndexByte(field, '['); i >= 0 {
		field = field[:i]
	}
	lines := strings.Split(string(src), "\n")
	at, line := 0, 0
	for _, part := range strings.Split(field, ".") {
		re := regexp.MustCompile(`(^|[\s{,])"?` + regexp.QuoteMeta(part) + `"?\s*:`)
		found := false
		for i := at; i < len(lines); i++ {
			if re.MatchString(lines[i]) {
				at, line, found = i, i+1, true
				break
			}
		}
		if !found {
			return 0
		}
	}
	return line
}

// printPlanTable prints the memory lines with their formulas, the
// candidates, the verdict and what the work needs.
func printPlanTable(w io.Writer, p *api.Plan) error {
	b := p.Brief
	m := b.Model
	name := m.Name
	if name == "" {
		name = "model"
	}
	if m.Revision != "" {
		name += " at revision " + m.Revision
	}
	seqs := fmt.Sprintf("concurrency %d", b.Concurrency)
	if b.Batch > 0 {
		seqs = fmt.Sprintf("batch %d", b.Batch)
	}
	fmt.Fprintf(w, "%s of %s (%d params, %d layers, %d KV heads × %d, hidden %d), %s, context %d, %s\n\n",
		b.Workload, name, m.Parameters, m.Layers, m.KVHeads, m.HeadDim, m.Hidden, b.Precision, b.ContextLength, seqs)
	t := newTable(w, "MEMORY", "BYTES", "GIB", "FORMULA")
	for _, l := range p.Memory.Lines {
		t.row(l.Name, strconv.FormatInt(l.Bytes, 10), gibString(l.Bytes), l.Formula)
	}
	t.row("total", strconv.FormatInt(p.Memory.TotalBytes, 10), gibString(p.Memory.TotalBytes),
		fmt.Sprintf("the sum; %.0f%% of what it is given kept free", p.Memory.HeadroomRatio*100))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(p.Candidates) == 0 {
		fmt.Fprintln(w, "no candidates: the fleet has no GPU the brief may use")
	} else {
		cur := ""
		if p.Currency != "" {
			cur = " (" + p.Currency + ")"
		}
		t = newTable(w, "SCOPE", "GPUS", "REPLICAS", "MODEL", "POOL", "REGION", "FITS", "WAIT", "COST/H"+cur, "COST/UNIT", "MAX TOKENS/S", "TARGETS", "WHY")
		for _, c := range p.Candidates {
			perHour, perUnit := "-", "-"
			if c.CostPerHour != nil {
				perHour = cost.PerUnit(*c.CostPerHour, p.Currency)
			}
			if c.CostPerUnit != nil {
				perUnit = cost.PerUnit(*c.CostPerUnit, p.Currency) + "/" + c.Unit
			}
			fits := "no"
			if c.Fits {
				fits = "yes"
			}
			tps, targets := "-", "-"
			if sp := c.Speed; sp != nil {
				if sp.DecodeTokensPerSecond > 0 {
					tps = strconv.FormatFloat(sp.DecodeTokensPerSecond, 'f', 0, 64)
				}
				if sp.Reachable != nil {
					targets = map[bool]string{true: "reachable", false: "out of reach"}[*sp.Reachable]
				}
			}
			t.row(c.Scope, c.GPUs, strconv.Itoa(max(c.Replicas, 1)), c.GPUModel, c.Pool, dash(c.Region), fits, c.ExpectedWait, perHour, perUnit, tps, targets, c.Why)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if sp := p.Candidates[0].Speed; sp != nil {
			fmt.Fprintf(w, "\nMAX TOKENS/S and TARGETS are %s (-o json: each candidate's speed, with its bandwidth's datasheet).\n", sp.Estimate)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "verdict: %s\nneeds: %s\n", p.Verdict, p.Needs)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// gibString writes bytes as GiB with one decimal.
func gibString(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) }

// planKind is the workload kind a brief's work runs as: serving is a
// service, a notebook a notebook, the rest jobs.
func planKind(workload string) string {
	switch workload {
	case api.BriefInference:
		return api.KindService
	case api.BriefNotebook:
		return api.KindNotebook
	}
	return api.KindJob
}

// planName is a workload name from the brief: the model's name, or the
// workload kind.
func planName(p *api.Plan) string {
	n := strings.ToLower(p.Brief.Model.Name)
	n = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, n)
	n = strings.Trim(n, "-")
	if n == "" {
		return p.Brief.Workload
	}
	if len(n) > 40 {
		n = strings.TrimRight(n[:40], "-")
	}
	return n + "-" + p.Brief.Workload
}

// planSpec is the workload spec of a candidate, as 'gpufleet submit -f'
// reads it: the GPUs, model and pool asked for, the brief's residency and
// owner, and a command to replace.
func planSpec(p *api.Plan, c *api.PlanCandidate) *api.Workload {
	gpus, _ := quantity.ParseMilli(c.GPUs)
	w := &api.Workload{
		Name:         planName(p),
		Kind:         planKind(p.Brief.Workload),
		Resources:    api.Resources{GPUs: gpus, GPUModels: []string{c.GPUModel}},
		NodeSelector: map[string]string{poolLabel: c.Pool},
		Command:      []string{"sh", "-c", "echo 'replace this command with the workload of the brief'"},
	}
	if c.Replicas > 1 {
		w.Replicas = c.Replicas
	}
	if len(p.Brief.Residency) > 0 {
		w.Residency = slices.Clone(p.Brief.Residency)
	}
	if p.Brief.Owner != "" {
		w.Labels = map[string]string{"owner": p.Brief.Owner}
	}
	return w
}

// planCard is an acceptance card skeleton (api.AcceptanceCard) for a
// candidate: smoke, functional, load, failure and review stages pinned to
// its pool and model, each a workload of the candidate's size with a
// command to replace, the load criteria taken from the brief's targets and
// the plan's headroom.
func planCard(p *api.Plan, c *api.PlanCandidate) (*api.AcceptanceCard, error) {
	brief := p.Brief
	pool := strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(c.Pool)), "-")
	name := planName(p)
	if pool != "" && len(name)+len(pool) < core.MaxNameLen {
		name += "-" + pool
	}
	card := &api.AcceptanceCard{Kind: "AcceptanceCard", Name: name, Brief: &brief,
		Target: api.CardTarget{Pool: c.Pool, GPUModel: c.GPUModel}}
	stage := func(what string) *api.Workload {
		w := planSpec(p, c)
		// A stage's workload runs to its end to be judged: a job.
		w.Name, w.Kind, w.Labels, w.NodeSelector = "", api.KindJob, nil, nil
		w.Command = []string{"sh", "-c", "echo 'replace with the " + what + "'"}
		return w
	}
	load := []string{"exit_code == 0", fmt.Sprintf("memory_headroom_ratio >= %g", p.Memory.HeadroomRatio)}
	if t := p.Brief.Targets; t.P95LatencyMs > 0 {
		load = append(load, fmt.Sprintf("p95_latency_ms <= %d", t.P95LatencyMs))
	}
	if t := p.Brief.Targets; t.ThroughputPerSecond > 0 {
		load = append(load, fmt.Sprintf("throughput_per_second >= %g", t.ThroughputPerSecond))
	}
	functional := []string{"exit_code == 0"}
	if plan.Trains(p.Brief.Workload) {
		functional = append(functional, "checkpoint_restore_seconds <= 120")
	}
	card.Stages = []api.Stage{
		{Name: "smoke", Type: api.StageSmoke, Workload: stage("smoke check: the image starts, the GPU is visible, the artifacts load"), Criteria: []string{"exit_code == 0"}},
		{Name: "functional", Type: api.StageFunctional, Workload: stage("functional check: known inputs give the expected outputs"), Criteria: functional},
		{Name: "load", Type: api.StageLoad, Workload: stage("load test: a representative distribution, metrics to $GPUFLEET_METRICS_FILE"), Criteria: load},
		{Name: "failure", Type: api.StageFailure, Disrupt: api.DisruptRequeue, Workload: stage("workload under disruption"), Criteria: []string{"recovery_seconds <= 60"}},
		{Name: "review", Type: api.StageReview},
	}
	return card, nil
}
