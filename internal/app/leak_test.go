package app

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// TestTokensDoNotLeak runs a server with its log captured, uses it the
// ordinary way (users, whoami, submit, logs, cancel, tokens made and
// revoked, refused and unauthenticated requests), stops it, and looks for
// every token's text in every file of the data dir (the SQLite database
// with its -wal and -shm, the workloads' files) and in the log: none may
// hold one. The audit trail records each mutation with its user and holds
// no token either.
func TestTokensDoNotLeak(t *testing.T) {
	dir := t.TempDir()
	logs := &lockedBuffer{}
	s := startWith(t, loadConfig(t, dir, "limits:\n  burst: 1000\n"), logs)
	h := &hclient{t: t, addr: s.addr}
	admin := s.admin.Token
	tokens := map[string]string{"admin": admin}

	h.must(admin, "POST", "/api/v1/teams", `{"name":"`+teamA+`"}`, http.StatusCreated, nil)
	var alice, carol, bot api.User
	h.must(admin, "POST", "/api/v1/users", `{"name":"alice","memberships":[{"team":"`+teamA+`","role":"member"}]}`, http.StatusCreated, &alice)
	h.must(admin, "POST", "/api/v1/users", `{"name":"carol","memberships":[{"team":"`+teamA+`","role":"viewer"}]}`, http.StatusCreated, &carol)
	h.must(admin, "POST", "/api/v1/users", `{"name":"ci-bot","serviceAccount":true,"memberships":[{"team":"`+teamA+`","role":"member"}]}`, http.StatusCreated, &bot)
	tokens["alice"], tokens["carol"], tokens["ci-bot"] = alice.Token, carol.Token, bot.Token

	// alice: who am I, submit, read the log, cancel.
	h.must(alice.Token, "GET", "/api/v1/whoami", "", 200, nil)
	var wl api.Workload
	h.must(alice.Token, "POST", "/api/v1/workloads", `{"team":"`+teamA+`","command":["sh","-c","echo hello-from-alice; sleep 60"],"gracePeriodSeconds":1,"resources":{"gpus":0.5}}`, http.StatusCreated, &wl)
	waitLog(t, api.NewClient(s.addr, alice.Token), wl.ID, "hello-from-alice")
	h.must(alice.Token, "GET", "/api/v1/workloads/"+wl.ID+"/events", "", 200, nil)
	h.must(alice.Token, "DELETE", "/api/v1/workloads/"+wl.ID, "", 200, nil)
	waitDone(t, s.admin, wl.ID)

	// alice makes a token, uses it, revokes it; the revoked token is
	// refused.
	var ci api.Token
	h.must(alice.Token, "POST", "/api/v1/tokens", `{"name":"laptop","expiresIn":"720h"}`, http.StatusCreated, &ci)
	tokens["alice's second"] = ci.Token
	h.must(ci.Token, "GET", "/api/v1/whoami", "", 200, nil)
	h.must(alice.Token, "GET", "/api/v1/tokens", "", 200, nil)
	h.must(alice.Token, "DELETE", "/api/v1/tokens/"+ci.ID, "", http.StatusNoContent, nil)
	if a := h.do(ci.Token, "GET", "/api/v1/whoami", ""); a.status != http.StatusUnauthorized {
		t.Errorf("revoked token: %d %s, want 401", a.status, a.body)
	}
	// Refused and unauthenticated mutations: they are audited and logged
	// (perhaps), without the token.
	if a := h.do(carol.Token, "POST", "/api/v1/workloads", `{"team":"`+teamA+`","command":["true"],"resources":{"gpus":1}}`); a.status != http.StatusForbidden {
		t.Errorf("viewer submitting: %d %s, want 403", a.status, a.body)
	}
	forged := "gpf_" + strings.Repeat("Zq9", 14) + "x"
	tokens["forged"] = forged
	if a := h.do(forged, "POST", "/api/v1/workloads", `{"command":["true"],"resources":{"gpus":1}}`); a.status != http.StatusUnauthorized {
		t.Errorf("forged token: %d %s, want 401", a.status, a.body)
	}
	if a := h.do(ci.Token, "POST", "/api/v1/tokens", `{"name":"from-a-revoked-token"}`); a.status != http.StatusUnauthorized {
		t.Errorf("revoked token making a token: %d %s, want 401", a.status, a.body)
	}

	// The audit trail: each mutation with its user, no token.
	var audit api.List[api.AuditEntry]
	a := h.must(admin, "GET", "/api/v1/audit?limit=1000", "", 200, &audit)
	for name, tok := range tokens {
		if strings.Contains(a.body, tok) || strings.Contains(a.body, strings.TrimPrefix(tok, "gpf_")) {
			t.Errorf("the audit trail holds %s's token", name)
		}
	}
	type want struct {
		user, action, method, object string
		status                       int
	}
	for _, w := range []want{
		{"admin", "create team", "POST", teamA, 201},
		{"admin", "create user", "POST", "alice", 201},
		{"admin", "create user", "POST", "ci-bot", 201},
		{"alice", "create workload", "POST", wl.ID, 201},
		{"alice", "cancel workload", "DELETE", wl.ID, 200},
		{"alice", "create token", "POST", ci.ID, 201},
		{"alice", "revoke token", "DELETE", ci.ID, 204},
		{"carol", "create workload", "POST", "", 403},
		{"", "", "POST", "", 401},
	} {
		found := false
		for _, e := range audit.Items {
			if e.User == w.user && strings.Contains(e.Action, w.action) && e.Method == w.method && e.Status == w.status &&
				(w.object == "" || e.Object == w.object) && !e.Time.IsZero() {
				found = true
			}
		}
		if !found {
			t.Errorf("no audit entry for %+v", w)
		}
	}
	for _, e := range audit.Items {
		if e.User == "alice" && e.Team == teamA && e.Role != api.RoleMember {
			t.Errorf("audit entry %+v: alice's role in %s is member", e, teamA)
		}
		if e.Method == "GET" {
			t.Errorf("audit entry for a read: %+v", e)
		}
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(audit.Items, "", "  ")
		t.Logf("audit trail:\n%s", b)
	}

	// Search the data dir while the server runs (the -wal and -shm files
	// are there then), and again once it has stopped.
	search := func(when string) int {
		scanned := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return err
			}
			if d.Name() == "admin-token" {
				return nil // the admin token's file, by design
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			scanned++
			for name, tok := range tokens {
				if bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte(strings.TrimPrefix(tok, "gpf_"))) {
					rel, _ := filepath.Rel(dir, path)
					t.Errorf("%s: %s holds %s's token in plain text", when, rel, name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return scanned
	}
	for _, f := range []string{"gpufleet.db", "gpufleet.db-wal", "gpufleet.db-shm"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the store's %s is not there to search: %v", f, err)
		}
	}
	running := search("while running")
	s.stop()
	scanned := search("after stopping")
	log := logs.Bytes()
	for name, tok := range tokens {
		if bytes.Contains(log, []byte(tok)) || bytes.Contains(log, []byte(strings.TrimPrefix(tok, "gpf_"))) {
			t.Errorf("the server's log holds %s's token", name)
		}
	}
	if bytes.Contains(log, []byte("Bearer")) {
		t.Errorf("the server's log holds an Authorization header")
	}
	t.Logf("searched %d files of the data dir while running and %d after, and %d bytes of log, for %d tokens", running, scanned, len(log), len(tokens))
}
