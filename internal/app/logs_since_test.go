package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// TestLogsSince: ?sinceSeconds= starts the log at what the workload wrote
// in the last seconds (to within the index's second), with and without
// follow, and a bad value is a 400 naming the field.
func TestLogsSince(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	w, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Command: []string{"sh", "-c", "echo early-line; sleep 3; echo late-line; sleep 30"},
		Resources: api.Resources{GPUs: 250}}, "")
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, s.admin, w.ID, "late-line")
	read := func(o api.LogOptions) string {
		t.Helper()
		rc, err := s.admin.LogsWith(ctx, w.ID, o)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var b strings.Builder
		done := make(chan struct{})
		go func() { io.Copy(&b, rc); close(done) }()
		select {
		case <-done:
		case <-time.After(1500 * time.Millisecond): // a followed log stays open
			rc.Close()
			<-done
		}
		return b.String()
	}
	for _, follow := range []bool{false, true} {
		got := read(api.LogOptions{SinceSeconds: 2, Follow: follow})
		if !strings.Contains(got, "late-line") || strings.Contains(got, "early-line") {
			t.Errorf("follow=%v, since 2 s: got %q, want late-line and not early-line", follow, got)
		}
	}
	if got := read(api.LogOptions{SinceSeconds: 60}); !strings.Contains(got, "early-line") || !strings.Contains(got, "late-line") {
		t.Errorf("since 60 s: got %q, want both lines", got)
	}
	for _, bad := range []string{"0", "-1", "x", "31536001"} {
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/api/v1/workloads/"+w.ID+"/logs?sinceSeconds="+bad, nil)
		req.Header.Set("Authorization", "Bearer "+s.admin.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "sinceSeconds") {
			t.Errorf("sinceSeconds=%s: %d %s, want 400 naming sinceSeconds", bad, resp.StatusCode, b)
		}
	}
	if _, err := s.admin.CancelWorkload(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
}
