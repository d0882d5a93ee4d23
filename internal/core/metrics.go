package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
)

// Metric is a figure a workload reported about its own run (acceptance
// cards judge them): one JSON line {"name":"p95_latency_ms","value":182,
// "unit":"ms"} of its $GPUFLEET_METRICS_FILE. Attempt is the attempt that
// reported it. Value is the last value reported; Samples, for a name
// reported more than once, holds every value in the order written (the
// last is Value), from which acceptance derives percentiles.
type Metric struct {
	Name    string    `json:"name"`
	Value   float64   `json:"value"`
	Unit    string    `json:"unit,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Samples []float64 `json:"samples,omitempty"`
}

// Bounds of reported metrics: per workload, and per line.
const (
	MaxMetrics = 64
	// MaxMetricSamples bounds the values kept of all repeated names of
	// one report together (the file's 64 KiB hold fewer lines anyway).
	MaxMetricSamples = 4096
	maxMetricLine    = 1 << 10
	maxMetricUnit    = 32
	MaxMetricsNotes  = 5
)

var metricNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)

// ParseMetrics reads a metrics report, one JSON object per line; a name
// reported twice keeps its last value as Value and every value, in order,
// as Samples (at most MaxMetricSamples in all, then the later values of a
// name change its Value only, with a note). Lines that are not a metric (bad
// JSON, a name that is not lowercase letters, digits and _, a value that
// is not a finite number, a unit over 32 characters, more than MaxMetrics
// names) are skipped, each with a note (at most MaxMetricsNotes, then one
// saying how many more).
func ParseMetrics(b []byte, attempt int) ([]Metric, []string) {
	var out []Metric
	at := map[string]int{}
	var notes []string
	skipped, samples, unsampled := 0, 0, 0
	skip := func(n int, format string, args ...any) {
		skipped++
		if len(notes) < MaxMetricsNotes {
			notes = append(notes, fmt.Sprintf("line %d: ", n)+fmt.Sprintf(format, args...))
		}
	}
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) > maxMetricLine {
			skip(i+1, "longer than %d bytes", maxMetricLine)
			continue
		}
		var m struct {
			Name  string   `json:"name"`
			Value *float64 `json:"value"`
			Unit  string   `json:"unit"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			skip(i+1, "not a JSON object with name, value and unit")
			continue
		}
		switch {
		case !metricNameRE.MatchString(m.Name):
			skip(i+1, "name %q: want lowercase letters, digits and _", m.Name)
			continue
		case m.Value == nil || math.IsNaN(*m.Value) || math.IsInf(*m.Value, 0):
			skip(i+1, "metric %s has no finite value", m.Name)
			continue
		case len(m.Unit) > maxMetricUnit:
			skip(i+1, "metric %s: a unit is at most %d characters", m.Name, maxMetricUnit)
			continue
		}
		if j, ok := at[m.Name]; ok {
			prev := &out[j]
			if prev.Samples == nil && samples+2 <= MaxMetricSamples {
				prev.Samples = []float64{prev.Value}
				samples++
			}
			if prev.Samples != nil && samples < MaxMetricSamples {
				prev.Samples = append(prev.Samples, *m.Value)
				samples++
			} else {
				unsampled++
			}
			prev.Value, prev.Unit = *m.Value, m.Unit
			continue
		}
		if len(out) >= MaxMetrics {
			skip(i+1, "more than %d metrics", MaxMetrics)
			continue
		}
		at[m.Name] = len(out)
		out = append(out, Metric{Name: m.Name, Value: *m.Value, Unit: m.Unit, Attempt: attempt})
	}
	if skipped > len(notes) {
		notes = append(notes, fmt.Sprintf("and %d more lines skipped", skipped-len(notes)))
	}
	if unsampled > 0 {
		notes = append(notes, fmt.Sprintf("more than %d values of repeated names: %d later values count as the last value only, not as samples", MaxMetricSamples, unsampled))
	}
	return out, notes
}

// MergeMetrics adds later metrics over earlier ones by name, keeping at
// most MaxMetrics.
func MergeMetrics(old, later []Metric) []Metric {
	out := append([]Metric(nil), old...)
	for _, m := range later {
		replaced := false
		for i := range out {
			if out[i].Name == m.Name {
				out[i], replaced = m, true
				break
			}
		}
		if !replaced && len(out) < MaxMetrics {
			out = append(out, m)
		}
	}
	return out
}
