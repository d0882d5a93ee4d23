package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// port-forward carries a local port to a running notebook's port over the
// API, for a member of its team; another team's member gets nothing.
func TestLivePortForward(t *testing.T) {
	s := startLiveServer(t)
	id := strings.TrimSpace(s.must(t, "submit", "--kind", "notebook", "--gpus", "0.25", "--", "sh", "-c", `exec /usr/bin/python3 -m http.server "$PORT"`))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- s.runCtx(t, ctx, s.admin, "port-forward", id, strconv.Itoa(local)+":8888") }()
	var body string
	eventually(t, "the notebook through the forward", func() string {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(local) + "/")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		if resp.StatusCode != 200 || !strings.Contains(body, "Directory listing") {
			return resp.Status + " " + body
		}
		return ""
	})
	cancel()
	if r := <-done; r.code != 0 || !strings.Contains(r.stdout, "Forwarding from 127.0.0.1:"+strconv.Itoa(local)+" -> 8888") {
		t.Errorf("port-forward: %+v", r)
	}

	// Another team's member: the workload is not theirs to see.
	s.must(t, "create", "team", "others")
	created := strings.TrimSpace(s.must(t, "create", "user", "oz", "--team", "others"))
	oz := created[strings.LastIndex(created, "\n")+1:]
	if r := s.run(t, oz, "port-forward", id, "0:8888"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("another team's member: %+v", r)
	}
	if r := s.run(t, s.admin, "port-forward", id, "70000"); r.code != 2 {
		t.Errorf("a port out of range: %+v, want a usage error", r)
	}
}
