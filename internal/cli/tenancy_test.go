package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

const (
	carolToken = "carol-token" // team-admin of research
	vicToken   = "vic-token"   // viewer of research
)

// tenancyServer is the real server with a team-admin (carol) and a viewer
// (vic) of research besides alice (a member) and admin.
func tenancyServer(t *testing.T) *testServer {
	t.Helper()
	f := newTestServer(t)
	f.addUser(core.User{Name: "carol", Memberships: []core.Membership{{Team: "research", Role: core.RoleTeamAdmin}}, CreatedAt: testNow.Add(-3 * time.Hour)}, carolToken)
	f.addUser(core.User{Name: "vic", Memberships: []core.Membership{{Team: "research", Role: core.RoleViewer}}, CreatedAt: testNow.Add(-30 * time.Minute)}, vicToken)
	return f
}

// tokenIDs maps the IDs of the tokens the server holds to names a test can
// expect: OWNER-NAME (alice-first, admin-first, alice-ci, ...).
func tokenIDs(f *testServer) map[string]string {
	f.t.Helper()
	ts, err := f.admin().Tokens(context.Background(), "")
	if err != nil {
		f.t.Fatal(err)
	}
	m := map[string]string{}
	for _, tk := range ts {
		m[tk.ID] = tk.User + "-" + tk.Name
		if tk.Name == "" {
			m[tk.ID] = tk.User + "-unnamed"
		}
	}
	return m
}

// tokenID returns the ID of user's token called name.
func tokenID(f *testServer, user, name string) string {
	f.t.Helper()
	for id, n := range tokenIDs(f) {
		if n == user+"-"+name {
			return id
		}
	}
	f.t.Fatalf("no token %s of %s", name, user)
	return ""
}

// redact writes the token IDs of the server in out as tokenIDs names them,
// and secrets (gpf_...) as SECRET.
func redact(f *testServer, out string) string {
	for id, name := range tokenIDs(f) {
		out = strings.ReplaceAll(out, id, name)
	}
	return regexp.MustCompile(`gpf_[A-Za-z0-9_-]+`).ReplaceAllString(out, "SECRET")
}

// redacted is got with redact applied to its output.
func redacted(f *testServer, got result) result {
	got.stdout, got.stderr = redact(f, got.stdout), redact(f, got.stderr)
	return got
}

// lastLine is the last line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

func checkResult(t *testing.T, want, got result) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// usage is what a usage error of verb prints.
func usage(verb, msg string) result {
	return result{code: 2, stderr: "error: " + msg + "\nRun 'gpufleet " + verb + " --help' for usage.\n"}
}

// checkRequests compares the requests sent under prefix, bodies compared
// as JSON.
func checkRequests(t *testing.T, f *testServer, prefix string, want ...string) {
	t.Helper()
	got := f.requests(prefix)
	if len(got) != len(want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	for i := range want {
		gh, gb, _ := strings.Cut(got[i], " {")
		wh, wb, _ := strings.Cut(want[i], " {")
		if gh != wh {
			t.Errorf("request %d: %q, want %q", i, gh, wh)
		}
		if wb != "" || gb != "" {
			if diff := cmp.Diff(decodeJSON(t, "{"+wb), decodeJSON(t, "{"+gb)); diff != "" {
				t.Errorf("request %d body (-want +got):\n%s", i, diff)
			}
		}
	}
}

func TestCreateUserWithRoles(t *testing.T) {
	tests := []struct {
		name     string
		token    string
		user     string // bob unless set
		args     []string
		wantBody string
		wantDesc string
	}{{
		name:     "--team without --role keeps the older form: a member",
		token:    adminToken,
		args:     []string{"--team", "research", "--team", "vision"},
		wantBody: `{"name":"bob","teams":["research","vision"]}`,
		wantDesc: "user/bob created in research as member, vision as member",
	}, {
		name:     "pairs given one after the other",
		token:    adminToken,
		args:     []string{"--team", "research", "--role", "team-admin", "--team", "vision", "--role", "viewer"},
		wantBody: `{"name":"bob","memberships":[{"team":"research","role":"team-admin"},{"team":"vision","role":"viewer"}]}`,
		wantDesc: "user/bob created in research as team-admin, vision as viewer",
	}, {
		name:     "the teams then the roles pair in order",
		token:    adminToken,
		args:     []string{"--team", "research", "--team", "vision", "--role", "viewer", "--role", "team-admin"},
		wantBody: `{"name":"bob","memberships":[{"team":"research","role":"viewer"},{"team":"vision","role":"team-admin"}]}`,
		wantDesc: "user/bob created in research as viewer, vision as team-admin",
	}, {
		name:     "a --team without its --role is a member",
		token:    adminToken,
		args:     []string{"--team", "research", "--role", "viewer", "--team", "vision"},
		wantBody: `{"name":"bob","memberships":[{"team":"research","role":"viewer"},{"team":"vision","role":"member"}]}`,
		wantDesc: "user/bob created in research as viewer, vision as member",
	}, {
		name:     "a global admin",
		token:    adminToken,
		args:     []string{"--admin"},
		wantBody: `{"name":"bob","admin":true}`,
		wantDesc: "user/bob created (admin)",
	}, {
		name:     "a team-admin makes a service account of its team",
		token:    carolToken,
		user:     "research.bob", // a team-admin's service accounts are named after the team
		args:     []string{"--service-account", "--team", "research", "--role", "member"},
		wantBody: `{"name":"research.bob","serviceAccount":true,"memberships":[{"team":"research","role":"member"}]}`,
		wantDesc: "user/research.bob created in research as member (a service account)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tenancyServer(t)
			user := tt.user
			if user == "" {
				user = "bob"
			}
			got := f.runAs(t, tt.token, append([]string{"create", "user", user}, tt.args...)...)
			checkResult(t, result{stdout: tt.wantDesc + "; its token, shown only once:\nSECRET\n"}, redacted(f, got))
			checkRequests(t, f, "/api/v1/users", "POST /api/v1/users "+tt.wantBody)

			// The last line is the token, and it works.
			who := f.runAs(t, lastLine(got.stdout), "whoami", "-o", "json")
			var u api.User
			if err := json.Unmarshal([]byte(who.stdout), &u); err != nil || u.Name != user {
				t.Errorf("whoami with the new token: %+v (%v)", who, err)
			}
		})
	}

	t.Run("a service account named after its team is a member of it", func(t *testing.T) {
		f := tenancyServer(t)
		got := f.runAs(t, carolToken, "create", "user", "research.ci", "--service-account")
		checkResult(t, result{stdout: "user/research.ci created in research as member (a service account); its token, shown only once:\nSECRET\n"}, redacted(f, got))
		checkRequests(t, f, "/api/v1/users", `POST /api/v1/users {"name":"research.ci","serviceAccount":true,"teams":["research"]}`)
	})
	t.Run("a member cannot create users", func(t *testing.T) {
		f := tenancyServer(t)
		got := f.run(t, "create", "user", "bob", "--team", "research")
		checkResult(t, result{code: 1, stderr: "error: creating a person's account needs the admin role; a team-admin may create service accounts (serviceAccount: true) in its teams\n"}, got)
	})
}

func TestCreateUserBadFlagsFailBeforeSending(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown role", []string{"--team", "research", "--role", "boss"}, `--role "boss": want viewer, member or team-admin`},
		{"a --role after two --team", []string{"--team", "research", "--team", "vision", "--role", "viewer"}, "--role viewer: which --team is it for? With fewer --role than --team, put each --role right after its --team"},
		{"a --role before its --team", []string{"--role", "viewer", "--team", "research"}, "--role viewer comes before its --team research (write --team TEAM --role ROLE)"},
		{"more --role than --team", []string{"--team", "research", "--role", "viewer", "--role", "member"}, "--role member: no --team for it (give --team TEAM --role ROLE pairs)"},
		{"a team twice", []string{"--team", "research", "--team", "research"}, "--team research: given twice"},
		{"an empty team", []string{"--team", " "}, `--team " ": want a team name`},
		{"a service account in two teams", []string{"--service-account", "--team", "research", "--team", "vision"}, "--service-account: a service account belongs to exactly one team; give one --team"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tenancyServer(t)
			got := f.runAs(t, adminToken, append([]string{"create", "user", "bob"}, tt.args...)...)
			checkResult(t, usage("create user", tt.want), got)
			checkRequests(t, f, "/api/v1/users")
		})
	}
}

func TestWhoAmI(t *testing.T) {
	f := tenancyServer(t)
	got := f.runAs(t, carolToken, "whoami")
	checkResult(t, result{stdout: "" +
		"Name:             carol\n" +
		"Admin:            no\n" +
		"Service account:  no\n" +
		"Created:          2025-06-01T09:00:00Z\n" +
		"Teams:\n" +
		"  TEAM      ROLE\n" +
		"  research  team-admin\n"}, got)

	got = f.runAs(t, adminToken, "whoami")
	if !strings.Contains(got.stdout, "Admin:            yes\n") || !strings.HasSuffix(got.stdout, "Teams:            <none>\n") {
		t.Errorf("admin:\n%s", got.stdout)
	}

	got = f.run(t, "whoami", "-o", "json")
	var u api.User
	if err := json.Unmarshal([]byte(got.stdout), &u); err != nil {
		t.Fatal(err)
	}
	if want := []api.Membership{{Team: "research", Role: "member"}}; u.Name != "alice" || !cmp.Equal(u.Memberships, want) {
		t.Errorf("got %+v", u)
	}

	got = f.runAs(t, "nobody", "whoami")
	checkResult(t, result{code: 1, stderr: "error: a valid token is required: send Authorization: Bearer TOKEN\n" + refusedTokenHint}, got)
}

func TestTokens(t *testing.T) {
	t.Run("create sends the flags and prints the token last", func(t *testing.T) {
		f := tenancyServer(t)
		got := f.run(t, "token", "create", "--name", "ci", "--expires-in", "30d")
		checkRequests(t, f, "/api/v1/tokens", `POST /api/v1/tokens {"id":"","name":"ci","expiresIn":"720h"}`)
		checkResult(t, result{stdout: "token alice-ci (ci) for alice created, expires 2025-07-01T12:00:00Z; the token, shown only once:\nSECRET\n"}, redacted(f, got))
		who := f.runAs(t, lastLine(got.stdout), "whoami", "-o", "json")
		if !strings.Contains(who.stdout, `"name": "alice"`) {
			t.Errorf("the new token does not work: %+v", who)
		}
	})
	t.Run("an admin makes a token for another user, without expiry", func(t *testing.T) {
		f := tenancyServer(t)
		got := f.runAs(t, adminToken, "token", "create", "--user", "vic", "--expires-in", "90m")
		checkRequests(t, f, "/api/v1/tokens", `POST /api/v1/tokens {"id":"","user":"vic","expiresIn":"90m"}`)
		checkResult(t, result{stdout: "token vic-unnamed for vic created, expires 2025-06-01T13:30:00Z; the token, shown only once:\nSECRET\n"}, redacted(f, got))
		got = redacted(f, f.runAs(t, adminToken, "token", "create"))
		if lines := strings.Split(got.stdout, "\n"); got.code != 0 || lines[0] != "token admin-unnamed for admin created, does not expire; the token, shown only once:" || lines[1] != "SECRET" {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("a bad --expires-in is refused before sending", func(t *testing.T) {
		f := tenancyServer(t)
		for _, v := range []string{"soon", "-1h", "0s"} {
			got := f.run(t, "token", "create", "--expires-in", v)
			checkResult(t, usage("token create", `--expires-in "`+v+`": want a positive duration such as 720h or 30d`), got)
		}
		checkRequests(t, f, "/api/v1/tokens")
	})
	t.Run("list shows IDs and times, never tokens", func(t *testing.T) {
		f := tenancyServer(t)
		f.runAs(t, adminToken, "token", "create", "--user", "alice", "--name", "ci", "--expires-in", "24h")
		f.runAs(t, adminToken, "token", "revoke", tokenID(f, "alice", "first"))
		got := f.runAs(t, adminToken, "token", "list", "--user", "alice")
		checkResult(t, result{stdout: "" +
			// (IDs are as wide as the server's, names shorter)
			"ID              NAME   USER   CREATED               EXPIRES               REVOKED\n" +
			"alice-ci  ci     alice  2025-06-01T12:00:00Z  2025-06-02T12:00:00Z  -\n" +
			"alice-first  first  alice  2025-05-30T12:00:00Z  -                     2025-06-01T12:00:00Z\n"}, redacted(f, got))
		if strings.Contains(got.stdout, "gpf_") || strings.Contains(got.stdout, aliceToken) {
			t.Errorf("a token is printed:\n%s", got.stdout)
		}

		// Every page is read: 5 tokens in pages of 2.
		f.pageSize = 2
		got = f.runAs(t, adminToken, "token", "list", "-o", "json")
		var l api.List[api.Token]
		if err := json.Unmarshal([]byte(got.stdout), &l); err != nil || len(l.Items) != 5 {
			t.Fatalf("got %v %s", err, got.stdout)
		}
		if strings.Contains(got.stdout, `"token"`) || strings.Contains(got.stdout, "gpf_") {
			t.Errorf("a token is printed:\n%s", got.stdout)
		}
	})
	t.Run("revoke each ID, report the ones that fail", func(t *testing.T) {
		f := tenancyServer(t)
		secret := lastLine(f.run(t, "token", "create").stdout) // alice's
		mine, admins := tokenID(f, "alice", "unnamed"), tokenID(f, "admin", "first")
		got := f.run(t, "token", "revoke", mine, admins, "tok-9")
		checkRequests(t, f, "/api/v1/tokens/", "DELETE /api/v1/tokens/"+mine, "DELETE /api/v1/tokens/"+admins, "DELETE /api/v1/tokens/tok-9")
		checkResult(t, result{code: 1, stdout: "token alice-unnamed revoked\n", stderr: "" +
			"error: admin-first: token admin-first: not found\n" +
			"error: tok-9: token tok-9: not found\n"}, redacted(f, got))
		checkResult(t, result{code: 1, stderr: "error: a valid token is required: send Authorization: Bearer TOKEN\n" + refusedTokenHint}, f.runAs(t, secret, "whoami"))
		checkResult(t, result{stdout: "token alice-first revoked\n"}, redacted(f, f.run(t, "token", "revoke", tokenID(f, "alice", "first"))))
	})
}

func TestGetUsersAndMembers(t *testing.T) {
	f := tenancyServer(t)
	f.pageSize = 2
	got := f.runAs(t, adminToken, "get", "users")
	checkResult(t, result{stdout: "" +
		"NAME   ADMIN  SERVICE-ACCOUNT  TEAMS                AGE\n" +
		"admin  yes    no               -                    3d\n" +
		"alice  no     no               research:member      2d\n" +
		"carol  no     no               research:team-admin  3h\n" +
		"vic    no     no               research:viewer      30m\n"}, got)
	checkRequests(t, f, "/api/v1/users", "GET /api/v1/users", "GET /api/v1/users?pageToken=2")

	got = f.runAs(t, adminToken, "get", "users", "-o", "json")
	var l api.List[api.User]
	if err := json.Unmarshal([]byte(got.stdout), &l); err != nil || len(l.Items) != 4 || l.Items[3].Name != "vic" {
		t.Errorf("json: %v %s", err, got.stdout)
	}

	checkResult(t, result{code: 1, stderr: "error: listing users needs the admin role\n"}, f.run(t, "get", "users"))
	got = f.run(t, "get", "user", "alice", "-o", "wide")
	checkResult(t, result{stdout: "" +
		"NAME   ADMIN  SERVICE-ACCOUNT  TEAMS            AGE  CREATED\n" +
		"alice  no     no               research:member  2d   2025-05-30T12:00:00Z\n"}, got)
	checkResult(t, result{code: 1, stderr: "error: user carol: not found\n"}, f.run(t, "get", "user", "carol"))

	got = f.runAs(t, vicToken, "get", "members", "research")
	checkResult(t, result{stdout: "" +
		"NAME   ROLE        SERVICE-ACCOUNT\n" +
		"alice  member      no\n" +
		"carol  team-admin  no\n" +
		"vic    viewer      no\n"}, got)
	got = f.runAs(t, vicToken, "get", "members", "research", "-o", "json")
	if err := json.Unmarshal([]byte(got.stdout), &l); err != nil || len(l.Items) != 3 || l.Items[1].Memberships[0].Role != "team-admin" {
		t.Errorf("json: %v %s", err, got.stdout)
	}
	// A team the caller is not in is as missing as one that does not exist.
	checkResult(t, result{code: 1, stderr: "error: team vision: not found\n"}, f.run(t, "get", "members", "vision"))
	checkResult(t, usage("get", "get members TEAM: which team?"), f.run(t, "get", "members"))
	checkResult(t, usage("get", "get nodes takes no name"), f.run(t, "get", "nodes", "gpu1"))
}

func TestSetAndDeleteMember(t *testing.T) {
	f := tenancyServer(t)
	got := f.runAs(t, carolToken, "set", "member", "research", "alice", "--role", "viewer")
	checkResult(t, result{stdout: "alice is a viewer of team research\n"}, got)
	f.addUser(core.User{Name: "bob", CreatedAt: testNow.Add(-time.Hour)}, "bob-token") // in no team
	got = f.runAs(t, carolToken, "set", "member", "research", "bob", "--role", "team-admin", "-o", "json")
	var u api.User
	if err := json.Unmarshal([]byte(got.stdout), &u); err != nil || u.Name != "bob" || u.Memberships[0] != (api.Membership{Team: "research", Role: "team-admin"}) {
		t.Errorf("json: %v %s", err, got.stdout)
	}
	got = f.runAs(t, carolToken, "delete", "member", "research", "vic")
	checkResult(t, result{stdout: "vic removed from team research\n"}, got)
	checkRequests(t, f, "/api/v1/teams/",
		`PUT /api/v1/teams/research/members/alice {"role":"viewer"}`,
		`PUT /api/v1/teams/research/members/bob {"role":"team-admin"}`,
		`DELETE /api/v1/teams/research/members/vic`)
	got = f.runAs(t, carolToken, "get", "members", "research")
	checkResult(t, result{stdout: "" +
		"NAME   ROLE        SERVICE-ACCOUNT\n" +
		"alice  viewer      no\n" +
		"bob    team-admin  no\n" +
		"carol  team-admin  no\n"}, got)

	// Errors from the server, and usage errors that send nothing.
	checkResult(t, result{code: 1, stderr: "error: managing the members of team research needs the team-admin role; you are a viewer\n"},
		f.run(t, "set", "member", "research", "vic", "--role", "member"))
	checkResult(t, result{code: 1, stderr: "error: team vision: not found\n"},
		f.runAs(t, carolToken, "delete", "member", "vision", "alice"))
	checkResult(t, result{code: 1, stderr: "error: member vic of team research: not found\n"},
		f.runAs(t, carolToken, "delete", "member", "research", "vic"))
	n := len(f.requests("/api/v1/teams/"))
	checkResult(t, usage("set member", "--role is required: viewer, member or team-admin"), f.runAs(t, carolToken, "set", "member", "research", "vic"))
	checkResult(t, usage("set member", `--role "owner": want viewer, member or team-admin`), f.runAs(t, carolToken, "set", "member", "research", "vic", "--role", "owner"))
	checkResult(t, usage("delete", `delete "members": want team, user, member, budget, secret or volume`), f.runAs(t, carolToken, "delete", "members"))
	if m := len(f.requests("/api/v1/teams/")); m != n {
		t.Errorf("usage errors sent %d requests", m-n)
	}
}

func TestSetPriorityClasses(t *testing.T) {
	f := tenancyServer(t)
	got := f.runAs(t, carolToken, "set", "priority-classes", "research", "production,training", "batch", "training")
	checkResult(t, result{stdout: "team/research configured: may use priority classes production, training, batch\n"}, got)
	if pc := storedTeam(f, "research").PriorityClasses; !cmp.Equal(pc, []string{"production", "training", "batch"}) {
		t.Errorf("stored %q", pc)
	}
	got = f.runAs(t, adminToken, "set", "priority-classes", "research", "--default", "-o", "json")
	var tm api.Team
	if err := json.Unmarshal([]byte(got.stdout), &tm); err != nil || tm.Name != "research" || len(tm.PriorityClasses) != 0 {
		t.Errorf("json: %v %s", err, got.stdout)
	}
	got = f.runAs(t, carolToken, "set", "pc", "research", "--default")
	checkResult(t, result{stdout: "team/research configured: may use every preemptible priority class (the default)\n"}, got)
	checkRequests(t, f, "/api/v1/teams/",
		`PATCH /api/v1/teams/research {"priorityClasses":["production","training","batch"]}`,
		`PATCH /api/v1/teams/research {"priorityClasses":[]}`,
		`PATCH /api/v1/teams/research {"priorityClasses":[]}`)

	checkResult(t, result{code: 1, stderr: "error: invalid request\n  priorityClasses[1]: unknown priority class \"gold\" (known: production, training, development, batch)\n"},
		f.runAs(t, carolToken, "set", "priority-classes", "research", "training,gold"))
	checkResult(t, result{code: 1, stderr: "error: changing the priority classes of team research needs the team-admin role; you are a member\n"},
		f.run(t, "set", "priority-classes", "research", "production"))
	n := len(f.requests("/api/v1/teams/"))
	checkResult(t, usage("set priority-classes", "which classes? give CLASS[,CLASS...], e.g. training,development, or --default"),
		f.runAs(t, carolToken, "set", "priority-classes", "research", ","))
	checkResult(t, usage("set priority-classes", "--default and a list of classes: give one or the other"),
		f.runAs(t, carolToken, "set", "priority-classes", "research", "batch", "--default"))
	if m := len(f.requests("/api/v1/teams/")); m != n {
		t.Errorf("usage errors sent %d requests", m-n)
	}
}

// auditTrail makes the server record an audit trail of five requests, as
// they happen: the admin creates team speech three hours ago, alice
// submits wl-1 two hours ago, is refused the production class 50 minutes
// ago, a caller without a token is refused 20 minutes ago, and alice
// cancels wl-1 a minute ago.
func auditTrail(f *testServer) {
	f.t.Helper()
	ctx := context.Background()
	defer f.setNow(f.clock())
	at := func(d time.Duration) { f.setNow(testNow.Add(-d)) }
	alice := api.NewClient(f.URL, aliceToken)
	at(3 * time.Hour)
	if _, err := f.admin().CreateTeam(ctx, &api.Team{Name: "speech"}); err != nil {
		f.t.Fatal(err)
	}
	at(2 * time.Hour)
	w := api.Workload{Team: "research", Resources: api.Resources{GPUs: 1000}, Command: []string{"sleep"}}
	if _, err := alice.SubmitWorkload(ctx, &w, ""); err != nil {
		f.t.Fatal(err)
	}
	at(50 * time.Minute)
	w.Priority = "production"
	if _, err := alice.SubmitWorkload(ctx, &w, ""); err == nil {
		f.t.Fatal("alice may submit production workloads")
	}
	at(20 * time.Minute)
	if _, err := api.NewClient(f.URL, "").SubmitWorkload(ctx, &w, ""); err == nil {
		f.t.Fatal("a submission without a token was accepted")
	}
	at(time.Minute)
	if _, err := alice.CancelWorkload(ctx, "wl-1"); err != nil {
		f.t.Fatal(err)
	}
}

func TestAudit(t *testing.T) {
	f := tenancyServer(t)
	auditTrail(f)
	f.pageSize = 2

	got := f.runAs(t, adminToken, "audit")
	checkResult(t, result{stdout: "" +
		"TIME                  USER   ROLE    ACTION           OBJECT  TEAM      STATUS\n" +
		"2025-06-01T09:00:00Z  admin  admin   create team      speech  speech    201\n" +
		"2025-06-01T10:00:00Z  alice  member  create workload  wl-1    research  201\n" +
		"2025-06-01T11:10:00Z  alice  member  create workload  -       research  403\n" +
		"2025-06-01T11:40:00Z  -      -       create workload  -       -         401\n" +
		"2025-06-01T11:59:00Z  alice  member  cancel workload  wl-1    research  200\n"}, got)
	checkRequests(t, f, "/api/v1/audit", "GET /api/v1/audit", "GET /api/v1/audit?pageToken=2", "GET /api/v1/audit?pageToken=4")

	t.Run("filters and the limit go to the server, and pages stop at the limit", func(t *testing.T) {
		f := tenancyServer(t)
		auditTrail(f)
		f.pageSize = 2
		got := f.runAs(t, adminToken, "audit", "--since", "2h", "--user", "alice", "--limit", "3", "-o", "wide")
		checkResult(t, result{stdout: "" +
			"TIME                  USER   ROLE    ACTION           OBJECT  TEAM      STATUS  METHOD  PATH                    MESSAGE\n" +
			"2025-06-01T10:00:00Z  alice  member  create workload  wl-1    research  201     POST    /api/v1/workloads       -\n" +
			"2025-06-01T11:10:00Z  alice  member  create workload  -       research  403     POST    /api/v1/workloads       team research may not use priority class production (allowed: training, development, batch); a team-admin or an admin can grant it\n" +
			"2025-06-01T11:59:00Z  alice  member  cancel workload  wl-1    research  200     DELETE  /api/v1/workloads/wl-1  -\n"}, got)
		checkRequests(t, f, "/api/v1/audit",
			"GET /api/v1/audit?limit=3&since=2025-06-01T10%3A00%3A00Z&user=alice",
			"GET /api/v1/audit?limit=1&pageToken=3&since=2025-06-01T10%3A00%3A00Z&user=alice")
	})

	t.Run("json and an RFC 3339 --since", func(t *testing.T) {
		f := tenancyServer(t)
		auditTrail(f)
		got := f.runAs(t, adminToken, "audit", "--since", "2025-06-01T11:30:00Z", "-o", "json")
		var l api.List[api.AuditEntry]
		if err := json.Unmarshal([]byte(got.stdout), &l); err != nil {
			t.Fatalf("%v %s", err, got.stdout)
		}
		all, err := f.admin().Audit(context.Background(), api.AuditOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(all[3:], l.Items); diff != "" || len(all) != 5 {
			t.Errorf("%d entries in all, (-want +got):\n%s", len(all), diff)
		}
		if !strings.Contains(got.stdout, `"time": "2025-06-01T11:40:00Z"`) {
			t.Errorf("times are not RFC 3339:\n%s", got.stdout)
		}
		got = f.runAs(t, adminToken, "audit", "--since", "1m", "--user", "bob", "-o", "json")
		checkResult(t, result{stdout: "{\n  \"items\": []\n}\n"}, got)
	})

	t.Run("errors", func(t *testing.T) {
		f := tenancyServer(t)
		checkResult(t, result{code: 1, stderr: "error: reading the audit trail needs the admin role\n"}, f.run(t, "audit"))
		checkResult(t, usage("audit", `--since "yesterday": want a duration such as 1h or 7d, or an RFC 3339 time such as 2025-06-01T12:00:00Z`),
			f.runAs(t, adminToken, "audit", "--since", "yesterday"))
		checkResult(t, usage("audit", "--limit -1: must not be negative"), f.runAs(t, adminToken, "audit", "--limit", "-1"))
		if n := len(f.requests("/api/v1/audit")); n != 1 {
			t.Errorf("sent %d requests, want 1", n)
		}
	})
}

func TestTenancyVerbsUsage(t *testing.T) {
	f := tenancyServer(t)
	checkResult(t, usage("token", "token what? want create, list or revoke"), f.run(t, "token"))
	checkResult(t, usage("delete", "delete what? want team, user, member, budget, secret or volume"), f.run(t, "delete"))
	checkResult(t, usage("set", `set "members": want quota, priority-classes, member, price or budget`), f.run(t, "set", "members"))
	if got := f.run(t, "token", "revoke"); got.code != 2 {
		t.Errorf("token revoke without an ID: %+v", got)
	}
	if got := f.run(t, "whoami", "alice"); got.code != 2 {
		t.Errorf("whoami with an argument: %+v", got)
	}
}
