package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/spec"
)

func newSetCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set quota|priority-classes|member|price|budget",
		Short: "Change a team's quota, priority classes, members or budget, or a pool's price",
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("set %q: want quota, priority-classes, member, price or budget", args[0])
			}
			return usagef("set what? want quota, priority-classes, member, price or budget")
		},
	}
	cmd.AddCommand(newSetQuotaCmd(e), newSetPriorityClassesCmd(e), newSetMemberCmd(e), newSetPriceCmd(e), newSetBudgetCmd(e))
	return cmd
}

func newSetQuotaCmd(e *env) *cobra.Command {
	var qf quotaFlags
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "quota TEAM [--guaranteed GPUS] [--limit GPUS|unlimited] [--weight W] [--guaranteed-model MODEL=GPUS] [--guaranteed-pool POOL=GPUS]",
		Short: "Change a team's quota (admin only)",
		Long: `Change a team's quota (admin only) and print the team.

Only the flags given change; the others keep their values. Quantities are in
GPUs and may be fractions (2.5, 0.25). --limit unlimited (or -1) removes the
limit.`,
		Example: `  gpufleet set quota vision --guaranteed 8 --limit 16 --weight 2
  gpufleet set quota vision --limit unlimited
  gpufleet set quota vision --guaranteed 8 --guaranteed-pool onprem=8`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			q, err := qf.parse(cmd)
			if err != nil {
				return err
			}
			if q.GuaranteedMilliGPU == nil && q.LimitMilliGPU == nil && q.Weight == nil && q.GuaranteedByModelMilliGPU == nil && q.GuaranteedByPoolMilliGPU == nil && q.Residency == nil {
				return usagef("nothing to set: give --guaranteed, --limit, --weight, --guaranteed-model, --guaranteed-pool or --residency")
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			t, err := c.SetQuota(cmd.Context(), args[0], &q)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, t); ok {
				return err
			}
			return printTeams(e, out.value, []api.Team{*t})
		},
	}
	qf.add(cmd, false)
	out = addOutputFlag(cmd, outTable, outWide, outJSON, outYAML)
	return cmd
}

func newSetPriorityClassesCmd(e *env) *cobra.Command {
	var out *outputFlag
	var reset bool
	cmd := &cobra.Command{
		Use:   "priority-classes TEAM CLASS[,CLASS...] | TEAM --default",
		Short: "Choose the priority classes a team may use",
		Long: `Choose the priority classes a team's workloads may use (a team-admin of the
team, or an admin); the list replaces the one the team had. Without a list a
team may use every preemptible class, not production, which must be granted
by name. --default goes back to that. 'gpufleet get priorityclasses' lists
the classes; 'gpufleet get teams -o wide' shows what each team may use.`,
		Example: `  gpufleet set priority-classes research production,training,development,batch
  gpufleet set priority-classes research --default`,
		Aliases: []string{"priorityclasses", "pc"},
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			var classes []string
			for _, a := range args[1:] {
				for c := range strings.SplitSeq(a, ",") {
					if c = strings.TrimSpace(c); c != "" && !slices.Contains(classes, c) {
						classes = append(classes, c)
					}
				}
			}
			switch {
			case reset && len(classes) > 0:
				return usagef("--default and a list of classes: give one or the other")
			case !reset && len(classes) == 0:
				return usagef("which classes? give CLASS[,CLASS...], e.g. training,development, or --default")
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			t, err := c.SetPriorityClasses(cmd.Context(), args[0], classes)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, t); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "team/%s configured: may use %s\n", or(t.Name, args[0]), describeClasses(t.PriorityClasses))
			return err
		},
	}
	cmd.Flags().BoolVar(&reset, "default", false, "go back to the default: every preemptible class, not production")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// describeClasses says which priority classes a team's list allows.
func describeClasses(classes []string) string {
	if len(classes) == 0 {
		return "every preemptible priority class (the default)"
	}
	return "priority classes " + strings.Join(classes, ", ")
}

// quotaFlags are the quota flags of `create team` and `set quota`, as typed.
type quotaFlags struct {
	guaranteed, limit, weight string
	byModel, byPool           []string
	residency                 string
}

// add declares the flags; defaults says what a flag left out means: the
// defaults of a new team, or else that the value stays as it is.
func (qf *quotaFlags) add(cmd *cobra.Command, defaults bool) {
	unset := func(def string) string {
		if defaults {
			return " (default " + def + ")"
		}
		return " (unchanged when not given)"
	}
	fl := cmd.Flags()
	fl.StringVar(&qf.guaranteed, "guaranteed", "", "GPUs the team always gets back, by reclaim, when it has work for them, e.g. 8 or 2.5"+unset("0"))
	fl.StringVar(&qf.limit, "limit", "", "the most GPUs the team may hold, borrowing included, or unlimited (-1)"+unset("unlimited"))
	fl.StringVar(&qf.weight, "weight", "", "the team's share of the capacity beyond the guarantees, a whole number from 1 to 1000"+unset("1"))
	fl.StringVar(&qf.residency, "residency", "", "the regions the team's workloads run in when they name none, REGION[,REGION...] (\"\" for anywhere)"+unset("anywhere"))
	fl.StringArrayVar(&qf.byModel, "guaranteed-model", nil, "guarantee GPUs of one model, MODEL=GPUS (repeatable, e.g. H100=4); they count within --guaranteed; MODEL= with no GPUs removes them all"+unset("none"))
	fl.StringArrayVar(&qf.byPool, "guaranteed-pool", nil, "guarantee GPUs in one pool, POOL=GPUS (repeatable, e.g. onprem=8), for work bound to the pool (--selector gpufleet.io/pool=POOL); they count within --guaranteed; POOL= with no GPUs removes them all"+unset("none"))
}

// parse turns the quota flags that were given into a quota in milli-GPU;
// the others stay nil. Every problem is a usage error that names its flag.
func (qf *quotaFlags) parse(cmd *cobra.Command) (api.TeamQuota, error) {
	var q api.TeamQuota
	set := cmd.Flags().Changed
	var bad []string
	fail := func(flag, value string, err error) {
		bad = append(bad, fmt.Sprintf("--%s %q: %v", flag, value, err))
	}
	if set("guaranteed") {
		if v, err := parseGPUs(qf.guaranteed); err != nil {
			fail("guaranteed", qf.guaranteed, err)
		} else {
			q.GuaranteedMilliGPU = &v
		}
	}
	if set("limit") {
		if v, err := parseLimit(qf.limit); err != nil {
			fail("limit", qf.limit, err)
		} else {
			q.LimitMilliGPU = &v
		}
	}
	if set("weight") {
		if v, err := parseWeight(qf.weight); err != nil {
			fail("weight", qf.weight, err)
		} else {
			q.Weight = &v
		}
	}
	// NAME=GPUS for each model or pool guarantee; NAME= clears them.
	byName := func(flag, example string, kvs []string) map[string]int64 {
		out := map[string]int64{}
		for _, kv := range kvs {
			name, n, ok := strings.Cut(kv, "=")
			name = strings.TrimSpace(name)
			switch {
			case !ok || name == "":
				fail(flag, kv, fmt.Errorf("want %s", example))
			case strings.TrimSpace(n) == "":
				// NAME= clears the guarantees.
			default:
				v, err := parseGPUs(n)
				if err != nil || v < 0 {
					fail(flag, kv, fmt.Errorf("want a number of GPUs"))
					continue
				}
				out[name] = v
			}
		}
		return out
	}
	if set("guaranteed-model") {
		q.GuaranteedByModelMilliGPU = byName("guaranteed-model", "MODEL=GPUS, e.g. H100=4", qf.byModel)
	}
	if set("guaranteed-pool") {
		q.GuaranteedByPoolMilliGPU = byName("guaranteed-pool", "POOL=GPUS, e.g. onprem=8", qf.byPool)
	}
	if set("residency") {
		q.Residency = []string{}
		for _, r := range strings.Split(qf.residency, ",") {
			if r = strings.TrimSpace(r); r != "" {
				q.Residency = append(q.Residency, r)
			}
		}
		for _, p := range spec.ResidencyErrors(q.Residency) {
			fail("residency", qf.residency, fmt.Errorf("%s: %s", p.Field, p.Problem))
		}
	}
	flagValue := map[string]string{"guaranteed": qf.guaranteed, "limit": qf.limit, "weight": qf.weight}
	for _, p := range quotaProblems(q) {
		if strings.HasPrefix(p.Field, "guaranteedByModel") {
			fail("guaranteed-model", strings.Join(qf.byModel, ","), fmt.Errorf("%s", p.Problem))
			continue
		}
		if strings.HasPrefix(p.Field, "guaranteedByPool") {
			fail("guaranteed-pool", strings.Join(qf.byPool, ","), fmt.Errorf("%s", p.Problem))
			continue
		}
		fail(p.Field, flagValue[p.Field], fmt.Errorf("%s", p.Problem))
	}
	if len(bad) > 0 {
		return api.TeamQuota{}, usagef("%s", strings.Join(bad, "; "))
	}
	return q, nil
}

// unlimited is the limit of a team without one, on the wire.
const unlimited = -1

// parseGPUs reads a number of GPUs such as 8, 2.5 or 0.25 into milli-GPU.
func parseGPUs(s string) (int64, error) {
	m, err := quantity.ParseMilli(s)
	if err != nil {
		return 0, err
	}
	return int64(m), nil
}

// parseLimit reads a limit in GPUs; "unlimited" and -1 mean none.
func parseLimit(s string) (int64, error) {
	if strings.EqualFold(strings.TrimSpace(s), "unlimited") {
		return unlimited, nil
	}
	m, err := parseGPUs(s)
	if err != nil {
		return 0, fmt.Errorf("%w (want a number of GPUs, or unlimited)", err)
	}
	switch {
	case m == -1000: // -1 GPUs
		return unlimited, nil
	case m < 0:
		return 0, fmt.Errorf("must be a number of GPUs, or unlimited (-1)")
	}
	return m, nil
}

// parseWeight reads a weight, a whole number.
func parseWeight(s string) (int64, error) {
	w, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a whole number from 1 to 1000")
	}
	return w, nil
}

// quotaFields are the short names (flags and apply -f keys) of the quota's
// wire fields.
var quotaFields = map[string]string{"guaranteedMilliGPU": "guaranteed", "limitMilliGPU": "limit", "weight": "weight", "guaranteedByModelMilliGPU": "guaranteedByModel",
	"guaranteedByPoolMilliGPU": "guaranteedByPool"}

// quotaProblems checks the values of a quota that are set with the server's
// own check (spec.CheckQuota) and names each bad one by its short
// name (guaranteed, limit, weight, guaranteedByModel[.MODEL],
// guaranteedByPool[.POOL]). A limit below the guarantee, or model or pool
// guarantees above it, are problems only when the
// guarantee is set; the server checks them against the stored values too.
func quotaProblems(q api.TeamQuota) []api.FieldError {
	errs := spec.CheckQuota(q)
	for i, e := range errs {
		field, model, _ := strings.Cut(e.Field, ".")
		if short, ok := quotaFields[field]; ok {
			errs[i].Field = short
			if model != "" {
				errs[i].Field += "." + model
			}
		}
	}
	return errs
}
