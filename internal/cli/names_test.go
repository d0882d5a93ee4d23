package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/apiserver"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// nameFixture is the real API server on a real store in a temporary
// directory, with teams research and vision, one node (region us-east,
// pool local, two 80 GiB H100s) and users:
//
//	alice   member of research and vision
//	bob     member of vision
type nameFixture struct {
	t     *testing.T
	url   string
	token map[string]string
	st    *store.Store
}

// nameLogs answers every workload's log with one line naming it.
type nameLogs struct{}

func (nameLogs) Logs(id core.WorkloadID) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("log of " + string(id) + "\n")), nil
}

func newNameFixture(t *testing.T) *nameFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenWith(ctx, filepath.Join(t.TempDir(), "gpufleet.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, name := range []core.TeamName{"research", "vision"} {
		if err := st.CreateTeam(ctx, core.NewTeam(name, testNow.Add(-time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	node := core.Node{Name: "gpu1", Region: "us-east", Pool: "local", Schedulable: true, UpdatedAt: testNow,
		GPUs: []core.GPU{{Index: 0, UUID: "GPU-0", Model: "H100", MemoryMiB: 81920}, {Index: 1, UUID: "GPU-1", Model: "H100", MemoryMiB: 81920}}}
	if err := st.PutNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	f := &nameFixture{t: t, token: map[string]string{}, st: st}
	for _, u := range []core.User{
		{Name: "alice", Memberships: []core.Membership{{Team: "research", Role: core.RoleMember}, {Team: "vision", Role: core.RoleMember}}},
		{Name: "bob", Memberships: []core.Membership{{Team: "vision", Role: core.RoleMember}}},
	} {
		u.CreatedAt = testNow.Add(-time.Hour)
		tok := apiserver.NewToken()
		if err := st.CreateUser(ctx, u, core.Token{Name: "first", CreatedAt: u.CreatedAt}, apiserver.HashToken(tok)); err != nil {
			t.Fatal(err)
		}
		f.token[u.Name] = tok
	}
	srv := httptest.NewServer(apiserver.New(apiserver.Options{Store: st, Logs: nameLogs{}, Now: func() time.Time { return testNow.Add(-5 * time.Minute) },
		OpenAPI: api.OpenAPI, PriorityClasses: core.DefaultPriorityClasses()}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// run runs the CLI as user.
func (f *nameFixture) run(user string, args ...string) result {
	f.t.Helper()
	dir := f.t.TempDir()
	return runCLI(f.t, invocation{args: args, vars: map[string]string{
		"GPUFLEET_ADDR": f.url, "GPUFLEET_TOKEN": f.token[user], "XDG_CONFIG_HOME": dir, "HOME": dir}})
}

// submit submits a small workload called name to team as user and
// returns its ID.
func (f *nameFixture) submit(user, team, name string) string {
	f.t.Helper()
	r := f.run(user, "submit", "--team", team, "--name", name, "--", "sleep", "600")
	if r.code != 0 {
		f.t.Fatalf("submit %s to %s as %s: %+v", name, team, user, r)
	}
	return strings.TrimSpace(r.stdout)
}

// TestVerbsTakeNames: every verb that takes a workload takes its name as
// well as its ID, within the caller's teams; --team narrows the lookup; an
// ambiguous name is an error listing the matches; describe takes a bare ID
// or name.
func TestVerbsTakeNames(t *testing.T) {
	f := newNameFixture(t)
	solo := f.submit("alice", "research", "solo")
	trainR := f.submit("alice", "research", "train")
	trainV := f.submit("bob", "vision", "train")

	t.Run("describe a bare name, a bare ID and workload NAME", func(t *testing.T) {
		for _, args := range [][]string{{"describe", "solo"}, {"describe", solo}, {"describe", "workload", "solo"}, {"describe", "wl", "solo", "--team", "research"}} {
			r := f.run("alice", append(args, "-o", "json")...)
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
		checkResult(t, result{stdout: "log of " + solo + "\n"}, f.run("alice", "logs", "solo"))
		r := f.run("alice", "why", "solo", "-o", "json")
		if r.code != 0 || !strings.Contains(r.stdout, `"id": "`+solo+`"`) {
			t.Errorf("why solo: %+v", r)
		}
		r = f.run("alice", "get", "workload", "train", "--team", "vision", "-o", "json")
		if r.code != 0 || !strings.Contains(r.stdout, `"id": "`+trainV+`"`) {
			t.Errorf("get workload train --team vision: %+v, want %s", r, trainV)
		}
	})
	t.Run("an ambiguous name lists the matches", func(t *testing.T) {
		for _, verb := range [][]string{{"why"}, {"logs"}, {"describe"}, {"cancel"}, {"wait"}, {"get", "workload"}} {
			r := f.run("alice", append(verb, "train")...)
			want := "error: 2 workloads are named \"train\" in your teams; give an ID, or --team if they are in different teams:\n" +
				"  ID               TEAM      PHASE    AGE\n" +
				"  " + trainR + "  research  Pending  5m\n" +
				"  " + trainV + "  vision    Pending  5m\n"
			checkResult(t, result{code: 1, stderr: want}, r)
		}
	})
	t.Run("a name many share lists the newest", func(t *testing.T) {
		var ids []string
		for range 12 {
			ids = append(ids, f.submit("alice", "research", "sweep"))
		}
		r := f.run("alice", "why", "sweep")
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != 1 || len(lines) != 13 || !strings.HasPrefix(lines[0], "error: 12 workloads are named \"sweep\"") ||
			!strings.HasPrefix(lines[2], "  "+ids[2]+" ") || lines[12] != "  and 2 older (gpufleet get workloads lists them all)" {
			t.Errorf("why sweep: %+v, want the 10 newest of 12 and a line for the 2 older", r)
		}
	})
	t.Run("--team picks among the matches", func(t *testing.T) {
		checkResult(t, result{stdout: "log of " + trainR + "\n"}, f.run("alice", "logs", "train", "--team", "research"))
		checkResult(t, result{stdout: "log of " + trainV + "\n"}, f.run("alice", "logs", "train", "--team", "vision"))
	})
	t.Run("names stay within the caller's teams", func(t *testing.T) {
		// bob sees only vision's train, so the name is not ambiguous to
		// him, and research's solo does not exist for him.
		checkResult(t, result{stdout: "log of " + trainV + "\n"}, f.run("bob", "logs", "train"))
		checkResult(t, result{code: 1, stderr: "error: workload solo: not found\n"}, f.run("bob", "describe", "solo"))
		checkResult(t, result{code: 1, stderr: "error: workload " + solo + ": not found\n"}, f.run("bob", "why", solo))
	})
	t.Run("unknown team or name", func(t *testing.T) {
		checkResult(t, result{code: 1, stderr: "error: team nosuch not found (your teams: research, vision)\n"}, f.run("alice", "logs", "train", "--team", "nosuch"))
		checkResult(t, result{code: 1, stderr: "error: workload nothing: not found\n"}, f.run("alice", "wait", "nothing"))
		checkResult(t, result{code: 1, stderr: "error: workload " + solo + " is in team research, not vision\n"}, f.run("alice", "why", solo, "--team", "vision"))
	})
	t.Run("cancel and wait by name", func(t *testing.T) {
		checkResult(t, result{stdout: solo + " cancelled\n"}, f.run("alice", "cancel", "solo"))
		r := f.run("alice", "wait", "solo")
		if r.code != 1 || !strings.HasPrefix(r.stderr, solo+": Cancelled") {
			t.Errorf("wait solo after cancel: %+v, want exit 1 and %s: Cancelled", r, solo)
		}
	})
	t.Run("describe usage", func(t *testing.T) {
		checkResult(t, result{code: 2, stderr: "error: describe workload: which workload? give its ID or name\nRun 'gpufleet describe --help' for usage.\n"}, f.run("alice", "describe", "workload"))
		checkResult(t, result{code: 2, stderr: "error: describe \"node\": only workloads can be described (describe [workload] ID|NAME)\nRun 'gpufleet describe --help' for usage.\n"}, f.run("alice", "describe", "node", "gpu1"))
	})
}

// TestGetWorkloadsFilters: --phase takes any case and an unknown phase
// lists the phases; --team naming no team of the caller's is an error,
// not an empty table.
func TestGetWorkloadsFilters(t *testing.T) {
	f := newNameFixture(t)
	id := f.submit("alice", "research", "one")
	r := f.run("alice", "get", "workloads", "--phase", "pending", "-o", "json")
	var l api.List[api.Workload]
	if err := json.Unmarshal([]byte(r.stdout), &l); r.code != 0 || err != nil || len(l.Items) != 1 || l.Items[0].ID != id {
		t.Errorf("get workloads --phase pending: %+v, want %s", r, id)
	}
	checkResult(t, result{code: 2, stderr: "error: --phase: unknown phase \"runing\": want one of Pending, Running, Succeeded, Failed, Cancelled\nRun 'gpufleet get --help' for usage.\n"},
		f.run("alice", "get", "workloads", "--phase", "runing"))
	checkResult(t, result{code: 1, stderr: "error: team nosuch not found (your teams: research, vision)\n"}, f.run("alice", "get", "workloads", "--team", "nosuch"))
	// research exists but bob is not in it: the same answer, so that
	// teams one cannot see stay hidden.
	checkResult(t, result{code: 1, stderr: "error: team research not found (your teams: vision)\n"}, f.run("bob", "get", "workloads", "--team", "research"))
	// An existing team with no workloads is an empty table.
	if r := f.run("alice", "get", "workloads", "--team", "vision"); r.code != 0 || r.stderr != "" || strings.Contains(r.stdout, "wl-") {
		t.Errorf("get workloads --team vision (empty): %+v, want an empty table", r)
	}
}
