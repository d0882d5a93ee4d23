package accept

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// ChecklistItem is one item of a readiness checklist and whether the run
// evidences it.
type ChecklistItem struct {
	Item      string `json:"item"`
	Evidenced bool   `json:"evidenced"`
	// Evidence says what shows it (or what is missing).
	Evidence string `json:"evidence,omitempty"`
}

// Checklist is the readiness checklist of a run: each item evidenced or
// not by what the run recorded and by the qualification evidence of the
// nodes it used.
func Checklist(run *api.AcceptanceRun, evidence []api.Evidence) []ChecklistItem {
	stage := func(typ string) *api.StageRun {
		for i := range run.Stages {
			if run.Stages[i].Type == typ {
				return &run.Stages[i]
			}
		}
		return nil
	}
	passed := func(typ, item, what string, metrics ...string) ChecklistItem {
		s := stage(typ)
		switch {
		case s == nil:
			return ChecklistItem{Item: item, Evidence: "the card has no " + typ + " stage"}
		case s.Status != api.StagePassed:
			return ChecklistItem{Item: item, Evidence: fmt.Sprintf("stage %s is %s", s.Name, s.Status)}
		}
		var missing []string
		for _, name := range metrics {
			if !slices.ContainsFunc(s.Metrics, func(m api.Metric) bool { return m.Name == name }) {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return ChecklistItem{Item: item, Evidence: fmt.Sprintf("stage %s passed but reported no %s", s.Name, strings.Join(missing, ", "))}
		}
		return ChecklistItem{Item: item, Evidenced: true, Evidence: fmt.Sprintf("stage %s passed%s", s.Name, what)}
	}
	items := []ChecklistItem{
		passed(api.StageSmoke, "The exact image or command starts and sees its GPU", ""),
		passed(api.StageFunctional, "Known inputs give the expected outputs", ""),
		passed(api.StageLoad, "Latency and memory headroom measured under a representative load", " with p95 latency and memory headroom", MetricP95Latency, MetricMemoryHeadroom),
		passed(api.StageFailure, "Recovery from a disruption measured", " with a recovery time", MetricRecovery),
	}
	items = append(items, qualification(evidence))
	r := ChecklistItem{Item: "Results compared with the brief's targets"}
	if s := stage(api.StageReview); s == nil {
		r.Evidence = "the card has no review stage"
	} else if len(s.Criteria) == 0 {
		r.Evidence = "the brief has no targets to compare with"
	} else if !Passed(s.Criteria) {
		r.Evidence = "targets not met"
	} else {
		r.Evidenced, r.Evidence = true, fmt.Sprintf("%d targets met", len(s.Criteria))
	}
	items = append(items, r)
	d := ChecklistItem{Item: "A decision is on record, with who and when"}
	if run.Decision != nil {
		d.Evidenced, d.Evidence = true, fmt.Sprintf("%s, by %s at %s", DecisionSummary(*run.Decision), run.Decision.By, run.Decision.At.UTC().Format(time.RFC3339))
		if n := len(run.Decisions); n > 1 {
			d.Evidence += fmt.Sprintf(" (the latest of %d decisions)", n)
		}
	} else {
		d.Evidence = "no decision recorded"
	}
	return append(items, d)
}

// qualification is the checklist's item on the nodes' qualification:
// evidenced when every check passed on real devices. Simulated evidence
// (devices gpufleet simulates) is never qualification, passed or not.
func qualification(evidence []api.Evidence) ChecklistItem {
	q := ChecklistItem{Item: "The nodes used passed qualification"}
	nodes := map[string]bool{}
	var failing []string
	simulated := 0
	for _, e := range evidence {
		nodes[e.Node] = true
		switch {
		case !strings.EqualFold(e.Result, "pass"):
			failing = append(failing, e.Node+" ("+e.ResultLabel()+")")
		case e.Simulated:
			simulated++
		}
	}
	switch {
	case len(evidence) == 0:
		q.Evidence = "no qualification evidence for the nodes used"
	case len(failing) > 0:
		q.Evidence = "not passed: " + strings.Join(failing, ", ")
	case simulated == len(evidence):
		q.Evidence = fmt.Sprintf("only simulated evidence (%d checks on %d nodes of simulated devices): not a qualification", simulated, len(nodes))
	case simulated > 0:
		q.Evidence = fmt.Sprintf("%d of %d checks are simulated: not a qualification", simulated, len(evidence))
	default:
		q.Evidenced, q.Evidence = true, fmt.Sprintf("%d checks on %d nodes passed", len(evidence), len(nodes))
	}
	return q
}

// Chart geometry of the report's SVG charts.
const (
	chartW, chartH = 560, 160
	chartPad       = 8
	maxChartPoints = 2000
)

type chart struct {
	Name     string
	Points   string
	Min, Max string
	From, To string
	N        int
}

type reportStage struct {
	api.StageRun
	Charts []chart
	// StepCharts draw a load stage's figures against its concurrency
	// steps.
	StepCharts []chart
}

// stepChartMetrics are the figures charted against a load stage's
// concurrency steps.
var stepChartMetrics = []string{"p50_" + MetricTTFT, "p95_" + MetricTTFT, "p50_" + MetricLatency, "p95_" + MetricLatency, MetricOutputTokensSec}

// stepCharts draws each of stepChartMetrics against the steps'
// concurrency (one point a step, in order); none for fewer than two
// steps.
func stepCharts(steps []api.LoadStep) []chart {
	if len(steps) < 2 {
		return nil
	}
	var out []chart
	for _, name := range stepChartMetrics {
		var xs []int
		var ys []float64
		for _, st := range steps {
			if v, ok := metricValue(st.Metrics, name); ok {
				xs, ys = append(xs, st.Concurrency), append(ys, v)
			}
		}
		if len(ys) < 2 {
			continue
		}
		lo, hi := slices.Min(ys), slices.Max(ys)
		var pts strings.Builder
		for i, v := range ys {
			x := chartPad + float64(i)/float64(len(ys)-1)*(chartW-2*chartPad)
			y := float64(chartH) / 2
			if hi > lo {
				y = chartPad + (hi-v)/(hi-lo)*(chartH-2*chartPad)
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
		}
		out = append(out, chart{Name: name + " by concurrency", Points: strings.TrimSpace(pts.String()), Min: num(lo), Max: num(hi),
			From: fmt.Sprintf("concurrency %d", xs[0]), To: fmt.Sprintf("concurrency %d", xs[len(xs)-1]), N: len(ys)})
	}
	return out
}

// metricValue is the value of the metric named name.
func metricValue(ms []api.Metric, name string) (float64, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

type reportData struct {
	Run       *api.AcceptanceRun
	Decisions []api.Decision
	Stages    []reportStage
	Evidence  []api.Evidence
	Checklist []ChecklistItem
}

// charts draws one line chart per series of samples (by name, in time
// order), at most maxChartPoints points each.
func charts(samples []api.Sample) []chart {
	var names []string
	series := map[string][]api.Sample{}
	for _, s := range samples {
		if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
			continue
		}
		if _, ok := series[s.Name]; !ok {
			names = append(names, s.Name)
		}
		series[s.Name] = append(series[s.Name], s)
	}
	var out []chart
	for _, name := range names {
		ss := series[name]
		slices.SortStableFunc(ss, func(a, b api.Sample) int { return a.At.Compare(b.At) })
		if len(ss) > maxChartPoints {
			ss = ss[:maxChartPoints]
		}
		lo, hi := ss[0].Value, ss[0].Value
		for _, s := range ss {
			lo, hi = min(lo, s.Value), max(hi, s.Value)
		}
		t0, t1 := ss[0].At, ss[len(ss)-1].At
		span := t1.Sub(t0).Seconds()
		var pts strings.Builder
		for i, s := range ss {
			x := float64(chartPad)
			if span > 0 {
				x += s.At.Sub(t0).Seconds() / span * (chartW - 2*chartPad)
			} else if len(ss) > 1 {
				x += float64(i) / float64(len(ss)-1) * (chartW - 2*chartPad)
			}
			y := float64(chartH) / 2
			if hi > lo {
				y = chartPad + (hi-s.Value)/(hi-lo)*(chartH-2*chartPad)
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x, y)
		}
		out = append(out, chart{Name: name, Points: strings.TrimSpace(pts.String()), Min: num(lo), Max: num(hi),
			From: t0.UTC().Format(time.RFC3339), To: t1.UTC().Format(time.RFC3339), N: len(ss)})
	}
	return out
}

// ReportHTML renders a run as one self-contained HTML page: inline CSS,
// inline SVG charts of each stage's sample series, every criterion with
// its value and verdict, the qualification evidence of the nodes used and
// the readiness checklist (Checklist, or the caller's). It loads nothing
// from elsewhere and html/template escapes every value.
func ReportHTML(run *api.AcceptanceRun, evidence []api.Evidence, checklist []ChecklistItem) ([]byte, error) {
	if run == nil {
		return nil, fmt.Errorf("report: no run")
	}
	d := reportData{Run: run, Evidence: evidence, Checklist: checklist, Decisions: run.Decisions}
	if len(d.Decisions) == 0 && run.Decision != nil {
		d.Decisions = []api.Decision{*run.Decision}
	}
	for _, s := range run.Stages {
		d.Stages = append(d.Stages, reportStage{StageRun: s, Charts: charts(s.Samples), StepCharts: stepCharts(s.Steps)})
	}
	var b bytes.Buffer
	if err := reportTmpl.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return b.Bytes(), nil
}

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"time": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "-"
			}
			return v.UTC().Format(time.RFC3339)
		case *time.Time:
			if v == nil || v.IsZero() {
				return "-"
			}
			return v.UTC().Format(time.RFC3339)
		}
		return "-"
	},
	"num": num,
	"value": func(v *float64) string {
		if v == nil {
			return "not reported"
		}
		return num(*v)
	},
	"lower": strings.ToLower,
	"join":  strings.Join,
	// metric writes a step's figure, "-" when it has none.
	"metric": func(ms []api.Metric, name string) string {
		if v, ok := metricValue(ms, name); ok {
			return strconv.FormatFloat(v, 'g', 4, 64)
		}
		return "-"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Acceptance run {{.Run.ID}}: {{.Run.Card.Name}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:62rem;padding:0 1rem;color:#1d232b}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #d8dde3;padding-bottom:.2rem}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;width:100%;margin:.4rem 0}th,td{text-align:left;padding:.25rem .5rem;border-bottom:1px solid #eceff2;vertical-align:top}
th{font-weight:600;background:#f6f8fa}
.status{display:inline-block;padding:0 .5rem;border-radius:.6rem;font-weight:600}
.passed,.pass,.yes{color:#0a6b2d}.failed,.fail,.no,.error{color:#a8071a}.running,.pending,.skipped{color:#8a5a00}
.muted{color:#5c6670}svg{background:#fbfcfd;border:1px solid #e3e7eb}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.92em}
</style>
</head>
<body>
<h1>Acceptance run {{.Run.ID}}</h1>
<p>Card <strong>{{.Run.Card.Name}}</strong> of team <strong>{{.Run.Team}}</strong>
{{- with .Run.Card.Target}}{{if or .Pool .GPUModel}}, target {{if .Pool}}pool {{.Pool}}{{end}}{{if .GPUModel}} {{.GPUModel}}{{end}}{{end}}{{end}}:
<span class="status {{lower .Run.Status}}">{{.Run.Status}}</span></p>
{{with .Run.Card.Brief}}<p class="muted">Brief: {{.Workload}}{{with .Model.Name}} of {{.}}{{end}}{{with .Model.Revision}} at revision <code>{{.}}</code>{{end}}{{with .DataBoundary}}{{with .Egress}}; egress {{.}}{{end}}{{end}}{{with .Owner}}; owner {{.}}{{end}}.</p>{{end}}
<p class="muted">Started {{time .Run.StartedAt}}, finished {{time .Run.FinishedAt}}.</p>
{{with .Run.Message}}<p><strong>{{.}}</strong></p>{{end}}
{{with .Decisions}}<table><tr><th>Decision</th><th>By</th><th>At</th><th>Note</th></tr>
{{range .}}<tr><td><strong>{{.Decision}}</strong>{{if .Override}} <span class="fail">(override)</span>{{end}}</td><td>{{.By}}</td><td>{{time .At}}</td><td>{{.Note}}</td></tr>
{{end}}</table>{{else}}<p class="muted">No decision recorded.</p>{{end}}

<h2>Stages</h2>
{{range .Stages}}
<h3>{{.Name}} <span class="muted">({{.Type}})</span> <span class="status {{lower .Status}}">{{.Status}}</span></h3>
<p class="muted">Started {{time .StartedAt}}, finished {{time .FinishedAt}}.{{with .Workloads}} Workloads: {{range $i, $w := .}}{{if $i}}, {{end}}<code>{{$w}}</code>{{end}}.{{end}}</p>
{{with .Message}}<p>{{.}}</p>{{end}}
{{if .Criteria}}
<table><tr><th>Criterion</th><th>Value</th><th>Verdict</th><th>Why</th></tr>
{{range .Criteria}}<tr><td><code>{{.Expression}}</code></td><td>{{value .Value}}</td><td class="{{.Verdict}}">{{.Verdict}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>
{{end}}
{{if .Metrics}}
<table><tr><th>Metric</th><th>Value</th><th>Unit</th><th>Source</th></tr>
{{range .Metrics}}<tr><td><code>{{.Name}}</code></td><td>{{num .Value}}</td><td>{{.Unit}}</td><td>{{.Source}}</td></tr>
{{end}}</table>
{{end}}
{{with .Steps}}
<table><caption>Load steps</caption><tr><th>Concurrency</th><th>Requests</th><th>Error rate</th><th>Requests/s</th><th>Output tokens/s</th><th>p50 TTFT ms</th><th>p95 TTFT ms</th><th>p95 ITL ms</th><th>p50 latency ms</th><th>p95 latency ms</th></tr>
{{range .}}<tr><td>{{.Concurrency}}</td><td>{{metric .Metrics "requests_total"}}</td><td>{{metric .Metrics "error_rate"}}</td><td>{{metric .Metrics "requests_per_second"}}</td><td>{{metric .Metrics "output_tokens_per_second"}}</td><td>{{metric .Metrics "p50_ttft_ms"}}</td><td>{{metric .Metrics "p95_ttft_ms"}}</td><td>{{metric .Metrics "p95_itl_ms"}}</td><td>{{metric .Metrics "p50_latency_ms"}}</td><td>{{metric .Metrics "p95_latency_ms"}}</td></tr>
{{end}}</table>
{{end}}
{{with .Disruptions}}
<table><caption>Disruptions</caption><tr><th>Workload</th><th>Disrupted</th><th>Recovered</th></tr>
{{range .}}<tr><td><code>{{.Workload}}</code></td><td>{{time .At}}</td><td>{{if .RecoveredAt}}{{time .RecoveredAt}}{{else}}<span class="fail">never</span>{{end}}</td></tr>
{{end}}</table>
{{end}}
{{range .StepCharts}}
<figure>
<svg xmlns="http://www.w3.org/2000/svg" width="560" height="160" viewBox="0 0 560 160" role="img" aria-label="{{.Name}}">
<polyline fill="none" stroke="#b35a00" stroke-width="1.5" points="{{.Points}}"/>
</svg>
<figcaption><code>{{.Name}}</code>: {{.N}} steps from {{.From}} to {{.To}}, min {{.Min}}, max {{.Max}}</figcaption>
</figure>
{{end}}
{{range .Charts}}
<figure>
<svg xmlns="http://www.w3.org/2000/svg" width="560" height="160" viewBox="0 0 560 160" role="img" aria-label="{{.Name}}">
<polyline fill="none" stroke="#2f6fb0" stroke-width="1.5" points="{{.Points}}"/>
</svg>
<figcaption><code>{{.Name}}</code>: {{.N}} samples from {{.From}} to {{.To}}, min {{.Min}}, max {{.Max}}</figcaption>
</figure>
{{end}}
{{end}}

<h2>Qualification evidence of the nodes used</h2>
{{if .Evidence}}
<table><tr><th>Node</th><th>Check</th><th>Result</th><th>When</th><th>Message</th></tr>
{{range .Evidence}}<tr><td>{{.Node}}</td><td><code>{{join .Command " "}}</code></td><td class="{{if .Simulated}}running{{else}}{{lower .Result}}{{end}}">{{.ResultLabel}}</td><td>{{time .StartedAt}}</td><td>{{.Message}}</td></tr>
{{end}}</table>
{{else}}<p class="muted">No qualification evidence for the nodes used.</p>{{end}}

<h2>Readiness checklist</h2>
{{if .Checklist}}
<table><tr><th>Item</th><th>Evidenced</th><th>Evidence</th></tr>
{{range .Checklist}}<tr><td>{{.Item}}</td>{{if .Evidenced}}<td class="yes">yes</td>{{else}}<td class="no">no</td>{{end}}<td>{{.Evidence}}</td></tr>
{{end}}</table>
{{else}}<p class="muted">No checklist.</p>{{end}}
</body>
</html>
`))
