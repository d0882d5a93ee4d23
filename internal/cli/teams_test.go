package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

// teamCall splits a recorded team request into its head ("POST" or
// "PATCH name") and its decoded body.
func teamCall(t *testing.T, call string) (string, any) {
	t.Helper()
	i := strings.Index(call, "{")
	if i < 0 {
		t.Fatalf("no body in %q", call)
	}
	return strings.TrimSpace(call[:i]), decodeJSON(t, call[i:])
}

// teamChanges returns the team changes sent so far, "POST body" or
// "PATCH name body".
func teamChanges(f *testServer) []string {
	var out []string
	for _, c := range f.requests("/api/v1/teams") {
		method, rest, _ := strings.Cut(c, " ")
		uri, body, _ := strings.Cut(rest, " ")
		switch {
		case method == "POST" && uri == "/api/v1/teams":
			out = append(out, "POST "+body)
		case method == "PATCH":
			out = append(out, "PATCH "+strings.TrimPrefix(uri, "/api/v1/teams/")+" "+body)
		}
	}
	return out
}

// storedTeam returns the team as the server holds it, or nil.
func storedTeam(f *testServer, name string) *api.Team {
	f.t.Helper()
	teams, err := f.admin().Teams(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, t := range teams {
		if t.Name == name {
			return &t
		}
	}
	return nil
}

// quota is the part of a team that create, set quota and apply change.
type quota struct{ Guaranteed, Limit, Weight int64 }

func quotaOf(t api.Team) quota {
	q := quota{Guaranteed: t.GuaranteedMilliGPU, Limit: -1, Weight: t.Weight}
	if t.LimitMilliGPU != nil {
		q.Limit = *t.LimitMilliGPU
	}
	return q
}

func TestCreateTeamSendsTheQuota(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantBody string
		want     api.Team // as stored, CreatedAt aside
	}{{
		name:     "no flags sends no limit, and the team is unlimited with weight 1",
		args:     []string{"create", "team", "nlp"},
		wantBody: `{"name":"nlp","guaranteedMilliGPU":0,"usageMilliGPU":0,"fairShareMilliGPU":0,"pendingMilliGPU":0}`,
		want:     api.Team{Name: "nlp", LimitMilliGPU: ptr(int64(-1)), Weight: 1},
	}, {
		name:     "quantities are GPUs and may be fractions",
		args:     []string{"create", "team", "nlp", "--guaranteed", "2.5", "--limit", "16", "--weight", "2"},
		wantBody: `{"name":"nlp","guaranteedMilliGPU":2500,"limitMilliGPU":16000,"weight":2,"usageMilliGPU":0,"fairShareMilliGPU":0,"pendingMilliGPU":0}`,
		want:     api.Team{Name: "nlp", GuaranteedMilliGPU: 2500, LimitMilliGPU: ptr(int64(16000)), Weight: 2},
	}, {
		name:     "--limit unlimited sends -1",
		args:     []string{"create", "team", "nlp", "--guaranteed", "0.25", "--limit", "unlimited"},
		wantBody: `{"name":"nlp","guaranteedMilliGPU":250,"limitMilliGPU":-1,"usageMilliGPU":0,"fairShareMilliGPU":0,"pendingMilliGPU":0}`,
		want:     api.Team{Name: "nlp", GuaranteedMilliGPU: 250, LimitMilliGPU: ptr(int64(-1)), Weight: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			got := runCLI(t, invocation{args: tt.args, vars: f.vars(t, adminToken)})
			if diff := cmp.Diff(result{stdout: "team/nlp created\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Fatalf("run (-want +got):\n%s", diff)
			}
			calls := teamChanges(f)
			if len(calls) != 1 {
				t.Fatalf("got team requests %q, want one", calls)
			}
			head, body := teamCall(t, calls[0])
			if head != "POST" {
				t.Errorf("request %q, want a POST", head)
			}
			if diff := cmp.Diff(decodeJSON(t, tt.wantBody), body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			stored := storedTeam(f, "nlp")
			stored.CreatedAt = tt.want.CreatedAt
			if diff := cmp.Diff(&tt.want, stored); diff != "" {
				t.Errorf("stored team (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadQuotaFlagsFailBeforeSending(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // the error line
	}{
		{"a negative guarantee", []string{"create", "team", "nlp", "--guaranteed", "-1"}, `--guaranteed "-1": must not be negative`},
		{"a zero weight", []string{"create", "team", "nlp", "--weight", "0"}, `--weight "0": must be from 1 to 1000`},
		{"a weight above 1000", []string{"set", "quota", "research", "--weight", "1001"}, `--weight "1001": must be from 1 to 1000`},
		{"a fractional weight", []string{"set", "quota", "research", "--weight", "1.5"}, `--weight "1.5": want a whole number from 1 to 1000`},
		{"a limit that is not a number", []string{"create", "team", "nlp", "--limit", "abc"}, `--limit "abc": "abc" is not a number or is too large (want a number of GPUs, or unlimited)`},
		{"a negative limit other than -1", []string{"set", "quota", "research", "--limit", "-2"}, `--limit "-2": must be a number of GPUs, or unlimited (-1)`},
		{"more than three decimals", []string{"set", "quota", "research", "--guaranteed", "0.0001"}, `--guaranteed "0.0001": "0.0001" has more than three decimals`},
		{"a limit below the guarantee", []string{"create", "team", "nlp", "--guaranteed", "8", "--limit", "4"}, `--limit "4": 4 GPUs is below the guarantee of 8`},
		{"every bad flag is named", []string{"set", "quota", "research", "--guaranteed", "-1", "--weight", "0"}, `--guaranteed "-1": must not be negative; --weight "0": must be from 1 to 1000`},
		{"set quota without a flag", []string{"set", "quota", "research"}, `nothing to set: give --guaranteed, --limit, --weight, --guaranteed-model, --guaranteed-pool or --residency`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			got := runCLI(t, invocation{args: tt.args, vars: f.vars(t, adminToken)})
			verb := "gpufleet " + strings.Join(tt.args[:2], " ")
			want := result{code: 2, stderr: "error: " + tt.want + "\nRun '" + verb + " --help' for usage.\n"}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if calls := teamChanges(f); len(calls) != 0 {
				t.Errorf("sent %q, want nothing", calls)
			}
		})
	}
}

func TestSetQuota(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantBody string
		wantOut  string
	}{{
		name:     "only the flags given are sent",
		args:     []string{"set", "quota", "research", "--weight", "3"},
		wantBody: `{"weight":3}`,
		wantOut: "" +
			"NAME      GUARANTEED  LIMIT  WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           16     3       2.5    2.75        0.25\n",
	}, {
		name:     "every flag, in GPUs",
		args:     []string{"set", "quota", "vision", "--guaranteed", "8", "--limit", "16.5", "--weight", "2"},
		wantBody: `{"guaranteedMilliGPU":8000,"limitMilliGPU":16500,"weight":2}`,
		wantOut: "" +
			"NAME    GUARANTEED  LIMIT  WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"vision  8           16.5   2       0      1.25        2\n",
	}, {
		name:     "--limit unlimited removes the limit",
		args:     []string{"set", "quota", "research", "--limit", "unlimited"},
		wantBody: `{"limitMilliGPU":-1}`,
		wantOut: "" +
			"NAME      GUARANTEED  LIMIT      WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           unlimited  2       2.5    2.75        0.25\n",
	}, {
		name:     "--guaranteed-model sends model guarantees in milli-GPU",
		args:     []string{"set", "quota", "research", "--guaranteed", "8", "--guaranteed-model", "H100=4", "--guaranteed-model", "A10=2.5"},
		wantBody: `{"guaranteedMilliGPU":8000,"guaranteedByModelMilliGPU":{"H100":4000,"A10":2500}}`,
		wantOut: "" +
			"NAME      GUARANTEED  LIMIT  WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           16     2       2.5    2.75        0.25\n",
	}, {
		name:     "--guaranteed-model alone is enough, and MODEL= clears the model guarantees",
		args:     []string{"set", "quota", "research", "--guaranteed-model", "H100="},
		wantBody: `{"guaranteedByModelMilliGPU":{}}`,
		wantOut: "" +
			"NAME      GUARANTEED  LIMIT  WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           16     2       2.5    2.75        0.25\n",
	}, {
		name:     "--guaranteed-pool sends pool guarantees in milli-GPU",
		args:     []string{"set", "quota", "research", "--guaranteed", "8", "--guaranteed-pool", "onprem=8"},
		wantBody: `{"guaranteedMilliGPU":8000,"guaranteedByPoolMilliGPU":{"onprem":8000}}`,
		wantOut: "" +
			"NAME      GUARANTEED  LIMIT  WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           16     2       2.5    2.75        0.25\n",
	}, {
		name:     "--guaranteed-pool alone is enough, and POOL= clears the pool guarantees",
		args:     []string{"set", "quota", "research", "--guaranteed-pool", "onprem="},
		wantBody: `{"guaranteedByPoolMilliGPU":{}}`,
		wantOut: "" +
			"NAME      GUARANTEED  LIMIT  WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           16     2       2.5    2.75        0.25\n",
	}, {
		name:     "--limit -1 removes the limit too",
		args:     []string{"set", "quota", "research", "--limit", "-1"},
		wantBody: `{"limitMilliGPU":-1}`,
		wantOut: "" +
			"NAME      GUARANTEED  LIMIT      WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           unlimited  2       2.5    2.75        0.25\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			teamsAtWork(f)
			f.forget()
			got := runCLI(t, invocation{args: tt.args, vars: f.vars(t, adminToken)})
			if diff := cmp.Diff(result{stdout: tt.wantOut}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
			calls := teamChanges(f)
			if len(calls) != 1 {
				t.Fatalf("got team requests %q, want one", calls)
			}
			head, body := teamCall(t, calls[0])
			if want := "PATCH " + tt.args[2]; head != want {
				t.Errorf("request %q, want %q", head, want)
			}
			if diff := cmp.Diff(decodeJSON(t, tt.wantBody), body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("-o json prints the team as the server answers", func(t *testing.T) {
		f := newTestServer(t)
		got := runCLI(t, invocation{args: []string{"set", "quota", "vision", "--guaranteed", "2", "-o", "json"}, vars: f.vars(t, adminToken)})
		var team api.Team
		if err := json.Unmarshal([]byte(got.stdout), &team); err != nil {
			t.Fatalf("%v\n%s", err, got.stdout)
		}
		if diff := cmp.Diff(storedTeam(f, "vision"), &team); diff != "" {
			t.Errorf("(-stored +printed):\n%s", diff)
		}
	})

	errors := []struct {
		name  string
		token string
		args  []string
		want  string
	}{
		{"a non-admin is refused by the server", aliceToken, []string{"set", "quota", "research", "--weight", "2"}, "error: changing the quota of team research (weight) needs the admin role; a team-admin may change only priorityClasses\n"},
		{"an unknown team is not found", adminToken, []string{"set", "quota", "nope", "--weight", "2"}, "error: team nope: not found\n"},
		{"a limit below the stored guarantee is refused by the server", adminToken, []string{"set", "quota", "research", "--limit", "4"},
			"error: invalid request\n  limitMilliGPU: 4 GPUs is below the guarantee of 8\n"},
	}
	for _, tt := range errors {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			got := runCLI(t, invocation{args: tt.args, vars: f.vars(t, tt.token)})
			if diff := cmp.Diff(result{code: 1, stderr: tt.want}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestApply(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		stdin     bool // pass the file as -f -
		wantOut   string
		wantCalls []string // "POST" or "PATCH name", then the body
		wantTeams []api.Team
	}{{
		name: "missing teams are created and existing ones configured",
		file: `
teams:
  - name: vision
    guaranteed: 8      # GPUs
    limit: 16          # GPUs
    weight: 2
  - name: nlp
    guaranteed: 2.5
`,
		wantOut: "team/vision configured\nteam/nlp created\n",
		wantCalls: []string{
			`PATCH vision {"guaranteedMilliGPU":8000,"limitMilliGPU":16000,"weight":2,"guaranteedByModelMilliGPU":{},"guaranteedByPoolMilliGPU":{}}`,
			`POST {"name":"nlp","guaranteedMilliGPU":2500,"weight":1,"usageMilliGPU":0,"fairShareMilliGPU":0,"pendingMilliGPU":0}`,
		},
		wantTeams: []api.Team{
			{Name: "vision", GuaranteedMilliGPU: 8000, LimitMilliGPU: ptr(int64(16000)), Weight: 2},
			{Name: "nlp", GuaranteedMilliGPU: 2500, LimitMilliGPU: ptr(int64(-1)), Weight: 1},
		},
	}, {
		name:      "a field left out returns to its default",
		file:      "teams:\n  - name: research\n",
		wantOut:   "team/research configured\n",
		wantCalls: []string{`PATCH research {"guaranteedMilliGPU":0,"limitMilliGPU":-1,"weight":1,"guaranteedByModelMilliGPU":{},"guaranteedByPoolMilliGPU":{}}`},
		wantTeams: []api.Team{{Name: "research", LimitMilliGPU: ptr(int64(-1)), Weight: 1}},
	}, {
		name:      "- reads standard input, and limit may say unlimited",
		file:      "teams:\n  - {name: research, guaranteed: '0.5', limit: unlimited, weight: 3}\n",
		stdin:     true,
		wantOut:   "team/research configured\n",
		wantCalls: []string{`PATCH research {"guaranteedMilliGPU":500,"limitMilliGPU":-1,"weight":3,"guaranteedByModelMilliGPU":{},"guaranteedByPoolMilliGPU":{}}`},
		wantTeams: []api.Team{{Name: "research", GuaranteedMilliGPU: 500, LimitMilliGPU: ptr(int64(-1)), Weight: 3}},
	}, {
		name:      "a JSON file is read too, and limit -1 is unlimited",
		file:      `{"teams": [{"name": "nlp", "guaranteed": 1, "limit": -1}]}`,
		wantOut:   "team/nlp created\n",
		wantCalls: []string{`POST {"name":"nlp","guaranteedMilliGPU":1000,"weight":1,"usageMilliGPU":0,"fairShareMilliGPU":0,"pendingMilliGPU":0}`},
		wantTeams: []api.Team{{Name: "nlp", GuaranteedMilliGPU: 1000, LimitMilliGPU: ptr(int64(-1)), Weight: 1}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			inv := invocation{vars: f.vars(t, adminToken)}
			if tt.stdin {
				inv.args, inv.stdin = []string{"apply", "-f", "-"}, tt.file
			} else {
				path := filepath.Join(t.TempDir(), "fleet.yaml")
				os.WriteFile(path, []byte(tt.file), 0o600)
				inv.args = []string{"apply", "-f", path}
			}
			got := runCLI(t, inv)
			if diff := cmp.Diff(result{stdout: tt.wantOut}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
			calls := teamChanges(f)
			if len(calls) != len(tt.wantCalls) {
				t.Fatalf("got team requests %q, want %q", calls, tt.wantCalls)
			}
			for i := range calls {
				gotHead, gotBody := teamCall(t, calls[i])
				wantHead, wantBody := teamCall(t, tt.wantCalls[i])
				if gotHead != wantHead {
					t.Errorf("request %d is %q, want %q", i, gotHead, wantHead)
				}
				if diff := cmp.Diff(wantBody, gotBody); diff != "" {
					t.Errorf("request %d body (-want +got):\n%s", i, diff)
				}
			}
			for _, want := range tt.wantTeams {
				stored := storedTeam(f, want.Name)
				if stored == nil {
					t.Errorf("team %s was not stored", want.Name)
					continue
				}
				if diff := cmp.Diff(quotaOf(want), quotaOf(*stored)); diff != "" {
					t.Errorf("team %s quota (-want +got):\n%s", want.Name, diff)
				}
			}
		})
	}
}

func TestApplyRejectsBeforeSending(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		noFile     bool
		wantCode   int
		wantStderr string // after "error: PATH" (the file's path is replaced by FILE)
	}{{
		name:       "an unknown field is named",
		file:       "teams:\n  - name: vision\n    wieght: 2\n",
		wantCode:   1,
		wantStderr: "error: FILE: unknown field \"wieght\"\n",
	}, {
		name:       "an unknown top-level field is named",
		file:       "teams: []\nqueues: []\n",
		wantCode:   1,
		wantStderr: "error: FILE: unknown field \"queues\"\n",
	}, {
		name:       "a file without teams is an error",
		file:       "# nothing\n",
		wantCode:   1,
		wantStderr: "error: FILE: declares no teams (want a list under teams:)\n",
	}, {
		name: "every bad value is listed with its path",
		file: `
teams:
  - name: vision
    guaranteed: -1
  - name: nlp
    limit: abc
    weight: 0
  - name: vision
  - name: Bad_Name
    guaranteed: 8
    limit: 4
    weight: 1.5
  - guaranteed: 1
`,
		wantCode: 1,
		wantStderr: "error: FILE: invalid, nothing was applied\n" +
			"  teams[0].guaranteed: must not be negative\n" +
			"  teams[1].limit: \"abc\" is not a number or is too large (want a number of GPUs, or unlimited)\n" +
			"  teams[1].weight: must be from 1 to 1000\n" +
			"  teams[2].name: \"vision\" is declared already, in teams[0]\n" +
			"  teams[3].name: \"Bad_Name\": must be lowercase letters, digits and '-', at most 63 characters\n" +
			"  teams[3].weight: want a whole number from 1 to 1000\n" +
			"  teams[3].limit: 4 GPUs is below the guarantee of 8\n" +
			"  teams[4].name: is missing\n",
	}, {
		name:       "apply without -f is a usage error",
		noFile:     true,
		wantCode:   2,
		wantStderr: "error: apply needs -f FILE ('-' for standard input)\nRun 'gpufleet apply --help' for usage.\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			path := filepath.Join(t.TempDir(), "fleet.yaml")
			os.WriteFile(path, []byte(tt.file), 0o600)
			args := []string{"apply", "-f", path}
			if tt.noFile {
				args = args[:1]
			}
			got := runCLI(t, invocation{args: args, vars: f.vars(t, adminToken)})
			got.stderr = strings.ReplaceAll(got.stderr, path, "FILE")
			if diff := cmp.Diff(result{code: tt.wantCode, stderr: tt.wantStderr}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if calls := teamChanges(f); len(calls) != 0 {
				t.Errorf("sent %q, want nothing", calls)
			}
		})
	}
}

func TestApplyReportsEachTeamTheServerRefuses(t *testing.T) {
	f := newTestServer(t)
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(path, []byte("teams:\n  - name: research\n    guaranteed: 1\n  - name: nlp\n"), 0o600)
	got := runCLI(t, invocation{args: []string{"apply", "-f", path}, vars: f.vars(t, aliceToken)})
	want := result{code: 1, stderr: "" +
		"error: team/research: changing the quota of team research (guaranteedMilliGPU) needs the admin role; a team-admin may change only priorityClasses\n" +
		"error: team/nlp: creating teams needs the admin role\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
