package cli

import (
	"os"
	"path/filepath"
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
