package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

const passingCard = `kind: AcceptanceCard
name: llm-serving
team: default
brief: {workload: inference, owner: ml-platform, targets: {p95LatencyMs: 200}}
target: {pool: local}
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: "0.25"}, command: [sh, -c, "nvidia-smi -L >/dev/null 2>&1; exit 0"]}
    criteria: ["exit_code == 0"]
  - name: functional
    type: functional
    workload:
      resources: {gpus: "0.25"}
      command: [sh, -c, "echo '{\"name\":\"p95_latency_ms\",\"value\":182,\"unit\":\"ms\"}' >> $GPUFLEET_METRICS_FILE"]
    criteria: ["exit_code == 0", "p95_latency_ms <= 200"]
  - name: failure
    type: failure
    disrupt: requeue
    disruptAfterSeconds: 1
    workload:
      resources: {gpus: "0.25"}
      command: [sh, -c, "if [ \"$GPUFLEET_ATTEMPT\" = 1 ]; then sleep 60; fi; exit 0"]
    criteria: ["recovery_seconds <= 60", "restarts >= 1", "exit_code == 0"]
  - name: review
    type: review
`

// A card whose stages meet their criteria passes, its failure stage
// really requeued its workload (a second attempt) and measured the
// recovery; the same card with an impossible criterion fails with exit 1
// naming it, and a criterion on a metric nobody reported fails.
func TestLiveAcceptanceCard(t *testing.T) {
	s := startLiveServer(t)
	dir := t.TempDir()
	card := filepath.Join(dir, "card.yaml")
	if err := os.WriteFile(card, []byte(passingCard), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, s.admin, "accept", "run", card, "-o", "json")
	if r.code != 0 {
		t.Fatalf("accept run: %+v", r)
	}
	var run api.AcceptanceRun
	mustJSON(t, r.stdout, &run)
	if run.Status != api.RunPassed || len(run.Stages) != 4 {
		t.Fatalf("run %s: %s (%s), stages %+v", run.ID, run.Status, run.Message, run.Stages)
	}
	if !strings.Contains(r.stderr, "stage failure") {
		t.Errorf("no progress on stderr:\n%s", r.stderr)
	}
	fail := run.Stages[2]
	var wl api.Workload
	mustJSON(t, s.must(t, "get", "workload", fail.Workloads[0], "-o", "json"), &wl)
	if wl.Status.Attempts != 2 {
		t.Errorf("the failure stage's workload ran %d attempts, want 2 (disrupted once)", wl.Status.Attempts)
	}
	rec := metric(fail.Metrics, "recovery_seconds")
	if rec == nil || *rec < 0 || *rec > 60 {
		t.Errorf("recovery_seconds = %v, want a measured recovery", rec)
	}
	if len(run.Stages[3].Criteria) != 1 || run.Stages[3].Criteria[0].Verdict != api.VerdictPass {
		t.Errorf("review against the brief's p95 target: %+v", run.Stages[3].Criteria)
	}
	// Listed, reported, decided.
	if got := s.must(t, "accept", "list"); !strings.Contains(got, run.ID) || !strings.Contains(got, "Passed") {
		t.Errorf("accept list:\n%s", got)
	}
	if html := s.must(t, "accept", "report", run.ID); !strings.Contains(html, "<html") || !strings.Contains(html, "p95_latency_ms") {
		t.Errorf("report:\n%.400s", html)
	}
	if got := s.must(t, "accept", "decide", run.ID, "--decision", "reserve", "--note", "meets p95"); !strings.Contains(got, "reserve") {
		t.Errorf("decide: %q", got)
	}

	// An impossible criterion, and one whose metric nobody reports.
	bad := strings.Replace(passingCard, `criteria: ["exit_code == 0", "p95_latency_ms <= 200"]`, `criteria: ["p95_latency_ms <= 1", "tokens_per_second >= 10"]`, 1)
	if err := os.WriteFile(card, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	r = s.run(t, s.admin, "accept", "run", card)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "p95_latency_ms <= 1") {
		t.Fatalf("a card with an impossible criterion: %+v, want exit 1 naming it", r)
	}
	if !strings.Contains(r.stdout, "no metric tokens_per_second was reported") || !strings.Contains(r.stdout, "Skipped") {
		t.Errorf("the missing metric must fail and later stages be skipped:\n%s", r.stdout)
	}
	// Bad cards: 400 naming the field, nothing stored.
	for _, tc := range []struct{ body, want string }{
		{strings.Replace(passingCard, "type: smoke", "type: smoky", 1), "stages[0].type"},
		{strings.Replace(passingCard, `["exit_code == 0"]`, `["exit_code ==="]`, 1), "stages[0].criteria[0]"},
		{strings.Replace(passingCard, "pool: local", "pool: nowhere", 1), "target.pool"},
	} {
		os.WriteFile(card, []byte(tc.body), 0o600)
		if r := s.run(t, s.admin, "accept", "run", card); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("bad card: %+v, want an error naming %s", r, tc.want)
		}
	}
}

func metric(ms []api.Metric, name string) *float64 {
	for _, m := range ms {
		if m.Name == name {
			return &m.Value
		}
	}
	return nil
}

// samplesCard's first stage writes 100 samples 1..100 of step_ms, from
// which criteria judge the derived p95, count and mean; its second, a
// failure stage, runs a job that ends before the stage disrupts it.
const samplesCard = `kind: AcceptanceCard
name: samples
team: default
target: {pool: local}
stages:
  - name: steps
    type: functional
    workload:
      resources: {gpus: "0.25"}
      command: [sh, -c, "i=1; while [ $i -le 100 ]; do echo \"{\\\"name\\\":\\\"step_ms\\\",\\\"value\\\":$i,\\\"unit\\\":\\\"ms\\\"}\" >> $GPUFLEET_METRICS_FILE; i=$((i+1)); done"]
    criteria: ["p95_step_ms >= 94", "p95_step_ms <= 96.5", "count_step_ms == 100", "mean_step_ms == 50.5", "step_ms == 100"]
  - name: failure
    type: failure
    disrupt: requeue
    disruptAfterSeconds: 5
    workload:
      resources: {gpus: "0.25"}
      command: [sh, -c, "sleep 1"]
    criteria: ["exit_code == 0"]
`

// Percentiles come from the samples a workload wrote; a failure stage
// whose job ended before its disruption does not pass though its
// criteria hold; a decision that commits capacity on that failed run is
// refused without --override and a note, and recorded with them; two
// decisions on a passing run are both kept, in order, and the audit
// trail has each decision and its note.
func TestLiveAcceptanceSamplesShortFailureAndDecisions(t *testing.T) {
	s := startLiveServer(t)
	card := filepath.Join(t.TempDir(), "card.yaml")
	if err := os.WriteFile(card, []byte(samplesCard), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, s.admin, "accept", "run", card, "--continue", "-o", "json")
	var failed api.AcceptanceRun
	mustJSON(t, r.stdout, &failed)
	if r.code != 1 || failed.Status != api.RunFailed || len(failed.Stages) != 2 {
		t.Fatalf("accept run: exit %d, %s (%s)", r.code, failed.Status, failed.Message)
	}
	steps, short := failed.Stages[0], failed.Stages[1]
	if steps.Status != api.StagePassed {
		t.Errorf("stage steps: %s (%s), criteria %+v", steps.Status, steps.Message, steps.Criteria)
	}
	if p95 := metric(steps.Metrics, "p95_step_ms"); p95 == nil || *p95 < 94 || *p95 > 96.5 {
		t.Errorf("p95_step_ms = %v, want in [94, 96.5]", p95)
	}
	if short.Status != api.StageFailed || !strings.Contains(short.Message, "before it was disrupted") || len(short.Disruptions) != 0 {
		t.Errorf("the short failure stage: %s: %q, disruptions %+v; want Failed saying nothing was disrupted", short.Status, short.Message, short.Disruptions)
	}
	if !strings.Contains(failed.Message, "stage failure") {
		t.Errorf("the run's message %q does not name the failure stage", failed.Message)
	}

	// A decision on the failed run.
	if r := s.run(t, s.admin, "accept", "decide", failed.ID, "--decision", "reserve"); r.code == 0 || !strings.Contains(r.stderr, "override") {
		t.Errorf("reserve on a failed run without --override: exit %d, %q", r.code, r.stderr)
	}
	if r := s.run(t, s.admin, "accept", "decide", failed.ID, "--decision", "reserve", "--override"); r.code == 0 || !strings.Contains(r.stderr, "note") {
		t.Errorf("--override without a note: exit %d, %q", r.code, r.stderr)
	}
	s.must(t, "accept", "decide", failed.ID, "--decision", "reserve", "--override", "--note", "the job was cut short on purpose")
	var got api.AcceptanceRun
	mustJSON(t, s.must(t, "accept", "get", failed.ID, "-o", "json"), &got)
	if len(got.Decisions) != 1 || !got.Decisions[0].Override || got.Decision == nil || got.Decision.Decision != api.DecisionReserve {
		t.Errorf("the overriding decision: %+v, latest %+v", got.Decisions, got.Decision)
	}

	// Two decisions on a passing run: both kept, in order.
	passing := strings.Replace(samplesCard, "command: [sh, -c, \"sleep 1\"]", "command: [sh, -c, \"if [ \\\"$GPUFLEET_ATTEMPT\\\" = 1 ]; then sleep 60; fi\"]", 1)
	passing = strings.Replace(passing, "disruptAfterSeconds: 5", "disruptAfterSeconds: 1", 1)
	if err := os.WriteFile(card, []byte(passing), 0o600); err != nil {
		t.Fatal(err)
	}
	var run api.AcceptanceRun
	mustJSON(t, s.must(t, "accept", "run", card, "-o", "json"), &run)
	if run.Status != api.RunPassed || len(run.Stages[1].Disruptions) != 1 || run.Stages[1].Disruptions[0].RecoveredAt == nil {
		t.Fatalf("the passing run: %s (%s), disruptions %+v", run.Status, run.Message, run.Stages[1].Disruptions)
	}
	s.must(t, "accept", "decide", run.ID, "--decision", "extend", "--note", "two more weeks")
	s.must(t, "accept", "decide", run.ID, "--decision", "reserve", "--note", "reserve 2 GPUs")
	mustJSON(t, s.must(t, "accept", "get", run.ID, "-o", "json"), &got)
	var said []string
	for _, d := range got.Decisions {
		said = append(said, d.Decision+": "+d.Note+" by "+d.By)
	}
	if want := []string{"extend: two more weeks by admin", "reserve: reserve 2 GPUs by admin"}; !slices.Equal(said, want) {
		t.Errorf("decisions %q, want %q", said, want)
	}
	if got.Decision == nil || got.Decision.Decision != api.DecisionReserve {
		t.Errorf("decision = %+v, want the latest (reserve)", got.Decision)
	}
	audit := s.must(t, "audit", "-o", "json")
	for _, want := range []string{"extend: two more weeks", "reserve: reserve 2 GPUs", "reserve (override: the job was cut short on purpose)"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit trail lacks %q", want)
		}
	}
}
