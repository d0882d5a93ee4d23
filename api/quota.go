package api

import (
	"fmt"
	"slices"
	"strings"
)

// MaxModelNameLen bounds the name of a GPU model in a model guarantee.
const MaxModelNameLen = 64

// Validate checks a team's quota, the one check of quotas: the API server
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
func (q TeamQuota) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	const million = "a million GPUs"
	g := q.GuaranteedMilliGPU
	if g != nil {
		switch {
		case *g < 0:
			add("guaranteedMilliGPU", "must not be negative")
		case *g > MaxQuotaMilliGPU:
			add("guaranteedMilliGPU", "must be at most %s", million)
		}
	}
	if l := q.LimitMilliGPU; l != nil {
		switch {
		case *l < -1:
			add("limitMilliGPU", "must be a number of GPUs, or unlimited (-1)")
		case *l > MaxQuotaMilliGPU:
			add("limitMilliGPU", "must be unlimited (-1) or at most %s", million)
		case *l >= 0 && g != nil && *l < *g:
			add("limitMilliGPU", "%s GPUs is below the guarantee of %s", Milli(*l), Milli(*g))
		}
	}
	if w := q.Weight; w != nil && (*w < 1 || *w > MaxTeamWeight) {
		add("weight", "must be from 1 to %d", MaxTeamWeight)
	}
	byModel := q.GuaranteedByModelMilliGPU
	if len(byModel) > MaxModelGuarantees {
		add("guaranteedByModelMilliGPU", "at most %d models", MaxModelGuarantees)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	slices.Sort(models)
	var sum int64
	bad := false
	for _, model := range models {
		if strings.TrimSpace(model) == "" || len(model) > MaxModelNameLen {
			add("guaranteedByModelMilliGPU", "model name %q must be 1 to %d characters", model, MaxModelNameLen)
		}
		v := byModel[model]
		if v < 0 || v > MaxQuotaMilliGPU {
			add("guaranteedByModelMilliGPU."+model, "must be from 0 to %s", million)
			bad = true
			continue
		}
		sum += v
	}
	if !bad && g != nil && *g >= 0 && sum > *g {
		add("guaranteedByModelMilliGPU", "the model guarantees add up to %s GPUs, more than the team's guarantee of %s; raise the guarantee too", Milli(sum), Milli(*g))
	}
	errs = append(errs, poolProblems(q.GuaranteedByPoolMilliGPU, g)...)
	return errs
}

// MaxPoolNameLen bounds the name of a pool in a pool guarantee (a label
// value).
const MaxPoolNameLen = 63

// poolProblems checks the pool guarantees as Validate does the model ones:
// each from 0 to MaxQuotaMilliGPU, at most MaxModelGuarantees of them,
// names 1 to MaxPoolNameLen characters without spaces or slashes, and their
// sum at most the guarantee g when it is set. Whether a pool exists is the
// server's check (it knows the fleet).
func poolProblems(byPool map[string]int64, g *int64) []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if len(byPool) > MaxModelGuarantees {
		add("guaranteedByPoolMilliGPU", "at most %d pools", MaxModelGuarantees)
	}
	pools := make([]string, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	slices.Sort(pools)
	var sum int64
	bad := false
	for _, pool := range pools {
		if pool == "" || len(pool) > MaxPoolNameLen || strings.ContainsAny(pool, " \t\r\n/\\\"'") {
			add("guaranteedByPoolMilliGPU", "pool name %q must be 1 to %d characters, without spaces, quotes or slashes", pool, MaxPoolNameLen)
		}
		v := byPool[pool]
		if v < 0 || v > MaxQuotaMilliGPU {
			add("guaranteedByPoolMilliGPU."+pool, "must be from 0 to a million GPUs")
			bad = true
			continue
		}
		sum += v
	}
	if !bad && g != nil && *g >= 0 && sum > *g {
		add("guaranteedByPoolMilliGPU", "the pool guarantees add up to %s GPUs, more than the team's guarantee of %s; raise the guarantee too", Milli(sum), Milli(*g))
	}
	return errs
}
