package apiserver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestLogsTailLines: ?tailLines=N answers the log's last N lines, followed
// or not, whatever the buffer boundaries; a bad N is a 400 naming the
// parameter.
func TestLogsTailLines(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	var w api.Workload
	f.must("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &w)
	f.must("member", "DELETE", "/api/v1/workloads/"+w.ID, "", http.StatusOK, nil) // ended: a follow stops at the end
	var b strings.Builder
	for i := range 20000 { // longer than one 64 KiB read
		fmt.Fprintf(&b, "line %d\n", i)
	}
	log := b.String()
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: f.st, Logs: fileLogs(path), Now: f.clock, OpenAPI: api.OpenAPI, DefaultTeam: "research"}))
	defer srv.Close()
	get := func(query string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/workloads/"+w.ID+"/logs?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+f.token["member"])
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, q := range []string{"tailLines=3", "tailLines=3&follow=true"} {
		if code, got := get(q); code != 200 || got != "line 19997\nline 19998\nline 19999\n" {
			t.Errorf("%s: %d %q, want the last 3 lines", q, code, got)
		}
	}
	if code, got := get("tailLines=15000"); code != 200 || !strings.HasPrefix(got, "line 5000\n") || strings.Count(got, "\n") != 15000 {
		t.Errorf("tailLines=15000: %d, %d lines starting %.12q", code, strings.Count(got, "\n"), got)
	}
	if code, got := get("tailLines=30000"); code != 200 || got != log {
		t.Errorf("more lines than the log has: %d, %d bytes, want the whole log", code, len(got))
	}
	// Within limitBytes: the lines that fit.
	if code, got := get("tailLines=5&limitBytes=15"); code != 200 || got != "ine 19998\nline 19999\n"[len("ine 19998\nline 19999\n")-15:] {
		t.Errorf("tailLines within limitBytes: %d %q", code, got)
	}
	// A last line without its newline counts.
	if err := os.WriteFile(path, []byte("a\nb\nc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, got := get("tailLines=2"); code != 200 || got != "b\nc" {
		t.Errorf("unterminated last line: %d %q, want \"b\\nc\"", code, got)
	}
	for _, q := range []string{"tailLines=0", "tailLines=-1", "tailLines=x", fmt.Sprintf("tailLines=%d", MaxTailLines+1)} {
		code, body := get(q)
		if code != http.StatusBadRequest || !strings.Contains(body, `"field":"tailLines"`) {
			t.Errorf("%s: %d %s, want 400 naming tailLines", q, code, body)
		}
	}
}

// TestLastLines: the last lines of a stream that does not seek (a pod's).
func TestLastLines(t *testing.T) {
	for in, want := range map[string]string{"a\nb\nc\n": "b\nc\n", "a\nb\nc": "b\nc", "c\n": "c\n", "": ""} {
		if got := string(lastLines(strings.NewReader(in), 2)); got != want {
			t.Errorf("lastLines(%q, 2) = %q, want %q", in, got, want)
		}
	}
}
