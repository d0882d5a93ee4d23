package accept

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Bounds on a criterion.
const (
	MaxCriterionLen  = 256
	MaxMetricNameLen = 128
)

// Criterion operators.
const (
	OpLE = "<="
	OpLT = "<"
	OpGE = ">="
	OpGT = ">"
	OpEQ = "=="
	OpNE = "!="
)

// Criterion is a parsed criterion: METRIC OP THRESHOLD.
type Criterion struct {
	Metric    string
	Op        string
	Threshold float64
}

// criterionRE is a criterion: a metric name, an operator and a decimal
// number, with optional spaces.
var criterionRE = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|==|!=|<|>)\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*$`)

// ParseCriterion parses "p95_latency_ms <= 200": a metric name (letters,
// digits, '_' and '.', not starting with a digit), an operator (<=, <, >=,
// >, ==, !=) and a finite decimal number (no hex, no NaN or Inf, no
// units). Spaces around the operator are optional.
func ParseCriterion(s string) (Criterion, error) {
	if len(s) > MaxCriterionLen {
		return Criterion{}, fmt.Errorf("criterion longer than %d characters", MaxCriterionLen)
	}
	m := criterionRE.FindStringSubmatch(s)
	if m == nil {
		return Criterion{}, fmt.Errorf("criterion %q does not parse: want METRIC OP NUMBER, such as \"p95_latency_ms <= 200\" (OP one of <=, <, >=, >, ==, !=)", s)
	}
	if len(m[1]) > MaxMetricNameLen {
		return Criterion{}, fmt.Errorf("criterion %q: metric name longer than %d characters", s, MaxMetricNameLen)
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return Criterion{}, fmt.Errorf("criterion %q: %s is not a finite number", s, m[3])
	}
	return Criterion{Metric: m[1], Op: m[2], Threshold: v}, nil
}

// String writes the criterion back: "p95_latency_ms <= 200".
func (c Criterion) String() string {
	return c.Metric + " " + c.Op + " " + strconv.FormatFloat(c.Threshold, 'g', -1, 64)
}

// Holds reports whether value meets the criterion. NaN meets none, not
// even "!=". Equality is exact: criteria on measured fractions should use
// <= or >=.
func (c Criterion) Holds(value float64) bool {
	if math.IsNaN(value) {
		return false
	}
	switch c.Op {
	case OpLE:
		return value <= c.Threshold
	case OpLT:
		return value < c.Threshold
	case OpGE:
		return value >= c.Threshold
	case OpGT:
		return value > c.Threshold
	case OpEQ:
		return value == c.Threshold
	case OpNE:
		return value != c.Threshold
	}
	return false
}
