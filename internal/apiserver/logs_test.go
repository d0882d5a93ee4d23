package apiserver

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// streamLogs is a LogFollower, as the Kubernetes executor is: its log is a
// stream per attempt that ends when the attempt's output ends.
type streamLogs struct {
	noLogs
	mu    sync.Mutex
	calls []bool // currentOnly of each FollowLogs
	out   chan io.ReadCloser
}

func (s *streamLogs) FollowLogs(_ context.Context, _ core.WorkloadID, currentOnly bool) (io.ReadCloser, error) {
	s.mu.Lock()
	s.calls = append(s.calls, currentOnly)
	s.mu.Unlock()
	return <-s.out, nil
}

// TestLogsFollowAStream: with a LogFollower the API server streams the
// attempt's log as it comes, and ends once the workload has finished.
func TestLogsFollowAStream(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	ctx := context.Background()
	var w api.Workload
	f.must("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &w)
	if err := f.st.PutNode(ctx, core.Node{Name: "n1", Schedulable: true, GPUs: []core.GPU{{Index: 0, UUID: "GPU-0", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	plan := core.Plan{Placements: []core.Placement{{Workload: core.WorkloadID(w.ID), Assignments: []core.Assignment{{Node: "n1", GPUUUID: "GPU-0", MilliGPU: 1000, MemoryMiB: 81920}}}}}
	if res, err := f.st.ApplyPlan(ctx, plan, f.clock()); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res)
	}
	logs := &streamLogs{out: make(chan io.ReadCloser, 1)}
	podOut, podIn := io.Pipe()
	logs.out <- podOut
	srv := httptest.NewServer(New(Options{Store: f.st, Logs: logs, Now: f.clock, OpenAPI: api.OpenAPI, DefaultTeam: "research"}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/workloads/"+w.ID+"/logs?follow=true", nil)
	req.Header.Set("Authorization", "Bearer "+f.token["member"])
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// Each line reaches the client before the next is written.
	for _, want := range []string{"step 1\n", "step 2\n"} {
		go podIn.Write([]byte(want))
		if got, err := br.ReadString('\n'); got != want || err != nil {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	podIn.Close() // the container ended; the workload has not yet
	if _, err := f.st.Finish(ctx, core.WorkloadID(w.ID), 1, core.Succeeded, "", "", nil, f.clock()); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the end: %q, %v", rest, err)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.calls) != 1 || logs.calls[0] {
		t.Errorf("FollowLogs calls (currentOnly) %v, want one, with every attempt", logs.calls)
	}
}
