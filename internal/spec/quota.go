package spec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// CheckQuota checks a team's quota, the one check of quotas: the API server
// runs it on the team as it would be stored (every field set), the CLI on
// the values a user gives (create team, set quota, apply -f), before
// sending them. Only the fields that are set are checked; the limit is
// checked against the guarantee, and the model and the pool guarantees'
// sums against it, only when the guarantee is set too (the server checks the
// stored values).
// Each problem names its field by its wire name (guaranteedMilliGPU,
// limitMilliGPU, weight, guaranteedByModelMilliGPU,
// guaranteedByModelMilliGPU.MODEL, guaranteedByPoolMilliGPU or
// guaranteedByPoolMilliGPU.POOL) and says it in GPUs. Every number is
// bounded (MaxQuotaMilliGPU, MaxTeamWeight, MaxModelGuarantees), so that the
// sums here and in the scheduler cannot overflow.
func CheckQuota(q api.TeamQuota) []api.FieldError {
	var errs problems
	const million = "a million GPUs"
	g := q.GuaranteedMilliGPU
	if g != nil {
		switch {
		case *g < 0:
			errs.add("guaranteedMilliGPU", "must not be negative")
		case *g > MaxQuotaMilliGPU:
			errs.add("guaranteedMilliGPU", "must be at most %s", million)
		}
	}
	if l := q.LimitMilliGPU; l != nil {
		switch {
		case *l < -1:
			errs.add("limitMilliGPU", "must be a number of GPUs, or unlimited (-1)")
		case *l > MaxQuotaMilliGPU:
			errs.add("limitMilliGPU", "must be unlimited (-1) or at most %s", million)
		case *l >= 0 && g != nil && *l < *g:
			errs.add("limitMilliGPU", "%s GPUs is below the guarantee of %s", quantity.Milli(*l), quantity.Milli(*g))
		}
	}
	if w := q.Weight; w != nil && (*w < 1 || *w > MaxTeamWeight) {
		errs.add("weight", "must be from 1 to %d", MaxTeamWeight)
	}
	errs = append(errs, guaranteeProblems("guaranteedByModelMilliGPU", "model", q.GuaranteedByModelMilliGPU, g,
		func(m string) bool { return strings.TrimSpace(m) != "" && len(m) <= MaxModelNameLen },
		fmt.Sprintf("must be 1 to %d characters", MaxModelNameLen))...)
	errs = append(errs, guaranteeProblems("guaranteedByPoolMilliGPU", "pool", q.GuaranteedByPoolMilliGPU, g,
		func(p string) bool {
			return p != "" && len(p) <= MaxPoolNameLen && !strings.ContainsAny(p, " \t\r\n/\\\"'")
		},
		fmt.Sprintf("must be 1 to %d characters, without spaces, quotes or slashes", MaxPoolNameLen))...)
	return errs
}

// guaranteeProblems checks a team's guarantees by model or by pool (field,
// noun): each from 0 to MaxQuotaMilliGPU, at most MaxModelGuarantees of
// them, each name as nameOK says (nameRule says it), and their sum at most
// the guarantee g when it is set. Whether a model or pool exists is the
// server's check (it knows the fleet).
func guaranteeProblems(field, noun string, by map[string]int64, g *int64, nameOK func(string) bool, nameRule string) []api.FieldError {
	var errs problems
	if len(by) > MaxModelGuarantees {
		errs.add(field, "at most %d %ss", MaxModelGuarantees, noun)
	}
	var sum int64
	bad := false
	for _, name := range slices.Sorted(maps.Keys(by)) {
		if !nameOK(name) {
			errs.add(field, "%s name %q %s", noun, name, nameRule)
		}
		v := by[name]
		if v < 0 || v > MaxQuotaMilliGPU {
			errs.add(field+"."+name, "must be from 0 to a million GPUs")
			bad = true
			continue
		}
		sum += v
	}
	if !bad && g != nil && *g >= 0 && sum > *g {
		errs.add(field, "the %s guarantees add up to %s GPUs, more than the team's guarantee of %s; raise the guarantee too", noun, quantity.Milli(sum), quantity.Milli(*g))
	}
	return errs
}
