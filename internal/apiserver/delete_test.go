package apiserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestDeleteTeamAndUser: an admin deletes a user (its token then
// authenticates nobody) and a team (refused with 409 naming its pending
// workload until it is cancelled); an admin cannot delete itself; others
// get 403; every attempt is audited.
func TestDeleteTeamAndUser(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	f.must("bob", "GET", "/api/v1/whoami", "", http.StatusOK, nil)
	for _, u := range []string{"tadmin", "member"} {
		if a := f.do(u, "DELETE", "/api/v1/users/bob", ""); a.status != http.StatusForbidden || a.errorBody(t).Message != "deleting users needs the admin role" {
			t.Errorf("as %s: %d %s, want 403", u, a.status, a.body)
		}
	}
	f.must("admin", "DELETE", "/api/v1/users/bob", "", http.StatusNoContent, nil)
	if a := f.do("bob", "GET", "/api/v1/whoami", ""); a.status != http.StatusUnauthorized {
		t.Errorf("the deleted user's token: %d %s, want 401", a.status, a.body)
	}
	f.must("admin", "DELETE", "/api/v1/users/bob", "", http.StatusNotFound, nil)
	if a := f.do("admin", "DELETE", "/api/v1/users/admin", ""); a.status != http.StatusConflict {
		t.Errorf("an admin deleting itself: %d %s, want 409", a.status, a.body)
	}

	id := f.submit("member", "research")
	if a := f.do("tadmin", "DELETE", "/api/v1/teams/research", ""); a.status != http.StatusForbidden {
		t.Errorf("a team-admin deleting its team: %d %s, want 403", a.status, a.body)
	}
	a := f.do("admin", "DELETE", "/api/v1/teams/research", "")
	if e := a.errorBody(t); a.status != http.StatusConflict || e.Code != api.CodeConflict || !strings.Contains(e.Message, id) || !strings.Contains(e.Message, "cancel them first") {
		t.Errorf("deleting a team with a pending workload: %d %+v, want 409 naming %s", a.status, e, id)
	}
	f.must("member", "DELETE", "/api/v1/workloads/"+id, "", http.StatusOK, nil)
	f.must("admin", "DELETE", "/api/v1/teams/research", "", http.StatusNoContent, nil)
	var teams api.List[api.Team]
	f.must("admin", "GET", "/api/v1/teams", "", http.StatusOK, &teams)
	for _, tm := range teams.Items {
		if tm.Name == "research" {
			t.Errorf("research is still listed")
		}
	}
	var me api.User
	f.must("member", "GET", "/api/v1/whoami", "", http.StatusOK, &me)
	if len(me.Memberships) != 0 {
		t.Errorf("member's memberships after research went: %+v, want none", me.Memberships)
	}

	var got []string
	for _, e := range f.audit() {
		if strings.HasPrefix(e.Action, "delete ") {
			got = append(got, e.Action+" "+e.Object+" "+e.User+" "+http.StatusText(e.Status))
		}
	}
	// Oldest first; a refused admin route names no object (it stops
	// before the handler reads one).
	want := []string{
		"delete user  tadmin Forbidden",
		"delete user  member Forbidden",
		"delete user bob admin No Content",
		"delete user bob admin Not Found",
		"delete user admin admin Conflict",
		"delete team  tadmin Forbidden",
		"delete team research admin Conflict",
		"delete team research admin No Content",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit entries of the deletes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
