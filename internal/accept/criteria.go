package accept

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gpufleet/gpufleet/api"
)

// DefaultCriteria are a running stage's criteria when its card lists none:
// a stage must show something, so a stage without criteria still needs its
// workloads to exit 0.
var DefaultCriteria = []string{MetricExitCode + " == 0"}

// StageCriteria is what a stage is judged by: its criteria, or
// DefaultCriteria for a smoke, functional, load or failure stage that
// lists none. A review stage's own criteria (none by default) come on top
// of those Review derives from the brief.
func StageCriteria(s api.Stage) []string {
	if len(s.Criteria) == 0 && s.Type != api.StageReview {
		return DefaultCriteria
	}
	return s.Criteria
}

// Evaluate judges each criterion against metrics. A criterion that does
// not parse fails; a criterion whose metric is not among metrics fails
// ("no metric p95_latency_ms was reported"), never passes by default; a
// metric whose value is NaN or infinite fails. When metrics name the same
// metric twice the last one counts.
func Evaluate(criteria []string, metrics []api.Metric) []api.CriterionResult {
	byName := make(map[string]api.Metric, len(metrics))
	for _, m := range metrics {
		byName[m.Name] = m
	}
	out := make([]api.CriterionResult, 0, len(criteria))
	for _, e := range criteria {
		c, err := ParseCriterion(e)
		if err != nil {
			out = append(out, api.CriterionResult{Expression: e, Verdict: api.VerdictFail, Reason: err.Error()})
			continue
		}
		out = append(out, judge(e, c, byName))
	}
	return out
}

func judge(expr string, c Criterion, byName map[string]api.Metric) api.CriterionResult {
	r := api.CriterionResult{Expression: expr, Metric: c.Metric, Op: c.Op, Threshold: c.Threshold, Verdict: api.VerdictFail}
	m, ok := byName[c.Metric]
	if !ok {
		r.Reason = fmt.Sprintf("no metric %s was reported", c.Metric)
		return r
	}
	if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
		r.Reason = fmt.Sprintf("%s is %v, not a number that can be judged", c.Metric, m.Value)
		return r
	}
	v := m.Value
	r.Value = &v
	shown := formatValue(v, m.Unit)
	if c.Holds(v) {
		r.Verdict = api.VerdictPass
		r.Reason = fmt.Sprintf("%s is %s, %s %s", c.Metric, shown, c.Op, num(c.Threshold))
	} else {
		r.Reason = fmt.Sprintf("%s is %s, not %s %s", c.Metric, shown, c.Op, num(c.Threshold))
	}
	return r
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func formatValue(v float64, unit string) string {
	if unit == "" {
		return num(v)
	}
	return num(v) + " " + unit
}

// Passed reports whether every result passed (true for none).
func Passed(results []api.CriterionResult) bool {
	return FirstFailure(results) == nil
}

// FirstFailure is the first failing result, or nil.
func FirstFailure(results []api.CriterionResult) *api.CriterionResult {
	for i := range results {
		if results[i].Verdict != api.VerdictPass {
			return &results[i]
		}
	}
	return nil
}
