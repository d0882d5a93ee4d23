package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// fixture is a real API server on a real store in a temporary directory,
// with teams research and vision and users of each role:
//
//	admin                     global admin
//	viewer, member, tadmin    research: viewer, member, team-admin
//	bob                       vision: member
type fixture struct {
	t     *testing.T
	st    *store.Store
	srv   *httptest.Server
	dir   string
	token map[string]string // user → token

	mu  sync.Mutex
	now time.Time
}

var fixtureStart = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newFixture(t *testing.T, so store.Options, rl RateLimit, edit ...func(*Options)) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenWith(context.Background(), filepath.Join(dir, "gpufleet.db"), so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, st: st, dir: dir, token: map[string]string{}, now: fixtureStart}
	ctx := context.Background()
	for _, name := range []core.TeamName{"research", "vision"} {
		tm := core.NewTeam(name, fixtureStart)
		tm.Guaranteed = 2000
		if err := st.CreateTeam(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	users := []core.User{
		{Name: "admin", Admin: true},
		{Name: "viewer", Memberships: []core.Membership{{Team: "research", Role: core.RoleViewer}}},
		{Name: "member", Memberships: []core.Membership{{Team: "research", Role: core.RoleMember}}},
		{Name: "tadmin", Memberships: []core.Membership{{Team: "research", Role: core.RoleTeamAdmin}}},
		{Name: "bob", Memberships: []core.Membership{{Team: "vision", Role: core.RoleMember}}},
	}
	for _, u := range users {
		u.CreatedAt = fixtureStart
		tok := NewToken()
		if err := st.CreateUser(ctx, u, core.Token{Name: "first", CreatedAt: fixtureStart}, HashToken(tok)); err != nil {
			t.Fatal(err)
		}
		f.token[u.Name] = tok
	}
	o := Options{Store: st, Logs: noLogs{}, Now: f.clock, OpenAPI: api.OpenAPI, DefaultTeam: "research", RateLimit: rl}
	for _, e := range edit {
		e(&o)
	}
	srv := New(o)
	f.srv = httptest.NewServer(srv)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

type noLogs struct{}

func (noLogs) Logs(core.WorkloadID) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("log line\n")), nil
}

// answer is one exchange: status, body and headers.
type answer struct {
	status int
	body   string
	header http.Header
}

func (a answer) errorBody(t *testing.T) api.Error {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(a.body), &eb); err != nil {
		t.Fatalf("answer %d is not an error body: %q", a.status, a.body)
	}
	return eb.Error
}

// do sends a request as user ("" sends no token).
func (f *fixture) do(user, method, path, body string) answer {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+f.token[user])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), header: resp.Header}
}

// must sends a request that must answer status, and decodes its body into
// out when out is not nil.
func (f *fixture) must(user, method, path, body string, status int, out any) {
	f.t.Helper()
	a := f.do(user, method, path, body)
	if a.status != status {
		f.t.Fatalf("%s %s as %s: %d %s, want %d", method, path, user, a.status, a.body, status)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(a.body), out); err != nil {
			f.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// submit submits a small workload to team as user and returns its ID.
func (f *fixture) submit(user, team string) string {
	f.t.Helper()
	var w api.Workload
	f.must(user, "POST", "/api/v1/workloads", `{"team":"`+team+`","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &w)
	return w.ID
}

func (f *fixture) audit() []core.AuditEntry {
	f.t.Helper()
	es, err := f.st.Audit(context.Background(), store.AuditFilter{Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

func TestRoles(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	bobs := f.submit("bob", "vision")
	ours := f.submit("member", "research")

	t.Run("a viewer cannot submit", func(t *testing.T) {
		a := f.do("viewer", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`)
		e := a.errorBody(t)
		if a.status != http.StatusForbidden || e.Code != api.CodeForbidden || e.Message != "submitting to team research needs the member role; you are a viewer" {
			t.Errorf("%d %+v, want 403 naming the member role", a.status, e)
		}
	})
	t.Run("a viewer cannot cancel", func(t *testing.T) {
		a := f.do("viewer", "DELETE", "/api/v1/workloads/"+ours, "")
		if e := a.errorBody(t); a.status != http.StatusForbidden || !strings.Contains(e.Message, "needs the member role; you are a viewer") {
			t.Errorf("%d %+v, want 403 naming the member role", a.status, e)
		}
	})
	t.Run("a viewer reads its team's workload, events and logs", func(t *testing.T) {
		for _, p := range []string{"", "/events", "/logs"} {
			if a := f.do("viewer", "GET", "/api/v1/workloads/"+ours+p, ""); a.status != http.StatusOK {
				t.Errorf("GET %s: %d %s, want 200", p, a.status, a.body)
			}
		}
	})

	// Another team's workload answers exactly as a missing one.
	for _, r := range []struct{ method, suffix string }{{"GET", ""}, {"GET", "/logs"}, {"GET", "/events"}, {"DELETE", ""}} {
		t.Run("a member of research gets 404 for "+r.method+" vision's workload"+r.suffix, func(t *testing.T) {
			got := f.do("member", r.method, "/api/v1/workloads/"+bobs+r.suffix, "")
			missing := f.do("member", r.method, "/api/v1/workloads/wl-zzzzzzzzzzzz"+r.suffix, "")
			if got.status != http.StatusNotFound {
				t.Fatalf("%d %s, want 404", got.status, got.body)
			}
			if want := strings.ReplaceAll(missing.body, "wl-zzzzzzzzzzzz", bobs); got.body != want {
				t.Errorf("the answer differs from a missing workload's:\n got %s\nwant %s", got.body, want)
			}
		})
	}
	t.Run("vision's workload is still pending", func(t *testing.T) {
		var w api.Workload
		f.must("bob", "GET", "/api/v1/workloads/"+bobs, "", http.StatusOK, &w)
		if w.Status.Phase != api.PhasePending {
			t.Errorf("phase %s, want Pending", w.Status.Phase)
		}
	})
	t.Run("lists hold only the caller's teams", func(t *testing.T) {
		var l api.List[api.Workload]
		f.must("member", "GET", "/api/v1/workloads", "", http.StatusOK, &l)
		if len(l.Items) != 1 || l.Items[0].ID != ours {
			t.Errorf("member lists %+v, want only %s", l.Items, ours)
		}
		var teams api.List[api.Team]
		f.must("bob", "GET", "/api/v1/teams", "", http.StatusOK, &teams)
		if len(teams.Items) != 1 || teams.Items[0].Name != "vision" {
			t.Errorf("bob lists teams %+v, want only vision", teams.Items)
		}
	})

	t.Run("a team-admin manages its team's members", func(t *testing.T) {
		// carol, a person in no team, is one any team-admin may add.
		f.must("admin", "POST", "/api/v1/users", `{"name":"carol"}`, http.StatusCreated, nil)
		var m api.User
		f.must("tadmin", "PUT", "/api/v1/teams/research/members/carol", `{"role":"viewer"}`, http.StatusOK, &m)
		want := api.User{Name: "carol", Memberships: []api.Membership{{Team: "research", Role: "viewer"}}, Teams: []string{"research"}, CreatedAt: fixtureStart}
		if diff := cmp.Diff(want, m); diff != "" {
			t.Errorf("the member (-want +got):\n%s", diff)
		}
		var l api.List[api.User]
		f.must("viewer", "GET", "/api/v1/teams/research/members", "", http.StatusOK, &l)
		var names []string
		for _, u := range l.Items {
			names = append(names, u.Name+"="+u.Memberships[0].Role)
			if len(u.Memberships) != 1 {
				t.Errorf("%s shows %d memberships, want only research's", u.Name, len(u.Memberships))
			}
		}
		if diff := cmp.Diff([]string{"carol=viewer", "member=member", "tadmin=team-admin", "viewer=viewer"}, names); diff != "" {
			t.Errorf("members (-want +got):\n%s", diff)
		}
		f.must("tadmin", "DELETE", "/api/v1/teams/research/members/carol", "", http.StatusNoContent, nil)
		if a := f.do("tadmin", "DELETE", "/api/v1/teams/research/members/carol", ""); a.status != http.StatusNotFound {
			t.Errorf("removing a non-member: %d %s, want 404", a.status, a.body)
		}
		if a := f.do("tadmin", "PUT", "/api/v1/teams/research/members/nobody", `{"role":"member"}`); a.status != http.StatusNotFound {
			t.Errorf("adding an unknown user: %d %s, want 404", a.status, a.body)
		}
		a := f.do("tadmin", "PUT", "/api/v1/teams/research/members/carol", `{"role":"owner"}`)
		if e := a.errorBody(t); a.status != http.StatusBadRequest || len(e.Fields) != 1 || e.Fields[0].Field != "role" {
			t.Errorf("a bad role: %d %+v, want 400 naming role", a.status, e)
		}
	})
	t.Run("a member cannot manage members", func(t *testing.T) {
		a := f.do("member", "PUT", "/api/v1/teams/research/members/bob", `{"role":"member"}`)
		if e := a.errorBody(t); a.status != http.StatusForbidden || e.Message != "managing the members of team research needs the team-admin role; you are a member" {
			t.Errorf("%d %+v, want 403 naming the team-admin role", a.status, e)
		}
	})
	t.Run("another team's members are not found", func(t *testing.T) {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/api/v1/teams/vision/members", ""},
			{"PUT", "/api/v1/teams/vision/members/member", `{"role":"team-admin"}`},
			{"DELETE", "/api/v1/teams/vision/members/bob", ""},
			{"PATCH", "/api/v1/teams/vision", `{"priorityClasses":["production"]}`},
		} {
			got := f.do("tadmin", r.method, r.path, r.body)
			missing := f.do("tadmin", r.method, strings.Replace(r.path, "vision", "nope", 1), r.body)
			if got.status != http.StatusNotFound || got.body != strings.Replace(missing.body, "nope", "vision", 1) {
				t.Errorf("%s %s: %d %s, want the 404 of a missing team (%s)", r.method, r.path, got.status, got.body, missing.body)
			}
		}
	})

	t.Run("a member cannot set the priority classes", func(t *testing.T) {
		a := f.do("member", "PATCH", "/api/v1/teams/research", `{"priorityClasses":["production","training"]}`)
		if e := a.errorBody(t); a.status != http.StatusForbidden || !strings.Contains(e.Message, "needs the team-admin role; you are a member") {
			t.Errorf("%d %+v, want 403", a.status, e)
		}
	})
	t.Run("only an admin changes the quota", func(t *testing.T) {
		for _, user := range []string{"tadmin", "viewer"} {
			a := f.do(user, "PATCH", "/api/v1/teams/research", `{"guaranteedMilliGPU":8000}`)
			want := "changing the quota of team research (guaranteedMilliGPU) needs the admin role; a team-admin may change only priorityClasses"
			if e := a.errorBody(t); a.status != http.StatusForbidden || e.Message != want {
				t.Errorf("as %s: %d %+v, want 403 %q", user, a.status, e, want)
			}
		}
		if a := f.do("bob", "PATCH", "/api/v1/teams/research", `{"guaranteedMilliGPU":8000}`); a.status != http.StatusNotFound {
			t.Errorf("as another team's member: %d %s, want 404", a.status, a.body)
		}
		f.must("admin", "PATCH", "/api/v1/teams/research", `{"weight":2}`, http.StatusOK, nil)
	})
	t.Run("an unknown class is refused naming it", func(t *testing.T) {
		a := f.do("tadmin", "PATCH", "/api/v1/teams/research", `{"priorityClasses":["training","urgent"]}`)
		if e := a.errorBody(t); a.status != http.StatusBadRequest || len(e.Fields) != 1 || e.Fields[0].Field != "priorityClasses[1]" {
			t.Errorf("%d %+v, want 400 naming priorityClasses[1]", a.status, e)
		}
	})

	prod := `{"team":"research","priority":"production","command":["true"],"resources":{"gpus":1}}`
	t.Run("production not granted is refused and nothing is stored", func(t *testing.T) {
		a := f.do("member", "POST", "/api/v1/workloads", prod)
		want := "team research may not use priority class production (allowed: training, development, batch); a team-admin or an admin can grant it"
		if e := a.errorBody(t); a.status != http.StatusForbidden || e.Code != api.CodeForbidden || e.Message != want {
			t.Errorf("%d %+v, want 403 %q", a.status, e, want)
		}
		var l api.List[api.Workload]
		f.must("admin", "GET", "/api/v1/workloads?team=research", "", http.StatusOK, &l)
		if len(l.Items) != 1 {
			t.Errorf("%d workloads in research, want only the one submitted before", len(l.Items))
		}
	})
	t.Run("a team-admin grants production, within the guarantee", func(t *testing.T) {
		var tm api.Team
		f.must("tadmin", "PATCH", "/api/v1/teams/research", `{"priorityClasses":["production","training"]}`, http.StatusOK, &tm)
		if diff := cmp.Diff([]string{"production", "training"}, tm.PriorityClasses); diff != "" {
			t.Errorf("classes (-want +got):\n%s", diff)
		}
		f.must("member", "POST", "/api/v1/workloads", prod, http.StatusCreated, nil)
		a := f.do("member", "POST", "/api/v1/workloads", `{"team":"research","priority":"production","command":["true"],"resources":{"gpus":4}}`)
		if e := a.errorBody(t); a.status != http.StatusBadRequest || e.Fields[0].Field != "priority" {
			t.Errorf("production beyond the guarantee: %d %+v, want 400 naming priority", a.status, e)
		}
		a = f.do("member", "POST", "/api/v1/workloads", `{"team":"research","priority":"development","command":["true"],"resources":{"gpus":1}}`)
		if a.status != http.StatusForbidden {
			t.Errorf("development, no longer granted: %d %s, want 403", a.status, a.body)
		}
		var reset api.Team
		f.must("tadmin", "PATCH", "/api/v1/teams/research", `{"priorityClasses":[]}`, http.StatusOK, &reset)
		if reset.PriorityClasses != nil {
			t.Errorf("after [], classes %v, want the default (none named)", reset.PriorityClasses)
		}
	})

	t.Run("fields the server owns are refused naming them", func(t *testing.T) {
		for field, body := range map[string]string{
			"createdAt": `{"command":["true"],"resources":{"gpus":1},"createdAt":"2025-01-01T00:00:00Z"}`,
			"status":    `{"command":["true"],"resources":{"gpus":1},"status":{"reason":"Done"}}`,
			"owner":     `{"command":["true"],"resources":{"gpus":1},"owner":"bob"}`,
			"id":        `{"command":["true"],"resources":{"gpus":1},"id":"wl-aaaaaaaaaaaa"}`,
		} {
			a := f.do("member", "POST", "/api/v1/workloads", body)
			e := a.errorBody(t)
			if a.status != http.StatusBadRequest || !slices.ContainsFunc(e.Fields, func(fe api.FieldError) bool { return fe.Field == field }) {
				t.Errorf("%s set: %d %+v, want 400 naming it", field, a.status, e)
			}
		}
	})
	t.Run("a workload cannot be changed after submission", func(t *testing.T) {
		for _, m := range []string{"PUT", "PATCH"} {
			a := f.do("member", m, "/api/v1/workloads/"+ours, `{"team":"vision"}`)
			if a.status != http.StatusMethodNotAllowed {
				t.Errorf("%s on a workload: %d %s, want 405", m, a.status, a.body)
			}
		}
	})
	t.Run("only an admin creates teams and lists users and the audit trail", func(t *testing.T) {
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/api/v1/teams", `{"name":"evil"}`},
			{"GET", "/api/v1/users", ""},
			{"GET", "/api/v1/audit", ""},
		} {
			if a := f.do("tadmin", r.method, r.path, r.body); a.status != http.StatusForbidden {
				t.Errorf("%s %s as a team-admin: %d %s, want 403", r.method, r.path, a.status, a.body)
			}
			if a := f.do("admin", r.method, r.path, r.body); a.status/100 != 2 {
				t.Errorf("%s %s as the admin: %d %s, want 2xx", r.method, r.path, a.status, a.body)
			}
		}
	})
	t.Run("a user reads itself, and nobody else", func(t *testing.T) {
		var u api.User
		f.must("member", "GET", "/api/v1/users/member", "", http.StatusOK, &u)
		if u.Name != "member" || len(u.Memberships) != 1 {
			t.Errorf("got %+v", u)
		}
		got, missing := f.do("member", "GET", "/api/v1/users/bob", ""), f.do("member", "GET", "/api/v1/users/nobody", "")
		if got.status != http.StatusNotFound || got.body != strings.Replace(missing.body, "nobody", "bob", 1) {
			t.Errorf("another user: %d %s, want the 404 of a missing one", got.status, got.body)
		}
	})
}

func TestServiceAccountsAndTokens(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})

	t.Run("a team-admin creates a service account in its team", func(t *testing.T) {
		var u api.User
		f.must("tadmin", "POST", "/api/v1/users", `{"name":"research.ci","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`, http.StatusCreated, &u)
		if u.Token == "" || !u.ServiceAccount {
			t.Fatalf("got %+v, want a service account with its token", u)
		}
		f.token["ci"] = u.Token
		f.must("ci", "POST", "/api/v1/workloads", `{"command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, nil)
	})
	refusals := []struct {
		name, body string
		status     int
	}{
		{"a person", `{"name":"eve","memberships":[{"team":"research","role":"member"}]}`, http.StatusForbidden},
		{"an admin", `{"name":"eve","admin":true,"serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`, http.StatusForbidden},
		{"in another team", `{"name":"vision.eve","serviceAccount":true,"memberships":[{"team":"vision","role":"member"}]}`, http.StatusNotFound},
		{"in no team", `{"name":"research.eve","serviceAccount":true}`, http.StatusBadRequest},
		{"in two teams", `{"name":"research.eve","serviceAccount":true,"memberships":[{"team":"research","role":"member"},{"team":"vision","role":"member"}]}`, http.StatusBadRequest},
		{"not named after its team", `{"name":"eve","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`, http.StatusBadRequest},
		{"named after another team", `{"name":"vision.eve","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`, http.StatusBadRequest},
	}
	for _, r := range refusals {
		t.Run("a team-admin cannot create "+r.name, func(t *testing.T) {
			if a := f.do("tadmin", "POST", "/api/v1/users", r.body); a.status != r.status {
				t.Errorf("%d %s, want %d", a.status, a.body, r.status)
			}
		})
	}
	t.Run("a member cannot create a service account", func(t *testing.T) {
		a := f.do("member", "POST", "/api/v1/users", `{"name":"eve","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`)
		if e := a.errorBody(t); a.status != http.StatusForbidden || !strings.Contains(e.Message, "needs the team-admin role; you are a member") {
			t.Errorf("%d %+v, want 403", a.status, e)
		}
	})

	var tok api.Token
	t.Run("a token for oneself, shown once, with an expiry", func(t *testing.T) {
		f.must("member", "POST", "/api/v1/tokens", `{"name":"laptop","expiresIn":"720h"}`, http.StatusCreated, &tok)
		if tok.Token == "" || tok.ID == "" || tok.User != "member" || tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(fixtureStart.Add(720*time.Hour)) {
			t.Fatalf("got %+v", tok)
		}
		var l api.List[api.Token]
		f.must("member", "GET", "/api/v1/tokens", "", http.StatusOK, &l)
		if len(l.Items) != 2 || strings.Contains(fmtJSON(l), tok.Token) {
			t.Errorf("member's tokens %+v: want 2, without the token text", l.Items)
		}
		f.token["laptop"] = tok.Token
		f.must("laptop", "GET", "/api/v1/whoami", "", http.StatusOK, nil)
	})
	t.Run("fields the server owns are refused", func(t *testing.T) {
		for _, field := range []string{"id", "token", "createdAt"} {
			body := map[string]string{"id": `{"id":"tok-x"}`, "token": `{"token":"gpf_x"}`, "createdAt": `{"createdAt":"2025-01-01T00:00:00Z"}`}[field]
			a := f.do("member", "POST", "/api/v1/tokens", body)
			if e := a.errorBody(t); a.status != http.StatusBadRequest || e.Fields[0].Field != field {
				t.Errorf("%s: %d %+v, want 400 naming it", field, a.status, e)
			}
		}
	})
	t.Run("tokens of others", func(t *testing.T) {
		if a := f.do("member", "POST", "/api/v1/tokens", `{"user":"viewer"}`); a.status != http.StatusForbidden {
			t.Errorf("a member making a teammate's token: %d %s, want 403", a.status, a.body)
		}
		if a := f.do("member", "POST", "/api/v1/tokens", `{"user":"bob"}`); a.status != http.StatusNotFound {
			t.Errorf("a member making a stranger's token: %d %s, want 404", a.status, a.body)
		}
		f.must("tadmin", "POST", "/api/v1/tokens", `{"user":"research.ci","name":"pipeline"}`, http.StatusCreated, nil)
		if a := f.do("tadmin", "POST", "/api/v1/tokens", `{"user":"member"}`); a.status != http.StatusForbidden {
			t.Errorf("a team-admin making a person's token: %d %s, want 403", a.status, a.body)
		}
		var l api.List[api.Token]
		f.must("tadmin", "GET", "/api/v1/tokens?user=research.ci", "", http.StatusOK, &l)
		if len(l.Items) != 2 {
			t.Errorf("ci's tokens seen by its team-admin: %+v, want 2", l.Items)
		}
		got, missing := f.do("bob", "DELETE", "/api/v1/tokens/"+tok.ID, ""), f.do("bob", "DELETE", "/api/v1/tokens/tok-zzzzzzzzzz", "")
		if got.status != http.StatusNotFound || got.body != strings.Replace(missing.body, "tok-zzzzzzzzzz", tok.ID, 1) {
			t.Errorf("bob revoking member's token: %d %s, want the 404 of a missing token", got.status, got.body)
		}
	})
	t.Run("a revoked token authenticates nobody", func(t *testing.T) {
		f.must("member", "DELETE", "/api/v1/tokens/"+tok.ID, "", http.StatusNoContent, nil)
		if a := f.do("laptop", "GET", "/api/v1/whoami", ""); a.status != http.StatusUnauthorized {
			t.Errorf("revoked token: %d %s, want 401", a.status, a.body)
		}
	})
	t.Run("an expired token authenticates nobody", func(t *testing.T) {
		var short api.Token
		f.must("member", "POST", "/api/v1/tokens", `{"expiresIn":"1h"}`, http.StatusCreated, &short)
		f.token["short"] = short.Token
		f.must("short", "GET", "/api/v1/whoami", "", http.StatusOK, nil)
		f.advance(2 * time.Hour)
		if a := f.do("short", "GET", "/api/v1/whoami", ""); a.status != http.StatusUnauthorized {
			t.Errorf("expired token: %d %s, want 401", a.status, a.body)
		}
	})
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestRateLimit(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{RequestsPerSecond: 2, Burst: 3})
	for i := range 3 {
		f.must("member", "GET", "/api/v1/whoami", "", http.StatusOK, nil)
		_ = i
	}
	a := f.do("member", "GET", "/api/v1/whoami", "")
	if e := a.errorBody(t); a.status != http.StatusTooManyRequests || e.Code != api.CodeRateLimited || a.header.Get("Retry-After") != "1" {
		t.Errorf("the 4th request at once: %d Retry-After=%q %+v, want 429 rate_limited with Retry-After: 1", a.status, a.header.Get("Retry-After"), e)
	}
	t.Run("the bucket is the token's", func(t *testing.T) {
		f.must("viewer", "GET", "/api/v1/whoami", "", http.StatusOK, nil)
	})
	t.Run("admins are not limited", func(t *testing.T) {
		for range 10 {
			f.must("admin", "GET", "/api/v1/whoami", "", http.StatusOK, nil)
		}
	})
	t.Run("it refills at the rate", func(t *testing.T) {
		f.advance(500 * time.Millisecond)
		f.must("member", "GET", "/api/v1/whoami", "", http.StatusOK, nil)
		if a := f.do("member", "GET", "/api/v1/whoami", ""); a.status != http.StatusTooManyRequests {
			t.Errorf("second request after one interval: %d, want 429", a.status)
		}
	})
	t.Run("requests without a valid token share their address's bucket", func(t *testing.T) {
		var got []int
		for range 4 {
			got = append(got, f.do("", "GET", "/api/v1/whoami", "").status)
		}
		if diff := cmp.Diff([]int{401, 401, 401, 429}, got); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
	})
	t.Run("a refused write is audited", func(t *testing.T) {
		for range 5 {
			f.do("member", "POST", "/api/v1/workloads", `{"command":["true"],"resources":{"gpus":1}}`)
		}
		var limited int
		for _, e := range f.audit() {
			if e.Status == http.StatusTooManyRequests && e.User == "member" && e.Action == "create workload" {
				limited++
			}
		}
		if limited == 0 {
			t.Errorf("no audit entry for a submit refused with 429: %+v", f.audit())
		}
	})
}

func TestLimiterWaits(t *testing.T) {
	l := newLimiter(4, 2) // an interval of 250 ms
	now := fixtureStart
	for i := range 2 {
		if _, ok := l.allow("k", now); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	wait, ok := l.allow("k", now)
	if ok || wait != 250*time.Millisecond {
		t.Errorf("beyond the burst: ok %t wait %v, want refused for 250ms", ok, wait)
	}
	if _, ok := l.allow("k", now.Add(wait)); !ok {
		t.Errorf("after the wait: refused")
	}
	l.sweep(now.Add(time.Hour))
	if l.len() != 0 {
		t.Errorf("%d buckets kept after an idle hour, want none", l.len())
	}
}

func TestPendingLimits(t *testing.T) {
	f := newFixture(t, store.Options{MaxPendingPerTeam: 3, MaxPendingPerUser: 2}, RateLimit{})
	f.submit("member", "research")
	f.submit("member", "research")
	a := f.do("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`)
	if e := a.errorBody(t); a.status != http.StatusTooManyRequests || e.Code != api.CodeLimitReached || a.header.Get("Retry-After") != "10" ||
		!strings.Contains(e.Message, "user member has 2 pending workloads") {
		t.Errorf("a third pending workload: %d Retry-After=%q %+v, want 429 limit_reached, Retry-After: 10", a.status, a.header.Get("Retry-After"), e)
	}
	// The admin is not bound per user, but the team bound holds.
	f.submit("admin", "research")
	a = f.do("admin", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`)
	if e := a.errorBody(t); a.status != http.StatusTooManyRequests || !strings.Contains(e.Message, "team research has 3 pending workloads") {
		t.Errorf("the team's fourth: %d %+v, want 429 naming the team", a.status, e)
	}
}

func TestAuditTrail(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	id := f.submit("member", "research")
	f.do("viewer", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1}}`)
	f.do("bob", "DELETE", "/api/v1/workloads/"+id, "")
	f.do("", "POST", "/api/v1/workloads", `{"command":["true"],"resources":{"gpus":1}}`)
	var tok api.Token
	f.must("member", "POST", "/api/v1/tokens", `{"name":"ci"}`, http.StatusCreated, &tok)
	f.must("member", "GET", "/api/v1/workloads/"+id, "", http.StatusOK, nil) // reads are not audited

	type entry struct {
		User, Role, Action, Method, Path, Object, Team string
		Status                                         int
		Message                                        string
	}
	var got []entry
	var l api.List[api.AuditEntry]
	f.must("admin", "GET", "/api/v1/audit", "", http.StatusOK, &l)
	for _, e := range l.Items {
		if e.Time.IsZero() {
			t.Errorf("entry %d has no time", e.ID)
		}
		got = append(got, entry{e.User, e.Role, e.Action, e.Method, e.Path, e.Object, e.Team, e.Status, e.Message})
	}
	want := []entry{
		{"member", "member", "create workload", "POST", "/api/v1/workloads", id, "research", 201, ""},
		{"viewer", "viewer", "create workload", "POST", "/api/v1/workloads", "", "research", 403, "submitting to team research needs the member role; you are a viewer"},
		{"bob", "", "cancel workload", "DELETE", "/api/v1/workloads/" + id, id, "research", 404, "workload " + id + ": not found"},
		{"", "", "create workload", "POST", "/api/v1/workloads", "", "", 401, "a valid token is required: send Authorization: Bearer TOKEN"},
		{"member", "", "create token", "POST", "/api/v1/tokens", tok.ID, "", 201, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit trail (-want +got):\n%s", diff)
	}

	t.Run("filtered and paged", func(t *testing.T) {
		var page1, page2 api.List[api.AuditEntry]
		f.must("admin", "GET", "/api/v1/audit?user=member&limit=1", "", http.StatusOK, &page1)
		if len(page1.Items) != 1 || page1.NextPageToken == "" {
			t.Fatalf("page 1: %+v", page1)
		}
		f.must("admin", "GET", "/api/v1/audit?user=member&limit=1&pageToken="+page1.NextPageToken, "", http.StatusOK, &page2)
		if len(page2.Items) != 1 || page2.Items[0].Object != tok.ID {
			t.Errorf("page 2: %+v, want the token's creation", page2)
		}
		var later api.List[api.AuditEntry]
		f.must("admin", "GET", "/api/v1/audit?since="+fixtureStart.Add(time.Minute).Format(time.RFC3339), "", http.StatusOK, &later)
		if len(later.Items) != 0 {
			t.Errorf("entries after the clock: %+v, want none", later.Items)
		}
	})

	t.Run("no token in the store in plain text", func(t *testing.T) {
		f.st.Close()
		var files []byte
		for _, name := range []string{"gpufleet.db", "gpufleet.db-wal"} {
			b, _ := os.ReadFile(filepath.Join(f.dir, name))
			files = append(files, b...)
		}
		if len(files) == 0 {
			t.Fatal("the store files are empty")
		}
		for user, tk := range map[string]string{"member": f.token["member"], "the new one": tok.Token} {
			if bytes.Contains(files, []byte(tk)) {
				t.Errorf("the token of %s is in the store", user)
			}
		}
		if bytes.Contains(files, []byte("gpf_")) {
			t.Errorf("something like a token (gpf_...) is in the store")
		}
	})
}

// TestTableIsComplete: every route is in the table with what serve needs
// to authorize and audit it.
func TestTableIsComplete(t *testing.T) {
	for _, rt := range table {
		t.Run(rt.pattern, func(t *testing.T) {
			method, _ := splitRoute(rt.pattern)
			if (rt.serve == nil) == (rt.stream == nil) {
				t.Errorf("want exactly one of serve and stream")
			}
			if mutating(strings.ToUpper(method)) && (rt.action == "" || rt.ok == 0) {
				t.Errorf("a mutating route needs an audit action and its success status")
			}
			switch rt.access {
			case teamRole:
				if rt.need == "" {
					t.Errorf("a team route needs a role")
				}
				if rt.need != core.RoleViewer && !strings.Contains(rt.doing, "%s") {
					t.Errorf("a team route that can refuse needs a doing with the team")
				}
			case adminOnly:
				if rt.doing == "" {
					t.Errorf("an admin route needs a doing for its 403")
				}
			case anyCaller, userScope:
			default:
				t.Errorf("no access")
			}
		})
	}
}
