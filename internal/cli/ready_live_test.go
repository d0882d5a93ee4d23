package cli

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// slowService answers /health 200 only three seconds after it started,
// and everything else with "hello".
const slowService = `import http.server, os, time
t0 = time.time()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        ok = self.path != "/health" or time.time() - t0 > 3
        body = b"hello" if ok else b"starting"
        self.send_response(200 if ok else 503); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()`

// A service with a readiness check gets traffic through its stable URL
// only once it answers 2xx on its readyPath; its status says ready.
func TestLiveServiceReadiness(t *testing.T) {
	s := startLiveServer(t)
	id := strings.TrimSpace(s.must(t, "submit", "--kind", "service", "--name", "web", "--gpus", "0.25", "--port", "8000", "--ready-path", "/health",
		"--", "/usr/bin/python3", "-c", slowService))
	get := func() (int, string) {
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/s/default/web/", nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != 503 {
		t.Errorf("before it is ready: %d %s, want 503", code, body)
	}
	eventually(t, "the service ready and answering", func() string {
		if code, body := get(); code != 200 || body != "hello" {
			return body
		}
		return ""
	})
	var w api.Workload
	mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
	if !w.Status.Ready || w.ReadyPath != "/health" {
		t.Errorf("status ready %t, readyPath %q", w.Status.Ready, w.ReadyPath)
	}
	if r := s.run(t, s.admin, "submit", "--ready-path", "health", "--port", "80", "--", "x"); r.code == 0 || !strings.Contains(r.stderr, "readyPath") {
		t.Errorf("a ready path without /: %+v", r)
	}
}
