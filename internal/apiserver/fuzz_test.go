package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// fuzzCaller is one of the users the submit fuzz target posts as.
type fuzzCaller struct {
	name, token string
	admin       bool
	// submit: the teams the caller may submit to.
	submit map[string]bool
}

// submitServer starts the API over real HTTP on a real store in a temporary
// directory, with teams research and inference and three callers: an
// admin, a member of research who views inference, and a user in no team.
func submitServer(f *testing.F) (string, []fuzzCaller) {
	ctx := context.Background()
	// NoSync: a throwaway store, durable writes would only slow the fuzzer.
	st, err := store.OpenWith(ctx, filepath.Join(f.TempDir(), "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	for _, t := range []core.TeamName{"default", "research", "inference"} {
		if err := st.CreateTeam(ctx, core.NewTeam(t, now)); err != nil {
			f.Fatal(err)
		}
	}
	var callers []fuzzCaller
	add := func(u core.User, submit ...string) {
		tok := NewToken()
		if err := st.CreateUser(ctx, u, core.Token{Name: "fuzz", CreatedAt: now}, HashToken(tok)); err != nil {
			f.Fatal(err)
		}
		c := fuzzCaller{name: u.Name, token: tok, admin: u.Admin, submit: map[string]bool{}}
		for _, t := range submit {
			c.submit[t] = true
		}
		callers = append(callers, c)
	}
	add(core.User{Name: "root", Admin: true, CreatedAt: now}, "default", "research", "inference")
	add(core.User{Name: "mem", CreatedAt: now, Memberships: []core.Membership{
		{Team: "research", Role: core.RoleMember}, {Team: "inference", Role: core.RoleViewer}}}, "research")
	add(core.User{Name: "loner", CreatedAt: now})
	srv := httptest.NewServer(New(Options{Store: st, DefaultTeam: "default", OpenAPI: api.OpenAPI}))
	f.Cleanup(srv.Close)
	return srv.URL, callers
}

// FuzzSubmit posts fuzzed bodies to POST /api/v1/workloads as an admin, a
// member or a user in no team. Whatever the body: the answer is never a 5xx,
// always JSON; an error names its code and, for invalid input, the fields;
// a created workload is the caller's, in a team the caller may submit to,
// Pending, and of a class the team allows.
func FuzzSubmit(f *testing.F) {
	base, callers := submitServer(f)
	seeds := []string{
		`{"command":["true"],"resources":{"gpus":1}}`,
		`{"team":"research","command":["sh","-c","echo hi"],"resources":{"gpus":0.25},"priority":"batch"}`,
		`{"team":"research","command":["true"],"resources":{"gpus":1},"priority":"production"}`,
		`{"team":"inference","command":["true"],"resources":{"gpus":1}}`,
		`{"team":"nope","command":["true"],"resources":{"gpus":1}}`,
		`{"command":["true"],"resources":{"gpus":1},"status":{"phase":"Succeeded"}}`,
		`{"command":["true"],"resources":{"gpus":1},"owner":"root","id":"wl-aaaaaaaaaaaa"}`,
		`{"command":["true"],"resources":{"gpus":1},"createdAt":"2020-01-01T00:00:00Z"}`,
		`{"command":["true"],"resources":0}`,
		`{"command":["true"],"resources":{"gpus":1.5}}`,
		`{"command":["true"],"priority":"urgent","resources":{"gpus":1}}`,
		`{"command":["true"],"kind":"notebook","resources":{"gpuMemoryMiB":1024}}`,
		`{"command":["true"],"replicas":300,"resources":{"gpus":8}}`,
		`{"command":["true"`,
		`{"command":["true"],"resources":{"gpus":1}} {}`,
		`null`,
		`[]`,
		``,
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i), "")
	}
	f.Add([]byte(seeds[0]), uint8(1), "key-1")
	f.Add([]byte(seeds[1]), uint8(1), "key-1")
	hc := &http.Client{Timeout: 30 * time.Second}
	f.Fuzz(func(t *testing.T, body []byte, who uint8, key string) {
		c := callers[int(who)%len(callers)]
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/workloads", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			// A header value the client refuses to send is not the
			// server's concern.
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Skipf("request not sent: %v", err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		in := func() string { return "caller " + c.name + ", key " + key + ", body " + string(body) }
		if resp.StatusCode >= 500 {
			t.Fatalf("status %d (%s)\nanswer: %s\n%s", resp.StatusCode, resp.Status, out, in())
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" || !json.Valid(out) {
			t.Fatalf("status %d with Content-Type %q and a body that is not JSON: %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), out, in())
		}
		if resp.StatusCode >= 400 {
			var eb api.ErrorBody
			if err := json.Unmarshal(out, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("status %d: error body without code or message: %s\n%s", resp.StatusCode, out, in())
			}
			if resp.StatusCode == http.StatusBadRequest && eb.Error.Code == api.CodeInvalid {
				if len(eb.Error.Fields) == 0 {
					t.Fatalf("400 invalid names no field: %s\n%s", out, in())
				}
				for _, fe := range eb.Error.Fields {
					if fe.Field == "" || fe.Problem == "" {
						t.Fatalf("400 with an unnamed field or problem: %s\n%s", out, in())
					}
				}
			}
			return
		}
		if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d on submit: %s\n%s", resp.StatusCode, out, in())
		}
		var w api.Workload
		if err := json.Unmarshal(out, &w); err != nil {
			t.Fatalf("status %d: answer is not a workload: %v: %s\n%s", resp.StatusCode, err, out, in())
		}
		switch {
		case w.ID == "" || w.Owner != c.name:
			t.Fatalf("created workload %q owned by %q, want a new ID owned by %s\n%s", w.ID, w.Owner, c.name, in())
		case !c.submit[w.Team]:
			t.Fatalf("%s created a workload in team %q, where it may not submit\n%s", c.name, w.Team, in())
		case !c.admin && w.Priority == "production":
			t.Fatalf("%s created a production workload in %s, a class the team was never granted\n%s", c.name, w.Team, in())
		case w.Status.Phase != api.PhasePending || w.Status.Attempts != 0 || len(w.Status.Placement) != 0:
			t.Fatalf("created workload's status %+v: the client set it\n%s", w.Status, in())
		}
	})
}
