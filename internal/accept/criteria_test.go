package accept

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/api"
)

func ptr(v float64) *float64 { return &v }

func TestEvaluate(t *testing.T) {
	metrics := []api.Metric{
		{Name: "p95_latency_ms", Value: 182, Unit: "ms", Source: api.SourceWorkload},
		{Name: "exit_code", Value: 0, Source: api.SourcePlatform},
		{Name: "weird", Value: math.NaN(), Source: api.SourceWorkload},
	}
	for _, tc := range []struct {
		name      string
		criterion string
		want      api.CriterionResult
	}{
		{"a met criterion passes", "p95_latency_ms <= 200", api.CriterionResult{Expression: "p95_latency_ms <= 200", Metric: "p95_latency_ms", Op: "<=", Threshold: 200, Value: ptr(182), Verdict: "pass", Reason: "p95_latency_ms is 182 ms, <= 200"}},
		{"an impossible criterion fails", "p95_latency_ms < 0", api.CriterionResult{Expression: "p95_latency_ms < 0", Metric: "p95_latency_ms", Op: "<", Threshold: 0, Value: ptr(182), Verdict: "fail", Reason: "p95_latency_ms is 182 ms, not < 0"}},
		{"a missing metric fails", "recovery_seconds <= 60", api.CriterionResult{Expression: "recovery_seconds <= 60", Metric: "recovery_seconds", Op: "<=", Threshold: 60, Verdict: "fail", Reason: "no metric recovery_seconds was reported"}},
		{"a missing metric fails even for !=", "nobody != 1", api.CriterionResult{Expression: "nobody != 1", Metric: "nobody", Op: "!=", Threshold: 1, Verdict: "fail", Reason: "no metric nobody was reported"}},
		{"NaN fails even for !=", "weird != 1", api.CriterionResult{Expression: "weird != 1", Metric: "weird", Op: "!=", Threshold: 1, Verdict: "fail", Reason: "weird is NaN, not a number that can be judged"}},
		{"equality is exact", "exit_code==0", api.CriterionResult{Expression: "exit_code==0", Metric: "exit_code", Op: "==", Threshold: 0, Value: ptr(0), Verdict: "pass", Reason: "exit_code is 0, == 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate([]string{tc.criterion}, metrics)
			if diff := cmp.Diff([]api.CriterionResult{tc.want}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("a criterion that does not parse fails", func(t *testing.T) {
		got := Evaluate([]string{"p95 <= fast"}, metrics)
		if len(got) != 1 || got[0].Verdict != api.VerdictFail || !strings.Contains(got[0].Reason, "does not parse") {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("the last value of a name counts", func(t *testing.T) {
		got := Evaluate([]string{"x == 2"}, []api.Metric{{Name: "x", Value: 1}, {Name: "x", Value: 2}})
		if got[0].Verdict != api.VerdictPass {
			t.Errorf("got %+v", got)
		}
	})
}

func TestParseCriterion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Criterion
		bad  string
	}{
		{in: "p95_latency_ms <= 200", want: Criterion{Metric: "p95_latency_ms", Op: "<=", Threshold: 200}},
		{in: "  memory_headroom_ratio>=0.1 ", want: Criterion{Metric: "memory_headroom_ratio", Op: ">=", Threshold: 0.1}},
		{in: "gpu.temp < -1.5e2", want: Criterion{Metric: "gpu.temp", Op: "<", Threshold: -150}},
		{in: "exit_code != 0", want: Criterion{Metric: "exit_code", Op: "!=", Threshold: 0}},
		{in: "x > .5", want: Criterion{Metric: "x", Op: ">", Threshold: 0.5}},
		{in: "exit_code = 0", bad: "does not parse"},
		{in: "x <= NaN", bad: "does not parse"},
		{in: "x <= Inf", bad: "does not parse"},
		{in: "x <= 0x10", bad: "does not parse"},
		{in: "x <= 1e999", bad: "not a finite number"},
		{in: "9x <= 1", bad: "does not parse"},
		{in: "x <= 200ms", bad: "does not parse"},
		{in: "x <= 1 && y > 2", bad: "does not parse"},
		{in: "", bad: "does not parse"},
		{in: "x <= " + strings.Repeat("1", 300), bad: "longer than"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCriterion(tc.in)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Errorf("got %+v, %v; want an error with %q", got, err, tc.bad)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestCriteriaProperties draws criteria and values (rapid, a fresh seed
// each run, printed on failure) and checks that a criterion written out
// parses back to itself, that its verdict is the comparison's, and that
// a missing or NaN metric never passes.
func TestCriteriaProperties(t *testing.T) {
	ops := []string{"<=", "<", ">=", ">", "==", "!="}
	compare := map[string]func(a, b float64) bool{
		"<=": func(a, b float64) bool { return a <= b }, "<": func(a, b float64) bool { return a < b },
		">=": func(a, b float64) bool { return a >= b }, ">": func(a, b float64) bool { return a > b },
		"==": func(a, b float64) bool { return a == b }, "!=": func(a, b float64) bool { return a != b },
	}
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringMatching(`[a-z_][a-z0-9_.]{0,20}`).Draw(t, "metric")
		op := rapid.SampledFrom(ops).Draw(t, "op")
		threshold := rapid.OneOf(rapid.Float64Range(-1e12, 1e12), rapid.SampledFrom([]float64{0, 1, -1, 0.1, 200})).Draw(t, "threshold")
		space := rapid.SampledFrom([]string{"", " ", "  "}).Draw(t, "space")
		expr := fmt.Sprintf("%s%s%s%s%s", name, space, op, space, num(threshold))
		c, err := ParseCriterion(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if want := (Criterion{Metric: name, Op: op, Threshold: threshold}); c != want {
			t.Fatalf("%q parsed as %+v, want %+v", expr, c, want)
		}
		if back, err := ParseCriterion(c.String()); err != nil || back != c {
			t.Fatalf("%q written as %q parses as %+v, %v", expr, c.String(), back, err)
		}
		value := rapid.OneOf(rapid.Float64Range(-1e12, 1e12), rapid.Just(threshold)).Draw(t, "value")
		got := Evaluate([]string{expr}, []api.Metric{{Name: name, Value: value}})
		if want := compare[op](value, threshold); (got[0].Verdict == api.VerdictPass) != want {
			t.Fatalf("%q with %s = %v: verdict %s, want pass=%v", expr, name, value, got[0].Verdict, want)
		}
		other := rapid.StringMatching(`[a-z]{1,8}`).Filter(func(s string) bool { return s != name }).Draw(t, "other")
		if r := Evaluate([]string{expr}, []api.Metric{{Name: other, Value: value}}); r[0].Verdict != api.VerdictFail || r[0].Value != nil {
			t.Fatalf("%q without %s: got %+v, want a failure", expr, name, r[0])
		}
		if r := Evaluate([]string{expr}, []api.Metric{{Name: name, Value: math.NaN()}}); r[0].Verdict != api.VerdictFail {
			t.Fatalf("%q with NaN: got %+v, want a failure", expr, r[0])
		}
	})
}

func TestStageCriteriaDefaultsToExitCode(t *testing.T) {
	if diff := cmp.Diff([]string{"exit_code == 0"}, StageCriteria(api.Stage{Type: api.StageSmoke})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := StageCriteria(api.Stage{Type: api.StageReview}); len(got) != 0 {
		t.Errorf("review: got %v, want none", got)
	}
}
