package accept

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

func reportRun() *api.AcceptanceRun {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(5 * time.Minute)
	return &api.AcceptanceRun{
		ID: "run-1", Team: "research", Status: api.RunFailed, StartedAt: t0, FinishedAt: &t1,
		Card: api.AcceptanceCard{Name: "llm", Target: api.CardTarget{Pool: "local", GPUModel: "H100"}},
		Stages: []api.StageRun{
			{Name: "smoke", Type: api.StageSmoke, Status: api.StagePassed, Workloads: []string{"w-1"},
				Metrics:  []api.Metric{{Name: "exit_code", Value: 0, Source: api.SourcePlatform}},
				Criteria: Evaluate([]string{"exit_code == 0"}, []api.Metric{{Name: "exit_code", Value: 0}})},
			{Name: "<script>alert(1)</script>", Type: api.StageLoad, Status: api.StageFailed, Message: `"><img src=x onerror=alert(2)>`,
				Metrics: []api.Metric{{Name: "p95_latency_ms", Value: 182, Unit: "ms", Source: api.SourceWorkload}},
				Criteria: Evaluate([]string{"p95_latency_ms <= 100", "memory_headroom_ratio >= 0.1"},
					[]api.Metric{{Name: "p95_latency_ms", Value: 182, Unit: "ms"}}),
				Samples: []api.Sample{{At: t0, Name: "latency_ms", Value: 100}, {At: t0.Add(time.Minute), Name: "latency_ms", Value: 180}, {At: t0.Add(2 * time.Minute), Name: "latency_ms", Value: 140}}},
		},
	}
}

func TestReportHTMLEscapesAHostileStageName(t *testing.T) {
	run := reportRun()
	ev := []api.Evidence{{Node: "n1", Command: []string{"dcgmi", "diag", "-r", "1"}, Result: "Pass", StartedAt: run.StartedAt, Message: "<b>ok</b>"}}
	b, err := ReportHTML(run, ev, Checklist(run, ev))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, bad := range []string{"<script>alert(1)", "<img src=x", "<b>ok</b>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",
		"<code>p95_latency_ms &lt;= 100</code>", "p95_latency_ms is 182 ms, not &lt;= 100",
		"no metric memory_headroom_ratio was reported", "not reported",
		"<polyline", "latency_ms</code>: 3 samples", "dcgmi diag -r 1",
		"Readiness checklist", "no decision recorded",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Self-contained: nothing is loaded from elsewhere.
	if m := regexp.MustCompile(`(?i)<[a-z][^>]*\s(src|href)\s*=|<link|<script|@import|url\(`).FindString(page); m != "" {
		t.Errorf("the page loads something: %q", m)
	}
}

func TestChecklistSaysWhatIsEvidenced(t *testing.T) {
	run := reportRun()
	got := Checklist(run, nil)
	byItem := map[string]ChecklistItem{}
	for _, it := range got {
		byItem[it.Item] = it
	}
	if it := byItem["The exact image or command starts and sees its GPU"]; !it.Evidenced {
		t.Errorf("smoke passed: got %+v", it)
	}
	for _, item := range []string{"Known inputs give the expected outputs", "Latency and memory headroom measured under a representative load",
		"Recovery from a disruption measured", "The nodes used passed qualification", "Results compared with the brief's targets", "A decision is on record, with who and when"} {
		if it, ok := byItem[item]; !ok || it.Evidenced || it.Evidence == "" {
			t.Errorf("%s: got %+v, want not evidenced, with why", item, it)
		}
	}
	run.Decision = &api.Decision{Decision: api.DecisionReserve, By: "ana", At: run.StartedAt}
	ev := []api.Evidence{{Node: "n1", Result: "Fail"}}
	got = Checklist(run, ev)
	if it := got[len(got)-1]; !it.Evidenced || !strings.Contains(it.Evidence, "reserve, by ana") {
		t.Errorf("decision: got %+v", it)
	}
	if it := got[4]; it.Evidenced || !strings.Contains(it.Evidence, "n1 (Fail)") {
		t.Errorf("qualification: got %+v", it)
	}
	// Simulated evidence that passed is not a qualification; real
	// evidence that passed is.
	sim := []api.Evidence{{Node: "n1", Result: "Pass", Simulated: true}, {Node: "n1", Result: "Pass", Simulated: true}}
	if it := Checklist(run, sim)[4]; it.Evidenced || !strings.Contains(it.Evidence, "only simulated evidence (2 checks on 1 nodes") {
		t.Errorf("simulated qualification: got %+v", it)
	}
	if it := Checklist(run, append(sim, api.Evidence{Node: "n2", Result: "Pass"}))[4]; it.Evidenced || !strings.Contains(it.Evidence, "2 of 3 checks are simulated") {
		t.Errorf("partly simulated qualification: got %+v", it)
	}
	if it := Checklist(run, []api.Evidence{{Node: "n2", Result: "Pass"}})[4]; !it.Evidenced {
		t.Errorf("real qualification: got %+v", it)
	}
	page, err := ReportHTML(run, sim, nil)
	if err != nil || !strings.Contains(string(page), "Pass (Simulated)") {
		t.Errorf("the report shows simulated evidence without saying so: %v", err)
	}
}
