package app

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestTeamAdminCannotTakeOverAnotherTeamsServiceAccount replays issue 12's
// report on a running server: tb's team-admin tries to put ta's service
// account in tb, to mint, list and revoke its tokens, and to learn which
// user names exist. Every answer is the one a missing user or token gets;
// ta's account keeps only ta, its token still works, and tb's admin ends
// with no access to ta.
func TestTeamAdminCannotTakeOverAnotherTeamsServiceAccount(t *testing.T) {
	s := start(t, t.TempDir())
	h := &hclient{t: t, addr: s.addr, retry429: true}
	admin := s.admin.Token
	for _, tm := range []string{"ta", "tb"} {
		h.must(admin, "POST", "/api/v1/teams", `{"name":"`+tm+`",`+limitA+`}`, http.StatusCreated, nil)
	}
	var tbAdmin, named, plain api.User
	h.must(admin, "POST", "/api/v1/users", `{"name":"tb-admin","memberships":[{"team":"tb","role":"team-admin"}]}`, http.StatusCreated, &tbAdmin)
	h.must(admin, "POST", "/api/v1/users", `{"name":"ta.ci","serviceAccount":true,"memberships":[{"team":"ta","role":"member"}]}`, http.StatusCreated, &named)
	// An account named as the report's, the way an admin may name one.
	h.must(admin, "POST", "/api/v1/users", `{"name":"sa-a","serviceAccount":true,"memberships":[{"team":"ta","role":"member"}]}`, http.StatusCreated, &plain)
	var ws api.Workload
	h.must(named.Token, "POST", "/api/v1/workloads", `{"team":"ta","command":["true"],`+park+`}`, http.StatusCreated, &ws)

	same := func(method, path, body, real, ghost string) {
		t.Helper()
		got := h.do(tbAdmin.Token, method, path, body)
		twin := h.do(tbAdmin.Token, method, strings.ReplaceAll(path, real, ghost), strings.ReplaceAll(body, real, ghost))
		if got.status != http.StatusNotFound || got.status != twin.status || got.body != strings.ReplaceAll(twin.body, ghost, real) {
			t.Errorf("%s %s %s: %d %s\nwant the 404 of a missing one: %d %s", method, path, body, got.status, got.body, twin.status, twin.body)
		}
	}
	for _, sa := range []api.User{named, plain} {
		var toks api.List[api.Token]
		h.must(admin, "GET", "/api/v1/tokens?user="+sa.Name, "", http.StatusOK, &toks)
		same("PUT", "/api/v1/teams/tb/members/"+sa.Name, `{"role":"viewer"}`, sa.Name, missingUser)
		same("POST", "/api/v1/tokens", `{"user":"`+sa.Name+`"}`, sa.Name, missingUser)
		same("GET", "/api/v1/tokens?user="+sa.Name, "", sa.Name, missingUser)
		same("DELETE", "/api/v1/tokens/"+toks.Items[0].ID, "", toks.Items[0].ID, missingTok)
	}
	// The names a team-admin may give a service account are its team's:
	// another team's name is refused as a free one is, not as taken.
	body := func(name string) string {
		return `{"name":"` + name + `","serviceAccount":true,"memberships":[{"team":"tb","role":"member"}]}`
	}
	for _, name := range []string{"ta.ci", "sa-a", "tb-admin"} {
		got, free := h.do(tbAdmin.Token, "POST", "/api/v1/users", body(name)), h.do(tbAdmin.Token, "POST", "/api/v1/users", body("zz"+name))
		if got.status == http.StatusConflict || got.status != free.status || got.body != strings.ReplaceAll(free.body, "zz"+name, name) {
			t.Errorf("creating %s: %d %s; a free name: %d %s; want the same answer", name, got.status, got.body, free.status, free.body)
		}
	}

	for _, sa := range []api.User{named, plain} {
		var me api.User
		h.must(sa.Token, "GET", "/api/v1/whoami", "", http.StatusOK, &me)
		if diff := cmp.Diff([]api.Membership{{Team: "ta", Role: "member"}}, me.Memberships); diff != "" {
			t.Errorf("%s's memberships after the attempts (-want +got):\n%s", sa.Name, diff)
		}
	}
	if a := h.do(tbAdmin.Token, "GET", "/api/v1/workloads/"+ws.ID, ""); a.status != http.StatusNotFound {
		t.Errorf("tb's admin reads ta's workload: %d %s", a.status, a.body)
	}
	var l api.List[api.Workload]
	h.must(tbAdmin.Token, "GET", "/api/v1/workloads", "", http.StatusOK, &l)
	if len(l.Items) != 0 {
		t.Errorf("tb's admin lists %d workloads, want none", len(l.Items))
	}
	h.must(admin, "DELETE", "/api/v1/workloads/"+ws.ID, "", http.StatusOK, nil)
}

// TestOtherTeamsEventsNameNoWorkload: alpha, within its guarantee, reclaims
// two of beta's GPUs through the real scheduler and control loop. Beta's
// viewer then reads its workloads, their events and its list: the
// preemptor is "a workload of another team", and neither alpha's workload
// IDs nor "team alpha" appear; the admin sees them.
func TestOtherTeamsEventsNameNoWorkload(t *testing.T) {
	s := start(t, t.TempDir())
	h := &hclient{t: t, addr: s.addr, retry429: true}
	admin := s.admin.Token
	h.must(admin, "POST", "/api/v1/teams", `{"name":"alpha","guaranteedMilliGPU":2000}`, http.StatusCreated, nil)
	h.must(admin, "POST", "/api/v1/teams", `{"name":"beta"}`, http.StatusCreated, nil)
	var viewer api.User
	h.must(admin, "POST", "/api/v1/users", `{"name":"beta-viewer","memberships":[{"team":"beta","role":"viewer"}]}`, http.StatusCreated, &viewer)
	submit := func(team string) string {
		var w api.Workload
		h.must(admin, "POST", "/api/v1/workloads", `{"team":"`+team+`","command":["sleep","60"],"gracePeriodSeconds":1,"resources":{"gpus":1}}`, http.StatusCreated, &w)
		return w.ID
	}
	phase := func(id string) api.Workload {
		var w api.Workload
		h.must(admin, "GET", "/api/v1/workloads/"+id, "", http.StatusOK, &w)
		return w
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		testwait.Until(t, 20*time.Second, what, func() (bool, string) { return ok(), "not yet" })
	}
	var beta, alpha []string
	for range 4 {
		beta = append(beta, submit("beta"))
	}
	t.Cleanup(func() {
		for _, id := range append(beta, alpha...) {
			s.admin.CancelWorkload(context.Background(), id)
		}
		for _, id := range append(beta, alpha...) {
			waitDone(t, s.admin, id)
		}
	})
	waitFor("beta running on the 4 GPUs", func() bool {
		return !slices.ContainsFunc(beta, func(id string) bool { return phase(id).Status.Phase != api.PhaseRunning })
	})
	for range 2 {
		alpha = append(alpha, submit("alpha"))
	}
	waitFor("alpha running", func() bool {
		return !slices.ContainsFunc(alpha, func(id string) bool { return phase(id).Status.Phase != api.PhaseRunning })
	})

	leaks := func(body string) []string {
		var out []string
		for _, s := range append([]string{"team alpha"}, alpha...) {
			if strings.Contains(body, s) {
				out = append(out, s)
			}
		}
		return out
	}
	reclaimed := 0
	for _, id := range beta {
		if phase(id).Status.Preemptions == 0 {
			continue
		}
		reclaimed++
		for _, path := range []string{"/api/v1/workloads/" + id, "/api/v1/workloads/" + id + "/events"} {
			a := h.must(viewer.Token, "GET", path, "", http.StatusOK, nil)
			if l := leaks(a.body); l != nil {
				t.Errorf("beta's viewer reads %s naming %q: %s", path, l, a.body)
			}
			if strings.HasSuffix(path, "/events") && !strings.Contains(a.body, "reclaimed by a workload of another team") {
				t.Errorf("beta's viewer reads events without who reclaimed the GPU: %s", a.body)
			}
			if a := h.must(admin, "GET", path, "", http.StatusOK, nil); strings.HasSuffix(path, "/events") && leaks(a.body) == nil {
				t.Errorf("the admin reads %s without the preemptor: %s", path, a.body)
			}
		}
	}
	if reclaimed != 2 {
		t.Errorf("%d of beta's workloads reclaimed, want 2", reclaimed)
	}
	if a := h.must(viewer.Token, "GET", "/api/v1/workloads", "", http.StatusOK, nil); leaks(a.body) != nil {
		t.Errorf("beta's viewer lists workloads naming %q: %s", leaks(a.body), a.body)
	}
}
