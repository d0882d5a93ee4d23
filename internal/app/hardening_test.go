package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// do sends one request as the admin and returns the status and body.
func (s *server) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.admin.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHugeNumbersAreRefused: a number that would overflow once converted
// (maxRuntimeSeconds 9223372037 wrapped to a negative duration, no limit;
// 18446744074 to 290 ms; model guarantees whose sum wraps below the team's
// guarantee) is a 400 naming its field, and nothing changes.
func TestHugeNumbersAreRefused(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	for _, c := range []struct {
		method, path, body, field string
	}{
		{"POST", "/api/v1/workloads", `{"command":["true"],"maxRuntimeSeconds":9223372037,"resources":{"gpus":1}}`, "maxRuntimeSeconds"},
		{"POST", "/api/v1/workloads", `{"command":["true"],"maxRuntimeSeconds":18446744074,"resources":{"gpus":1}}`, "maxRuntimeSeconds"},
		{"POST", "/api/v1/workloads", `{"command":["true"],"maxRuntimeSeconds":99999999999999999999,"resources":{"gpus":1}}`, "maxRuntimeSeconds"},
		{"POST", "/api/v1/workloads", `{"command":["true"],"resources":{"gpus":1,"memoryMiB":9223372036854775807}}`, "resources.memoryMiB"},
		{"POST", "/api/v1/workloads", `{"command":["true"],"resources":{"gpuMemoryMiB":9223372036854775807}}`, "resources.gpuMemoryMiB"},
		{"POST", "/api/v1/workloads", `{"command":["true"],"resources":{"gpus":1,"cpu":1099511627775}}`, "resources.cpu"},
		{"POST", "/api/v1/teams", `{"name":"huge","guaranteedMilliGPU":9000000000000000000}`, "guaranteedMilliGPU"},
		{"POST", "/api/v1/teams", `{"name":"huge","limitMilliGPU":9000000000000000000}`, "limitMilliGPU"},
		{"PATCH", "/api/v1/teams/research", `{"guaranteedMilliGPU":1000,"guaranteedByModelMilliGPU":{"A":5000000000000000000,"B":5000000000000000000}}`, "guaranteedByModelMilliGPU.A"},
		{"PATCH", "/api/v1/teams/research", `{"limitMilliGPU":1000000000001}`, "limitMilliGPU"},
	} {
		status, body := s.do(t, c.method, c.path, c.body)
		if status != http.StatusBadRequest || !strings.Contains(body, `"field":"`+c.field+`"`) {
			t.Errorf("%s %s %s: %d %s, want 400 naming %s", c.method, c.path, c.body, status, body, c.field)
		}
	}
	all, err := s.admin.AllWorkloads(ctx, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Errorf("%d workloads stored after refused submissions", len(all))
	}
	teams, err := s.admin.Teams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range teams {
		if tm.Name == "huge" || (tm.Name == "research" && (tm.GuaranteedMilliGPU != 0 || len(tm.GuaranteedByModelMilliGPU) != 0 || *tm.LimitMilliGPU != -1)) {
			t.Errorf("team changed by a refused request: %+v", tm)
		}
	}
}

// TestDataDirModes: after a start, the data dir is 0700 and the store's
// files and the admin token 0600, even under umask 0; a data dir left loose
// (0777, files 0666) is tightened at the next start.
func TestDataDirModes(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "data")
	want := map[string]os.FileMode{
		"": 0o700, "gpufleet.db": 0o600, "gpufleet.db-wal": 0o600, "gpufleet.db-shm": 0o600, "admin-token": 0o600, "lock": 0o600,
	}
	check := func(when string) {
		t.Helper()
		for name, mode := range want {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Errorf("%s: %v", when, err)
				continue
			}
			if got := fi.Mode().Perm(); got != mode {
				t.Errorf("%s: %s is %v, want %v", when, filepath.Join("data", name), got, mode)
			}
		}
	}
	cfg := testConfig(t, dir)
	s := startWith(t, cfg, io.Discard)
	check("first start")
	s.stop()

	// Loosen everything, as an older version or an operator might have,
	// with -wal and -shm files left behind.
	for name := range want {
		mode := os.FileMode(0o666)
		if name == "" {
			mode = 0o777
		}
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); os.IsNotExist(err) {
			if err := os.WriteFile(p, nil, mode); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Addr = freeAddr(t)
	startWith(t, cfg, io.Discard)
	check("restart on a loose data dir")
}

// shortTimeouts runs the test's servers with the HTTP timeouts to, so that
// a test of them takes seconds.
func shortTimeouts(t *testing.T, to httpTimeouts) {
	old := serverTimeouts
	serverTimeouts = to
	t.Cleanup(func() { serverTimeouts = old })
}

// TestSlowBodyIsCutOff: 100 clients that send a request body a byte at a
// time, steadily (every 100 ms, ten times within the read timeout), are each
// disconnected once the read timeout has passed since the request began,
// although the body they announce would take them minutes.
func TestSlowBodyIsCutOff(t *testing.T) {
	const readTimeout = time.Second
	shortTimeouts(t, httpTimeouts{readHeader: readTimeout, read: readTimeout, write: 2 * time.Second, idle: 2 * time.Second})
	s := start(t, t.TempDir())
	const clients = 100
	var wg sync.WaitGroup
	lasted := make([]time.Duration, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() {
			conn, err := net.Dial("tcp", s.addr)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close()
			t0 := time.Now()
			fmt.Fprintf(conn, "POST /api/v1/workloads HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", s.addr, s.admin.Token)
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				io.Copy(io.Discard, conn) // until the server closes
			}()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			giveUp := time.After(5 * readTimeout)
			for {
				select {
				case <-closed:
					lasted[i] = time.Since(t0)
					return
				case <-tick.C:
					conn.Write([]byte(" ")) // an error is the server closing: the reader sees it
				case <-giveUp:
					errs[i] = fmt.Errorf("still open after %v", time.Since(t0))
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range clients {
		switch {
		case errs[i] != nil:
			t.Errorf("client %d: %v", i, errs[i])
		case lasted[i] > readTimeout+2*time.Second:
			t.Errorf("client %d: closed after %v, want about the read timeout (%v)", i, lasted[i], readTimeout)
		}
	}
}

// TestFollowedLogOutlivesTimeouts: a followed log (logs -f) streams for as
// long as its workload runs, well past the read and write timeouts, and
// ends with the workload.
func TestFollowedLogOutlivesTimeouts(t *testing.T) {
	shortTimeouts(t, httpTimeouts{readHeader: time.Second, read: 500 * time.Millisecond, write: 500 * time.Millisecond, idle: time.Second})
	s := start(t, t.TempDir())
	ctx := context.Background()
	wl, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Resources: api.Resources{GPUs: 1000},
		Command: []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.3; done"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	rc, err := s.admin.Logs(ctx, wl.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var lines []string
	sc := bufio.NewScanner(rc)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Errorf("stream broke after %v: %v", time.Since(t0), err)
	}
	if got := strings.Join(lines, "\n"); !strings.HasSuffix(got, "line 7\nline 8") || !strings.Contains(got, "line 1\n") {
		t.Errorf("followed log after %v:\n%s\nwant lines 1 to 8", time.Since(t0), got)
	}
	if d := time.Since(t0); d < time.Second {
		t.Errorf("the log ended after %v, before the timeouts it should outlast", d)
	}
}

// TestPprofOnLoopbackOnly: Go's profiles, which need no token, are served
// on a loopback address only; any other address is refused, naming it.
func TestPprofOnLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:6061": true, "[::1]:6061": true, "localhost:6061": true, "127.0.0.2:6061": true,
		":6061": false, "0.0.0.0:6061": false, "[::]:6061": false, "10.0.0.5:6061": false, "example.com:6061": false, "6061": false,
	} {
		err := loopbackOnly(addr)
		if (err == nil) != ok {
			t.Errorf("loopbackOnly(%q) = %v, want allowed %v", addr, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), addr) {
			t.Errorf("loopbackOnly(%q) = %v: does not name the address", addr, err)
		}
	}
}
