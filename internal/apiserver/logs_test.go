package apiserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// fileLogs serves one file as every workload's log, as the local executor
// does (an *os.File, which seeks).
type fileLogs string

func (p fileLogs) Logs(core.WorkloadID) (io.ReadCloser, error) { return os.Open(string(p)) }

// TestLogsFollowFromTheLastBytes: ?limitBytes= bounds a followed log too,
// to its last bytes, so that a page following a long log does not read it
// all from the start.
func TestLogsFollowFromTheLastBytes(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	var w api.Workload
	f.must("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &w)
	f.must("member", "DELETE", "/api/v1/workloads/"+w.ID, "", http.StatusOK, nil) // ended: the follow stops at the end
	path := filepath.Join(t.TempDir(), "log")
	log := strings.Repeat("old line\n", 1000) + "last line\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: f.st, Logs: fileLogs(path), Now: f.clock, OpenAPI: api.OpenAPI, DefaultTeam: "research"}))
	defer srv.Close()
	get := func(query string) string {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/workloads/"+w.ID+"/logs?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+f.token["member"])
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", query, resp.StatusCode, b)
		}
		return string(b)
	}
	if got := get("follow=true&limitBytes=19"); got != "old line\nlast line\n" {
		t.Errorf("follow with limitBytes=19: %q, want the last 19 bytes", got)
	}
	if got := get("limitBytes=10"); got != "last line\n" {
		t.Errorf("limitBytes=10: %q", got)
	}
	if got := get("follow=true"); got != log {
		t.Errorf("follow without limitBytes: %d bytes, want the whole log (%d)", len(got), len(log))
	}
}
