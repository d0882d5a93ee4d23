package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// TestWorkloadsCannotReadThePlatformsFiles is the attack of issue 12 from
// outside: a member of team inference submits workloads that try to read
// the admin token, the store and team research's log and files, by
// absolute and relative paths and through /proc; each gets nothing, while
// its own checkpoint directory works. Where this machine cannot isolate
// (not root, no Landlock) the test is skipped, unless
// GPUFLEET_REQUIRE_ISOLATION=1 (CI).
func TestWorkloadsCannotReadThePlatformsFiles(t *testing.T) {
	s := start(t, t.TempDir())
	ctx := context.Background()
	requireIsolated(t, s)
	alice, err := s.admin.CreateUser(ctx, &api.User{Name: "alice", Teams: []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.admin.CreateUser(ctx, &api.User{Name: "bob", Teams: []string{"inference"}})
	if err != nil {
		t.Fatal(err)
	}
	ac, bc := api.NewClient(s.addr, alice.Token), api.NewClient(s.addr, bob.Token)

	const marker = "research-private-91c3"
	victim, err := ac.SubmitWorkload(ctx, &api.Workload{Command: []string{"sh", "-c", "echo " + marker + "; echo " + marker + " > notes; echo " + marker + " > /tmp/notes; sleep 60"},
		Resources: api.Resources{GPUs: 250}}, "")
	if err != nil {
		t.Fatal(err)
	}
	waitLog(t, ac, victim.ID, marker)

	data, _ := filepath.Abs(s.cfg.DataDir)
	vdir := filepath.Join(data, "workloads", victim.ID)
	paths := []string{
		"../../../admin-token", filepath.Join(data, "admin-token"), "/proc/1/root" + filepath.Join(data, "admin-token"),
		"/proc/self/root" + filepath.Join(data, "admin-token"), "/proc/1/cwd/" + filepath.Join(data, "admin-token"),
		"../../../gpufleet.db", filepath.Join(data, "gpufleet.db"), filepath.Join(data, "gpufleet.db-wal"),
		"../../" + victim.ID + "/log", filepath.Join(vdir, "log"), filepath.Join(vdir, "work", "notes"), "/tmp/notes",
	}
	script := `for p in "$@"; do if c=$(cat -- "$p" 2>/dev/null) && [ -n "$c" ]; then echo "LEAK $p: $c"; fi; done
for f in ../../*/log; do cat -- "$f" 2>/dev/null | sed 's/^/LEAK glob: /'; done
echo saved > "$GPUFLEET_CHECKPOINT_DIR/state" && echo "CHECKPOINT $(cat "$GPUFLEET_CHECKPOINT_DIR/state")"
echo DONE`
	attacker, err := bc.SubmitWorkload(ctx, &api.Workload{Command: append([]string{"sh", "-c", script, "sh"}, paths...), Resources: api.Resources{GPUs: 100}}, "")
	if err != nil {
		t.Fatal(err)
	}
	w := waitDone(t, bc, attacker.ID)
	out := readLog(t, bc, attacker.ID)
	if w.Status.Phase != api.PhaseSucceeded || !strings.Contains(out, "CHECKPOINT saved") || !strings.Contains(out, "DONE") {
		t.Fatalf("the attacking workload ended %s and did not run its checks; its log:\n%s", w.Status.Phase, out)
	}
	token, _ := os.ReadFile(filepath.Join(data, "admin-token"))
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "LEAK") || strings.Contains(l, marker) || (len(token) > 0 && strings.Contains(l, strings.TrimSpace(string(token)))) {
			t.Errorf("team inference's workload read what it must not: %s", l)
		}
	}
	if bytes.Contains([]byte(out), []byte("gpf_")) {
		t.Errorf("a token appears in the attacker's log")
	}
	if _, err := ac.CancelWorkload(ctx, victim.ID); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ac, victim.ID)
}

// requireIsolated skips a test where the server's node cannot isolate
// workloads (not root, no Landlock), unless GPUFLEET_REQUIRE_ISOLATION=1
// (CI) makes that a failure.
func requireIsolated(t *testing.T, s *server) {
	t.Helper()
	nodes, err := s.admin.Nodes(context.Background())
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	if iso := nodes[0].Isolation; iso == "" || strings.HasSuffix(iso, ")") {
		if os.Getenv("GPUFLEET_REQUIRE_ISOLATION") == "1" {
			t.Fatalf("isolation is required (GPUFLEET_REQUIRE_ISOLATION=1) but the node says %q", iso)
		}
		t.Skipf("this machine cannot isolate workloads: %s", iso)
	}
}

// TestUnisolatedServerRefusesSeveralTeams: a server that cannot isolate
// workloads (here: isolation turned off) refuses to start with several
// teams, saying what to do, unless --allow-shared-uid is given; with one
// team it starts, and the node says it is not isolated.
func TestUnisolatedServerRefusesSeveralTeams(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.Demo = false
	cfg.Local.Isolation = "off"
	s := startWith(t, cfg, io.Discard) // only the default team: starts
	nodes, err := s.admin.Nodes(context.Background())
	if err != nil || len(nodes) != 1 || !strings.Contains(nodes[0].Isolation, "none") {
		t.Fatalf("nodes %+v (%v): want one node whose isolation says none", nodes, err)
	}
	if _, err := s.admin.CreateTeam(context.Background(), &api.Team{Name: "second"}); err != nil {
		t.Fatal(err)
	}
	s.stop()

	cfg.Addr = freeAddr(t)
	err = RunWithLogger(t.Context(), cfg, io.Discard, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--allow-shared-uid") || !strings.Contains(err.Error(), "2 teams") {
		t.Fatalf("start without isolation and with 2 teams: %v, want a refusal naming --allow-shared-uid", err)
	}
	cfg.Local.AllowSharedUID = true
	cfg.Addr = freeAddr(t)
	startWith(t, cfg, io.Discard)
}
