package apiserver

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// sessionDeadline is how soon after its rights are lost an open stream
// must end.
const sessionDeadline = 5 * time.Second

// logStream is an open GET .../logs?follow=true, read line by line.
type logStream struct {
	lines chan string // closed at the stream's end
}

// follow opens the followed log of workload id on srv with token.
func follow(t *testing.T, srv *httptest.Server, token, id string) *logStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/workloads/"+id+"/logs?follow=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("follow the log of %s: %s", id, resp.Status)
	}
	ls := &logStream{lines: make(chan string, 1000)}
	go func() {
		defer close(ls.lines)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				ls.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return ls
}

// next returns the stream's next line; it fails t if none comes within d
// or the stream ends.
func (ls *logStream) next(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-ls.lines:
		if !ok {
			t.Fatal("the stream ended")
		}
		return line
	case <-time.After(d):
		t.Fatalf("no line in %s", d)
	}
	return ""
}

// end reads the stream to its end and returns its last line; it fails t
// if the stream lasts d more.
func (ls *logStream) end(t *testing.T, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	last := ""
	for {
		select {
		case line, ok := <-ls.lines:
			if !ok {
				return last
			}
			last = line
		case <-deadline:
			t.Fatalf("the stream still runs %s later (last line %q)", d, last)
		}
	}
}

// newToken makes a token for user (as user) and returns it.
func (f *fixture) newToken(user, body string) api.Token {
	f.t.Helper()
	var tok api.Token
	f.must(user, "POST", "/api/v1/tokens", body, http.StatusCreated, &tok)
	return tok
}

// A followed log ends within sessionDeadline of its rights being lost,
// whoever loses them and however, with a last line that says why; one
// whose role is still enough goes on.
func TestFollowedLogEndsWithItsRights(t *testing.T) {
	for _, tc := range []struct {
		name string
		user string
		lose func(f *fixture, tok api.Token)
		want string
	}{
		{"token revoked", "member", func(f *fixture, tok api.Token) {
			f.must("admin", "DELETE", "/api/v1/tokens/"+tok.ID, "", http.StatusNoContent, nil)
		}, "the token was revoked"},
		{"token revoked by its user", "viewer", func(f *fixture, tok api.Token) {
			f.must("viewer", "DELETE", "/api/v1/tokens/"+tok.ID, "", http.StatusNoContent, nil)
		}, "the token was revoked"},
		{"token expired", "member", func(f *fixture, tok api.Token) {
			f.advance(2 * time.Hour) // the watcher's own tick sees it: nothing was written
		}, "the token expired"},
		{"user deleted", "member", func(f *fixture, tok api.Token) {
			f.must("admin", "DELETE", "/api/v1/users/member", "", http.StatusNoContent, nil)
		}, "the user member was deleted"},
		{"removed from the team", "viewer", func(f *fixture, tok api.Token) {
			f.must("tadmin", "DELETE", "/api/v1/teams/research/members/viewer", "", http.StatusNoContent, nil)
		}, "viewer is no longer in team research"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, store.Options{}, RateLimit{})
			// Pending (nothing runs it), its log is followed until the
			// stream's rights are lost.
			id := f.submit("admin", "research")
			tok := f.newToken(tc.user, `{"name":"stream","expiresIn":"1h"}`)
			ls := follow(t, f.srv, tok.Token, id)
			if got := ls.next(t, 5*time.Second); got != "log line\n" {
				t.Fatalf("first line %q", got)
			}
			lost := time.Now()
			tc.lose(f, tok)
			last := ls.end(t, sessionDeadline)
			if want := closeLine(tc.want); last != want {
				t.Errorf("last line %q, want %q", last, want)
			}
			t.Logf("ended %s after", time.Since(lost).Round(time.Millisecond))
		})
	}
}

// A stream whose user keeps the role it needs goes on: a member made a
// viewer still follows a log (a viewer's right) and sees what comes.
func TestFollowedLogOutlivesAChangeThatKeepsItsRight(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := f.submit("member", "research")
	srv := New(Options{Store: f.st, Logs: fileLogs(path), Now: f.clock, OpenAPI: api.OpenAPI, DefaultTeam: "research"})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ls := follow(t, hs, f.token["member"], id)
	if got := ls.next(t, 5*time.Second); got != "before\n" {
		t.Fatalf("first line %q", got)
	}
	f.must("tadmin", "PUT", "/api/v1/teams/research/members/member", `{"role":"viewer"}`, http.StatusOK, nil)
	srv.sessions.recheck() // ends now what it ends at all
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString("after\n")
	fh.Close()
	if got := ls.next(t, 5*time.Second); got != "after\n" {
		t.Errorf("after the demotion to viewer: %q, want the log to go on", got)
	}
	// Out of the team, it ends.
	f.must("tadmin", "DELETE", "/api/v1/teams/research/members/member", "", http.StatusNoContent, nil)
	if last, want := ls.end(t, sessionDeadline), closeLine("member is no longer in team research"); last != want {
		t.Errorf("last line %q, want %q", last, want)
	}
}

// Two servers share a PostgreSQL store: a token revoked through one ends,
// within sessionDeadline, the stream it holds open on the other, although
// that one's cache of token lookups still holds the token (it is the
// watcher's own read that sees the change).
func TestFollowedLogEndsWhenRevokedOnAnotherServer(t *testing.T) {
	dsn := pgtest.DB(t)
	ctx := context.Background()
	open := func() *store.Store {
		st, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	stA, stB := open(), open()
	if err := stA.CreateTeam(ctx, core.NewTeam("research", time.Now())); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, u := range []core.User{
		{Name: "admin", Admin: true},
		{Name: "member", Memberships: []core.Membership{{Team: "research", Role: core.RoleMember}}},
	} {
		u.CreatedAt = time.Now()
		tokens[u.Name] = NewToken()
		if err := stA.CreateUser(ctx, u, core.Token{Name: "first", CreatedAt: u.CreatedAt}, HashToken(tokens[u.Name])); err != nil {
			t.Fatal(err)
		}
	}
	serve := func(st *store.Store) *httptest.Server {
		hs := httptest.NewServer(New(Options{Store: st, Logs: noLogs{}, OpenAPI: api.OpenAPI, DefaultTeam: "research"}))
		t.Cleanup(hs.Close)
		return hs
	}
	a, b := serve(stA), serve(stB)
	c := api.NewClient(a.URL, tokens["member"])
	w, err := c.SubmitWorkload(ctx, &api.Workload{Team: "research", Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ls := follow(t, b, tokens["member"], w.ID)
	if got := ls.next(t, 5*time.Second); got != "log line\n" {
		t.Fatalf("first line %q", got)
	}
	mine, err := c.Tokens(ctx, "")
	if err != nil || len(mine) != 1 {
		t.Fatalf("member's tokens: %v %v", mine, err)
	}
	revoked := time.Now()
	if err := api.NewClient(a.URL, tokens["admin"]).RevokeToken(ctx, mine[0].ID); err != nil {
		t.Fatal(err)
	}
	if last, want := ls.end(t, sessionDeadline), closeLine("the token was revoked"); last != want {
		t.Errorf("last line %q, want %q", last, want)
	}
	t.Logf("ended %s after the revocation on the other server", time.Since(revoked).Round(time.Millisecond))
}

// What a session is denied for, from its token and user as the store has
// them now.
func TestSessionDenied(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Hour)
	member := &core.User{Name: "mia", Memberships: []core.Membership{{Team: "research", Role: core.RoleMember}}}
	viewer := &core.User{Name: "mia", Memberships: []core.Membership{{Team: "research", Role: core.RoleViewer}}}
	admin := &core.User{Name: "root", Admin: true}
	reader := &core.User{Name: "prom", ServiceAccount: true, MetricsReader: true}
	holder := func(u *core.User, tok core.Token) store.TokenHolder { return store.TokenHolder{Token: tok, User: u} }
	needs := func(role core.Role) []teamNeed { return []teamNeed{{"research", role}} }
	for _, tc := range []struct {
		name  string
		s     *session
		h     store.TokenHolder
		found bool
		want  string
	}{
		{"valid", &session{user: "mia", needs: needs(core.RoleMember)}, holder(member, core.Token{ExpiresAt: &future}), true, ""},
		{"gone", &session{user: "mia"}, store.TokenHolder{}, false, "the user mia was deleted"},
		{"revoked", &session{user: "mia"}, holder(member, core.Token{RevokedAt: &past}), true, "the token was revoked"},
		{"expired", &session{user: "mia"}, holder(member, core.Token{ExpiresAt: &now}), true, "the token expired"},
		{"revoked and expired", &session{user: "mia"}, holder(member, core.Token{RevokedAt: &past, ExpiresAt: &past}), true, "the token was revoked"},
		{"demoted below the need", &session{user: "mia", needs: needs(core.RoleMember)}, holder(viewer, core.Token{}), true,
			"mia is now a viewer of team research; this needs the member role"},
		{"demoted, still enough", &session{user: "mia", needs: needs(core.RoleViewer)}, holder(viewer, core.Token{}), true, ""},
		{"out of the team", &session{user: "mia", needs: needs(core.RoleViewer)}, holder(&core.User{Name: "mia"}, core.Token{}), true,
			"mia is no longer in team research"},
		{"admin in no team", &session{user: "root", needs: needs(core.RoleMember)}, holder(admin, core.Token{}), true, ""},
		{"admin route, admin", &session{user: "root", admin: true}, holder(admin, core.Token{}), true, ""},
		{"admin route, no longer admin", &session{user: "root", admin: true}, holder(&core.User{Name: "root"}, core.Token{}), true, "root is no longer an admin"},
		{"scrape route, metrics reader", &session{user: "prom", admin: true, scrape: true}, holder(reader, core.Token{}), true, ""},
		{"admin route, metrics reader", &session{user: "prom", admin: true}, holder(reader, core.Token{}), true, "prom is no longer an admin"},
	} {
		if got := tc.s.denied(tc.h, tc.found, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
