package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/apiserver"
	"github.com/gpufleet/gpufleet/internal/app"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/sim"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/testwait"
	gpuusage "github.com/gpufleet/gpufleet/internal/usage"
)

// testServer is the real API server (internal/apiserver) on a real store in
// a temporary directory, served by httptest, with the real control loop over
// the in-memory executor of internal/executor/fake. The test drives the
// loop: step runs it until nothing more happens, so what a test reads is
// deterministic. Workload IDs are wl-1, wl-2, … in submission order, and the
// server's clock is the test's (testNow unless a test moves it).
//
// It holds teams research (guarantee 8 GPUs, limit 16, weight 2) and vision
// (no limit), nodes gpu1 (four H100s, region us-east, pool a) and gpu2 (an
// A10 and an L4, not schedulable), and users alice (member of research) and admin, whose
// tokens are aliceToken and adminToken.
//
// Commands tell the executor what to do: ["exit", "N"] ends with exit code
// N when it starts, ["sleep", ...] runs until stopped, anything else
// succeeds when it starts.
type testServer struct {
	t    *testing.T
	URL  string
	st   *store.Store
	ex   *scriptExecutor
	loop *control.Loop
	use  *gpuusage.Tracker // what the monitor would have sampled; see sample
	now  atomic.Pointer[time.Time]

	mu    sync.Mutex
	calls []string // "METHOD URI BODY" of every request
	last  string   // the token of the last request

	// pageSize, when set, caps the ?limit= of list requests, so that the
	// server answers lists in pages that small and the CLI must follow
	// them.
	pageSize int
}

const (
	aliceToken = "alice-token"
	adminToken = "admin-token"
)

// testNow is the clock of every test: the server stamps what it records with
// it and the CLI measures ages against it.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	ctx := context.Background()
	var n atomic.Int64
	st, err := store.OpenWith(ctx, filepath.Join(t.TempDir(), "gpufleet.db"), store.Options{NoSync: true,
		NewID: func() core.WorkloadID { return core.WorkloadID("wl-" + strconv.FormatInt(n.Add(1), 10)) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &testServer{t: t, st: st}
	s.setNow(testNow)
	research := core.NewTeam("research", testNow.Add(-72*time.Hour))
	research.Guaranteed, research.Limit, research.Weight = 8000, 16000, 2
	vision := core.NewTeam("vision", testNow.Add(-90*time.Minute))
	for _, tm := range []core.Team{research, vision} {
		if err := st.CreateTeam(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	h100 := func(i int) core.GPU {
		return core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: "H100", MemoryMiB: 81920}
	}
	for _, node := range []core.Node{
		{Name: "gpu1", Region: "us-east", Pool: "a", Schedulable: true, UpdatedAt: testNow, GPUs: []core.GPU{h100(0), h100(1), h100(2), h100(3)}},
		{Name: "gpu2", UpdatedAt: testNow, GPUs: []core.GPU{{Index: 0, UUID: "GPU-4", Model: "A10", MemoryMiB: 24576}, {Index: 1, UUID: "GPU-5", Model: "L4", MemoryMiB: 24576}}},
	} {
		if err := st.PutNode(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	s.addUser(core.User{Name: "alice", Memberships: []core.Membership{{Team: "research", Role: core.RoleMember}}, CreatedAt: testNow.Add(-48 * time.Hour)}, aliceToken)
	s.addUser(core.User{Name: "admin", Admin: true, CreatedAt: testNow.Add(-72 * time.Hour)}, adminToken)

	s.ex = &scriptExecutor{Executor: fake.New(fake.Options{Now: s.clock})}
	s.loop = control.New(control.Options{Store: st, Executor: s.ex, Now: s.clock, Logger: discard()})
	s.use = gpuusage.NewTracker(time.Second, time.Minute)
	srv := httptest.NewServer(s.record(apiserver.New(apiserver.Options{Store: st, Logs: s.ex, Now: s.clock, Logger: discard(), Usage: s.use,
		OpenAPI: api.OpenAPI, PriorityClasses: core.DefaultPriorityClasses()})))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// addUser stores a user with a token.
func (s *testServer) addUser(u core.User, token string) {
	s.t.Helper()
	if err := s.st.CreateUser(context.Background(), u, core.Token{Name: "first", CreatedAt: u.CreatedAt}, apiserver.HashToken(token)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *testServer) clock() time.Time   { return *s.now.Load() }
func (s *testServer) setNow(t time.Time) { s.now.Store(&t) }

// sample records what the usage monitor would have sampled at testNow.
func (s *testServer) sample(gpus []core.GPUSample, wls ...core.WorkloadSample) {
	m := map[core.WorkloadID]core.WorkloadSample{}
	for _, w := range wls {
		m[w.ID] = w
	}
	s.use.Record(core.Sample{At: testNow, GPUs: gpus, Workloads: m}, core.UsagePoint{Time: testNow}, nil)
}

// step runs the control loop until it has nothing more to do: pending
// workloads that fit start, exits are recorded, stops are sent.
func (s *testServer) step() {
	for range 20 {
		exits, plan := s.loop.Step(context.Background())
		if exits == 0 && len(plan.Placements) == 0 && len(plan.Preemptions) == 0 && s.ex.quiet() {
			return
		}
	}
}

// submit submits workloads as alice through the API, the first ten minutes
// before testNow, each next one a minute later, and returns
// their IDs.
func (s *testServer) submit(ws ...api.Workload) []string {
	return s.submitAs(aliceToken, ws...)
}

func (s *testServer) submitAs(token string, ws ...api.Workload) []string {
	s.t.Helper()
	defer s.setNow(s.clock())
	c := api.NewClient(s.URL, token)
	var ids []string
	for _, w := range ws {
		s.setNow(testNow.Add(-time.Duration(10-len(ids)) * time.Minute))
		out, err := c.SubmitWorkload(context.Background(), &w, "")
		if err != nil {
			s.t.Fatalf("submit %+v: %v", w, err)
		}
		ids = append(ids, out.ID)
	}
	return ids
}

// submitAt submits a workload with token, as if at the time at, and
// returns its ID.
func (s *testServer) submitAt(token string, at time.Time, w api.Workload) string {
	s.t.Helper()
	defer s.setNow(s.clock())
	s.setNow(at)
	out, err := api.NewClient(s.URL, token).SubmitWorkload(context.Background(), &w, "")
	if err != nil {
		s.t.Fatalf("submit %+v: %v", w, err)
	}
	return out.ID
}

// admin is an API client with the admin's token, to read what the server
// holds.
func (s *testServer) admin() *api.Client { return api.NewClient(s.URL, adminToken) }

// requests returns the requests so far, "METHOD URI BODY", those whose URI
// starts with prefix.
func (s *testServer) requests(prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if _, uri, _ := strings.Cut(c, " "); strings.HasPrefix(uri, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// forget forgets the requests so far, those of a test's set-up.
func (s *testServer) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// submitted returns the bodies of the submissions (POST /api/v1/workloads)
// so far.
func (s *testServer) submitted() [][]byte {
	var out [][]byte
	for _, c := range s.requests("/api/v1/workloads") {
		if body, ok := strings.CutPrefix(c, "POST /api/v1/workloads "); ok {
			out = append(out, []byte(body))
		}
	}
	return out
}

// takeToken returns the token of the last request, and forgets it.
func (s *testServer) takeToken() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := s.last
	s.last = ""
	return tok
}

// record keeps every request's method, URI and body.
func (s *testServer) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.calls = append(s.calls, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(bytes.TrimSpace(body))))
		s.last = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		page := s.pageSize
		s.mu.Unlock()
		if q := r.URL.Query(); page > 0 && r.Method == http.MethodGet {
			if n, err := strconv.Atoi(q.Get("limit")); err != nil || n > page {
				q.Set("limit", strconv.Itoa(page))
				r.URL.RawQuery = q.Encode()
			}
		}
		next.ServeHTTP(w, r)
	})
}

// run runs the CLI against the server as alice, with an empty config
// directory.
func (s *testServer) run(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, invocation{args: args, vars: s.vars(t, aliceToken)})
}

// runAs runs the CLI with token.
func (s *testServer) runAs(t *testing.T, token string, args ...string) result {
	t.Helper()
	return runCLI(t, invocation{args: args, vars: s.vars(t, token)})
}

func (s *testServer) vars(t *testing.T, token string) map[string]string {
	dir := t.TempDir()
	return map[string]string{
		"GPUFLEET_ADDR":   s.URL,
		"GPUFLEET_TOKEN":  token,
		"XDG_CONFIG_HOME": dir,
		"HOME":            dir,
	}
}

// scriptExecutor is the fake executor, whose tasks end as their commands
// say (see testServer).
type scriptExecutor struct {
	*fake.Executor
}

func (e *scriptExecutor) Start(ctx context.Context, t executor.Task) error {
	if err := e.Executor.Start(ctx, t); err != nil {
		return err
	}
	switch {
	case t.Command[0] == "sleep":
	case t.Command[0] == "exit" && len(t.Command) > 1:
		code, _ := strconv.Atoi(t.Command[1])
		e.Finish(t.WorkloadID, t.Attempt, code)
	default:
		e.Finish(t.WorkloadID, t.Attempt, 0)
	}
	return nil
}

// quiet reports whether no exit waits to be read.
func (e *scriptExecutor) quiet() bool { return len(e.Exits()) == 0 }

// liveServer is the whole gpufleet server (internal/app: store, control
// loop, local executor on simulated GPUs, real processes) in this process,
// on a data dir of the test's and the real clock: the fixture for what
// needs time to pass, --follow, --tail, --watch. Everything else uses
// testServer.
type liveServer struct {
	addr, admin string
	dir         string // the data directory
}

func startLiveServer(t *testing.T) *liveServer {
	t.Helper()
	return startLiveServerWith(t, nil)
}

// startLiveServerWith starts a live server with configure's changes to its
// configuration (nil: none).
func startLiveServerWith(t *testing.T, configure func(*config.Config)) *liveServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Addr, cfg.DataDir, cfg.FakeGPUs, cfg.Demo, cfg.NodeName = addr, dir, "4xH100-80GB", true, "node-a"
	cfg.ResyncPeriod = 100 * time.Millisecond
	if configure != nil {
		configure(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.RunWithLogger(ctx, cfg, io.Discard, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { cancel(); <-done })
	testwait.Until(t, 10*time.Second, "the server to be ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s := &liveServer{addr: addr, admin: strings.TrimSpace(string(tok)), dir: dir}
	// The workloads' processes outlive a server that stops (they are
	// adopted when it starts again): cancel what is left, and wait for it
	// to end, before the server stops.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := api.NewClient(addr, s.admin)
		ws, err := c.AllWorkloads(ctx, api.ListOptions{})
		if err != nil {
			return // a test that stopped the server itself
		}
		for _, w := range ws {
			if w.Status.Phase == api.PhasePending || w.Status.Phase == api.PhaseRunning {
				c.CancelWorkload(ctx, w.ID)
			}
		}
		if _, ok := testwait.Within(20*time.Second, func() (bool, string) {
			ws, err := c.AllWorkloads(ctx, api.ListOptions{})
			return err != nil || !slices.ContainsFunc(ws, func(w api.Workload) bool { return w.Status.Phase == api.PhaseRunning }), ""
		}); !ok {
			t.Errorf("workloads still running 20 s after their cancel")
		}
	})
	return s
}

// run runs the CLI against the server with token.
func (s *liveServer) run(t *testing.T, token string, args ...string) result {
	t.Helper()
	return s.runCtx(t, context.Background(), token, args...)
}

func (s *liveServer) runCtx(t *testing.T, ctx context.Context, token string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := s.runTo(t, ctx, token, &stdout, &stderr, args...)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// runTo runs the CLI against the server with token, writing its output
// to stdout and stderr as it comes, and returns its exit code.
func (s *liveServer) runTo(t *testing.T, ctx context.Context, token string, stdout, stderr io.Writer, args ...string) int {
	t.Helper()
	dir := t.TempDir()
	vars := map[string]string{"GPUFLEET_ADDR": s.addr, "GPUFLEET_TOKEN": token, "XDG_CONFIG_HOME": dir, "HOME": dir}
	e := &env{stdin: strings.NewReader(""), stdout: stdout, stderr: stderr, getenv: func(k string) string { return vars[k] }, now: time.Now}
	return run(ctx, args, e)
}

func (s *liveServer) must(t *testing.T, args ...string) string {
	t.Helper()
	r := s.run(t, s.admin, args...)
	if r.code != 0 {
		t.Fatalf("gpufleet %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// result is what one run of the CLI printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// invocation is one run of the CLI: its arguments, environment and input.
type invocation struct {
	args  []string
	vars  map[string]string // the whole environment; nothing is read from the process's
	stdin string
	// plot is what gpufleet-sim adds (Options.Plot); nil as in gpufleet.
	plot func(w io.Writer, format, title string, runs []sim.PackingRun) error
}

func runCLI(t *testing.T, inv invocation) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{
		stdin:  strings.NewReader(inv.stdin),
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(k string) string { return inv.vars[k] },
		now:    func() time.Time { return testNow },
		plot:   inv.plot,
	}
	code := run(context.Background(), inv.args, e)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func ptr[T any](v T) *T { return &v }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
