package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTeamQuotaValidate(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	tests := []struct {
		name string
		q    TeamQuota
		want []FieldError
	}{
		{"nothing set", TeamQuota{}, nil},
		{"a whole quota", TeamQuota{GuaranteedMilliGPU: i(8000), LimitMilliGPU: i(16000), Weight: i(2),
			GuaranteedByModelMilliGPU: map[string]int64{"H100": 4000, "A10": 4000}}, nil},
		{"unlimited, and a limit alone", TeamQuota{LimitMilliGPU: i(-1)}, nil},
		{"a limit without the guarantee is not compared", TeamQuota{LimitMilliGPU: i(1000)}, nil},
		{"the bounds themselves", TeamQuota{GuaranteedMilliGPU: i(MaxQuotaMilliGPU), LimitMilliGPU: i(MaxQuotaMilliGPU), Weight: i(MaxTeamWeight)}, nil},
		{"a negative guarantee", TeamQuota{GuaranteedMilliGPU: i(-1)},
			[]FieldError{{"guaranteedMilliGPU", "must not be negative"}}},
		{"a guarantee above a million GPUs", TeamQuota{GuaranteedMilliGPU: i(MaxQuotaMilliGPU + 1)},
			[]FieldError{{"guaranteedMilliGPU", "must be at most a million GPUs"}}},
		{"a limit below -1", TeamQuota{LimitMilliGPU: i(-2)},
			[]FieldError{{"limitMilliGPU", "must be a number of GPUs, or unlimited (-1)"}}},
		{"a limit above a million GPUs", TeamQuota{LimitMilliGPU: i(MaxQuotaMilliGPU + 1)},
			[]FieldError{{"limitMilliGPU", "must be unlimited (-1) or at most a million GPUs"}}},
		{"a limit below the guarantee", TeamQuota{GuaranteedMilliGPU: i(8000), LimitMilliGPU: i(4500)},
			[]FieldError{{"limitMilliGPU", "4.5 GPUs is below the guarantee of 8"}}},
		{"weights out of range", TeamQuota{Weight: i(0)}, []FieldError{{"weight", "must be from 1 to 1000"}}},
		{"a weight above 1000", TeamQuota{Weight: i(1001)}, []FieldError{{"weight", "must be from 1 to 1000"}}},
		// The check the CLI's copy lacked.
		{"model guarantees above the guarantee", TeamQuota{GuaranteedMilliGPU: i(4000), GuaranteedByModelMilliGPU: map[string]int64{"H100": 4000, "A10": 2500}},
			[]FieldError{{"guaranteedByModelMilliGPU", "the model guarantees add up to 6.5 GPUs, more than the team's guarantee of 4; raise the guarantee too"}}},
		{"model guarantees without the guarantee are not summed", TeamQuota{GuaranteedByModelMilliGPU: map[string]int64{"H100": 4000}}, nil},
		{"bad model guarantees, sorted by model, and no sum that could overflow", TeamQuota{GuaranteedMilliGPU: i(1000),
			GuaranteedByModelMilliGPU: map[string]int64{"B": 5_000_000_000_000_000_000, "A": -1, " ": 0, strings.Repeat("x", 65): 0}},
			[]FieldError{
				{"guaranteedByModelMilliGPU", `model name " " must be 1 to 64 characters`},
				{"guaranteedByModelMilliGPU.A", "must be from 0 to a million GPUs"},
				{"guaranteedByModelMilliGPU.B", "must be from 0 to a million GPUs"},
				{"guaranteedByModelMilliGPU", `model name "` + strings.Repeat("x", 65) + `" must be 1 to 64 characters`},
			}},
		{"pool guarantees within the guarantee", TeamQuota{GuaranteedMilliGPU: i(8000), GuaranteedByPoolMilliGPU: map[string]int64{"onprem": 8000}}, nil},
		{"pool guarantees above the guarantee", TeamQuota{GuaranteedMilliGPU: i(4000), GuaranteedByPoolMilliGPU: map[string]int64{"onprem": 4000, "cloud": 1000}},
			[]FieldError{{"guaranteedByPoolMilliGPU", "the pool guarantees add up to 5 GPUs, more than the team's guarantee of 4; raise the guarantee too"}}},
		{"bad pool guarantees, sorted by pool", TeamQuota{GuaranteedMilliGPU: i(1000),
			GuaranteedByPoolMilliGPU: map[string]int64{"b": MaxQuotaMilliGPU + 1, "a": -1, "x/y": 0}},
			[]FieldError{
				{"guaranteedByPoolMilliGPU.a", "must be from 0 to a million GPUs"},
				{"guaranteedByPoolMilliGPU.b", "must be from 0 to a million GPUs"},
				{"guaranteedByPoolMilliGPU", `pool name "x/y" must be 1 to 63 characters, without spaces, quotes or slashes`},
			}},
		{"every problem is listed", TeamQuota{GuaranteedMilliGPU: i(-1), Weight: i(0)},
			[]FieldError{{"guaranteedMilliGPU", "must not be negative"}, {"weight", "must be from 1 to 1000"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.q.Validate()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	many := map[string]int64{}
	for n := range MaxModelGuarantees + 1 {
		many[fmt.Sprintf("m%d", n)] = 0
	}
	if errs := (TeamQuota{GuaranteedByModelMilliGPU: many}).Validate(); len(errs) != 1 || errs[0].Problem != "at most 64 models" {
		t.Errorf("65 models: %v, want one problem, at most 64 models", errs)
	}
}
