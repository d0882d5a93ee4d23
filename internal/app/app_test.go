package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// server is a real gpufleet server on loopback, run in-process.
type server struct {
	addr   string
	admin  *api.Client
	cancel context.CancelFunc
	done   chan error
	cfg    config.Config
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testConfig is the configuration of a test server on a free loopback
// address: four simulated H100s with the demo teams, its data in dir.
func testConfig(t testing.TB, dir string) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = freeAddr(t)
	cfg.DataDir = dir
	cfg.FakeGPUs = "4xH100-80GB"
	cfg.Demo = true
	cfg.NodeName = "node-a"
	cfg.ResyncPeriod = 100 * time.Millisecond
	return cfg
}

func start(t testing.TB, dir string) *server {
	t.Helper()
	return startWith(t, testConfig(t, dir), io.Discard)
}

// removeAll removes dir, trying again while workloads that outlived their
// server still write into it.
func removeAll(t testing.TB, dir string) {
	if saw, ok := testwait.Within(10*time.Second, func() (bool, string) {
		err := os.RemoveAll(dir)
		return err == nil, fmt.Sprint(err)
	}); !ok {
		t.Errorf("remove %s: %s", dir, saw)
	}
}

func (s *server) stop() {
	s.cancel()
	<-s.done
	s.done <- nil // let a second stop return
}

// waitFor waits until cond holds for the workload (30 s at most), and
// returns it. The API has no watch: testwait polls it.
func waitFor(t testing.TB, c *api.Client, id, what string, cond func(*api.Workload) bool) *api.Workload {
	t.Helper()
	var w *api.Workload
	testwait.Until(t, 30*time.Second, fmt.Sprintf("workload %s to be %s", id, what), func() (bool, string) {
		var err error
		if w, err = c.GetWorkload(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return cond(w), fmt.Sprintf("it is %s/%s %q", w.Status.Phase, w.Status.Reason, w.Status.Message)
	})
	return w
}

// waitDone waits until the workload has finished.
func waitDone(t testing.TB, c *api.Client, id string) *api.Workload {
	t.Helper()
	return waitFor(t, c, id, "finished", func(w *api.Workload) bool {
		switch w.Status.Phase {
		case api.PhaseSucceeded, api.PhaseFailed, api.PhaseCancelled:
			return true
		}
		return false
	})
}

// waitLog follows the workload's log, which the server streams as it is
// written, until it holds s, and returns what it read. It fails t when the
// log ends (the workload finished) or 30 s pass without s.
func waitLog(t testing.TB, c *api.Client, id, s string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []byte
	for buf := make([]byte, 4096); !bytes.Contains(got, []byte(s)); {
		n, err := rc.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil && !bytes.Contains(got, []byte(s)) {
			t.Fatalf("log of %s: no %q before %v; it holds %q", id, s, err, got)
		}
	}
	return string(got)
}

// TestMixedWorkloadsEndToEnd submits a mix of whole, multi-GPU and
// fractional workloads that succeed, fail and sleep, and checks that each
// ends in the right phase with the right exit code and log, and that no GPU
// is ever over-committed.
func TestMixedWorkloadsEndToEnd(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	type want struct {
		phase string
		code  int
		log   string
	}
	gpus := []string{"1", "2", "0.5", "0.25"}
	wants := map[string]want{}
	for i := range 24 {
		var cmd []string
		var w want
		switch i % 3 {
		case 0:
			cmd, w = []string{"sh", "-c", fmt.Sprintf("echo ok-%d", i)}, want{api.PhaseSucceeded, 0, fmt.Sprintf("ok-%d", i)}
		case 1:
			cmd, w = []string{"sh", "-c", fmt.Sprintf("echo fail-%d >&2; exit %d", i, 1+i%5)}, want{api.PhaseFailed, 1 + i%5, fmt.Sprintf("fail-%d", i)}
		case 2:
			cmd, w = []string{"sh", "-c", "sleep 0.3; echo slept"}, want{api.PhaseSucceeded, 0, "slept"}
		}
		g, _ := quantity.ParseMilli(gpus[i%len(gpus)])
		wl, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Command: cmd, Resources: api.Resources{GPUs: g}}, "")
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		wants[wl.ID] = w
	}
	// Watch the nodes while the workloads run.
	stop := make(chan struct{})
	var watchErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			nodes, err := s.admin.Nodes(ctx)
			if err != nil {
				watchErr = err
				return
			}
			for _, n := range nodes {
				for _, g := range n.GPUs {
					if g.AllocatedMilliGPU > 1000 || g.AllocatedMemoryMiB > g.MemoryMiB {
						watchErr = fmt.Errorf("node %s gpu %d over-committed: %+v", n.Name, g.Index, g)
						return
					}
				}
			}
			time.Sleep(10 * time.Millisecond) // the watcher's pace
		}
	})
	for id, w := range wants {
		got := waitDone(t, s.admin, id)
		if got.Status.Phase != w.phase || got.Status.ExitCode == nil || *got.Status.ExitCode != w.code {
			t.Errorf("%s: %s exit %v, want %s exit %d", id, got.Status.Phase, got.Status.ExitCode, w.phase, w.code)
		}
		if len(got.Status.Placement) == 0 {
			t.Errorf("%s: no placement recorded", id)
		}
		rc, err := s.admin.Logs(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if !strings.Contains(string(b), w.log) {
			t.Errorf("%s: log %q lacks %q", id, b, w.log)
		}
	}
	close(stop)
	wg.Wait()
	if watchErr != nil {
		t.Error(watchErr)
	}
}

func TestBadInputIsRefusedAndStoresNothing(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	cases := []struct {
		name   string
		body   string
		status int
		field  string
	}{
		{"zero GPUs", `{"command":["true"],"resources":{"gpus":0}}`, 400, "resources.gpus"},
		{"negative GPUs", `{"command":["true"],"resources":{"gpus":-1}}`, 400, "resources.gpus"},
		{"one and a half GPUs", `{"command":["true"],"resources":{"gpus":1.5}}`, 400, "resources.gpus"},
		{"too precise a fraction", `{"command":["true"],"resources":{"gpus":0.0001}}`, 400, "resources.gpus"},
		{"unknown priority", `{"command":["true"],"priority":"urgent","resources":{"gpus":1}}`, 400, "priority"},
		{"unknown team", `{"command":["true"],"team":"nope","resources":{"gpus":1}}`, 400, "team"},
		{"empty command", `{"command":[],"resources":{"gpus":1}}`, 400, "command"},
		{"unknown field", `{"command":["true"],"resources":{"gpus":1},"gpuz":2}`, 400, "gpuz"},
		{"malformed JSON", `{"command":["true"`, 400, "body"},
		{"wrong type", `{"command":"true","resources":{"gpus":1}}`, 400, "command"},
		{"bad kind", `{"command":["true"],"kind":"daemon","resources":{"gpus":1}}`, 400, "kind"},
		{"escaping working dir", `{"command":["true"],"workingDir":"../../etc","resources":{"gpus":1}}`, 400, "workingDir"},
		{"bad env name", `{"command":["true"],"env":{"A-B":"1"},"resources":{"gpus":1}}`, 400, "env.A-B"},
		{"status set by client", `{"command":["true"],"resources":{"gpus":1},"status":{"phase":"Succeeded"}}`, 400, "status"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(t, s, "/api/v1/workloads", c.body, nil)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, body)
			}
			if !strings.Contains(body, `"field":"`+c.field+`"`) {
				t.Errorf("error does not name field %q: %s", c.field, body)
			}
		})
	}
	t.Run("body over 1 MiB", func(t *testing.T) {
		big := `{"command":["true","` + strings.Repeat("x", 2<<20) + `"]}`
		status, body := post(t, s, "/api/v1/workloads", big, nil)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"code":"too_large"`) {
			t.Errorf("status %d body %.200s, want 413 too_large", status, body)
		}
	})
	all, err := s.admin.AllWorkloads(ctx, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Errorf("%d workloads stored after bad submissions", len(all))
	}
}

func post(t *testing.T, s *server, path, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.admin.Token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestIdempotencyKeyOverHTTP(t *testing.T) {
	s := start(t, t.TempDir())
	body := `{"command":["true"],"resources":{"gpus":1}}`
	st1, b1 := post(t, s, "/api/v1/workloads", body, map[string]string{"Idempotency-Key": "abc"})
	st2, b2 := post(t, s, "/api/v1/workloads", body, map[string]string{"Idempotency-Key": "abc"})
	st3, b3 := post(t, s, "/api/v1/workloads", `{"command":["false"],"resources":{"gpus":1}}`, map[string]string{"Idempotency-Key": "abc"})
	reordered, b4 := post(t, s, "/api/v1/workloads", `{ "resources": {"gpus": 1.0}, "command": ["true"] }`, map[string]string{"Idempotency-Key": "abc"})
	if reordered != 200 {
		t.Errorf("same request with fields reordered: status %d, want 200 (a replay): %s", reordered, b4)
	}
	if st1 != 201 || st2 != 200 || st3 != 422 {
		t.Fatalf("statuses %d %d %d, want 201 200 422\n%s\n%s\n%s", st1, st2, st3, b1, b2, b3)
	}
	id := func(b string) string { i := strings.Index(b, `"id":"`); return b[i+6 : i+6+15] }
	if id(b1) != id(b2) {
		t.Errorf("replay returned %s, first %s", id(b2), id(b1))
	}
	all, _ := s.admin.AllWorkloads(context.Background(), api.ListOptions{})
	if len(all) != 1 {
		t.Errorf("%d workloads, want 1", len(all))
	}
}

func TestAuthAndTeamIsolation(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	alice, err := s.admin.CreateUser(ctx, &api.User{Name: "alice", Teams: []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.admin.CreateUser(ctx, &api.User{Name: "bob", Teams: []string{"inference"}})
	if err != nil {
		t.Fatal(err)
	}
	ac, bc := api.NewClient(s.addr, alice.Token), api.NewClient(s.addr, bob.Token)
	w, err := ac.SubmitWorkload(ctx, &api.Workload{Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if w.Team != "research" || w.Owner != "alice" {
		t.Errorf("team %s owner %s, want research/alice", w.Team, w.Owner)
	}
	var se *api.StatusError
	if _, err := bc.GetWorkload(ctx, w.ID); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("bob reading alice's workload: %v, want 404", err)
	}
	if _, err := bc.CancelWorkload(ctx, w.ID); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("bob cancelling alice's workload: %v, want 404", err)
	}
	if _, err := bc.Logs(ctx, w.ID, false); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("bob reading alice's logs: %v, want 404", err)
	}
	if list, _ := bc.AllWorkloads(ctx, api.ListOptions{}); len(list) != 0 {
		t.Errorf("bob lists %d workloads, want 0", len(list))
	}
	if _, err := bc.SubmitWorkload(ctx, &api.Workload{Team: "research", Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}, ""); !errors.As(err, &se) || se.Status != 400 {
		t.Errorf("bob submitting to research: %v, want 400 naming team", err)
	}
	if _, err := bc.CreateTeam(ctx, &api.Team{Name: "evil"}); !errors.As(err, &se) || se.Status != 403 {
		t.Errorf("bob creating a team: %v, want 403", err)
	}
	anon := api.NewClient(s.addr, "gpf_not-a-real-token")
	if _, err := anon.Nodes(ctx); !errors.As(err, &se) || se.Status != 401 {
		t.Errorf("bad token: %v, want 401", err)
	}
	// The token is stored only as a hash.
	db, _ := os.ReadFile(filepath.Join(s.cfg.DataDir, "gpufleet.db"))
	wal, _ := os.ReadFile(filepath.Join(s.cfg.DataDir, "gpufleet.db-wal"))
	for _, tok := range []string{alice.Token, bob.Token, s.admin.Token} {
		if bytes.Contains(db, []byte(tok)) || bytes.Contains(wal, []byte(tok)) {
			t.Errorf("a token is in the store in plain text")
		}
	}
}

// TestRestartReadoptsRunningWorkloads stops the server while a workload
// runs; the next server finds the process, and the workload finishes once.
func TestRestartReadoptsRunningWorkloads(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	ctx := context.Background()
	w, err := s.admin.SubmitWorkload(ctx, &api.Workload{Command: []string{"sh", "-c", "echo begin-marker; sleep 1; echo done"}, Resources: api.Resources{GPUs: 500}}, "")
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, s.admin, w.ID, "begin-marker")
	s.stop()
	s2 := start(t, dir)
	got := waitDone(t, s2.admin, w.ID)
	if log := readLog(t, s2.admin, w.ID); strings.Count(log, "begin-marker") != 1 || !strings.Contains(log, "done") {
		t.Errorf("log after restart %q: want one start and the end", log)
	}
	if got.Status.Phase != api.PhaseSucceeded || got.Status.Attempts != 1 {
		evs, _ := s2.admin.Events(ctx, w.ID)
		t.Errorf("after restart: %s with %d attempts, want Succeeded with 1; events:\n%+v", got.Status.Phase, got.Status.Attempts, evs)
	}
}

func readLog(t testing.TB, c *api.Client, id string) string {
	t.Helper()
	rc, err := c.Logs(context.Background(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// TestReclaimEndToEnd: team research fills the GPUs with over-quota
// training; team inference submits within its guarantee and gets it back by
// reclaim. The victims are stopped (SIGTERM), requeued, and their events say
// Reclaimed.
func TestReclaimEndToEnd(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	two := int64(2000)
	if _, err := s.admin.SetQuota(ctx, "inference", &api.TeamQuota{GuaranteedMilliGPU: &two}); err != nil {
		t.Fatal(err)
	}
	var research []string
	for range 4 {
		w, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Command: []string{"sleep", "60"},
			GracePeriodSeconds: 1, Resources: api.Resources{GPUs: 1000}}, "")
		if err != nil {
			t.Fatal(err)
		}
		research = append(research, w.ID)
	}
	waitPhase := func(id, phase string) *api.Workload {
		t.Helper()
		return waitFor(t, s.admin, id, phase, func(w *api.Workload) bool { return w.Status.Phase == phase })
	}
	for _, id := range research {
		waitPhase(id, api.PhaseRunning)
	}
	var inference []string
	for range 2 {
		w, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "inference", Command: []string{"sleep", "60"}, Resources: api.Resources{GPUs: 1000}}, "")
		if err != nil {
			t.Fatal(err)
		}
		inference = append(inference, w.ID)
	}
	for _, id := range inference {
		waitPhase(id, api.PhaseRunning)
	}
	reclaimed := 0
	for _, id := range research {
		w, _ := s.admin.GetWorkload(ctx, id)
		if w.Status.Phase != api.PhasePending {
			continue
		}
		reclaimed++
		if w.Status.Preemptions != 1 || w.Status.Attempts != 1 {
			t.Errorf("%s: preemptions %d attempts %d, want 1 and 1", id, w.Status.Preemptions, w.Status.Attempts)
		}
		evs, _ := s.admin.Events(ctx, id)
		found := false
		for _, e := range evs {
			if e.Reason == "Reclaimed" && e.To == api.PhasePreempted && strings.Contains(e.Message, "team inference") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no Reclaimed event naming team inference: %+v", id, evs)
		}
	}
	if reclaimed != 2 {
		t.Errorf("%d research workloads reclaimed, want exactly 2", reclaimed)
	}
	teams, _ := s.admin.Teams(ctx)
	for _, tm := range teams {
		if tm.Name == "inference" && (tm.UsageMilliGPU != 2000 || tm.GuaranteedMilliGPU != 2000) {
			t.Errorf("inference: %+v, want usage 2000 of a 2000 guarantee", tm)
		}
	}
	// Workloads outlive the server by design: stop them.
	for _, id := range append(research, inference...) {
		s.admin.CancelWorkload(ctx, id)
	}
	for _, id := range append(research, inference...) {
		waitDone(t, s.admin, id)
	}
}

func TestSecondServerOnOneDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	start(t, dir)
	cfg := config.Default()
	cfg.Addr = freeAddr(t)
	cfg.DataDir = dir
	cfg.FakeGPUs = "1xH100-80GB"
	err := RunWithLogger(context.Background(), cfg, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "in use by another gpufleet server") {
		t.Errorf("second server: %v, want a refusal naming the data dir lock", err)
	}
}

// TestProductionBeyondTheGuaranteeIsRefused: production runs only within
// its team's guarantee, so a request larger than the guarantee is refused
// at submission, naming the field; one within it is accepted.
func TestProductionBeyondTheGuaranteeIsRefused(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	one := int64(1000)
	if _, err := s.admin.SetQuota(ctx, "research", &api.TeamQuota{GuaranteedMilliGPU: &one}); err != nil {
		t.Fatal(err)
	}
	status, body := post(t, s, "/api/v1/workloads", `{"team":"research","priority":"production","command":["true"],"resources":{"gpus":2}}`, nil)
	if status != 400 || !strings.Contains(body, `"field":"priority"`) || !strings.Contains(body, "guarantees 1 GPUs") {
		t.Errorf("production over the guarantee: %d %s, want 400 naming priority", status, body)
	}
	if _, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Priority: "production", Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}, ""); err != nil {
		t.Errorf("production within the guarantee: %v", err)
	}
}

func TestModelGuarantees(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	two := int64(2000)
	var se *api.StatusError
	_, err := s.admin.SetQuota(ctx, "research", &api.TeamQuota{GuaranteedByModelMilliGPU: map[string]int64{"H100": 4000}})
	if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(se.Error(), "guaranteedByModelMilliGPU") {
		t.Errorf("model guarantees above the total: %v, want 400 naming guaranteedByModelMilliGPU", err)
	}
	got, err := s.admin.SetQuota(ctx, "research", &api.TeamQuota{GuaranteedMilliGPU: &two, GuaranteedByModelMilliGPU: map[string]int64{"H100": 2000}})
	if err != nil {
		t.Fatal(err)
	}
	if got.GuaranteedByModelMilliGPU["H100"] != 2000 || got.GuaranteedMilliGPU != 2000 {
		t.Errorf("team after setting its H100 guarantee: %+v", got)
	}
	teams, _ := s.admin.Teams(ctx)
	for _, tm := range teams {
		if tm.Name == "research" && tm.GuaranteedByModelMilliGPU["H100"] != 2000 {
			t.Errorf("GET /teams lost the model guarantee: %+v", tm)
		}
	}
	got, err = s.admin.SetQuota(ctx, "research", &api.TeamQuota{GuaranteedByModelMilliGPU: map[string]int64{}})
	if err != nil || len(got.GuaranteedByModelMilliGPU) != 0 {
		t.Errorf("clearing the model guarantees: %+v %v", got, err)
	}
}

// TestNodesShowWhoHoldsEachGPU: each GPU lists the workloads holding it
// that the caller may see; another team's workload is counted but not
// named.
func TestNodesShowWhoHoldsEachGPU(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	alice, err := s.admin.CreateUser(ctx, &api.User{Name: "alice", Teams: []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Command: []string{"sleep", "30"}, Resources: api.Resources{GPUs: 500}}, "")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "inference", Command: []string{"sleep", "30"}, Resources: api.Resources{GPUs: 500}}, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, id := range []string{mine.ID, theirs.ID} {
			s.admin.CancelWorkload(ctx, id)
			waitDone(t, s.admin, id)
		}
	}()
	testwait.Until(t, 10*time.Second, "the admin to see both holders", func() (bool, string) {
		nodes, err := s.admin.Nodes(ctx)
		if err != nil || len(nodes) == 0 {
			return false, fmt.Sprintf("nodes %v, %v", nodes, err)
		}
		held := map[string]bool{}
		for _, g := range nodes[0].GPUs {
			for _, a := range g.Allocations {
				held[a.WorkloadID] = true
			}
		}
		return held[mine.ID] && held[theirs.ID], fmt.Sprintf("%+v", nodes[0].GPUs)
	})
	nodes, err := api.NewClient(s.addr, alice.Token).Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, g := range nodes[0].GPUs {
		total += g.AllocatedMilliGPU
		for _, a := range g.Allocations {
			if a.WorkloadID != mine.ID {
				t.Errorf("alice sees %s (team %s) on a GPU", a.WorkloadID, a.Team)
			}
		}
	}
	if total != 1000 {
		t.Errorf("alice's view counts %d milli-GPU allocated, want 1000 (both workloads)", total)
	}
}

func TestWrongMethodIs405(t *testing.T) {
	s := start(t, t.TempDir())
	req, _ := http.NewRequest(http.MethodPut, "http://"+s.addr+"/api/v1/workloads", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+s.admin.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST" || !strings.Contains(string(b), `"code":"method_not_allowed"`) {
		t.Errorf("PUT /api/v1/workloads: %d Allow=%q %s, want 405 with Allow: GET, POST", resp.StatusCode, resp.Header.Get("Allow"), b)
	}
	status, body := post(t, s, "/api/v1/nope", "{}", nil)
	if status != http.StatusNotFound || !strings.Contains(body, `"code":"not_found"`) {
		t.Errorf("unknown path: %d %s, want a JSON 404", status, body)
	}
}

// waitReady waits until the server at addr answers /readyz, failing the
// test if it exits first or is not ready within 10 s.
func waitReady(t testing.TB, addr string, done <-chan error) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "the server to be ready", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("server exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
}
