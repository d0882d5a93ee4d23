package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/api"
)

func TestCheckQuota(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	tests := []struct {
		name string
		q    api.TeamQuota
		want []api.FieldError
	}{
		{"nothing set", api.TeamQuota{}, nil},
		{"a whole quota", api.TeamQuota{GuaranteedMilliGPU: i(8000), LimitMilliGPU: i(16000), Weight: i(2),
			GuaranteedByModelMilliGPU: map[string]int64{"H100": 4000, "A10": 4000}}, nil},
		{"unlimited, and a limit alone", api.TeamQuota{LimitMilliGPU: i(-1)}, nil},
		{"a limit without the guarantee is not compared", api.TeamQuota{LimitMilliGPU: i(1000)}, nil},
		{"the bounds themselves", api.TeamQuota{GuaranteedMilliGPU: i(MaxQuotaMilliGPU), LimitMilliGPU: i(MaxQuotaMilliGPU), Weight: i(MaxTeamWeight)}, nil},
		{"a negative guarantee", api.TeamQuota{GuaranteedMilliGPU: i(-1)},
			[]api.FieldError{{Field: "guaranteedMilliGPU", Problem: "must not be negative"}}},
		{"a guarantee above a million GPUs", api.TeamQuota{GuaranteedMilliGPU: i(MaxQuotaMilliGPU + 1)},
			[]api.FieldError{{Field: "guaranteedMilliGPU", Problem: "must be at most a million GPUs"}}},
		{"a limit below -1", api.TeamQuota{LimitMilliGPU: i(-2)},
			[]api.FieldError{{Field: "limitMilliGPU", Problem: "must be a number of GPUs, or unlimited (-1)"}}},
		{"a limit above a million GPUs", api.TeamQuota{LimitMilliGPU: i(MaxQuotaMilliGPU + 1)},
			[]api.FieldError{{Field: "limitMilliGPU", Problem: "must be unlimited (-1) or at most a million GPUs"}}},
		{"a limit below the guarantee", api.TeamQuota{GuaranteedMilliGPU: i(8000), LimitMilliGPU: i(4500)},
			[]api.FieldError{{Field: "limitMilliGPU", Problem: "4.5 GPUs is below the guarantee of 8"}}},
		{"weights out of range", api.TeamQuota{Weight: i(0)}, []api.FieldError{{Field: "weight", Problem: "must be from 1 to 1000"}}},
		{"a weight above 1000", api.TeamQuota{Weight: i(1001)}, []api.FieldError{{Field: "weight", Problem: "must be from 1 to 1000"}}},
		// The check the CLI's copy lacked.
		{"model guarantees above the guarantee", api.TeamQuota{GuaranteedMilliGPU: i(4000), GuaranteedByModelMilliGPU: map[string]int64{"H100": 4000, "A10": 2500}},
			[]api.FieldError{{Field: "guaranteedByModelMilliGPU", Problem: "the model guarantees add up to 6.5 GPUs, more than the team's guarantee of 4; raise the guarantee too"}}},
		{"model guarantees without the guarantee are not summed", api.TeamQuota{GuaranteedByModelMilliGPU: map[string]int64{"H100": 4000}}, nil},
		{"bad model guarantees, sorted by model, and no sum that could overflow", api.TeamQuota{GuaranteedMilliGPU: i(1000),
			GuaranteedByModelMilliGPU: map[string]int64{"B": 5_000_000_000_000_000_000, "A": -1, " ": 0, strings.Repeat("x", 65): 0}},
			[]api.FieldError{
				{Field: "guaranteedByModelMilliGPU", Problem: `model name " " must be 1 to 64 characters`},
				{Field: "guaranteedByModelMilliGPU.A", Problem: "must be from 0 to a million GPUs"},
				{Field: "guaranteedByModelMilliGPU.B", Problem: "must be from 0 to a million GPUs"},
				{Field: "guaranteedByModelMilliGPU", Problem: `model name "` + strings.Repeat("x", 65) + `" must be 1 to 64 characters`},
			}},
		{"pool guarantees within the guarantee", api.TeamQuota{GuaranteedMilliGPU: i(8000), GuaranteedByPoolMilliGPU: map[string]int64{"onprem": 8000}}, nil},
		{"pool guarantees above the guarantee", api.TeamQuota{GuaranteedMilliGPU: i(4000), GuaranteedByPoolMilliGPU: map[string]int64{"onprem": 4000, "cloud": 1000}},
			[]api.FieldError{{Field: "guaranteedByPoolMilliGPU", Problem: "the pool guarantees add up to 5 GPUs, more than the team's guarantee of 4; raise the guarantee too"}}},
		{"bad pool guarantees, sorted by pool", api.TeamQuota{GuaranteedMilliGPU: i(1000),
			GuaranteedByPoolMilliGPU: map[string]int64{"b": MaxQuotaMilliGPU + 1, "a": -1, "x/y": 0}},
			[]api.FieldError{
				{Field: "guaranteedByPoolMilliGPU.a", Problem: "must be from 0 to a million GPUs"},
				{Field: "guaranteedByPoolMilliGPU.b", Problem: "must be from 0 to a million GPUs"},
				{Field: "guaranteedByPoolMilliGPU", Problem: `pool name "x/y" must be 1 to 63 characters, without spaces, quotes or slashes`},
			}},
		{"every problem is listed", api.TeamQuota{GuaranteedMilliGPU: i(-1), Weight: i(0)},
			[]api.FieldError{{Field: "guaranteedMilliGPU", Problem: "must not be negative"}, {Field: "weight", Problem: "must be from 1 to 1000"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, CheckQuota(tt.q)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	many := map[string]int64{}
	for n := range MaxModelGuarantees + 1 {
		many[fmt.Sprintf("m%d", n)] = 0
	}
	if errs := CheckQuota(api.TeamQuota{GuaranteedByModelMilliGPU: many}); len(errs) != 1 || errs[0].Problem != "at most 64 models" {
		t.Errorf("65 models: %v, want one problem, at most 64 models", errs)
	}
}
