package cli

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// The fake's users, roles, tokens and audit trail, after the HTTP contract
// of issue 5: a team that the caller cannot see answers 404, a role too
// weak in the caller's own team 403.

// fakeToken is a token record with its secret.
type fakeToken struct {
	rec    api.Token
	secret string
}

// tenancyRoutes registers the users, members, tokens and audit endpoints.
func (f *fakeServer) tenancyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/users", f.listUsers)
	mux.HandleFunc("GET /api/v1/users/{name}", f.getUser)
	mux.HandleFunc("GET /api/v1/teams/{name}/members", f.listMembers)
	mux.HandleFunc("PUT /api/v1/teams/{name}/members/{user}", f.setMember)
	mux.HandleFunc("DELETE /api/v1/teams/{name}/members/{user}", f.removeMember)
	mux.HandleFunc("POST /api/v1/tokens", f.createToken)
	mux.HandleFunc("GET /api/v1/tokens", f.listTokens)
	mux.HandleFunc("DELETE /api/v1/tokens/{id}", f.revokeToken)
	mux.HandleFunc("GET /api/v1/audit", f.listAudit)
}

// addUser stores a user with a token; Teams follows Memberships. The
// caller holds the lock, or the server is not serving yet.
func (f *fakeServer) addUser(u api.User, token, tokenName string) *api.User {
	u.Token = ""
	u.Teams = nil
	for _, m := range u.Memberships {
		u.Teams = append(u.Teams, m.Team)
	}
	p := &u
	f.people = append(f.people, p)
	f.addToken(p.Name, token, tokenName, nil)
	return p
}

func (f *fakeServer) addToken(user, secret, name string, expires *time.Time) *fakeToken {
	t := &fakeToken{secret: secret, rec: api.Token{
		ID: "tok-" + strconv.Itoa(len(f.tokens)+1), Name: name, User: user, CreatedAt: testNow.Add(-time.Hour), ExpiresAt: expires,
	}}
	f.tokens = append(f.tokens, t)
	f.users[secret] = f.person(user)
	return t
}

// addTenancyUser adds a user with a token, for tests.
func (f *fakeServer) addTenancyUser(u api.User, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addUser(u, token, "")
}

func (f *fakeServer) person(name string) *api.User {
	for _, u := range f.people {
		if u.Name == name {
			return u
		}
	}
	return nil
}

// requests returns the requests so far, "METHOD URI BODY", those whose
// URI starts with prefix.
func (f *fakeServer) requests(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if _, uri, _ := strings.Cut(c, " "); strings.HasPrefix(uri, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func fakeRole(u *api.User, team string) string {
	for _, m := range u.Memberships {
		if m.Team == team {
			return m.Role
		}
	}
	return ""
}

// visibleTeam answers 404 and returns false when the caller cannot see
// the team, as if it did not exist.
func (f *fakeServer) visibleTeam(w http.ResponseWriter, u *api.User, team string) bool {
	if !f.teamExists(team) || !u.Admin && fakeRole(u, team) == "" {
		replyError(w, 404, api.CodeNotFound, fmt.Sprintf("team %q not found", team))
		return false
	}
	return true
}

// fakePage answers one page of items, fakePageSize at most, with pageToken
// "after-N" and ?limit=.
func fakePage[T any](w http.ResponseWriter, r *http.Request, items []T) {
	q := r.URL.Query()
	limit := fakePageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			replyError(w, 400, api.CodeInvalid, "bad limit", api.FieldError{Field: "limit", Problem: "must be a positive number"})
			return
		}
		limit = min(n, fakePageSize)
	}
	start, _ := strconv.Atoi(strings.TrimPrefix(q.Get("pageToken"), "after-"))
	out := api.List[T]{Items: []T{}}
	if start < len(items) {
		end := min(start+limit, len(items))
		out.Items = items[start:end]
		if end < len(items) {
			out.NextPageToken = "after-" + strconv.Itoa(end)
		}
	}
	reply(w, 200, out)
}

func (f *fakeServer) listUsers(w http.ResponseWriter, r *http.Request) {
	if !f.caller(r).Admin {
		replyError(w, 403, api.CodeForbidden, "listing users needs the admin role")
		return
	}
	var us []api.User
	for _, u := range f.people {
		us = append(us, *u)
	}
	fakePage(w, r, us)
}

func (f *fakeServer) getUser(w http.ResponseWriter, r *http.Request) {
	u, caller := f.person(r.PathValue("name")), f.caller(r)
	if u == nil || !caller.Admin && caller.Name != u.Name {
		replyError(w, 404, api.CodeNotFound, fmt.Sprintf("user %q not found", r.PathValue("name")))
		return
	}
	reply(w, 200, u)
}

func (f *fakeServer) listMembers(w http.ResponseWriter, r *http.Request) {
	team := r.PathValue("name")
	if !f.visibleTeam(w, f.caller(r), team) {
		return
	}
	var us []api.User
	for _, u := range f.people {
		if role := fakeRole(u, team); role != "" {
			m := *u
			m.Memberships, m.Teams = []api.Membership{{Team: team, Role: role}}, []string{team}
			us = append(us, m)
		}
	}
	fakePage(w, r, us)
}

// teamAdmin answers 404 or 403 and returns false unless the caller may
// manage team's members.
func (f *fakeServer) teamAdmin(w http.ResponseWriter, u *api.User, team string) bool {
	if !f.visibleTeam(w, u, team) {
		return false
	}
	if role := fakeRole(u, team); !u.Admin && role != api.RoleTeamAdmin {
		replyError(w, 403, api.CodeForbidden, fmt.Sprintf("managing the members of team %s needs the team-admin role; you are a %s", team, role))
		return false
	}
	return true
}

func (f *fakeServer) setMember(w http.ResponseWriter, r *http.Request) {
	team := r.PathValue("name")
	if !f.teamAdmin(w, f.caller(r), team) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	var in struct {
		Role string `json:"role"`
	}
	if !decodeStrict(w, body, &in) {
		return
	}
	if !slices.Contains([]string{api.RoleViewer, api.RoleMember, api.RoleTeamAdmin}, in.Role) {
		replyError(w, 400, api.CodeInvalid, "invalid role", api.FieldError{Field: "role", Problem: "want viewer, member or team-admin"})
		return
	}
	u := f.person(r.PathValue("user"))
	if u == nil {
		replyError(w, 404, api.CodeNotFound, fmt.Sprintf("user %q not found", r.PathValue("user")))
		return
	}
	i := slices.IndexFunc(u.Memberships, func(m api.Membership) bool { return m.Team == team })
	if i < 0 {
		u.Memberships = append(u.Memberships, api.Membership{Team: team})
		u.Teams = append(u.Teams, team)
		i = len(u.Memberships) - 1
	}
	u.Memberships[i].Role = in.Role
	out := *u
	out.Memberships, out.Teams = []api.Membership{{Team: team, Role: in.Role}}, []string{team}
	reply(w, 200, out)
}

func (f *fakeServer) removeMember(w http.ResponseWriter, r *http.Request) {
	team := r.PathValue("name")
	if !f.teamAdmin(w, f.caller(r), team) {
		return
	}
	u := f.person(r.PathValue("user"))
	if u == nil || fakeRole(u, team) == "" {
		replyError(w, 404, api.CodeNotFound, fmt.Sprintf("user %q is not a member of team %s", r.PathValue("user"), team))
		return
	}
	u.Memberships = slices.DeleteFunc(u.Memberships, func(m api.Membership) bool { return m.Team == team })
	u.Teams = slices.DeleteFunc(u.Teams, func(t string) bool { return t == team })
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeServer) createToken(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in api.Token
	if !decodeStrict(w, body, &in) {
		return
	}
	caller := f.caller(r)
	user := in.User
	if user == "" {
		user = caller.Name
	}
	target := f.person(user)
	if target == nil || !caller.Admin && caller.Name != user {
		replyError(w, 404, api.CodeNotFound, fmt.Sprintf("user %q not found", user))
		return
	}
	var expires *time.Time
	if in.ExpiresIn != "" {
		d, err := time.ParseDuration(in.ExpiresIn)
		if err != nil || d <= 0 {
			replyError(w, 400, api.CodeInvalid, "invalid token", api.FieldError{Field: "expiresIn", Problem: "want a positive duration"})
			return
		}
		at := testNow.Add(d)
		expires = &at
	}
	t := f.addToken(user, fmt.Sprintf("secret-%d", len(f.tokens)+1), in.Name, expires)
	t.rec.CreatedAt = testNow
	out := t.rec
	out.Token = t.secret
	reply(w, 201, out)
}

func (f *fakeServer) listTokens(w http.ResponseWriter, r *http.Request) {
	caller, user := f.caller(r), r.URL.Query().Get("user")
	if !caller.Admin {
		if user != "" && user != caller.Name {
			replyError(w, 403, api.CodeForbidden, "only an admin may list other users' tokens")
			return
		}
		user = caller.Name
	}
	var ts []api.Token
	for _, t := range f.tokens {
		if user == "" || t.rec.User == user {
			ts = append(ts, t.rec)
		}
	}
	fakePage(w, r, ts)
}

func (f *fakeServer) revokeToken(w http.ResponseWriter, r *http.Request) {
	caller := f.caller(r)
	for _, t := range f.tokens {
		if t.rec.ID == r.PathValue("id") && (caller.Admin || t.rec.User == caller.Name) {
			if t.rec.RevokedAt == nil {
				at := testNow
				t.rec.RevokedAt = &at
				delete(f.users, t.secret)
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	replyError(w, 404, api.CodeNotFound, fmt.Sprintf("token %q not found", r.PathValue("id")))
}

// listAudit pages the trail with the last ID as the page token, as the
// server does.
func (f *fakeServer) listAudit(w http.ResponseWriter, r *http.Request) {
	if !f.caller(r).Admin {
		replyError(w, 403, api.CodeForbidden, "the audit trail needs the admin role")
		return
	}
	q := r.URL.Query()
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			replyError(w, 400, api.CodeInvalid, "bad since", api.FieldError{Field: "since", Problem: "want an RFC 3339 time"})
			return
		}
		since = t
	}
	limit := fakePageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			replyError(w, 400, api.CodeInvalid, "bad limit", api.FieldError{Field: "limit", Problem: "must be a positive number"})
			return
		}
		limit = min(n, fakePageSize)
	}
	after, _ := strconv.ParseInt(q.Get("pageToken"), 10, 64)
	var match []api.AuditEntry
	for _, a := range f.audit {
		if a.ID > after && !a.Time.Before(since) && (q.Get("user") == "" || a.User == q.Get("user")) {
			match = append(match, a)
		}
	}
	out := api.List[api.AuditEntry]{Items: []api.AuditEntry{}}
	if len(match) > 0 {
		out.Items = match[:min(limit, len(match))]
		if len(match) > limit {
			out.NextPageToken = strconv.FormatInt(out.Items[len(out.Items)-1].ID, 10)
		}
	}
	reply(w, 200, out)
}
