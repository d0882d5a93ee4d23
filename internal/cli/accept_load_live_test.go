package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// openAIServer is a small OpenAI-compatible server: POST /v1/completions
// answers, when asked to stream, its first token after 100 ms and 16
// tokens 10 ms apart in all (server-sent events, usage at the end), and
// the whole answer at once otherwise; GET /health answers 200. It counts
// the requests it answered in $GPUFLEET_METRICS_FILE as it goes
// (served_total), so the test can compare the platform's count with the
// server's own.
const openAIServer = `import http.server, json, os, time
served = 0
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def do_POST(self):
        global served
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/completions" or "prompt" not in req:
            self.send_response(400); self.end_headers(); return
        if not req.get("stream"):
            body = json.dumps({"choices": [{"text": "x" * 16}], "usage": {"completion_tokens": 16}}).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
            return
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        time.sleep(0.1)
        for i in range(16):
            if i: time.sleep(0.01)
            self.wfile.write(b'data: {"choices":[{"text":"t"}]}\n\n'); self.wfile.flush()
        self.wfile.write(b'data: {"choices":[],"usage":{"completion_tokens":16}}\n\ndata: [DONE]\n\n'); self.wfile.flush()
        served += 1
        with open(os.environ["GPUFLEET_METRICS_FILE"], "a") as f:
            f.write(json.dumps({"name": "served_total", "value": served}) + "\n")
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()`

// loadCard is a card whose load stage drives openAIServer at a
// concurrency for a duration, judged by criteria.
func loadCard(concurrency, duration, criteria string) string {
	code, _ := json.Marshal(openAIServer)
	return fmt.Sprintf(`kind: AcceptanceCard
name: llm-load
team: default
target: {pool: local}
stages:
  - name: load
    type: load
    workload:
      kind: service
      resources: {gpus: "0.25"}
      ports: [{name: http, port: 8000}]
      readyPath: /health
      command: ["/usr/bin/python3", "-c", %s]
    load:
      port: http
      protocol: openai
      path: /v1/completions
      requests: [{"prompt": "hello", "max_tokens": 16}]
      concurrency: %s
      duration: %s
    criteria: %s
`, code, concurrency, duration, criteria)
}

// The built-in load generator drives a streaming OpenAI-compatible server
// at concurrency 4 for 15 s through the proxy's path: the stage passes
// with p95_ttft_ms and p95_latency_ms in the server's range and tokens
// flowing, every metric of vLLM's vocabulary is there, and the same card
// asking for a TTFT the server cannot give exits 1 naming the criterion.
func TestLiveLoadStageMeasuresTheService(t *testing.T) {
	s := startLiveServer(t)
	dir := t.TempDir()
	card := filepath.Join(dir, "card.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(card, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(loadCard("4", "15s", `["p95_ttft_ms >= 80", "p95_ttft_ms <= 400", "p95_latency_ms >= 230", "p95_latency_ms <= 1500", "output_tokens_per_second > 0", "error_rate <= 0.01"]`))
	r := s.run(t, s.admin, "accept", "run", card, "-o", "json")
	var run api.AcceptanceRun
	mustJSON(t, r.stdout, &run)
	if r.code != 0 || run.Status != api.RunPassed {
		t.Fatalf("accept run: exit %d, %s (%s); stage %+v\nstderr: %s", r.code, run.Status, run.Message, run.Stages, r.stderr)
	}
	st := run.Stages[0]
	for _, name := range []string{"requests_total", "p95_ttft_ms", "p95_latency_ms", "p50_itl_ms", "output_tokens_per_second"} {
		if v := metric(st.Metrics, name); v != nil {
			t.Logf("%s = %.1f", name, *v)
		}
	}
	for _, name := range []string{"requests_total", "error_rate", "requests_per_second", "output_tokens_per_second",
		"p50_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "mean_ttft_ms", "p95_itl_ms", "mean_itl_ms", "p50_latency_ms", "p99_latency_ms", "mean_tpot_ms", "count_latency_ms"} {
		if metric(st.Metrics, name) == nil {
			t.Errorf("no %s among the stage's metrics", name)
		}
	}
	// 4 requests in flight for 15 s, each about 250 ms: some 240 answers.
	total, itl := metric(st.Metrics, "requests_total"), metric(st.Metrics, "p50_itl_ms")
	if total == nil || *total < 100 || *total > 400 {
		t.Errorf("requests_total = %v, want about 240 (4 at a time for 15 s, 250 ms each)", total)
	}
	if itl == nil || *itl < 5 || *itl > 100 {
		t.Errorf("p50_itl_ms = %v, want about 10", itl)
	}
	if tps := metric(st.Metrics, "output_tokens_per_second"); tps == nil || *tps < 16**total/30 {
		t.Errorf("output_tokens_per_second = %v, want 16 tokens a request (usage.completion_tokens) over about 15 s", tps)
	}
	if len(st.Steps) != 1 || st.Steps[0].Concurrency != 4 {
		t.Errorf("steps %+v, want one at concurrency 4", st.Steps)
	}
	if served := metric(st.Metrics, "served_total"); served == nil || *served < *total {
		t.Errorf("the server answered %v streamed requests, fewer than the %v measured", served, *total)
	}
	if got := s.must(t, "accept", "get", run.ID); !strings.Contains(got, "Load steps of stage load:") || !regexp.MustCompile(`(?m)^4\s+\d+\s+0\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+`).MatchString(got) {
		t.Errorf("accept get shows no step at concurrency 4 with its figures:\n%s", got)
	}
	if html := s.must(t, "accept", "report", run.ID); !strings.Contains(html, "ttft_ms") || !strings.Contains(html, "Concurrency") {
		t.Errorf("the report charts no TTFT or has no step table:\n%.600s", html)
	}

	// Two steps, and a brief whose data boundary denies egress: the load
	// stage's workload carries it as its network policy.
	stepped := strings.Replace(loadCard("[1, 2]", "3s", `["p95_ttft_ms <= 20"]`), "team: default\n",
		"team: default\nbrief: {workload: inference, model: {name: llama-3-8b, revision: v1.0}, dataBoundary: {egress: deny, dependencies: [\"10.0.0.0/8\"]}}\n", 1)
	write(stepped)
	r = s.run(t, s.admin, "accept", "run", card, "-o", "json")
	mustJSON(t, r.stdout, &run)
	if r.code != 1 || run.Status != api.RunFailed || !strings.Contains(run.Message, "p95_ttft_ms <= 20") {
		t.Fatalf("an unreachable TTFT: exit %d, %s: %q; want exit 1 naming p95_ttft_ms <= 20", r.code, run.Status, run.Message)
	}
	st = run.Stages[0]
	if len(st.Steps) != 2 || st.Steps[0].Concurrency != 1 || st.Steps[1].Concurrency != 2 {
		t.Errorf("steps %+v, want concurrency 1 then 2", st.Steps)
	}
	for _, name := range []string{"c1.p95_ttft_ms", "c2.p95_ttft_ms", "c2.requests_per_second", "p95_ttft_ms"} {
		if metric(st.Metrics, name) == nil {
			t.Errorf("no %s among the stepped stage's metrics", name)
		}
	}
	var wl api.Workload
	mustJSON(t, s.must(t, "get", "workload", st.Workloads[0], "-o", "json"), &wl)
	if wl.Network == nil || wl.Network.Egress != api.EgressDeny || len(wl.Network.Allow) != 1 || wl.Network.Allow[0] != "10.0.0.0/8" {
		t.Errorf("the load stage's workload has network %+v, want the brief's egress deny and its dependency", wl.Network)
	}
	// Enforced where the workload has a network namespace of its own (the
	// server as root), carried only elsewhere: the message says which.
	if !strings.Contains(st.Message, "network egress deny enforced by the executor") && !strings.Contains(st.Message, "network egress deny is carried to the workload") {
		t.Errorf("the stage's message %q does not say what became of the egress policy", st.Message)
	}
}

// A card whose load stage names a port its workload does not declare, a
// protocol gpufleet does not speak, or a concurrency above the bound is
// refused at accept run, naming the field and its line; so is a
// requestsFile in a volume the team does not have.
func TestLiveLoadStageBadInput(t *testing.T) {
	s := startLiveServer(t)
	card := filepath.Join(t.TempDir(), "card.yaml")
	good := loadCard("4", "5s", `["error_rate <= 0"]`)
	for _, tc := range []struct{ body, want string }{
		{strings.Replace(good, "port: http\n", "port: grpc\n", 1), `line 15: stages[0].load.port: "grpc" is not a port the stage's workload declares (it declares http 8000)`},
		{strings.Replace(good, "protocol: openai", "protocol: grpc", 1), `line 16: stages[0].load.protocol: unknown protocol "grpc"`},
		{strings.Replace(good, "concurrency: 4", "concurrency: 1001", 1), "line 19: stages[0].load.concurrency: 1001: want from 1 to 1000"},
		{strings.Replace(good, `requests: [{"prompt": "hello", "max_tokens": 16}]`, "requestsFile: ../etc/passwd", 1), "stages[0].load.requestsFile"},
		{strings.Replace(good, `requests: [{"prompt": "hello", "max_tokens": 16}]`, "requestsFile: prompts/a.jsonl", 1), `card.stages[0].load.requestsFile: team default has no volume "prompts"`},
	} {
		if err := os.WriteFile(card, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := s.run(t, s.admin, "accept", "run", card); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("bad card: exit %d, stderr %q; want an error with %q", r.code, r.stderr, tc.want)
		}
	}
	if got := s.must(t, "accept", "list", "-o", "json"); strings.Contains(got, `"id"`) {
		t.Errorf("a refused card left a run: %s", got)
	}

	// The requests from a file in a team volume: a line that is not a
	// request is refused naming it; good lines are sent, count a step.
	s.must(t, "create", "volume", "default", "prompts", "--size", "1GiB")
	vdir := filepath.Join(s.dir, "volumes", "default", "prompts")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	fromFile := strings.Replace(strings.Replace(good, `requests: [{"prompt": "hello", "max_tokens": 16}]`, "requestsFile: prompts/set.jsonl", 1), "duration: 5s", "count: 6", 1)
	if err := os.WriteFile(card, []byte(fromFile), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(vdir, "set.jsonl"), []byte("{\"prompt\": \"a\"}\n[\"not an object\"]\n"), 0o600)
	if r := s.run(t, s.admin, "accept", "run", card); r.code == 0 || !strings.Contains(r.stderr, "prompts/set.jsonl line 2: an openai request is a JSON object") {
		t.Errorf("a bad line: exit %d, %q", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(vdir, "set.jsonl"), []byte("{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\", \"max_tokens\": 16}\n"), 0o600)
	var run api.AcceptanceRun
	mustJSON(t, s.must(t, "accept", "run", card, "-o", "json"), &run)
	if n := metric(run.Stages[0].Metrics, "requests_total"); run.Status != api.RunPassed || n == nil || *n != 6 {
		t.Errorf("a load from a volume file: %s (%s), requests_total %v; want Passed with 6", run.Status, run.Message, n)
	}
}
