package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/apiserver"
	"github.com/gpufleet/gpufleet/internal/config"
)

// This file proves tenancy from outside: a real server over HTTP, users of
// two teams in every role, and every endpoint of apiserver.Routes tried by
// every caller on its own team's objects and on the other team's.

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.b.Bytes())
}

// loadConfig reads a server configuration file holding yaml (the way
// `gpufleet server --config` does) and points it at dir with four simulated
// GPUs on a free port.
func loadConfig(t testing.TB, dir, yaml string) config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpufleet.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config file:\n%s\n%v", yaml, err)
	}
	cfg.Addr = freeAddr(t)
	cfg.DataDir = dir
	cfg.FakeGPUs = "4xH100-80GB"
	cfg.NodeName = "node-a"
	cfg.ResyncPeriod = 100 * time.Millisecond
	return cfg
}

// startWith runs a real server from cfg in-process, its log (every level)
// and its standard output going to logw.
func startWith(t testing.TB, cfg config.Config, logw io.Writer) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{addr: cfg.Addr, cancel: cancel, done: make(chan error, 1), cfg: cfg}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { s.done <- RunWithLogger(ctx, cfg, logw, log) }()
	waitReady(t, cfg.Addr, s.done)
	tok, err := os.ReadFile(filepath.Join(cfg.DataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.admin = api.NewClient(cfg.Addr, strings.TrimSpace(string(tok)))
	// Cleanups run last first: the server stops, then its data dir goes.
	// Workloads outlive the server by design (their supervisors re-adopt
	// them), and one that ends during the removal writes its exit status
	// into a directory being removed: try again until nothing writes.
	t.Cleanup(func() { removeAll(t, cfg.DataDir) })
	t.Cleanup(s.stop)
	return s
}

// answer is one HTTP exchange's result.
type answer struct {
	status int
	body   string
	header http.Header
}

// hclient sends raw requests. With retry429 it waits out rate limiting
// (counting it) so that a long matrix is not cut short by the limiter.
type hclient struct {
	t        testing.TB
	addr     string
	retry429 bool
	requests int
	waited   int
}

func (h *hclient) do(token, method, path, body string) answer {
	h.t.Helper()
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, "http://"+h.addr+path, rd)
		if err != nil {
			h.t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			h.t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h.requests++
		a := answer{status: resp.StatusCode, body: string(b), header: resp.Header}
		if a.status == http.StatusTooManyRequests && h.retry429 && attempt < 20 && strings.Contains(a.body, api.CodeRateLimited) {
			h.waited++
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(1, min(secs, 3))) * time.Second) // as the server's Retry-After asks
			continue
		}
		return a
	}
}

// must sends a request that has to succeed with want, and decodes the answer
// into out (when not nil).
func (h *hclient) must(token, method, path, body string, want int, out any) answer {
	h.t.Helper()
	a := h.do(token, method, path, body)
	if a.status != want {
		h.t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, a.status, a.body, want)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(a.body), out); err != nil {
			h.t.Fatalf("%s %s: decode %s: %v", method, path, a.body, err)
		}
	}
	return a
}

// caller is one identity of the matrix. role is its role in team A ("" when
// it has none).
type caller struct {
	name, token string
	admin       bool
	role        string
	// bSide: the caller is in team B.
	bSide bool
}

const (
	teamA       = "tenant-a"
	teamB       = "tenant-b"
	missingTeam = "tenant-x"
	missingUser = "ghost-user"
	missingWL   = "wl-zzzzzzzzzzzz"
	missingTok  = "tok-zzzzzzzzzz"
	markerA     = "a-secret-marker"
	markerB     = "b-secret-marker"
	// park keeps a workload pending for ever: it asks more than its team's
	// limit (limitA, limitB), though the fleet could hold it, so it is accepted.
	park = `"resources":{"gpus":2}`
	// limitA and limitB cap both teams below park's ask, B's at what its running
	// workload holds.
	limitA = `"limitMilliGPU":1000`
	limitB = `"limitMilliGPU":250`
)

// world is the matrix's fixture: the callers and the objects of both
// teams.
type world struct {
	t       *testing.T
	s       *server
	h       *hclient
	admin   caller
	callers []caller // A's side, the admin, B's member and a user in no team
	bMember caller

	wlA, wlB, wlBPend string
	tokB              api.Token // b-member's token record, with its text
	seq               int
	// secretsA and secretsB must never reach a caller outside the team.
	secretsA, secretsB []string
	// volumes are the names of the volumes the matrix made, by team,
	// deleted or not: the cost ledger bills each for the time it existed.
	volumes map[string][]string
	// runs are an acceptance run of each team, made at first use.
	runs map[string]string
}

// acceptanceRows are the cost rows the acceptance runs' stage workloads
// of the caller's teams may add: their IDs (by workload), their owners
// (by user) and "(none)" (by label), read when the answer is checked.
func (w *world) acceptanceRows(c caller) func() map[string]bool {
	return func() map[string]bool {
		var l api.List[api.Workload]
		w.h.must(w.admin.token, "GET", "/api/v1/workloads?limit=1000", "", http.StatusOK, &l)
		out := map[string]bool{}
		for _, wl := range l.Items {
			if wl.Labels["gpufleet.io/acceptance-run"] != "" && slices.Contains(sees(c, teamA, teamB), wl.Team) {
				out[wl.ID], out[wl.Owner], out["(none)"] = true, true, true
			}
		}
		return out
	}
}

// acceptanceRun is an acceptance run of team tm (one smoke stage that
// exits at once), started by the admin at first use.
func (w *world) acceptanceRun(tm string) string {
	if id, ok := w.runs[tm]; ok {
		return id
	}
	if w.runs == nil {
		w.runs = map[string]string{}
	}
	var run api.AcceptanceRun
	w.h.must(w.admin.token, "POST", "/api/v1/acceptance/runs", `{"card":{"name":"m","team":"`+tm+`","stages":[{"name":"smoke","type":"smoke","workload":{"command":["true"],"resources":{"gpus":0.25}}}]}}`, http.StatusCreated, &run)
	w.runs[tm] = run.ID
	return run.ID
}

func (w *world) uniq(prefix string) string {
	w.seq++
	return fmt.Sprintf("%s-%d", prefix, w.seq)
}

// createUser makes a user as the admin and returns it with its token.
func (w *world) createUser(name string, sa bool, ms ...api.Membership) caller {
	w.t.Helper()
	b, _ := json.Marshal(api.User{Name: name, ServiceAccount: sa, Memberships: ms})
	var u api.User
	w.h.must(w.admin.token, "POST", "/api/v1/users", string(b), http.StatusCreated, &u)
	if u.Token == "" {
		w.t.Fatalf("create user %s: no token in the answer", name)
	}
	c := caller{name: name, token: u.Token}
	for _, m := range ms {
		if m.Team == teamA {
			c.role = m.Role
		}
	}
	return c
}

// submit submits a workload as c and returns its ID.
func (w *world) submit(c caller, body string) string {
	w.t.Helper()
	var out api.Workload
	w.h.must(c.token, "POST", "/api/v1/workloads", body, http.StatusCreated, &out)
	return out.ID
}

// array submits a pending job array of two tasks to team as c and
// returns its ID.
func (w *world) array(c caller, team string) string {
	w.t.Helper()
	var out api.Array
	w.h.must(c.token, "POST", "/api/v1/arrays", `{"team":"`+team+`","command":["true"],"array":{"start":0,"end":1},`+park+`}`, http.StatusCreated, &out)
	return out.ID
}

// freshPending is a new pending workload of team A, submitted by the admin.
func (w *world) freshPending() string {
	return w.submit(w.admin, `{"team":"`+teamA+`","command":["true"],`+park+`}`)
}

func (w *world) waitRunningWithLog(id, marker string) {
	w.t.Helper()
	waitLog(w.t, api.NewClient(w.h.addr, w.admin.token), id, marker)
	var wl api.Workload
	w.h.must(w.admin.token, "GET", "/api/v1/workloads/"+id, "", 200, &wl)
	if wl.Status.Phase != api.PhaseRunning {
		w.t.Fatalf("%s wrote %q and is %s, want Running", id, marker, wl.Status.Phase)
	}
}

func newWorld(t *testing.T, s *server) *world {
	h := &hclient{t: t, addr: s.addr, retry429: true}
	w := &world{t: t, s: s, h: h, admin: caller{name: "admin", token: s.admin.Token, admin: true, role: "admin"}, volumes: map[string][]string{}}
	h.must(w.admin.token, "POST", "/api/v1/teams", `{"name":"`+teamA+`","guaranteedMilliGPU":1000,`+limitA+`}`, http.StatusCreated, nil)
	h.must(w.admin.token, "POST", "/api/v1/teams", `{"name":"`+teamB+`",`+limitB+`}`, http.StatusCreated, nil)
	m := func(team, role string) api.Membership { return api.Membership{Team: team, Role: role} }
	aViewer := w.createUser("a-viewer", false, m(teamA, api.RoleViewer))
	aMember := w.createUser("a-member", false, m(teamA, api.RoleMember))
	aTAdmin := w.createUser("a-tadmin", false, m(teamA, api.RoleTeamAdmin))
	aBot := w.createUser("a-bot", true, m(teamA, api.RoleMember))
	w.createUser("a-target", false, m(teamA, api.RoleViewer))
	w.bMember = w.createUser("b-member", false, m(teamB, api.RoleMember))
	w.bMember.bSide = true
	bBot := w.createUser("b-bot", true, m(teamB, api.RoleMember))
	loner := w.createUser("loner", false)
	w.callers = []caller{w.admin, aViewer, aMember, aTAdmin, aBot, w.bMember, loner}

	// Cost to leak: the local pool's GPUs cost 1 a second from now on,
	// and both teams have a (soft) budget.
	h.must(w.admin.token, "POST", "/api/v1/prices", `{"pool":"local","kind":"on-demand","rate":3600}`, http.StatusCreated, nil)
	for _, tm := range []string{teamA, teamB} {
		h.must(w.admin.token, "PUT", "/api/v1/teams/"+tm+"/budget", `{"monthly":1000000}`, http.StatusOK, nil)
	}

	// Team B's objects: a running workload with a log and events, a
	// pending one, and a token made by B's member.
	w.wlB = w.submit(w.bMember, `{"team":"`+teamB+`","command":["sh","-c","echo `+markerB+`; sleep 300"],"labels":{"project":"`+markerB+`"},"gracePeriodSeconds":1,"resources":{"gpus":0.25}}`)
	w.wlBPend = w.submit(w.bMember, `{"team":"`+teamB+`","command":["true"],`+park+`}`)
	w.h.must(w.bMember.token, "POST", "/api/v1/tokens", `{"name":"b-ci","expiresIn":"720h"}`, http.StatusCreated, &w.tokB)
	if w.tokB.ID == "" || w.tokB.Token == "" {
		t.Fatalf("token create answered %+v: want an ID and the token", w.tokB)
	}
	// Team A's running workload.
	w.wlA = w.submit(aMember, `{"team":"`+teamA+`","command":["sh","-c","echo `+markerA+`; sleep 300"],"labels":{"project":"`+markerA+`"},"gracePeriodSeconds":1,"resources":{"gpus":0.25}}`)
	w.waitRunningWithLog(w.wlB, markerB)
	w.waitRunningWithLog(w.wlA, markerA)
	t.Cleanup(func() {
		for _, id := range []string{w.wlA, w.wlB} {
			w.h.do(w.admin.token, "DELETE", "/api/v1/workloads/"+id, "")
		}
		for _, id := range []string{w.wlA, w.wlB} {
			waitDone(t, s.admin, id)
		}
	})
	w.secretsB = []string{w.wlB, w.wlBPend, markerB, w.tokB.ID, w.tokB.Token, w.bMember.token, bBot.token, "b-member", "b-bot", teamB}
	w.secretsA = []string{w.wlA, markerA, aViewer.token, aMember.token, aTAdmin.token, aBot.token, "a-viewer", "a-member", "a-tadmin", "a-bot", "a-target", teamA}
	return w
}

// probe is one request of the matrix and what may answer it.
type probe struct {
	what         string
	method, path string
	body         string
	// want lists the acceptable statuses.
	want []int
	// hidden: the request names an object the caller may not see. Then
	// the same request with each key of hidden replaced by its value (an
	// object that does not exist) must answer the same status and body,
	// and the answer must not be a 2xx.
	hidden map[string]string
	// givesToken: the answer may carry a token (it creates one).
	givesToken bool
	// raw: the 200 answer is not JSON (logs).
	raw bool
	// check, when set, looks further at a 2xx answer.
	check func(a answer) string
	// skip: nothing to try (team B's own member on B's objects, or the
	// admin changing B's objects, which the matrix checks are untouched).
	skip bool
}

var anyTokenRE = regexp.MustCompile(`gpf_[A-Za-z0-9_-]{20,}`)

// roleRank orders the roles of team A; admin is above all.
func roleRank(r string) int {
	return map[string]int{api.RoleViewer: 1, api.RoleMember: 2, api.RoleTeamAdmin: 3, "admin": 4}[r]
}

// inA answers a request on one of team A's objects that needs role need:
// ok when the caller has it, 403 when it is in team A with a weaker role,
// and hidden (404, indistinguishable from a missing object) when it is not
// in team A.
func inA(c caller, need string, ok int, p probe, hidden map[string]string, notFound ...int) probe {
	if len(notFound) == 0 {
		notFound = []int{http.StatusNotFound}
	}
	switch {
	case roleRank(c.role) >= roleRank(need):
		p.want = []int{ok}
	case c.role != "":
		p.want = []int{http.StatusForbidden}
	default:
		p.want, p.hidden = notFound, hidden
	}
	return p
}

// inB answers a request on one of team B's objects: only the admin may
// act on it; anyone else gets what a missing object gets.
func inB(c caller, ok int, p probe, hidden map[string]string, notFound ...int) probe {
	if len(notFound) == 0 {
		notFound = []int{http.StatusNotFound}
	}
	if c.bSide || (c.admin && p.method != http.MethodGet) {
		p.skip = true
		return p
	}
	if c.admin {
		p.want = []int{ok}
		return p
	}
	p.want, p.hidden = notFound, hidden
	return p
}

func adminOnly(c caller, ok int, p probe) probe {
	p.want = []int{http.StatusForbidden}
	if c.admin {
		p.want = []int{ok}
	}
	return p
}

func anyone(ok int, p probe) probe { p.want = []int{ok}; return p }

func holds(subs ...string) func(a answer) string {
	return func(a answer) string {
		for _, s := range subs {
			if !strings.Contains(a.body, s) {
				return fmt.Sprintf("answer lacks %q", s)
			}
		}
		return ""
	}
}

// sees is what a caller's cost answers name of a and b (team A's and team
// B's): its teams' only, every team's for the admin.
func sees(c caller, a, b string) []string {
	switch {
	case c.admin:
		return []string{a, b}
	case c.bSide:
		return []string{b}
	case c.role != "":
		return []string{a}
	}
	return nil
}

// seesVolumes is what a caller's cost answers add to want for the volumes
// of its teams: a row "volume:TEAM/NAME" each by workload, the row "(none)"
// by user or by label (a volume has neither).
func (w *world) seesVolumes(c caller, byWorkload bool, want []string) []string {
	want = slices.Clone(want)
	for _, tm := range sees(c, teamA, teamB) {
		for _, n := range w.volumes[tm] {
			if byWorkload {
				want = append(want, "volume:"+tm+"/"+n)
			} else {
				want = append(want, "(none)")
			}
		}
	}
	slices.Sort(want)
	return slices.Compact(want)
}

// sameRows compares the names of an answer's rows with want: exactly for a
// caller who is no admin (any other row is another team's), at least want
// for the admin (who also sees the idle row and teams outside the matrix).
// A caller who is no admin never sees the idle row.
func sameRows(c caller, want, got []string, extra func() map[string]bool) string {
	got = slices.Clone(got)
	if extra != nil {
		// Rows of the acceptance runs' stage workloads, which the
		// runner submits as it goes: allowed, not required.
		ok := extra()
		got = slices.DeleteFunc(got, func(n string) bool { return ok[n] && !slices.Contains(want, n) })
	}
	slices.Sort(got)
	got = slices.Compact(got)
	if c.admin {
		got = slices.DeleteFunc(got, func(n string) bool { return n == api.IdleRow })
		for _, n := range want {
			if !slices.Contains(got, n) {
				return fmt.Sprintf("rows %q lack %q", got, n)
			}
		}
		return ""
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		return fmt.Sprintf("rows (-want +got):\n%s", diff)
	}
	return ""
}

// costRows checks a cost report's rows (GET /cost): want are its rows'
// names.
func costRows(c caller, want []string, extra func() map[string]bool) func(a answer) string {
	return func(a answer) string {
		var rep api.CostReport
		if err := json.Unmarshal([]byte(a.body), &rep); err != nil {
			return err.Error()
		}
		var got []string
		for _, r := range rep.Items {
			got = append(got, r.Name)
		}
		return sameRows(c, want, got, extra)
	}
}

// seriesRows checks the rows of a cost series (GET /cost/series), over all
// its points.
func seriesRows(c caller, want []string, extra func() map[string]bool) func(a answer) string {
	return func(a answer) string {
		var ser api.CostSeries
		if err := json.Unmarshal([]byte(a.body), &ser); err != nil {
			return err.Error()
		}
		if len(ser.Points) == 0 {
			return "no points"
		}
		var got []string
		for _, pt := range ser.Points {
			for n := range pt.Items {
				got = append(got, n)
			}
		}
		return sameRows(c, want, got, extra)
	}
}

// routeKey normalizes "GET /api/v1/teams/{name}" to "GET /api/v1/teams/{}"
// so that the table does not depend on the names of path parameters.
func routeKey(r string) string { return regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(r, "{}") }

// matrix lists, for every route the spec defines, the probes one caller
// makes. A route of apiserver.Routes missing here fails the test, and so
// does a route here that the server does not serve.
func (w *world) matrix() map[string]func(c caller) []probe {
	wl := func(id string) map[string]string { return map[string]string{id: missingWL} }
	run := func(id string) map[string]string { return map[string]string{id: "ar-zzzzzzzzzzzz"} }
	team := func(name string) map[string]string { return map[string]string{name: missingTeam} }
	user := func(name string) map[string]string { return map[string]string{name: missingUser} }
	node, missingNode := w.s.cfg.NodeName, "node-zz"
	// A pending job array of each team, for the array routes.
	arrA, arrB := w.array(w.admin, teamA), w.array(w.bMember, teamB)
	public := func(path string) func(c caller) []probe {
		return func(c caller) []probe { return []probe{anyone(200, probe{method: "GET", path: path})} }
	}
	onWorkload := func(suffix string, raw bool, marker string) func(c caller) []probe {
		return func(c caller) []probe {
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/workloads/" + w.wlA + suffix, raw: raw, check: holds(marker)}, wl(w.wlA)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/workloads/" + w.wlB + suffix, raw: raw}, wl(w.wlB)),
				inB(c, 200, probe{what: "foreign pending", method: "GET", path: "/api/v1/workloads/" + w.wlBPend + suffix, raw: raw}, wl(w.wlBPend)),
			}
		}
	}
	return map[string]func(c caller) []probe{
		"GET /healthz":             public("/healthz"),
		"GET /readyz":              public("/readyz"),
		"GET /api/v1/healthz":      public("/api/v1/healthz"),
		"GET /api/v1/readyz":       public("/api/v1/readyz"),
		"GET /api/v1/openapi.json": public("/api/v1/openapi.json"),
		"GET /api/v1/whoami": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/whoami", check: holds(`"name":"` + c.name + `"`)})}
		},
		"POST /api/v1/workloads": func(c caller) []probe {
			sub := func(t string) string {
				return `{"team":"` + t + `","command":["true"],` + park + `}`
			}
			// A team one cannot see answers as a missing team does: 400
			// naming the field (as before) or 404.
			return []probe{
				inA(c, api.RoleMember, 201, probe{what: "own team", method: "POST", path: "/api/v1/workloads", body: sub(teamA)}, team(teamA), 400, 404),
				inB(c, 201, probe{what: "foreign team", method: "POST", path: "/api/v1/workloads", body: sub(teamB)}, team(teamB), 400, 404),
			}
		},
		"POST /api/v1/arrays": func(c caller) []probe {
			sub := func(t string) string {
				return `{"team":"` + t + `","command":["true"],"array":{"start":0,"end":1},` + park + `}`
			}
			return []probe{
				inA(c, api.RoleMember, 201, probe{what: "own team", method: "POST", path: "/api/v1/arrays", body: sub(teamA)}, team(teamA), 400, 404),
				inB(c, 201, probe{what: "foreign team", method: "POST", path: "/api/v1/arrays", body: sub(teamB)}, team(teamB), 400, 404),
			}
		},
		"GET /api/v1/arrays/{}": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/arrays/" + arrA, check: holds(`"team":"` + teamA + `"`)}, wl(arrA)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/arrays/" + arrB}, wl(arrB)),
			}
		},
		"DELETE /api/v1/arrays/{}": func(c caller) []probe {
			own := w.array(w.admin, teamA)
			return []probe{
				inA(c, api.RoleMember, 200, probe{what: "own", method: "DELETE", path: "/api/v1/arrays/" + own}, wl(own)),
				inB(c, 200, probe{what: "foreign", method: "DELETE", path: "/api/v1/arrays/" + arrB}, wl(arrB)),
			}
		},
		"GET /api/v1/workloads": func(c caller) []probe {
			return []probe{
				anyone(200, probe{what: "all", method: "GET", path: "/api/v1/workloads"}),
				anyone(200, probe{what: "team filter", method: "GET", path: "/api/v1/workloads?team=" + teamB}),
			}
		},
		"GET /api/v1/workloads/{}": onWorkload("", false, `"team":"`+teamA+`"`),
		"DELETE /api/v1/workloads/{}": func(c caller) []probe {
			own := w.freshPending()
			return []probe{
				inA(c, api.RoleMember, 200, probe{what: "own", method: "DELETE", path: "/api/v1/workloads/" + own}, wl(own)),
				inB(c, 200, probe{what: "foreign pending", method: "DELETE", path: "/api/v1/workloads/" + w.wlBPend}, wl(w.wlBPend)),
			}
		},
		"GET /api/v1/workloads/{}/logs":     onWorkload("/logs", true, markerA),
		"GET /api/v1/workloads/{}/events":   onWorkload("/events", false, w.wlA),
		"GET /api/v1/workloads/{}/usage":    onWorkload("/usage", false, `"points":`),
		"GET /api/v1/workloads/{}/attempts": onWorkload("/attempts", false, `"items":`),
		// A port-forward is for members of the workload's team; without
		// Upgrade: tcp, once authorized, it is a 400 naming the header.
		"GET /api/v1/workloads/{}/portforward": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleMember, 400, probe{what: "own", method: "GET", path: "/api/v1/workloads/" + w.wlA + "/portforward?port=1", check: holds("Upgrade")}, wl(w.wlA)),
				inB(c, 400, probe{what: "foreign", method: "GET", path: "/api/v1/workloads/" + w.wlB + "/portforward?port=1"}, wl(w.wlB)),
			}
		},
		"GET /api/v1/nodes": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/nodes"})}
		},
		// A node is everyone's to read, with only the caller's teams'
		// allocations named.
		"GET /api/v1/nodes/{}": func(c caller) []probe {
			return []probe{
				anyone(200, probe{what: "the node", method: "GET", path: "/api/v1/nodes/" + node, check: holds(append(sees(c, w.wlA, w.wlB), `"name":"`+node+`"`)...)}),
				anyone(404, probe{what: "a missing node", method: "GET", path: "/api/v1/nodes/" + missingNode}),
			}
		},
		"GET /api/v1/nodes/{}/events": func(c caller) []probe {
			return []probe{
				anyone(200, probe{what: "the node", method: "GET", path: "/api/v1/nodes/" + node + "/events", check: holds(`"reason":`)}),
				anyone(404, probe{what: "a missing node", method: "GET", path: "/api/v1/nodes/" + missingNode + "/events"}),
			}
		},
		"GET /api/v1/nodes/{}/evidence": func(c caller) []probe {
			return []probe{
				anyone(200, probe{what: "the node", method: "GET", path: "/api/v1/nodes/" + node + "/evidence", check: holds(`"command":`)}),
				anyone(404, probe{what: "a missing node", method: "GET", path: "/api/v1/nodes/" + missingNode + "/evidence"}),
			}
		},
		// Changing a node is the admin's. The admin leaves the node as it
		// found it (Ready, its work running): a cordon is undone at once,
		// a drain and a fault are only tried where they are refused, and
		// a qualification is of a device no workload holds.
		"POST /api/v1/nodes/{}/cordon": func(c caller) []probe {
			path := "/api/v1/nodes/" + node + "/cordon"
			if !c.admin {
				return []probe{
					adminOnly(c, 0, probe{what: "the node", method: "POST", path: path}),
					adminOnly(c, 0, probe{what: "a missing node", method: "POST", path: "/api/v1/nodes/" + missingNode + "/cordon"}),
				}
			}
			return []probe{
				anyone(200, probe{what: "the node", method: "POST", path: path, check: holds(`"state":"Cordoned"`)}),
				anyone(409, probe{what: "the node, cordoned", method: "POST", path: path}),
				anyone(200, probe{what: "uncordon it, to leave it in service", method: "POST", path: "/api/v1/nodes/" + node + "/uncordon", check: holds(`"state":"Ready"`)}),
				anyone(404, probe{what: "a missing node", method: "POST", path: "/api/v1/nodes/" + missingNode + "/cordon"}),
			}
		},
		"POST /api/v1/nodes/{}/uncordon": func(c caller) []probe {
			path := "/api/v1/nodes/" + node + "/uncordon"
			if !c.admin {
				return []probe{adminOnly(c, 0, probe{what: "the node", method: "POST", path: path})}
			}
			w.h.must(w.admin.token, "POST", "/api/v1/nodes/"+node+"/cordon", "", http.StatusOK, nil)
			return []probe{
				anyone(200, probe{what: "the node, cordoned", method: "POST", path: path, check: holds(`"state":"Ready"`)}),
				anyone(409, probe{what: "the node, in service", method: "POST", path: path}),
				anyone(404, probe{what: "a missing node", method: "POST", path: "/api/v1/nodes/" + missingNode + "/uncordon"}),
			}
		},
		"POST /api/v1/nodes/{}/drain": func(c caller) []probe {
			path := "/api/v1/nodes/" + node + "/drain"
			if !c.admin {
				return []probe{adminOnly(c, 0, probe{what: "the node", method: "POST", path: path, body: `{"grace":"1s"}`})}
			}
			return []probe{
				anyone(400, probe{what: "the node, a bad grace", method: "POST", path: path, body: `{"grace":"for ever"}`}),
				anyone(404, probe{what: "a missing node", method: "POST", path: "/api/v1/nodes/" + missingNode + "/drain", body: `{"grace":"1s"}`}),
			}
		},
		"POST /api/v1/nodes/{}/faults": func(c caller) []probe {
			path := "/api/v1/nodes/" + node + "/faults"
			if !c.admin {
				return []probe{adminOnly(c, 0, probe{what: "the node", method: "POST", path: path, body: `{"gpu":0,"diag":"memory"}`})}
			}
			return []probe{
				anyone(400, probe{what: "the node, a GPU it lacks", method: "POST", path: path, body: `{"gpu":99,"diag":"memory"}`}),
				anyone(400, probe{what: "the node, no fault", method: "POST", path: path, body: `{"gpu":0}`}),
				anyone(404, probe{what: "a missing node", method: "POST", path: "/api/v1/nodes/" + missingNode + "/faults", body: `{"gpu":0,"diag":"memory"}`}),
			}
		},
		"POST /api/v1/nodes/{}/validate": func(c caller) []probe {
			path := "/api/v1/nodes/" + node + "/validate"
			if !c.admin {
				return []probe{adminOnly(c, 0, probe{what: "the node", method: "POST", path: path, body: `{"level":1}`})}
			}
			var n api.Node
			w.h.must(w.admin.token, "GET", "/api/v1/nodes/"+node, "", http.StatusOK, &n)
			free := -1
			for _, g := range n.GPUs {
				if g.AllocatedMilliGPU == 0 {
					free = g.Index
				}
			}
			if free < 0 {
				w.t.Fatalf("node %s has no free GPU to qualify: %+v", node, n.GPUs)
			}
			return []probe{
				anyone(200, probe{what: "a free GPU of the node", method: "POST", path: path, body: fmt.Sprintf(`{"level":1,"gpus":[%d]}`, free)}),
				anyone(400, probe{what: "the node, a bad level", method: "POST", path: path, body: `{"level":9}`}),
				anyone(404, probe{what: "a missing node", method: "POST", path: "/api/v1/nodes/" + missingNode + "/validate", body: `{"level":1}`}),
			}
		},
		"GET /api/v1/priorityclasses": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/priorityclasses"})}
		},
		"GET /api/v1/teams": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/teams"})}
		},
		"POST /api/v1/teams": func(c caller) []probe {
			return []probe{adminOnly(c, 201, probe{method: "POST", path: "/api/v1/teams", body: `{"name":"` + w.uniq("made-by-"+c.name) + `"}`})}
		},
		"PATCH /api/v1/teams/{}": func(c caller) []probe {
			quota, classes := `{"weight":2}`, `{"priorityClasses":["training","development","batch"]}`
			// Quotas are the admin's: a team-admin is refused too.
			q := inA(c, "admin", 200, probe{what: "own quota", method: "PATCH", path: "/api/v1/teams/" + teamA, body: quota}, team(teamA))
			return []probe{q,
				inA(c, api.RoleTeamAdmin, 200, probe{what: "own classes", method: "PATCH", path: "/api/v1/teams/" + teamA, body: classes}, team(teamA)),
				inB(c, 200, probe{what: "foreign quota", method: "PATCH", path: "/api/v1/teams/" + teamB, body: `{"weight":1}`}, team(teamB)),
				inB(c, 200, probe{what: "foreign classes", method: "PATCH", path: "/api/v1/teams/" + teamB, body: `{"priorityClasses":["training","development"]}`}, team(teamB)),
			}
		},
		// Admins only; a team with running work is refused, naming it.
		"DELETE /api/v1/teams/{}": func(c caller) []probe {
			fresh := w.uniq("doomed")
			w.h.must(w.admin.token, "POST", "/api/v1/teams", `{"name":"`+fresh+`"}`, http.StatusCreated, nil)
			ps := []probe{
				adminOnly(c, 204, probe{what: "an idle team", method: "DELETE", path: "/api/v1/teams/" + fresh}),
				adminOnly(c, 409, probe{what: "own team, running", method: "DELETE", path: "/api/v1/teams/" + teamA}),
			}
			if !c.admin {
				ps = append(ps, adminOnly(c, 0, probe{what: "foreign team", method: "DELETE", path: "/api/v1/teams/" + teamB}))
			}
			return ps
		},
		"DELETE /api/v1/users/{}": func(c caller) []probe {
			fresh := w.createUser(w.uniq("doomed"), false).name
			ps := []probe{adminOnly(c, 204, probe{what: "a user", method: "DELETE", path: "/api/v1/users/" + fresh})}
			if !c.admin {
				ps = append(ps, adminOnly(c, 0, probe{what: "B's member", method: "DELETE", path: "/api/v1/users/b-member"}))
			} else {
				ps = append(ps, probe{what: "self", method: "DELETE", path: "/api/v1/users/" + c.name, want: []int{409}})
			}
			return ps
		},
		"POST /api/v1/users": func(c caller) []probe {
			sa := func(t string) string {
				// A service account is named after its team.
				return `{"name":"` + t + "." + w.uniq("sa-by-"+c.name) + `","serviceAccount":true,"memberships":[{"team":"` + t + `","role":"member"}]}`
			}
			person := `{"name":"` + w.uniq("person-by-"+c.name) + `","memberships":[{"team":"` + teamA + `","role":"viewer"}]}`
			p := []probe{
				inA(c, api.RoleTeamAdmin, 201, probe{what: "service account of own team", method: "POST", path: "/api/v1/users", body: sa(teamA), givesToken: true}, team(teamA), 403, 404),
				inB(c, 201, probe{what: "service account of foreign team", method: "POST", path: "/api/v1/users", body: sa(teamB), givesToken: true}, team(teamB), 403, 404),
				adminOnly(c, 201, probe{what: "a person", method: "POST", path: "/api/v1/users", body: person, givesToken: true}),
			}
			return p
		},
		"GET /api/v1/users": func(c caller) []probe {
			return []probe{adminOnly(c, 200, probe{method: "GET", path: "/api/v1/users"})}
		},
		"GET /api/v1/users/{}": func(c caller) []probe {
			other := probe{what: "a teammate", method: "GET", path: "/api/v1/users/a-target", want: []int{404}, hidden: user("a-target")}
			if c.admin {
				other = probe{what: "a teammate", method: "GET", path: "/api/v1/users/a-target", want: []int{200}}
			}
			return []probe{
				anyone(200, probe{what: "self", method: "GET", path: "/api/v1/users/" + c.name, check: holds(`"name":"` + c.name + `"`)}),
				other,
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/users/b-member"}, user("b-member")),
			}
		},
		"GET /api/v1/teams/{}/members": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/teams/" + teamA + "/members", check: holds("a-target")}, team(teamA)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/teams/" + teamB + "/members"}, team(teamB)),
			}
		},
		// Secrets: team-admins create and delete; the team reads names and
		// keys only.
		"POST /api/v1/teams/{}/secrets": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleTeamAdmin, 201, probe{what: "own", method: "POST", path: "/api/v1/teams/" + teamA + "/secrets",
					body: `{"name":"` + w.uniq("sa") + `","data":{"K":"v"}}`, check: holds(`"keys":["K"]`)}, team(teamA)),
				inB(c, 201, probe{what: "foreign", method: "POST", path: "/api/v1/teams/" + teamB + "/secrets", body: `{"name":"` + w.uniq("sb") + `","data":{"K":"v"}}`}, team(teamB)),
			}
		},
		"GET /api/v1/teams/{}/secrets": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/teams/" + teamA + "/secrets", check: holds(`"items":`)}, team(teamA)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/teams/" + teamB + "/secrets"}, team(teamB)),
			}
		},
		"DELETE /api/v1/teams/{}/secrets/{}": func(c caller) []probe {
			mk := func(tm string) string {
				name := w.uniq("sd")
				w.h.must(w.admin.token, "POST", "/api/v1/teams/"+tm+"/secrets", `{"name":"`+name+`","data":{"K":"v"}}`, http.StatusCreated, nil)
				return name
			}
			return []probe{
				inA(c, api.RoleTeamAdmin, 204, probe{what: "own", method: "DELETE", path: "/api/v1/teams/" + teamA + "/secrets/" + mk(teamA)}, team(teamA)),
				inB(c, 204, probe{what: "foreign", method: "DELETE", path: "/api/v1/teams/" + teamB + "/secrets/" + mk(teamB)}, team(teamB)),
			}
		},
		// Volumes: members create them, team-admins delete them; the team
		// reads them and its storage.
		"POST /api/v1/teams/{}/volumes": func(c caller) []probe {
			name := w.uniq("va")
			if roleRank(c.role) >= roleRank(api.RoleMember) {
				w.volumes[teamA] = append(w.volumes[teamA], name)
			}
			return []probe{
				inA(c, api.RoleMember, 201, probe{what: "own", method: "POST", path: "/api/v1/teams/" + teamA + "/volumes",
					body: `{"name":"` + name + `","sizeBytes":1048576}`, check: holds(`"name":"`+name+`"`, `"sizeBytes":1048576`)}, team(teamA)),
				inB(c, 201, probe{what: "foreign", method: "POST", path: "/api/v1/teams/" + teamB + "/volumes", body: `{"name":"` + w.uniq("vb") + `","sizeBytes":1048576}`}, team(teamB)),
			}
		},
		"GET /api/v1/teams/{}/volumes": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/teams/" + teamA + "/volumes", check: holds(`"items":`)}, team(teamA)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/teams/" + teamB + "/volumes"}, team(teamB)),
			}
		},
		"DELETE /api/v1/teams/{}/volumes/{}": func(c caller) []probe {
			mk := func(tm string) string {
				name := w.uniq("vd")
				w.h.must(w.admin.token, "POST", "/api/v1/teams/"+tm+"/volumes", `{"name":"`+name+`","sizeBytes":1048576}`, http.StatusCreated, nil)
				w.volumes[tm] = append(w.volumes[tm], name)
				return name
			}
			return []probe{
				inA(c, api.RoleTeamAdmin, 204, probe{what: "own", method: "DELETE", path: "/api/v1/teams/" + teamA + "/volumes/" + mk(teamA)}, team(teamA)),
				inB(c, 204, probe{what: "foreign", method: "DELETE", path: "/api/v1/teams/" + teamB + "/volumes/" + mk(teamB)}, team(teamB)),
			}
		},
		// Where work runs, with no team's work in it: anyone.
		"GET /api/v1/clusters": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/clusters", check: holds(`"executor":"local"`)})}
		},
		"GET /api/v1/servers": func(c caller) []probe {
			return []probe{adminOnly(c, 200, probe{method: "GET", path: "/api/v1/servers", check: holds(`"leader":true`)})}
		},
		"GET /api/v1/pools": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/pools", check: holds(`"name":"local"`, `"gpus":4`)})}
		},
		// A brief's advice: anyone.
		// An estimate prices hypothetical work from the public prices.
		"POST /api/v1/cost/estimate": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "POST", path: "/api/v1/cost/estimate", body: `{"gpus":1,"hours":2,"rate":3}`, check: holds(`"total":6`)})}
		},
		"POST /api/v1/plan": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "POST", path: "/api/v1/plan",
				body: `{"workload":"inference","model":{"name":"llama-3-8b"},"precision":"bf16","contextLength":4096,"concurrency":1}`, check: holds(`"candidates":`)})}
		},
		// Acceptance runs: a member of the card's team starts one (400
		// naming the team, as for a missing team, outside it), its viewers
		// read it, its team-admins decide.
		"POST /api/v1/acceptance/runs": func(c caller) []probe {
			card := func(tm string) string {
				return `{"card":{"name":"` + w.uniq("card") + `","team":"` + tm + `","stages":[{"name":"smoke","type":"smoke","workload":{"command":["true"],"resources":{"gpus":0.25}}}]}}`
			}
			return []probe{
				inA(c, api.RoleMember, 201, probe{what: "own", method: "POST", path: "/api/v1/acceptance/runs", body: card(teamA), check: holds(`"status":"Running"`)}, team(teamA), 400),
				inB(c, 201, probe{what: "foreign", method: "POST", path: "/api/v1/acceptance/runs", body: card(teamB)}, team(teamB), 400),
			}
		},
		"GET /api/v1/acceptance/runs": func(c caller) []probe {
			ra, rb := w.acceptanceRun(teamA), w.acceptanceRun(teamB)
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/acceptance/runs", check: func(a answer) string {
				switch {
				case c.admin && (!strings.Contains(a.body, ra) || !strings.Contains(a.body, rb)):
					return "the admin does not see every run"
				case !c.admin && c.role != "" && !strings.Contains(a.body, ra):
					return "a member of team A does not see its run"
				}
				return ""
			}})}
		},
		"GET /api/v1/acceptance/runs/{}": func(c caller) []probe {
			ra, rb := w.acceptanceRun(teamA), w.acceptanceRun(teamB)
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/acceptance/runs/" + ra, check: holds(ra)}, run(ra)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/acceptance/runs/" + rb}, run(rb)),
			}
		},
		"GET /api/v1/acceptance/runs/{}/report": func(c caller) []probe {
			ra, rb := w.acceptanceRun(teamA), w.acceptanceRun(teamB)
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/acceptance/runs/" + ra + "/report", raw: true, check: holds("<html")}, run(ra)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/acceptance/runs/" + rb + "/report", raw: true}, run(rb)),
			}
		},
		"POST /api/v1/acceptance/runs/{}/decision": func(c caller) []probe {
			ra, rb := w.acceptanceRun(teamA), w.acceptanceRun(teamB)
			body := `{"decision":"extend","note":"matrix"}`
			pa := inA(c, api.RoleTeamAdmin, 200, probe{what: "own", method: "POST", path: "/api/v1/acceptance/runs/" + ra + "/decision", body: body}, run(ra))
			pb := inB(c, 200, probe{what: "foreign", method: "POST", path: "/api/v1/acceptance/runs/" + rb + "/decision", body: body}, run(rb))
			for _, p := range []*probe{&pa, &pb} {
				if slices.Equal(p.want, []int{200}) {
					p.want = append(p.want, http.StatusConflict) // the run may not have ended yet
				}
			}
			return []probe{pa, pb}
		},
		"GET /api/v1/teams/{}/storage": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/teams/" + teamA + "/storage", check: holds(`"team":"`+teamA+`"`, `"limitBytes":`)}, team(teamA)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/teams/" + teamB + "/storage"}, team(teamB)),
			}
		},
		"PUT /api/v1/teams/{}/members/{}": func(c caller) []probe {
			ps := []probe{
				inA(c, api.RoleTeamAdmin, 200, probe{what: "own", method: "PUT", path: "/api/v1/teams/" + teamA + "/members/a-target", body: `{"role":"viewer"}`}, team(teamA)),
				inB(c, 200, probe{what: "foreign: add a teammate", method: "PUT", path: "/api/v1/teams/" + teamB + "/members/a-target", body: `{"role":"member"}`}, team(teamB)),
			}
			if !c.admin {
				ps = append(ps, inB(c, 200, probe{what: "foreign: add oneself", method: "PUT", path: "/api/v1/teams/" + teamB + "/members/" + c.name, body: `{"role":"team-admin"}`}, team(teamB)))
			}
			// Into its own team, a team-admin may not pull another team's
			// service account or person: they answer as missing users. An
			// admin may add the person, never the service account (409).
			for _, target := range []string{"b-bot", "b-member"} {
				p := probe{what: "own team: add " + target + " of another team", method: "PUT", path: "/api/v1/teams/" + teamA + "/members/" + target, body: `{"role":"viewer"}`}
				switch {
				case c.admin && target == "b-bot":
					p.want = []int{http.StatusConflict}
				case c.admin:
					p.skip = true // allowed, and it would put B's member in A for the probes that follow
				case c.role == api.RoleTeamAdmin:
					p.want, p.hidden = []int{http.StatusNotFound}, user(target)
				case c.role != "":
					p.want = []int{http.StatusForbidden}
				default:
					p.want, p.hidden = []int{http.StatusNotFound}, team(teamA)
				}
				ps = append(ps, p)
			}
			if c.role != "" && c.role != api.RoleTeamAdmin && c.role != "admin" {
				ps = append(ps, probe{what: "promote oneself", method: "PUT", path: "/api/v1/teams/" + teamA + "/members/" + c.name, body: `{"role":"team-admin"}`, want: []int{403}})
			}
			return ps
		},
		"DELETE /api/v1/teams/{}/members/{}": func(c caller) []probe {
			target := "a-target"
			if roleRank(c.role) >= roleRank(api.RoleTeamAdmin) {
				target = w.createUser(w.uniq("leaver"), false, api.Membership{Team: teamA, Role: api.RoleViewer}).name
			}
			return []probe{
				inA(c, api.RoleTeamAdmin, 204, probe{what: "own", method: "DELETE", path: "/api/v1/teams/" + teamA + "/members/" + target}, team(teamA)),
				inB(c, 204, probe{what: "foreign", method: "DELETE", path: "/api/v1/teams/" + teamB + "/members/b-bot"}, team(teamB)),
			}
		},
		"POST /api/v1/tokens": func(c caller) []probe {
			ps := []probe{
				anyone(201, probe{what: "self", method: "POST", path: "/api/v1/tokens", body: `{"name":"mine"}`, givesToken: true}),
				inB(c, 201, probe{what: "for B's member", method: "POST", path: "/api/v1/tokens", body: `{"name":"x","user":"b-member"}`, givesToken: true}, user("b-member"), 403, 404),
				inB(c, 201, probe{what: "for B's service account", method: "POST", path: "/api/v1/tokens", body: `{"name":"x","user":"b-bot"}`, givesToken: true}, user("b-bot"), 404),
			}
			sa := inA(c, api.RoleTeamAdmin, 201, probe{what: "for own service account", method: "POST", path: "/api/v1/tokens", body: `{"name":"ci","user":"a-bot"}`, givesToken: true}, user("a-bot"), 403, 404)
			if c.name == "a-bot" {
				sa.want = []int{201} // its own
			} else if c.role != "" && roleRank(c.role) < roleRank(api.RoleTeamAdmin) {
				sa.want = []int{403, 404}
			}
			return append(ps, sa)
		},
		"GET /api/v1/tokens": func(c caller) []probe {
			p := probe{what: "B's member's", method: "GET", path: "/api/v1/tokens?user=b-member", want: []int{200, 403, 404}, hidden: user("b-member")}
			if c.admin || c.bSide {
				p = probe{what: "B's member's", method: "GET", path: "/api/v1/tokens?user=b-member", want: []int{200}, check: holds(w.tokB.ID)}
			}
			return []probe{anyone(200, probe{what: "own", method: "GET", path: "/api/v1/tokens"}), p}
		},
		"DELETE /api/v1/tokens/{}": func(c caller) []probe {
			var mine, bots api.Token
			w.h.must(c.token, "POST", "/api/v1/tokens", `{"name":"to-revoke"}`, 201, &mine)
			w.h.must(w.admin.token, "POST", "/api/v1/tokens", `{"name":"bot-ci","user":"a-bot"}`, 201, &bots)
			tok := map[string]string{bots.ID: missingTok}
			botp := inA(c, api.RoleTeamAdmin, 204, probe{what: "own service account's", method: "DELETE", path: "/api/v1/tokens/" + bots.ID}, tok)
			if c.name == "a-bot" {
				botp.want, botp.hidden = []int{204}, nil
			} else if c.role != "" && roleRank(c.role) < roleRank(api.RoleTeamAdmin) {
				// Another user's token ID answers 404 (spec).
				botp.want, botp.hidden = []int{404}, tok
			}
			return []probe{
				anyone(204, probe{what: "own", method: "DELETE", path: "/api/v1/tokens/" + mine.ID}),
				botp,
				inB(c, 204, probe{what: "B's", method: "DELETE", path: "/api/v1/tokens/" + w.tokB.ID}, map[string]string{w.tokB.ID: missingTok}),
			}
		},
		"GET /api/v1/audit": func(c caller) []probe {
			return []probe{adminOnly(c, 200, probe{method: "GET", path: "/api/v1/audit"})}
		},
		// Prices are everyone's to read and the admin's to set.
		"GET /api/v1/prices": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/prices", check: holds(`"pool":"local"`)})}
		},
		"POST /api/v1/prices": func(c caller) []probe {
			price := `{"pool":"` + w.uniq("pool-by-"+c.name) + `","kind":"on-demand","rate":2}`
			return []probe{adminOnly(c, 201, probe{method: "POST", path: "/api/v1/prices", body: price})}
		},
		// Cost answers hold the rows of the caller's teams only, however
		// they are cut.
		"GET /api/v1/cost": func(c caller) []probe {
			return []probe{
				anyone(200, probe{what: "by team", method: "GET", path: "/api/v1/cost", check: costRows(c, sees(c, teamA, teamB), w.acceptanceRows(c))}),
				anyone(200, probe{what: "by workload", method: "GET", path: "/api/v1/cost?by=workload", check: costRows(c, w.seesVolumes(c, true, sees(c, w.wlA, w.wlB)), w.acceptanceRows(c))}),
				anyone(200, probe{what: "by user", method: "GET", path: "/api/v1/cost?by=user", check: costRows(c, w.seesVolumes(c, false, sees(c, "a-member", "b-member")), w.acceptanceRows(c))}),
				anyone(200, probe{what: "by label", method: "GET", path: "/api/v1/cost?by=label:project", check: costRows(c, w.seesVolumes(c, false, sees(c, markerA, markerB)), w.acceptanceRows(c))}),
				anyone(200, probe{what: "by pool", method: "GET", path: "/api/v1/cost?by=pool&since=1h"}),
			}
		},
		"GET /api/v1/cost/series": func(c caller) []probe {
			return []probe{
				anyone(200, probe{what: "by team", method: "GET", path: "/api/v1/cost/series?since=1h&step=10m", check: seriesRows(c, sees(c, teamA, teamB), w.acceptanceRows(c))}),
				anyone(200, probe{what: "by workload", method: "GET", path: "/api/v1/cost/series?by=workload&since=1h&step=10m", check: seriesRows(c, w.seesVolumes(c, true, sees(c, w.wlA, w.wlB)), w.acceptanceRows(c))}),
			}
		},
		"GET /api/v1/cost/export": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/cost/export?format=focus", raw: true, check: holds(sees(c, w.wlA, w.wlB)...)})}
		},
		"GET /api/v1/budgets": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/budgets", check: func(a answer) string {
				var l api.BudgetList
				if err := json.Unmarshal([]byte(a.body), &l); err != nil {
					return err.Error()
				}
				var got []string
				for _, b := range l.Items {
					got = append(got, b.Team)
				}
				return sameRows(c, sees(c, teamA, teamB), got, nil)
			}})}
		},
		// A team's budget reads as the team does; a team one cannot see
		// answers as a missing team.
		"GET /api/v1/teams/{}/budget": func(c caller) []probe {
			return []probe{
				inA(c, api.RoleViewer, 200, probe{what: "own", method: "GET", path: "/api/v1/teams/" + teamA + "/budget", check: holds(`"team":"`+teamA+`"`, `"spent":`)}, team(teamA)),
				inB(c, 200, probe{what: "foreign", method: "GET", path: "/api/v1/teams/" + teamB + "/budget"}, team(teamB)),
			}
		},
		"PUT /api/v1/teams/{}/budget": func(c caller) []probe {
			if !c.admin {
				return []probe{
					adminOnly(c, 0, probe{what: "own team", method: "PUT", path: "/api/v1/teams/" + teamA + "/budget", body: `{"monthly":1}`}),
					adminOnly(c, 0, probe{what: "foreign team", method: "PUT", path: "/api/v1/teams/" + teamB + "/budget", body: `{"monthly":1}`}),
				}
			}
			return []probe{
				anyone(200, probe{what: "team A", method: "PUT", path: "/api/v1/teams/" + teamA + "/budget", body: `{"monthly":2000000}`, check: holds(`"team":"` + teamA + `"`)}),
				anyone(400, probe{what: "team A, no amount", method: "PUT", path: "/api/v1/teams/" + teamA + "/budget", body: `{"monthly":0}`}),
				anyone(404, probe{what: "a missing team", method: "PUT", path: "/api/v1/teams/" + missingTeam + "/budget", body: `{"monthly":1}`}),
			}
		},
		"DELETE /api/v1/teams/{}/budget": func(c caller) []probe {
			if !c.admin {
				return []probe{
					adminOnly(c, 0, probe{what: "own team", method: "DELETE", path: "/api/v1/teams/" + teamA + "/budget"}),
					adminOnly(c, 0, probe{what: "foreign team", method: "DELETE", path: "/api/v1/teams/" + teamB + "/budget"}),
				}
			}
			fresh := w.uniq("budgeted")
			w.h.must(w.admin.token, "POST", "/api/v1/teams", `{"name":"`+fresh+`"}`, http.StatusCreated, nil)
			w.h.must(w.admin.token, "PUT", "/api/v1/teams/"+fresh+"/budget", `{"monthly":5}`, http.StatusOK, nil)
			return []probe{
				anyone(204, probe{what: "a team's", method: "DELETE", path: "/api/v1/teams/" + fresh + "/budget"}),
				anyone(404, probe{what: "the same, gone", method: "DELETE", path: "/api/v1/teams/" + fresh + "/budget"}),
			}
		},
		// Outputs are reported by members of the workload's team.
		"POST /api/v1/workloads/{}/outputs": func(c caller) []probe {
			body := `{"accepted":3,"rejected":1,"unit":"samples"}`
			return []probe{
				inA(c, api.RoleMember, 200, probe{what: "own", method: "POST", path: "/api/v1/workloads/" + w.wlA + "/outputs", body: body, check: holds(w.wlA, `"samples"`)}, wl(w.wlA)),
				inB(c, 200, probe{what: "foreign", method: "POST", path: "/api/v1/workloads/" + w.wlB + "/outputs", body: body}, wl(w.wlB)),
			}
		},
		// Cluster totals, no team names: anyone.
		"GET /api/v1/usage": func(c caller) []probe {
			return []probe{anyone(200, probe{method: "GET", path: "/api/v1/usage?window=5m"})}
		},
		// Metrics name every team: admins only.
		"GET /metrics": func(c caller) []probe {
			return []probe{adminOnly(c, 200, probe{method: "GET", path: "/metrics", raw: true, check: holds("gpufleet_gpus_total")})}
		},
	}
}

// runProbe sends p as c, checks the answer, and returns the problems found
// and whether one of them is a leak.
func (w *world) runProbe(c caller, p probe) (problems []string, leak bool) {
	a := w.h.do(c.token, p.method, p.path, p.body)
	bad := func(isLeak bool, format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
		leak = leak || isLeak
	}
	if !slices.Contains(p.want, a.status) {
		bad(p.hidden != nil && a.status/100 == 2, "status %d, want %v: %.300s", a.status, p.want, a.body)
	}
	mt, _, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
	if !(p.raw && a.status == 200) && a.status != http.StatusNoContent && (mt != "application/json" || !json.Valid([]byte(a.body))) {
		bad(false, "answer is not JSON (Content-Type %q): %.200s", a.header.Get("Content-Type"), a.body)
	}
	if a.status/100 == 2 && p.check != nil && !(p.hidden != nil && !c.admin) {
		if msg := p.check(a); msg != "" {
			bad(false, "%s", msg)
		}
	}
	// Nothing of a team reaches a caller outside it, except what the
	// request itself named.
	var secrets []string
	if !c.admin {
		if c.role == "" {
			secrets = append(secrets, w.secretsA...)
		}
		if c.name != w.bMember.name {
			secrets = append(secrets, w.secretsB...)
		}
	}
	for _, s := range secrets {
		if s == c.name || strings.Contains(p.path, s) || strings.Contains(p.body, s) {
			continue
		}
		if strings.Contains(a.body, s) {
			bad(true, "answer holds %q, which belongs to a team the caller is not in: %.300s", s, a.body)
		}
	}
	if !p.givesToken {
		if tok := anyTokenRE.FindString(a.body); tok != "" {
			bad(true, "answer holds a token: %.300s", a.body)
		}
	}
	if p.hidden != nil {
		path, body := p.path, p.body
		for real, fake := range p.hidden {
			path, body = strings.ReplaceAll(path, real, fake), strings.ReplaceAll(body, real, fake)
		}
		twin := w.h.do(c.token, p.method, path, body)
		norm := twin.body
		for real, fake := range p.hidden {
			norm = strings.ReplaceAll(norm, fake, real)
		}
		if twin.status != a.status || norm != a.body {
			bad(true, "the object is distinguishable from a missing one: %d %s\nvs missing (%s %s): %d %s",
				a.status, strings.TrimSpace(a.body), p.method, path, twin.status, strings.TrimSpace(twin.body))
		}
	}
	return problems, leak
}

// TestCrossTenantMatrix tries every route of the server, as every caller,
// on its own team's objects and on the other team's: the other team's
// objects answer exactly as missing ones do (404), a role too weak answers
// 403, and nothing of a team reaches a caller outside it.
func TestCrossTenantMatrix(t *testing.T) {
	s := start(t, t.TempDir())
	w := newWorld(t, s)
	table := w.matrix()

	// The table must cover the server's routes, and the server must serve
	// the spec's.
	served := map[string]bool{}
	for _, r := range apiserver.Routes {
		served[routeKey(r)] = true
		if table[routeKey(r)] == nil {
			t.Errorf("route %q has no entry in the cross-tenant matrix: add one", r)
		}
	}
	var keys []string
	for k := range table {
		keys = append(keys, k)
		if !served[k] {
			t.Errorf("spec endpoint %q is not in apiserver.Routes", k)
		}
	}
	slices.Sort(keys)

	tried, leaks, twins := 0, 0, 0
	for _, k := range keys {
		if !served[k] {
			continue
		}
		for _, c := range w.callers {
			for _, p := range table[k](c) {
				if p.skip {
					continue
				}
				tried++
				if p.hidden != nil {
					twins++
				}
				problems, leak := w.runProbe(c, p)
				if leak {
					leaks++
				}
				for _, msg := range problems {
					t.Errorf("%s %s (%s) as %s [%s]: %s", p.method, p.path, p.what, c.name, roleOf(c), msg)
				}
			}
		}
		// Without a token: 401, except the public routes.
		method, path, _ := strings.Cut(k, " ")
		path = strings.NewReplacer("{}", "x").Replace(path)
		if !strings.HasSuffix(path, "healthz") && !strings.HasSuffix(path, "readyz") && !strings.HasSuffix(path, "openapi.json") {
			tried++
			if a := w.h.do("", method, path, ""); a.status != http.StatusUnauthorized {
				t.Errorf("%s %s without a token: %d %.200s, want 401", method, path, a.status, a.body)
			}
		}
	}
	// A workload's spec never changes after submission: no PUT or PATCH.
	for _, c := range w.callers {
		for _, m := range []string{"PUT", "PATCH"} {
			for _, id := range []string{w.wlA, w.wlB} {
				tried++
				a := w.h.do(c.token, m, "/api/v1/workloads/"+id, `{"team":"`+teamA+`","resources":{"gpus":8}}`)
				if a.status != http.StatusMethodNotAllowed {
					t.Errorf("%s /api/v1/workloads/%s as %s: %d %.200s, want 405", m, id, c.name, a.status, a.body)
				}
			}
		}
	}

	// Nothing of team B changed.
	var got api.Workload
	w.h.must(w.admin.token, "GET", "/api/v1/workloads/"+w.wlB, "", 200, &got)
	if got.Status.Phase != api.PhaseRunning || got.Status.StopRequested != "" {
		t.Errorf("team B's running workload after the matrix: %s (stop %q), want Running", got.Status.Phase, got.Status.StopRequested)
	}
	w.h.must(w.admin.token, "GET", "/api/v1/workloads/"+w.wlBPend, "", 200, &got)
	if got.Status.Phase != api.PhasePending {
		t.Errorf("team B's pending workload after the matrix: %s, want Pending", got.Status.Phase)
	}
	var members api.List[api.User]
	w.h.must(w.admin.token, "GET", "/api/v1/teams/"+teamB+"/members", "", 200, &members)
	var names []string
	for _, u := range members.Items {
		names = append(names, u.Name+"="+roleIn(u, teamB))
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"b-bot=member", "b-member=member"}, names); diff != "" {
		t.Errorf("team B's members after the matrix (-want +got):\n%s", diff)
	}
	w.h.must(w.admin.token, "GET", "/api/v1/teams/"+teamA+"/members", "", 200, &members)
	for _, u := range members.Items {
		if strings.HasPrefix(u.Name, "b-") {
			t.Errorf("team B's %s is in team A after the matrix", u.Name)
		}
	}
	var teams api.List[api.Team]
	w.h.must(w.admin.token, "GET", "/api/v1/teams", "", 200, &teams)
	for _, tm := range teams.Items {
		if tm.Name == teamB && (tm.Weight != 1 || len(tm.PriorityClasses) != 0) {
			t.Errorf("team B after the matrix: weight %d classes %v, want 1 and none", tm.Weight, tm.PriorityClasses)
		}
	}
	var n api.Node
	w.h.must(w.admin.token, "GET", "/api/v1/nodes/"+w.s.cfg.NodeName, "", 200, &n)
	if n.State != "Ready" || !n.Schedulable {
		t.Errorf("the node after the matrix: %s (%s, schedulable %v), want Ready and schedulable", n.State, n.StateReason, n.Schedulable)
	}
	if a := w.h.do(w.tokB.Token, "GET", "/api/v1/whoami", ""); a.status != 200 || !strings.Contains(a.body, `"b-member"`) {
		t.Errorf("B's token after the matrix: %d %s, want it still valid", a.status, a.body)
	}
	t.Logf("cross-tenant matrix: %d requests (%d probes over %d routes x %d callers, with the 405 and 401 checks, and %d twin requests on missing objects), %d leaks; %d waits for the rate limiter",
		tried+twins, tried, len(keys), len(w.callers), twins, leaks, w.h.waited)
	if leaks > 0 {
		t.Errorf("%d leaks", leaks)
	}
}

func roleOf(c caller) string {
	if c.role == "" {
		return "not in " + teamA
	}
	return c.role
}

func roleIn(u api.User, team string) string {
	for _, m := range u.Memberships {
		if m.Team == team {
			return m.Role
		}
	}
	if slices.Contains(u.Teams, team) {
		return "member?"
	}
	return ""
}

// TestTenancyMemberMayNotChooseProduction: a member submitting a class its
// team was not granted gets 403 with a message that says what to do, and
// nothing is stored; once a team-admin grants it, the same submission is
// accepted.
func TestTenancyMemberMayNotChooseProduction(t *testing.T) {
	s := start(t, t.TempDir())
	w := newWorldLite(t, s)
	member := w.createUser("a-member", false, api.Membership{Team: teamA, Role: api.RoleMember})
	tadmin := w.createUser("a-tadmin", false, api.Membership{Team: teamA, Role: api.RoleTeamAdmin})
	body := `{"team":"` + teamA + `","priority":"production","command":["true"],"resources":{"gpus":1}}`
	a := w.h.do(member.token, "POST", "/api/v1/workloads", body)
	var eb api.ErrorBody
	json.Unmarshal([]byte(a.body), &eb)
	if a.status != http.StatusForbidden || eb.Error.Code != api.CodeForbidden ||
		!strings.Contains(eb.Error.Message, "production") || !strings.Contains(eb.Error.Message, teamA) ||
		!strings.Contains(eb.Error.Message, "team-admin") {
		t.Errorf("member submitting production: %d %s\nwant 403 forbidden naming the class, the team and who can grant it", a.status, a.body)
	}
	var list api.List[api.Workload]
	w.h.must(w.admin.token, "GET", "/api/v1/workloads", "", 200, &list)
	if len(list.Items) != 0 {
		t.Errorf("%d workloads stored after a refused submission", len(list.Items))
	}
	// A member cannot grant it either.
	grant := `{"priorityClasses":["training","development","batch","production"]}`
	if a := w.h.do(member.token, "PATCH", "/api/v1/teams/"+teamA, grant); a.status != http.StatusForbidden {
		t.Errorf("member granting production: %d %s, want 403", a.status, a.body)
	}
	w.h.must(tadmin.token, "PATCH", "/api/v1/teams/"+teamA, grant, 200, nil)
	var wl api.Workload
	w.h.must(member.token, "POST", "/api/v1/workloads", body, 201, &wl)
	if wl.Priority != "production" {
		t.Errorf("granted production: stored priority %q", wl.Priority)
	}
	// An unknown class still names the field, and a class that is not a
	// class in the grant is refused.
	if a := w.h.do(tadmin.token, "PATCH", "/api/v1/teams/"+teamA, `{"priorityClasses":["gold"]}`); a.status/100 != 4 || !strings.Contains(a.body, "priorityClasses[0]") {
		t.Errorf("granting an unknown class: %d %s, want 400/422 naming priorityClasses[0]", a.status, a.body)
	}
}

// TestTenancyServerOwnedFieldsAreRefused: a submission may not set what the
// platform owns.
func TestTenancyServerOwnedFieldsAreRefused(t *testing.T) {
	s := start(t, t.TempDir())
	w := newWorldLite(t, s)
	member := w.createUser("a-member", false, api.Membership{Team: teamA, Role: api.RoleMember})
	base := `"team":"` + teamA + `","command":["true"],` + park
	for field, extra := range map[string]string{
		"id":        `"id":"wl-aaaaaaaaaaaa"`,
		"owner":     `"owner":"admin"`,
		"createdAt": `"createdAt":"2020-01-01T00:00:00Z"`,
		"status":    `"status":{"phase":"Succeeded"}`,
	} {
		a := w.h.do(member.token, "POST", "/api/v1/workloads", "{"+base+","+extra+"}")
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"field":"`+field) {
			t.Errorf("submission setting %s: %d %s, want 400 naming %s", field, a.status, a.body, field)
		}
	}
	var list api.List[api.Workload]
	w.h.must(w.admin.token, "GET", "/api/v1/workloads", "", 200, &list)
	if len(list.Items) != 0 {
		t.Errorf("%d workloads stored after refused submissions", len(list.Items))
	}
}

// newWorldLite is a world with the admin and both teams, and no users.
func newWorldLite(t *testing.T, s *server) *world {
	h := &hclient{t: t, addr: s.addr}
	w := &world{t: t, s: s, h: h, admin: caller{name: "admin", token: s.admin.Token, admin: true, role: "admin"}, volumes: map[string][]string{}}
	h.must(w.admin.token, "POST", "/api/v1/teams", `{"name":"`+teamA+`","guaranteedMilliGPU":1000,`+limitA+`}`, http.StatusCreated, nil)
	h.must(w.admin.token, "POST", "/api/v1/teams", `{"name":"`+teamB+`",`+limitB+`}`, http.StatusCreated, nil)
	return w
}

// TestTenancyLimits: oversized bodies, request bursts and pending work are
// bounded, with JSON answers that say so.
func TestTenancyLimits(t *testing.T) {
	cfg := loadConfig(t, t.TempDir(), `
limits:
  maxPendingPerTeam: 3
  maxPendingPerUser: 2
  requestsPerSecond: 2
  burst: 5
`)
	s := startWith(t, cfg, io.Discard)
	w := newWorldLite(t, s)
	alice := w.createUser("alice", false, api.Membership{Team: teamA, Role: api.RoleMember})
	bob := w.createUser("bob", false, api.Membership{Team: teamA, Role: api.RoleMember})
	carol := w.createUser("carol", false, api.Membership{Team: teamA, Role: api.RoleViewer})

	t.Run("2 MiB bodies", func(t *testing.T) {
		big := strings.Repeat("x", 2<<20)
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/api/v1/workloads", `{"command":["true","` + big + `"],"resources":{"gpus":1}}`},
			{"POST", "/api/v1/teams", `{"name":"` + big + `"}`},
			{"PATCH", "/api/v1/teams/" + teamA, `{"priorityClasses":["` + big + `"]}`},
			{"POST", "/api/v1/users", `{"name":"` + big + `"}`},
			{"POST", "/api/v1/tokens", `{"name":"` + big + `"}`},
			{"PUT", "/api/v1/teams/" + teamA + "/members/alice", `{"role":"` + big + `"}`},
		} {
			a := w.h.do(w.admin.token, r.method, r.path, r.body)
			var eb api.ErrorBody
			if a.status != http.StatusRequestEntityTooLarge || json.Unmarshal([]byte(a.body), &eb) != nil || eb.Error.Code != api.CodeTooLarge {
				t.Errorf("%s %s with 2 MiB: %d %.200s, want 413 too_large in JSON", r.method, r.path, a.status, a.body)
			}
		}
	})

	t.Run("pending limits", func(t *testing.T) {
		sub := `{"team":"` + teamA + `","command":["true"],` + park + `}`
		w.h.must(alice.token, "POST", "/api/v1/workloads", sub, 201, nil)
		w.h.must(alice.token, "POST", "/api/v1/workloads", sub, 201, nil)
		a := w.h.do(alice.token, "POST", "/api/v1/workloads", sub)
		checkLimited(t, "alice's third pending workload (per-user limit 2)", a, api.CodeLimitReached)
		w.h.must(bob.token, "POST", "/api/v1/workloads", sub, 201, nil)
		a = w.h.do(bob.token, "POST", "/api/v1/workloads", sub)
		checkLimited(t, "the team's fourth pending workload (per-team limit 3)", a, api.CodeLimitReached)
		if a.header.Get("Retry-After") != "10" {
			t.Errorf("limit_reached Retry-After %q, want 10", a.header.Get("Retry-After"))
		}
		var list api.List[api.Workload]
		w.h.must(w.admin.token, "GET", "/api/v1/workloads?team="+teamA, "", 200, &list)
		if len(list.Items) != 3 {
			t.Errorf("%d workloads stored, want the 3 accepted", len(list.Items))
		}
		// Cancelling one makes room.
		w.h.must(alice.token, "DELETE", "/api/v1/workloads/"+list.Items[0].ID, "", 200, nil)
		w.h.must(bob.token, "POST", "/api/v1/workloads", sub, 201, nil)
	})

	t.Run("rate limit", func(t *testing.T) {
		limited := 0
		var first answer
		for range 30 {
			a := w.h.do(carol.token, "GET", "/api/v1/whoami", "")
			if a.status == http.StatusTooManyRequests {
				if limited == 0 {
					first = a
				}
				limited++
			} else if a.status != 200 {
				t.Fatalf("whoami: %d %s", a.status, a.body)
			}
		}
		if limited == 0 {
			t.Fatalf("30 requests at once with burst 5 and 2/s: none answered 429")
		}
		checkLimited(t, "a burst", first, api.CodeRateLimited)
		// The bucket is the token's: another caller is not limited.
		if a := w.h.do(bob.token, "GET", "/api/v1/whoami", ""); a.status != 200 {
			t.Errorf("another token during carol's burst: %d %s, want 200", a.status, a.body)
		}
		t.Logf("rate limit: %d of 30 requests answered 429", limited)
	})
}

func checkLimited(t *testing.T, what string, a answer, code string) {
	t.Helper()
	var eb api.ErrorBody
	if a.status != http.StatusTooManyRequests || json.Unmarshal([]byte(a.body), &eb) != nil || eb.Error.Code != code || eb.Error.Message == "" {
		t.Errorf("%s: %d %.300s, want 429 %s in JSON", what, a.status, a.body, code)
		return
	}
	n, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || n < 1 {
		t.Errorf("%s: Retry-After %q, want whole seconds >= 1", what, a.header.Get("Retry-After"))
	}
}
