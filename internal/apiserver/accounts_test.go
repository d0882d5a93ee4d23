package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// accountsFixture adds to the fixture vision's team-admin (vadmin), its
// service account vision.ci with a token, a person in vision (dana) and a
// person in no team (carol).
func accountsFixture(t *testing.T) (*fixture, api.Token) {
	f := newFixture(t, store.Options{}, RateLimit{})
	var u api.User
	f.must("admin", "POST", "/api/v1/users", `{"name":"vadmin","memberships":[{"team":"vision","role":"team-admin"}]}`, http.StatusCreated, &u)
	f.token["vadmin"] = u.Token
	f.must("vadmin", "POST", "/api/v1/users", `{"name":"vision.ci","serviceAccount":true,"memberships":[{"team":"vision","role":"member"}]}`, http.StatusCreated, &u)
	f.token["vision.ci"] = u.Token
	f.must("admin", "POST", "/api/v1/users", `{"name":"dana","memberships":[{"team":"vision","role":"member"}]}`, http.StatusCreated, nil)
	f.must("admin", "POST", "/api/v1/users", `{"name":"carol"}`, http.StatusCreated, nil)
	var tok api.Token
	f.must("vadmin", "POST", "/api/v1/tokens", `{"user":"vision.ci","name":"pipeline"}`, http.StatusCreated, &tok)
	return f, tok
}

// sameAsMissing checks that a request naming real answers 404 exactly as
// the one naming the missing object ghost does.
func (f *fixture) sameAsMissing(t *testing.T, user, method, path, body, real, ghost string) {
	t.Helper()
	got := f.do(user, method, path, body)
	missing := f.do(user, method, strings.ReplaceAll(path, real, ghost), strings.ReplaceAll(body, real, ghost))
	if got.status != http.StatusNotFound {
		t.Errorf("%s %s %s as %s: %d %s, want 404", method, path, body, user, got.status, got.body)
	}
	if want := strings.ReplaceAll(missing.body, ghost, real); got.status != missing.status || got.body != want {
		t.Errorf("%s %s %s as %s tells %s from a missing one:\n got %d %s\nwant %d %s", method, path, body, user, real, got.status, got.body, missing.status, want)
	}
}

// TestTeamAdminGainsNothingInAnotherTeam is issue 12's takeover: research's
// team-admin tries to take vision's service account through the members
// route, then its tokens. Each answers as a missing user or token, and
// nothing of vision changes.
func TestTeamAdminGainsNothingInAnotherTeam(t *testing.T) {
	f, tok := accountsFixture(t)
	ctx := context.Background()

	t.Run("another team's service account and person look missing", func(t *testing.T) {
		f.sameAsMissing(t, "tadmin", "PUT", "/api/v1/teams/research/members/vision.ci", `{"role":"viewer"}`, "vision.ci", "vision.ghost")
		f.sameAsMissing(t, "tadmin", "PUT", "/api/v1/teams/research/members/dana", `{"role":"viewer"}`, "dana", "ghost")
		f.sameAsMissing(t, "tadmin", "POST", "/api/v1/tokens", `{"user":"vision.ci"}`, "vision.ci", "vision.ghost")
		f.sameAsMissing(t, "tadmin", "GET", "/api/v1/tokens?user=vision.ci", "", "vision.ci", "vision.ghost")
		f.sameAsMissing(t, "tadmin", "DELETE", "/api/v1/tokens/"+tok.ID, "", tok.ID, "tok-zzzzzzzzzz")
		f.sameAsMissing(t, "tadmin", "GET", "/api/v1/users/vision.ci", "", "vision.ci", "vision.ghost")
		f.sameAsMissing(t, "tadmin", "DELETE", "/api/v1/teams/research/members/vision.ci", "", "vision.ci", "vision.ghost")
	})
	t.Run("a service account's names are its team's, so a taken one is a teammate", func(t *testing.T) {
		body := func(name string) string {
			return `{"name":"` + name + `","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`
		}
		got, ghost := f.do("tadmin", "POST", "/api/v1/users", body("vision.ci")), f.do("tadmin", "POST", "/api/v1/users", body("vision.ghost"))
		if got.status != http.StatusBadRequest || got.body != strings.ReplaceAll(ghost.body, "ghost", "ci") {
			t.Errorf("another team's name: %d %s, want the 400 a free name gets (%s)", got.status, got.body, ghost.body)
		}
		if e := got.errorBody(t); len(e.Fields) != 1 || e.Fields[0].Field != "name" {
			t.Errorf("another team's name: %+v, want 400 naming name", e)
		}
	})
	t.Run("nothing of vision changed", func(t *testing.T) {
		u, err := f.st.User(ctx, "vision.ci")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]core.Membership{{Team: "vision", Role: core.RoleMember}}, u.Memberships); diff != "" {
			t.Errorf("vision.ci's memberships (-want +got):\n%s", diff)
		}
		d, _ := f.st.User(ctx, "dana")
		if diff := cmp.Diff([]core.Membership{{Team: "vision", Role: core.RoleMember}}, d.Memberships); diff != "" {
			t.Errorf("dana's memberships (-want +got):\n%s", diff)
		}
		ts, _ := f.st.Tokens(ctx, "vision.ci")
		if len(ts) != 2 || ts[0].RevokedAt != nil || ts[1].RevokedAt != nil {
			t.Errorf("vision.ci's tokens %+v, want its first and the pipeline's, unrevoked", ts)
		}
	})

	t.Run("a team-admin manages its own service account's role", func(t *testing.T) {
		var m api.User
		f.must("vadmin", "PUT", "/api/v1/teams/vision/members/vision.ci", `{"role":"viewer"}`, http.StatusOK, &m)
		if r := m.Memberships; len(r) != 1 || r[0].Role != "viewer" {
			t.Errorf("got %+v, want a viewer of vision", m)
		}
	})
	t.Run("a service account never joins a second team, not even by an admin", func(t *testing.T) {
		a := f.do("admin", "PUT", "/api/v1/teams/research/members/vision.ci", `{"role":"viewer"}`)
		if e := a.errorBody(t); a.status != http.StatusConflict || e.Code != api.CodeConflict || !strings.Contains(e.Message, "cannot join team research") {
			t.Errorf("%d %+v, want 409 saying it cannot join research", a.status, e)
		}
		if u, _ := f.st.User(ctx, "vision.ci"); len(u.Memberships) != 1 {
			t.Errorf("vision.ci after the refusal: %+v", u.Memberships)
		}
	})
	t.Run("a service account never leaves its team", func(t *testing.T) {
		a := f.do("vadmin", "DELETE", "/api/v1/teams/vision/members/vision.ci", "")
		if e := a.errorBody(t); a.status != http.StatusConflict || !strings.Contains(e.Message, "revoke its tokens") {
			t.Errorf("%d %+v, want 409 pointing at its tokens", a.status, e)
		}
	})
	t.Run("an admin service account is an admin's to act for", func(t *testing.T) {
		f.must("admin", "POST", "/api/v1/users", `{"name":"research.scraper","admin":true,"serviceAccount":true,"memberships":[{"team":"research","role":"viewer"}]}`, http.StatusCreated, nil)
		if a := f.do("tadmin", "POST", "/api/v1/tokens", `{"user":"research.scraper"}`); a.status != http.StatusForbidden {
			t.Errorf("research's team-admin minting an admin account's token: %d %s, want 403", a.status, a.body)
		}
	})
	t.Run("a person in no team is any team-admin's to add, once", func(t *testing.T) {
		f.must("tadmin", "PUT", "/api/v1/teams/research/members/carol", `{"role":"member"}`, http.StatusOK, nil)
		f.sameAsMissing(t, "vadmin", "PUT", "/api/v1/teams/vision/members/carol", `{"role":"member"}`, "carol", "ghost")
		f.must("admin", "PUT", "/api/v1/teams/vision/members/carol", `{"role":"member"}`, http.StatusOK, nil)
	})
	t.Run("a team-admin adds a person it sees in another of its teams", func(t *testing.T) {
		f.must("admin", "PUT", "/api/v1/teams/vision/members/tadmin", `{"role":"viewer"}`, http.StatusOK, nil)
		f.must("tadmin", "PUT", "/api/v1/teams/research/members/dana", `{"role":"viewer"}`, http.StatusOK, nil)
		// Seeing vision's service account gives no hold on it.
		if a := f.do("tadmin", "POST", "/api/v1/tokens", `{"user":"vision.ci"}`); a.status != http.StatusForbidden {
			t.Errorf("a viewer of vision minting vision.ci's token: %d %s, want 403", a.status, a.body)
		}
		if a := f.do("tadmin", "PUT", "/api/v1/teams/research/members/vision.ci", `{"role":"viewer"}`); a.status != http.StatusConflict {
			t.Errorf("adding vision.ci, seen, to research: %d %s, want 409", a.status, a.body)
		}
	})
	t.Run("vision's service account still works in vision alone", func(t *testing.T) {
		var me api.User
		f.must("vision.ci", "GET", "/api/v1/whoami", "", http.StatusOK, &me)
		if diff := cmp.Diff([]api.Membership{{Team: "vision", Role: "viewer"}}, me.Memberships); diff != "" {
			t.Errorf("vision.ci's memberships (-want +got):\n%s", diff)
		}
	})
}

func TestCreateUserNames(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	for _, tc := range []struct {
		name, body, field string
	}{
		{"a person's name has no dot", `{"name":"research.alice","memberships":[{"team":"research","role":"member"}]}`, "name"},
		{"an admin's service account named after another team", `{"name":"vision.ci","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`, "name"},
		{"an admin's service account in two teams", `{"name":"ci","serviceAccount":true,"memberships":[{"team":"research","role":"member"},{"team":"vision","role":"member"}]}`, "memberships"},
		{"an admin's service account in no team", `{"name":"ci","serviceAccount":true}`, "memberships"},
		{"two dots", `{"name":"research.ci.x","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`, "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.do("admin", "POST", "/api/v1/users", tc.body)
			if e := a.errorBody(t); a.status != http.StatusBadRequest || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
				t.Errorf("%d %+v, want 400 naming %s", a.status, e, tc.field)
			}
		})
	}
	t.Run("nothing was stored", func(t *testing.T) {
		us, _ := f.st.Users(context.Background())
		if len(us) != 5 {
			t.Errorf("%d users, want the fixture's 5", len(us))
		}
	})
	t.Run("an admin names a service account as it likes, in one team", func(t *testing.T) {
		f.must("admin", "POST", "/api/v1/users", `{"name":"scraper","serviceAccount":true,"memberships":[{"team":"research","role":"viewer"}]}`, http.StatusCreated, nil)
		f.must("admin", "POST", "/api/v1/users", `{"name":"vision.ci","serviceAccount":true,"memberships":[{"team":"vision","role":"member"}]}`, http.StatusCreated, nil)
	})
}
