package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
)

func newSetPriceCmd(e *env) *cobra.Command {
	var f struct {
		onDemand, reserved, monthly, owned, perGPUHour, depreciation, term, effectiveFrom, increment string
		cpuCoreHour, memoryGiBHour, egressGiB, storageGiBMonth, licenceGPUHour                       string
		gpus                                                                                         int
	}
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "price POOL (--on-demand RATE | --reserved RATE --gpus N --term 8760h | --monthly RATE | --owned PRICE --depreciation 36mo [--per-gpu-hour RATE]) [--effective-from T]",
		Short: "Set a new version of a pool's price (admin only)",
		Long: `Set a new version of a pool's price (admin only). It applies from
--effective-from (default now; never in the past) until the next version, and
never rewrites the past. One kind per version:

  --on-demand RATE   per GPU-hour, billed per second while held (--billing-increment 1m rounds up)
  --reserved RATE    per GPU-hour for a commitment of --gpus N over --term, billed used or not
  --monthly RATE     per GPU per month (730 h), prorated per second, billed used or not
  --owned PRICE      a GPU's purchase price over --depreciation (36mo), plus --per-gpu-hour for power and operations

Host, network and licence lines add to any kind. The local machine's pool is
'local' unless the server's config names another; 'gpufleet get nodes -o wide'
shows each node's pool.`,
		Example: `  gpufleet set price local --on-demand 2.5
  gpufleet set price cloud --reserved 2.1 --gpus 64 --term 8760h --effective-from 2027-01-01T00:00:00Z
  gpufleet set price onprem --owned 30000 --depreciation 36mo --per-gpu-hour 0.4`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			p := api.Price{Pool: args[0], Term: f.term, Depreciation: f.depreciation, BillingIncrement: f.increment, GPUs: f.gpus}
			var kinds []string
			money := func(flag, v string, dst *quantity.Money) error {
				if v == "" {
					return nil
				}
				m, err := quantity.ParseMoney(v)
				if err != nil {
					return usagef("%s %q: %v", flag, v, err)
				}
				*dst = m
				return nil
			}
			for _, k := range []struct {
				flag, kind, v string
				dst           *quantity.Money
			}{{"--on-demand", api.PriceOnDemand, f.onDemand, &p.Rate}, {"--reserved", api.PriceReserved, f.reserved, &p.Rate},
				{"--monthly", api.PriceMonthly, f.monthly, &p.Rate}, {"--owned", api.PriceOwned, f.owned, &p.Purchase}} {
				if k.v == "" {
					continue
				}
				kinds = append(kinds, k.flag)
				p.Kind = k.kind
				if err := money(k.flag, k.v, k.dst); err != nil {
					return err
				}
			}
			if len(kinds) != 1 {
				return usagef("give one price kind: --on-demand, --reserved, --monthly or --owned (got %d)", len(kinds))
			}
			for _, l := range []struct {
				flag, v string
				dst     *quantity.Money
			}{{"--per-gpu-hour", f.perGPUHour, &p.PerGPUHour}, {"--cpu-core-hour", f.cpuCoreHour, &p.CPUCoreHour},
				{"--memory-gib-hour", f.memoryGiBHour, &p.MemoryGiBHour}, {"--egress-gib", f.egressGiB, &p.EgressGiB},
				{"--storage-gib-month", f.storageGiBMonth, &p.StorageGiBMonth}, {"--licence-gpu-hour", f.licenceGPUHour, &p.LicenceGPUHour}} {
				if err := money(l.flag, l.v, l.dst); err != nil {
					return err
				}
			}
			if f.effectiveFrom != "" {
				t, err := time.Parse(time.RFC3339, f.effectiveFrom)
				if err != nil {
					return usagef("--effective-from %q: want an RFC 3339 time such as 2027-01-01T00:00:00Z", f.effectiveFrom)
				}
				p.EffectiveFrom = t
			}
			if fe := cost.CheckPrice(p); len(fe) > 0 {
				return fieldUsage(fe)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			got, err := c.AddPrice(cmd.Context(), &p)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, got); ok {
				return err
			}
			fmt.Fprintf(e.stdout, "price/%s configured: %s from %s\n", got.Pool, describePrice(*got, ""), got.EffectiveFrom.UTC().Format(time.RFC3339))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.onDemand, "on-demand", "", "on-demand rate per GPU-hour")
	fl.StringVar(&f.reserved, "reserved", "", "reserved rate per GPU-hour (with --gpus and --term)")
	fl.StringVar(&f.monthly, "monthly", "", "monthly price per GPU")
	fl.StringVar(&f.owned, "owned", "", "purchase price of one GPU (with --depreciation)")
	fl.IntVar(&f.gpus, "gpus", 0, "reserved: GPUs committed")
	fl.StringVar(&f.term, "term", "", "reserved: the commitment's term (8760h, 12mo, 1y)")
	fl.StringVar(&f.depreciation, "depreciation", "", "owned: depreciation period (36mo)")
	fl.StringVar(&f.perGPUHour, "per-gpu-hour", "", "owned: power and operations per GPU-hour")
	fl.StringVar(&f.increment, "billing-increment", "", "on-demand: round each allocation up to this (1m)")
	fl.StringVar(&f.cpuCoreHour, "cpu-core-hour", "", "host: per CPU core-hour")
	fl.StringVar(&f.memoryGiBHour, "memory-gib-hour", "", "host: per GiB-hour of memory")
	fl.StringVar(&f.egressGiB, "egress-gib", "", "network: per GiB of egress the workload reports")
	fl.StringVar(&f.storageGiBMonth, "storage-gib-month", "", "storage: per GiB-month")
	fl.StringVar(&f.licenceGPUHour, "licence-gpu-hour", "", "licences: per GPU-hour")
	fl.StringVar(&f.effectiveFrom, "effective-from", "", "applies from this time, RFC 3339 (default now)")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

// fieldUsage is a usage error listing field problems.
func fieldUsage(fe []api.FieldError) error {
	var parts []string
	for _, f := range fe {
		parts = append(parts, f.Field+": "+f.Problem)
	}
	return usagef("%s", strings.Join(parts, "; "))
}

// describePrice says a price in a few words, each figure with what it is
// per, and, for monthly and owned, what that is per GPU-hour as the ledger
// bills it: "monthly 5840.00 USD/GPU-month = 8.00 USD/GPU-hour".
func describePrice(p api.Price, currency string) string {
	per := func(m quantity.Money, unit string) string {
		return cost.WithCurrency(cost.PerUnit(m, currency), currency) + "/" + unit
	}
	hourly := " = " + per(cost.HourlyRate(p), "GPU-hour")
	switch p.Kind {
	case api.PriceOnDemand:
		s := "on-demand " + per(p.Rate, "GPU-hour")
		if p.BillingIncrement != "" {
			s += " per " + p.BillingIncrement
		}
		return s
	case api.PriceReserved:
		return fmt.Sprintf("reserved %d GPUs at %s for %s", p.GPUs, per(p.Rate, "GPU-hour"), p.Term)
	case api.PriceMonthly:
		return "monthly " + per(p.Rate, "GPU-month") + hourly
	case api.PriceOwned:
		s := "owned"
		if p.Purchase != 0 {
			s += " " + per(p.Purchase, "GPU") + " over " + p.Depreciation
		}
		if p.PerGPUHour != 0 {
			s += " + " + per(p.PerGPUHour, "GPU-hour")
		}
		return s + hourly
	}
	return p.Kind
}

func printPrices(e *env, ps *api.PriceList) error {
	t := newTable(e.stdout, "POOL", "PRICE", "EFFECTIVE-FROM", "HOST", "LICENCE")
	for _, p := range ps.Items {
		from := "always"
		if !p.EffectiveFrom.IsZero() {
			from = p.EffectiveFrom.UTC().Format(time.RFC3339)
		}
		cur := ps.Currency
		host := ""
		if p.CPUCoreHour != 0 || p.MemoryGiBHour != 0 {
			host = cost.PerUnit(p.CPUCoreHour, cur) + "/core-hour " + cost.PerUnit(p.MemoryGiBHour, cur) + "/GiB-hour"
		}
		lic := ""
		if p.LicenceGPUHour != 0 {
			lic = cost.PerUnit(p.LicenceGPUHour, cur) + "/GPU-hour"
		}
		t.row(p.Pool, describePrice(p, ps.Currency), from, host, lic)
	}
	return t.flush()
}

func newSetBudgetCmd(e *env) *cobra.Command {
	var monthly, alert string
	var hard, stopRunning bool
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "budget TEAM --monthly AMOUNT [--alert 80%] [--hard [--stop-running]]",
		Short: "Set a team's monthly budget (admin only)",
		Long: `Set a team's budget per calendar month (UTC), in the server's currency (admin
only). At the alert level (80% by default) the team's running workloads get a
Warning event, gpufleet_budget_spent_ratio shows it and the portal a banner.
With --hard, once what the month spent plus what running work accrues reaches
the budget, the team's new non-production workloads wait (BudgetExceeded;
'gpufleet why' says spent X of Y and when the month resets); running work
continues unless --stop-running, which stops it too, lowest classes first
(it waits in the queue for the next month).`,
		Example: `  gpufleet set budget research --monthly 5000
  gpufleet set budget vision --monthly 2000 --alert 90% --hard

The budget given replaces the team's whole budget: flags left out take their
defaults (soft, alert at 80%).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			m, err := quantity.ParseMoney(monthly)
			if err != nil {
				return usagef("--monthly %q: %v", monthly, err)
			}
			b := api.Budget{Monthly: m, Hard: hard, StopRunning: stopRunning}
			if alert != "" {
				v, err := strconv.Atoi(strings.TrimSuffix(alert, "%"))
				if err != nil || v < 1 || v > 100 {
					return usagef("--alert %q: want a percentage from 1%% to 100%% (80%%)", alert)
				}
				b.AlertPercent = v
			}
			if fe := cost.CheckBudget(b); len(fe) > 0 {
				return fieldUsage(fe)
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			got, err := c.SetBudget(cmd.Context(), args[0], &b)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, got); ok {
				return err
			}
			kind := "soft"
			if got.Hard {
				kind = "hard"
			}
			fmt.Fprintf(e.stdout, "budget/%s configured: %s a month, %s, alert at %d%%\n", args[0], cost.Amount(got.Monthly, ""), kind, got.AlertPercent)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&monthly, "monthly", "", "the budget per calendar month")
	fl.StringVar(&alert, "alert", "", "alert at this share of the budget (80%)")
	fl.BoolVar(&hard, "hard", false, "new non-production work waits once the budget is spent")
	fl.BoolVar(&stopRunning, "stop-running", false, "with --hard: also stop running work, lowest classes first")
	cmd.MarkFlagRequired("monthly")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

// printBudgets writes the budgets as a table, money with its currency;
// RUNS-OUT is when the budget runs out at the current burn rate (a time to
// come), or, once it has, "reached" and since when.
func printBudgets(e *env, bs *api.BudgetList) error {
	t := newTable(e.stdout, "TEAM", "MONTHLY", "SPENT", "SPENT%", "BURN/HOUR", "RUNS-OUT", "ALERT", "HARD", "STATE", "RESETS")
	for _, b := range bs.Items {
		out := ""
		switch {
		case b.ExhaustedSince != nil:
			out = "reached " + b.ExhaustedSince.UTC().Format(time.RFC3339)
		case b.ExhaustedAt != nil:
			out = b.ExhaustedAt.UTC().Format(time.RFC3339)
		}
		state := "ok"
		switch {
		case b.Exceeded:
			state = "exceeded"
		case b.Alerting:
			state = "alerting"
		}
		amount := func(m quantity.Money) string { return cost.WithCurrency(cost.Amount(m, b.Currency), b.Currency) }
		t.row(b.Team, amount(b.Monthly), amount(b.Spent), fmt.Sprintf("%.1f%%", 100*b.SpentRatio), amount(b.BurnPerHour), out,
			fmt.Sprintf("%d%%", b.AlertPercent), strconv.FormatBool(b.Hard), state, b.ResetsAt.UTC().Format(time.RFC3339))
	}
	return t.flush()
}
