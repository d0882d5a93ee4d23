package cli

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
)

const outCSV = "csv"

func newCostCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cost report|export|estimate",
		Short: "What work cost: reports, a FOCUS export, estimates",
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("cost %q: want report, export or estimate", args[0])
			}
			return usagef("cost what? want report, export or estimate")
		},
	}
	cmd.AddCommand(newCostReportCmd(e), newCostExportCmd(e), newCostEstimateCmd(e))
	return cmd
}

// windowFlags are --since, --from and --to.
type windowFlags struct{ since, from, to string }

func (w *windowFlags) add(cmd *cobra.Command, since string) {
	fl := cmd.Flags()
	fl.StringVar(&w.since, "since", since, "the window ends now and starts this long before (24h, 7d, 30d)")
	fl.StringVar(&w.from, "from", "", "the window's start, RFC 3339 (2026-11-01T00:00:00Z)")
	fl.StringVar(&w.to, "to", "", "the window's end, RFC 3339 (default now)")
}

// query checks the flags (the server checks them again) and returns them.
func (w *windowFlags) query(cmd *cobra.Command) (api.CostQuery, error) {
	q := api.CostQuery{From: w.from, To: w.to}
	if w.from != "" && cmd.Flags().Changed("since") {
		return q, usagef("give --since or --from, not both")
	}
	if w.from == "" {
		q.Since = w.since
	}
	for name, v := range map[string]string{"--from": w.from, "--to": w.to} {
		if v == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			return q, usagef("%s %q: want an RFC 3339 time such as 2026-11-01T00:00:00Z", name, v)
		}
	}
	if q.Since != "" {
		if d, err := quantity.ParsePeriod(q.Since); err != nil || d <= 0 {
			return q, usagef("--since %q: want a positive duration such as 24h, 7d or 30d", q.Since)
		}
	}
	return q, nil
}

func newCostReportCmd(e *env) *cobra.Command {
	var w windowFlags
	var by string
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "report [--by team|pool|workload|user|label:KEY] [--since 24h | --from T --to T]",
		Short: "The cost of completed work over a window",
		Long: `The cost of the work of a window, by team (default), pool, workload (with its
NAME), user or a label's value: billed GPU time counted once (GPU-HOURS; a
shared GPU split by share), its accelerator cost, host, storage, network and
licence lines, and the outputs reported in the window, one line per unit:
accepted, rejected, and the cost of one accepted output (PER-OUTPUT). A
running workload's outputs count from the moment they are reported; those of
a workload that failed are UNACCEPTED, those of an acceptance card's stages
(STAGE) are the card's (ACCEPTANCE), not the team's. The idle, failed and
preempted GPU hours explain the cost and are inside it, not added to it.
Money is in the currency's minor units (0.63), a cost per output with more
digits only where it needs them. Where the executor measured what attempts
used of their host (the local executor's cgroups), CPU-SECONDS-USED,
CPU-EFFICIENCY (used over requested: CPU request × runtime), PEAK-MEMORY
(the highest peak of one attempt) and MEMORY-EFFICIENCY (peak over the
memory request, weighted by runtime) show it, "-" where nothing was
measured; an attempt counts in proportion to its time in the window. The
host cost still bills the requests. Members see their teams' rows; admins
every team's and __idle__, what pools bill that nobody held. -o csv and -o
json keep the exact values.`,
		Example: `  gpufleet cost report --since 7d
  gpufleet cost report --by workload --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z -o json
  gpufleet cost report --by label:project -o csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			q, err := w.query(cmd)
			if err != nil {
				return err
			}
			q.By = by
			c, err := e.client()
			if err != nil {
				return err
			}
			rep, err := c.Cost(cmd.Context(), q)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, rep); ok {
				return err
			}
			if out.value == outCSV {
				return printCostCSV(e.stdout, rep)
			}
			return printCostTable(e, rep)
		},
	}
	cmd.Flags().StringVar(&by, "by", "team", "rows by team, pool, workload, user or label:KEY")
	w.add(cmd, "24h")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML, outCSV)
	return cmd
}

// unitLines are a row's outputs, one line per unit (one empty line when it
// has none).
func unitLines(r api.CostRow) []api.UnitOutputs {
	if len(r.OutputsByUnit) == 0 {
		return []api.UnitOutputs{{}}
	}
	return r.OutputsByUnit
}

// printCostTable writes a report as a table: money in the currency's minor
// units (a cost per output with more digits only where it needs them),
// GPU-hours with two decimals (three significant digits below one), one
// line per unit of a row's outputs: the row's figures on its first. The
// UNACCEPTED, ACCEPTANCE and STAGE columns appear when a row has them.
func printCostTable(e *env, rep *api.CostReport) error {
	cur := rep.Currency
	fmt.Fprintf(e.stdout, "cost by %s, %s to %s (%s)\n", rep.By, rep.From.UTC().Format(time.RFC3339), rep.To.UTC().Format(time.RFC3339), cur)
	rows := append(slices.Clone(rep.Items), rep.Total)
	rows[len(rows)-1].Name = "TOTAL"
	byWorkload := rep.By == api.CostByWorkload
	var unaccepted, acceptance, stage, measured bool
	for _, r := range rows {
		unaccepted = unaccepted || r.UnacceptedOutputs != 0
		acceptance = acceptance || r.AcceptanceOutputs != 0
		stage = stage || r.AcceptanceStage != ""
		measured = measured || r.Efficiency != nil
	}
	head := []string{strings.ToUpper(rep.By)}
	if byWorkload {
		head = append(head, "NAME")
	}
	if stage {
		head = append(head, "STAGE")
	}
	head = append(head, "GPU-HOURS", "ACCELERATOR", "HOST", "OTHER", "TOTAL", "ACCEPTED", "REJECTED", "UNIT", "PER-OUTPUT")
	if unaccepted {
		head = append(head, "UNACCEPTED")
	}
	if acceptance {
		head = append(head, "ACCEPTANCE")
	}
	head = append(head, "IDLE-GPU-H", "FAILED-GPU-H", "PREEMPTED-GPU-H", "RETRIES")
	if measured {
		head = append(head, "CPU-SECONDS-USED", "CPU-EFFICIENCY", "PEAK-MEMORY", "MEMORY-EFFICIENCY")
	}
	t := newTable(e.stdout, head...)
	for _, r := range rows {
		for i, u := range unitLines(r) {
			var line []string
			cell := func(first func() string) string {
				if i > 0 {
					return ""
				}
				return first()
			}
			line = append(line, cell(func() string { return r.Name }))
			if byWorkload {
				line = append(line, cell(func() string { return r.WorkloadName }))
			}
			if stage {
				line = append(line, cell(func() string { return r.AcceptanceStage }))
			}
			money := func(m quantity.Money) string { return cell(func() string { return cost.Amount(m, cur) }) }
			line = append(line, cell(func() string { return cost.GPUHours(r.GPUHours) }), money(r.AcceleratorCost), money(r.HostCost),
				money(r.StorageCost+r.NetworkCost+r.LicenceCost), money(r.TotalCost))
			per := ""
			if u.CostPerAccepted != nil {
				per = cost.PerUnit(*u.CostPerAccepted, cur)
			}
			line = append(line, strconv.FormatInt(u.Accepted, 10), strconv.FormatInt(u.Rejected, 10), u.Unit, per)
			if unaccepted {
				line = append(line, strconv.FormatInt(u.Unaccepted, 10))
			}
			if acceptance {
				line = append(line, strconv.FormatInt(u.Acceptance, 10))
			}
			line = append(line, cell(func() string { return cost.GPUHours(r.IdleGPUHours) }), cell(func() string { return cost.GPUHours(r.FailedGPUHours) }),
				cell(func() string { return cost.GPUHours(r.PreemptedGPUHours) }), cell(func() string { return strconv.FormatInt(r.Retries, 10) }))
			if measured {
				for _, v := range efficiencyCells(r.Efficiency) {
					line = append(line, cell(func() string { return v }))
				}
			}
			t.row(line...)
		}
	}
	return t.flush()
}

// efficiencyCells are a row's efficiency columns in a table: CPU-seconds
// used, the share of the requested CPU-seconds, the highest peak memory
// and its share of the request; "-" where nothing was measured or
// requested.
func efficiencyCells(e *api.Efficiency) []string {
	out := []string{"-", "-", "-", "-"}
	if e == nil {
		return out
	}
	if e.CPUSeconds != nil {
		out[0] = cpuNumber(*e.CPUSeconds)
	}
	if e.CPUEfficiency != nil {
		out[1] = formatShare(*e.CPUEfficiency)
	}
	if e.PeakMemoryBytes != nil {
		out[2] = formatBytes(*e.PeakMemoryBytes)
	}
	if e.MemoryEfficiency != nil {
		out[3] = formatShare(*e.MemoryEfficiency)
	}
	return out
}

// costColumns are the CSV columns of a report: the JSON names of a row's
// fields and of its outputsByUnit entries, those of its efficiency as
// efficiency.NAME.
var costColumns = []string{"name", "workloadName", "acceptanceStage", "gpuHours", "acceleratorCost", "hostCost", "storageCost", "networkCost", "licenceCost", "totalCost",
	"unit", "accepted", "rejected", "unaccepted", "acceptance", "costPerAccepted", "idleGPUHours", "failedGPUHours", "preemptedGPUHours", "retries",
	"efficiency.measuredAttempts", "efficiency.cpuSeconds", "efficiency.requestedCPUSeconds", "efficiency.cpuEfficiency", "efficiency.peakMemoryBytes", "efficiency.memoryEfficiency"}

// printCostCSV writes a report as CSV with exact values: one line per row
// and unit of its outputs, the row's own figures on its first line only
// (so that a column's sum is the report's), the total last.
func printCostCSV(w io.Writer, rep *api.CostReport) error {
	cw := csv.NewWriter(w)
	cw.Write(costColumns)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	total := rep.Total
	total.Name = "TOTAL"
	for _, r := range append(slices.Clone(rep.Items), total) {
		for i, u := range unitLines(r) {
			rec := make([]string, 0, len(costColumns))
			if i == 0 {
				rec = append(rec, r.Name, r.WorkloadName, r.AcceptanceStage, f(r.GPUHours), r.AcceleratorCost.String(), r.HostCost.String(), r.StorageCost.String(),
					r.NetworkCost.String(), r.LicenceCost.String(), r.TotalCost.String())
			} else {
				rec = append(rec, r.Name, r.WorkloadName, r.AcceptanceStage, "", "", "", "", "", "", "")
			}
			per := ""
			if u.CostPerAccepted != nil {
				per = u.CostPerAccepted.String()
			}
			rec = append(rec, u.Unit, strconv.FormatInt(u.Accepted, 10), strconv.FormatInt(u.Rejected, 10), strconv.FormatInt(u.Unaccepted, 10),
				strconv.FormatInt(u.Acceptance, 10), per)
			if i == 0 {
				rec = append(rec, f(r.IdleGPUHours), f(r.FailedGPUHours), f(r.PreemptedGPUHours), strconv.FormatInt(r.Retries, 10))
				rec = append(rec, efficiencyCSV(r.Efficiency)...)
			} else {
				rec = append(rec, "", "", "", "", "", "", "", "", "", "")
			}
			cw.Write(rec)
		}
	}
	cw.Flush()
	return cw.Error()
}

// efficiencyCSV is a row's efficiency in exact values, empty where
// nothing was measured.
func efficiencyCSV(e *api.Efficiency) []string {
	if e == nil {
		return []string{"0", "", "", "", "", ""}
	}
	f := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	}
	peak := ""
	if e.PeakMemoryBytes != nil {
		peak = strconv.FormatInt(*e.PeakMemoryBytes, 10)
	}
	return []string{strconv.FormatInt(e.MeasuredAttempts, 10), f(e.CPUSeconds), f(e.RequestedCPUSeconds), f(e.CPUEfficiency), peak, f(e.MemoryEfficiency)}
}

func newCostExportCmd(e *env) *cobra.Command {
	var w windowFlags
	var format, granularity, file string
	cmd := &cobra.Command{
		Use:   "export --format focus [--granularity hour|day] --from T --to T [--file F]",
		Short: "Export charges as FinOps FOCUS 1.3 CSV",
		Long: `Export the window's charges as FinOps FOCUS 1.3 CSV: every mandatory column
(ProviderName and PublisherName, deprecated by 1.3, kept beside
ServiceProviderName and HostProviderName), resource (ResourceName is the
workload's name) and tag columns, the split cost allocation columns on the
rows of a GPU shared by share, gpufleet's own columns prefixed x_, one row per
charge period (hour or day), workload and pool, the idle charge of pools
billed whether used or not, and reserved commitments as a Purchase row with
Used and Unused usage rows. The sum of BilledCost equals 'cost report' over
the same window. Written to stdout, or --file.`,
		Example: `  gpufleet cost export --format focus --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --file nov.csv
  gpufleet cost export --since 24h --granularity hour`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "focus" {
				return usagef("--format %q: the one export format is focus", format)
			}
			if granularity != "hour" && granularity != "day" {
				return usagef("--granularity %q: want hour or day", granularity)
			}
			q, err := w.query(cmd)
			if err != nil {
				return err
			}
			q.Format, q.Granularity = format, granularity
			c, err := e.client()
			if err != nil {
				return err
			}
			if file == "" || file == "-" {
				return c.CostExport(cmd.Context(), q, e.stdout)
			}
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			if err := c.CostExport(cmd.Context(), q, f); err != nil {
				f.Close()
				os.Remove(file)
				return err
			}
			return f.Close()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&format, "format", "focus", "export format: focus")
	fl.StringVar(&granularity, "granularity", "day", "charge period: hour or day")
	fl.StringVar(&file, "file", "", "write to this file (default stdout)")
	w.add(cmd, "24h")
	return cmd
}

func newCostEstimateCmd(e *env) *cobra.Command {
	var gpusFlag, pool, rate, onDemand, reserved, monthly, currency string
	var hoursFlag, util float64
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "estimate --gpus N --hours H (--pool P | --rate RATE) [--utilisation U] [--on-demand R --reserved R --monthly R]",
		Short: "What GPUs for a time would cost, and which price kind is cheaper",
		Long: `What N GPUs for H hours cost at a rate per GPU-hour (--rate), or at a pool's
price in effect now (--pool: a monthly price per GPU-month is 730 GPU-hours,
an owned GPU's purchase is spread over its depreciation, as the ledger bills
them). Given an expected utilisation (the share of the hours the GPUs are
held: on-demand bills only that share) and prices of several kinds, it
compares them for the same work and prints the utilisation above which a
committed price (reserved, monthly: billed used or not) is cheaper than
on-demand. The server computes it, in its currency, exactly: no rounding but
the last micro-unit.`,
		Example: `  gpufleet cost estimate --gpus 100 --hours 720 --rate 8
  gpufleet cost estimate --gpus 8 --hours 720 --on-demand 4 --reserved 2.6 --monthly 1500 --utilisation 0.6
  gpufleet cost estimate --gpus 4 --hours 24 --pool local -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			gpus, err := quantity.ParseMilli(gpusFlag)
			if err != nil || gpus <= 0 {
				return usagef("--gpus %q: want a positive number of GPUs (100, 0.5)", gpusFlag)
			}
			if hoursFlag <= 0 || hoursFlag > 1e6 {
				return usagef("--hours %v: want a positive number of hours (720)", hoursFlag)
			}
			if util < 0 || util > 1 {
				return usagef("--utilisation %v: want a share from 0 to 1 (0.6)", util)
			}
			parse := func(flag, v, per string) (quantity.Money, error) {
				m, err := quantity.ParseMoney(v)
				if err != nil || m < 0 {
					return 0, usagef("%s %q: want a non-negative amount per %s (8, 2.5)", flag, v, per)
				}
				return m, nil
			}
			req := api.EstimateRequest{GPUs: gpus, Hours: hoursFlag, Pool: pool, Utilisation: &util, Currency: currency}
			for _, o := range []struct{ flag, kind, v string }{{"--on-demand", api.PriceOnDemand, onDemand}, {"--reserved", api.PriceReserved, reserved}, {"--monthly", api.PriceMonthly, monthly}} {
				if o.v == "" {
					continue
				}
				m, err := parse(o.flag, o.v, cost.PriceUnit(o.kind))
				if err != nil {
					return err
				}
				req.Compare = append(req.Compare, api.EstimateOption{Kind: o.kind, Rate: m})
			}
			switch {
			case rate != "" && pool != "":
				return usagef("give --rate or --pool, not both")
			case rate != "":
				if req.Rate, err = parse("--rate", rate, "GPU-hour"); err != nil {
					return err
				}
				req.Kind = api.PriceOnDemand
			case pool == "" && len(req.Compare) == 0:
				return usagef("give --rate, --pool, or prices to compare (--on-demand, --reserved, --monthly)")
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			est, err := c.Estimate(cmd.Context(), &req)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, est); ok {
				return err
			}
			return printEstimate(e.stdout, est)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&gpusFlag, "gpus", "", "how many GPUs (may be a fraction)")
	fl.Float64Var(&hoursFlag, "hours", 0, "for how many hours (720 is 30 days)")
	fl.StringVar(&pool, "pool", "", "at this pool's price in effect now")
	fl.StringVar(&rate, "rate", "", "at this rate per GPU-hour")
	fl.Float64Var(&util, "utilisation", 1, "expected share of the hours the GPUs are held, 0 to 1")
	fl.StringVar(&onDemand, "on-demand", "", "compare: an on-demand rate per GPU-hour")
	fl.StringVar(&reserved, "reserved", "", "compare: a reserved rate per GPU-hour")
	fl.StringVar(&monthly, "monthly", "", "compare: a monthly price per GPU-month (730 GPU-hours)")
	fl.StringVar(&currency, "currency", "", "the currency you mean (ISO 4217); the server refuses one that is not its own")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

// printEstimate writes an estimate: the pool's price as set and per
// GPU-hour, the formula with its total, and the comparison.
func printEstimate(w io.Writer, est *api.CostEstimate) error {
	cur := est.Currency
	if p := est.Price; p != nil {
		fmt.Fprintf(w, "pool %s: %s\n", est.Pool, describePrice(*p, cur))
	}
	held := ""
	if est.Kind == api.PriceOnDemand && est.Utilisation != 1 {
		held = fmt.Sprintf(" × %s%% held", strconv.FormatFloat(100*est.Utilisation, 'f', -1, 64))
	}
	fmt.Fprintf(w, "%s %s × %s/GPU-hour × %s h%s = %s\n", est.GPUs, gpuWord(est.GPUs), cost.WithCurrency(cost.PerUnit(est.Rate, cur), cur),
		strconv.FormatFloat(est.Hours, 'f', -1, 64), held, cost.WithCurrency(cost.Amount(est.Total, cur), cur))
	if len(est.Compare) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nthe same work at %.0f%% utilisation (%s):\n", 100*est.Utilisation, cur)
	t := newTable(w, "KIND", "PRICE", "PER-GPU-HOUR", "TOTAL", "BREAK-EVEN-UTILISATION")
	for _, o := range est.Compare {
		be := ""
		if o.BreakEvenUtilisation != nil {
			be = fmt.Sprintf("%.1f%%", 100**o.BreakEvenUtilisation)
		}
		t.row(o.Kind, cost.PerUnit(o.PriceRate, cur)+"/"+o.PriceUnit, cost.PerUnit(o.Rate, cur), cost.Amount(o.Total, cur), be)
	}
	return t.flush()
}

// gpuWord is "GPU" for one, "GPUs" otherwise (0.5 GPUs).
func gpuWord(n quantity.Milli) string {
	if n == 1000 {
		return "GPU"
	}
	return "GPUs"
}
