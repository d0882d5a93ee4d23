package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// nameFixture is the real-server fixture (server_test.go) as names see it:
// alice is a member of research and vision, bob of vision; the server's
// clock is five minutes behind the CLI's, so what is submitted is 5m old.
// Each workload's command names its team and name, which its log (the fake
// executor's) repeats once it has started.
type nameFixture struct {
	*testServer
	token map[string]string
}

func newNameFixture(t *testing.T) *nameFixture {
	t.Helper()
	s := newTestServer(t)
	if _, err := s.admin().SetMember(context.Background(), "vision", "alice", api.RoleMember); err != nil {
		t.Fatal(err)
	}
	s.addUser(core.User{Name: "bob", Memberships: []core.Membership{{Team: "vision", Role: core.RoleMember}}, CreatedAt: testNow.Add(-time.Hour)}, "bob-token")
	s.setNow(testNow.Add(-5 * time.Minute))
	return &nameFixture{testServer: s, token: map[string]string{"alice": aliceToken, "bob": "bob-token"}}
}

// as runs the CLI as user.
func (f *nameFixture) as(user string, args ...string) result {
	f.t.Helper()
	return f.runAs(f.t, f.token[user], args...)
}

// submitNamed submits a small workload called name to team as user and
// returns its ID.
func (f *nameFixture) submitNamed(user, team, name string) string {
	f.t.Helper()
	r := f.as(user, "submit", "--team", team, "--name", name, "--", "sleep", "600", team+"/"+name)
	if r.code != 0 {
		f.t.Fatalf("submit %s to %s as %s: %+v", name, team, user, r)
	}
	return strings.TrimSpace(r.stdout)
}

// logOf is the log of a started workload that submitNamed submitted.
func logOf(team, name string) string {
	return "started attempt 1: sleep 600 " + team + "/" + name + "\n"
}

// TestVerbsTakeNames: every verb that takes a workload takes its name as
// well as its ID, within the caller's teams; --team narrows the lookup; an
// ambiguous name is an error listing the matches; describe takes a bare ID
// or name.
func TestVerbsTakeNames(t *testing.T) {
	f := newNameFixture(t)
	solo := f.submitNamed("alice", "research", "solo")
	trainR := f.submitNamed("alice", "research", "train")
	trainV := f.submitNamed("bob", "vision", "train")
	f.step() // all three start

	t.Run("describe a bare name, a bare ID and workload NAME", func(t *testing.T) {
		for _, args := range [][]string{{"describe", "solo"}, {"describe", solo}, {"describe", "workload", "solo"}, {"describe", "wl", "solo", "--team", "research"}} {
			r := f.as("alice", append(args, "-o", "json")...)
			if r.code != 0 {
				t.Fatalf("%v: %+v", args, r)
			}
			var d workloadDescription
			if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
				t.Fatal(err)
			}
			if d.Workload.ID != solo || len(d.Events) == 0 {
				t.Errorf("%v: described %s with %d events, want %s with its events", args, d.Workload.ID, len(d.Events), solo)
			}
		}
	})
	t.Run("logs, why, get workload by name", func(t *testing.T) {
		checkResult(t, result{stdout: logOf("research", "solo")}, f.as("alice", "logs", "solo"))
		r := f.as("alice", "why", "solo", "-o", "json")
		if r.code != 0 || !strings.Contains(r.stdout, `"id": "`+solo+`"`) {
			t.Errorf("why solo: %+v", r)
		}
		r = f.as("alice", "get", "workload", "train", "--team", "vision", "-o", "json")
		if r.code != 0 || !strings.Contains(r.stdout, `"id": "`+trainV+`"`) {
			t.Errorf("get workload train --team vision: %+v, want %s", r, trainV)
		}
	})
	t.Run("an ambiguous name lists the matches", func(t *testing.T) {
		for _, verb := range [][]string{{"why"}, {"logs"}, {"describe"}, {"cancel"}, {"wait"}, {"get", "workload"}} {
			r := f.as("alice", append(verb, "train")...)
			want := "error: 2 workloads are named \"train\" in your teams; give an ID, or --team if they are in different teams:\n" +
				"  ID    TEAM      PHASE    AGE\n" +
				"  " + trainR + "  research  Running  5m\n" +
				"  " + trainV + "  vision    Running  5m\n"
			checkResult(t, result{code: 1, stderr: want}, r)
		}
	})
	t.Run("a name many share lists the newest", func(t *testing.T) {
		var ids []string
		for range 12 {
			ids = append(ids, f.submitNamed("alice", "research", "sweep"))
		}
		r := f.as("alice", "why", "sweep")
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != 1 || len(lines) != 13 || !strings.HasPrefix(lines[0], "error: 12 workloads are named \"sweep\"") ||
			!strings.HasPrefix(lines[2], "  "+ids[2]+" ") || lines[12] != "  and 2 older (gpufleet get workloads lists them all)" {
			t.Errorf("why sweep: %+v, want the 10 newest of 12 and a line for the 2 older", r)
		}
	})
	t.Run("--team picks among the matches", func(t *testing.T) {
		checkResult(t, result{stdout: logOf("research", "train")}, f.as("alice", "logs", "train", "--team", "research"))
		checkResult(t, result{stdout: logOf("vision", "train")}, f.as("alice", "logs", "train", "--team", "vision"))
	})
	t.Run("names stay within the caller's teams", func(t *testing.T) {
		// bob sees only vision's train, so the name is not ambiguous to
		// him, and research's solo does not exist for him.
		checkResult(t, result{stdout: logOf("vision", "train")}, f.as("bob", "logs", "train"))
		checkResult(t, result{code: 1, stderr: "error: workload solo: not found\n"}, f.as("bob", "describe", "solo"))
		checkResult(t, result{code: 1, stderr: "error: workload " + solo + ": not found\n"}, f.as("bob", "why", solo))
	})
	t.Run("unknown team or name", func(t *testing.T) {
		checkResult(t, result{code: 1, stderr: "error: team nosuch not found (your teams: research, vision)\n"}, f.as("alice", "logs", "train", "--team", "nosuch"))
		checkResult(t, result{code: 1, stderr: "error: workload nothing: not found\n"}, f.as("alice", "wait", "nothing"))
		checkResult(t, result{code: 1, stderr: "error: workload " + solo + " is in team research, not vision\n"}, f.as("alice", "why", solo, "--team", "vision"))
	})
	t.Run("cancel and wait by name", func(t *testing.T) {
		checkResult(t, result{stdout: solo + " cancelling (Running)\n"}, f.as("alice", "cancel", "solo"))
		f.step() // the stop is sent, and solo ends
		r := f.as("alice", "wait", "solo")
		if r.code != 1 || !strings.HasPrefix(r.stderr, solo+": Cancelled") {
			t.Errorf("wait solo after cancel: %+v, want exit 1 and %s: Cancelled", r, solo)
		}
	})
	t.Run("describe usage", func(t *testing.T) {
		checkResult(t, result{code: 2, stderr: "error: describe workload: which workload? give its ID or name\nRun 'gpufleet describe --help' for usage.\n"}, f.as("alice", "describe", "workload"))
		checkResult(t, result{code: 2, stderr: "error: describe \"team\": only workloads and nodes can be described (describe [workload] ID|NAME, describe node NAME)\nRun 'gpufleet describe --help' for usage.\n"}, f.as("alice", "describe", "team", "research"))
	})
}

// TestGetWorkloadsFilters: --phase takes any case and an unknown phase
// lists the phases; --team naming no team of the caller's is an error,
// not an empty table.
func TestGetWorkloadsFilters(t *testing.T) {
	f := newNameFixture(t)
	id := f.submitNamed("alice", "research", "one")
	r := f.as("alice", "get", "workloads", "--phase", "pending", "-o", "json")
	var l api.List[api.Workload]
	if err := json.Unmarshal([]byte(r.stdout), &l); r.code != 0 || err != nil || len(l.Items) != 1 || l.Items[0].ID != id {
		t.Errorf("get workloads --phase pending: %+v, want %s", r, id)
	}
	checkResult(t, result{code: 2, stderr: "error: --phase: unknown phase \"runing\": want one of Pending, Running, Succeeded, Failed, Cancelled\nRun 'gpufleet get --help' for usage.\n"},
		f.as("alice", "get", "workloads", "--phase", "runing"))
	checkResult(t, result{code: 1, stderr: "error: team nosuch not found (your teams: research, vision)\n"}, f.as("alice", "get", "workloads", "--team", "nosuch"))
	// research exists but bob is not in it: the same answer, so that
	// teams one cannot see stay hidden.
	checkResult(t, result{code: 1, stderr: "error: team research not found (your teams: vision)\n"}, f.as("bob", "get", "workloads", "--team", "research"))
	// An existing team with no workloads is an empty table.
	if r := f.as("alice", "get", "workloads", "--team", "vision"); r.code != 0 || r.stderr != "" || strings.Contains(r.stdout, "wl-") {
		t.Errorf("get workloads --team vision (empty): %+v, want an empty table", r)
	}
}
