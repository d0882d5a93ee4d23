package local_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// fullyIsolated returns an executor on a fresh data directory that
// confines tasks fully, skipping the test where the machine cannot (not
// root, no Landlock) unless GPUFLEET_REQUIRE_ISOLATION=1.
func fullyIsolated(t *testing.T) (*local.Executor, string) {
	t.Helper()
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	if st := e.Isolation(); !st.Full() {
		if os.Getenv("GPUFLEET_REQUIRE_ISOLATION") == "1" {
			t.Fatalf("isolation is required (GPUFLEET_REQUIRE_ISOLATION=1) but this machine gives %s", st)
		}
		t.Skipf("this machine cannot isolate tasks: %s", st)
	}
	return e, dir
}

// fields runs a script as a task of team and returns its output lines of
// the form "KEY value" as a map.
func fields(t *testing.T, e *local.Executor, id core.WorkloadID, team core.TeamName, attempt int, script string, env map[string]string) map[string]string {
	t.Helper()
	tk := task(id, "sh", "-c", script)
	tk.Team, tk.Attempt, tk.Env = team, attempt, env
	if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("%s: exited with %+v; log:\n%s", id, x, output(t, e, id))
	}
	got := map[string]string{}
	for _, l := range strings.Split(output(t, e, id), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && strings.ToUpper(k) == k && !strings.HasPrefix(l, "---") {
			got[k] = v
		}
	}
	return got
}

// TestTasksRunAsTheirTeamsUser: each team's tasks run under a user and
// group of their own (never root, the server's), with no supplementary
// groups and no_new_privs; the same team keeps its user, also after a
// restart of the executor.
func TestTasksRunAsTheirTeamsUser(t *testing.T) {
	e, dir := fullyIsolated(t)
	const script = `echo "UID $(id -u)"; echo "GID $(id -g)"; echo "GROUPS $(id -G)"; echo "NNP $(grep NoNewPrivs /proc/self/status | tr -d '\t ' | cut -d: -f2)"`
	a := fields(t, e, "a1", "ta", 1, script, nil)
	a2 := fields(t, e, "a2", "ta", 1, script, nil)
	b := fields(t, e, "b1", "tb", 1, script, nil)
	uidA, _ := strconv.Atoi(a["UID"])
	uidB, _ := strconv.Atoi(b["UID"])
	if uidA < local.DefaultUIDFirst || uidA > local.DefaultUIDLast || uidB < local.DefaultUIDFirst || uidB > local.DefaultUIDLast {
		t.Errorf("user IDs %d and %d: want both in %d-%d", uidA, uidB, local.DefaultUIDFirst, local.DefaultUIDLast)
	}
	if uidA == uidB {
		t.Errorf("teams ta and tb both run as %d", uidA)
	}
	if a2["UID"] != a["UID"] {
		t.Errorf("team ta ran as %s, then as %s", a["UID"], a2["UID"])
	}
	for name, f := range map[string]map[string]string{"ta": a, "tb": b} {
		if f["GID"] != f["UID"] || f["GROUPS"] != f["GID"] {
			t.Errorf("team %s: uid %s gid %s groups %q: want the gid equal to the uid and no other group", name, f["UID"], f["GID"], f["GROUPS"])
		}
		if f["NNP"] != "1" {
			t.Errorf("team %s: NoNewPrivs %q, want 1", name, f["NNP"])
		}
	}
	// A new executor on the same data directory keeps the mapping.
	e2 := newExecutor(t, dir, nil)
	again := fields(t, e2, "a3", "ta", 1, script, nil)
	if again["UID"] != a["UID"] {
		t.Errorf("after a restart team ta runs as %s, before as %s", again["UID"], a["UID"])
	}
}

// TestTaskFilesystem: a task sees a private /tmp, cannot write the log
// (its output reaches it through the supervisor), cannot signal another
// task, and keeps its checkpoint directory across attempts.
func TestTaskFilesystem(t *testing.T) {
	e, dir := fullyIsolated(t)

	// A running task of team ta with a file in /tmp.
	victim := task("victim", "sh", "-c", "echo secret > /tmp/ta-file; echo ready; sleep 30")
	victim.Team = "ta"
	start(t, e, victim)
	waitOutput(t, e, victim.WorkloadID, "ready")
	var pid int
	for _, p := range e.Processes() {
		if p.WorkloadID == victim.WorkloadID {
			pid = p.PID
		}
	}
	if pid == 0 {
		t.Fatal("the victim's process is not listed")
	}
	log := filepath.Join(dir, "workloads", "b1", "log")
	script := `
[ -e /tmp/ta-file ] && echo "TMP visible" || echo "TMP private"
echo x > /tmp/mine && echo "TMPWRITE ok"
( echo forged >> ` + log + ` ) 2>/dev/null && echo "LOG writable" || echo "LOG closed"
case "$(readlink /proc/self/fd/1)" in pipe:*) echo "STDOUT pipe";; *) echo "STDOUT $(readlink /proc/self/fd/1)";; esac
kill -0 ` + strconv.Itoa(pid) + ` 2>/dev/null && echo "SIGNAL sent" || echo "SIGNAL refused"
echo "CKPT $(cat "$GPUFLEET_CHECKPOINT_DIR/saved" 2>/dev/null || echo none)"
echo "attempt $GPUFLEET_ATTEMPT" > "$GPUFLEET_CHECKPOINT_DIR/saved" && echo "SAVE ok"
`
	got := fields(t, e, "b1", "tb", 1, script, nil)
	want := map[string]string{"TMP": "private", "TMPWRITE": "ok", "LOG": "closed", "STDOUT": "pipe", "SIGNAL": "refused", "CKPT": "none", "SAVE": "ok"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	// The second attempt finds what the first saved.
	got = fields(t, e, "b1", "tb", 2, script, nil)
	if got["CKPT"] != "attempt 1" {
		t.Errorf("attempt 2 read the checkpoint %q, want %q", got["CKPT"], "attempt 1")
	}
	if b, err := os.ReadFile(log); err == nil && strings.Contains(string(b), "forged") {
		t.Errorf("the task wrote into its log file directly")
	}
	stop := e.Stop(t.Context(), victim.WorkloadID, 1, 0)
	if stop != nil {
		t.Fatal(stop)
	}
	waitExit(t, e, victim)
}

// TestSandboxedStartErrors: a program the sandbox may not execute (outside
// the read-only system paths) fails Start with the reason, and no exit is
// delivered.
func TestSandboxedStartErrors(t *testing.T) {
	e, _ := fullyIsolated(t)
	// /var is in the task's view (unlike the test's /tmp) but not among
	// the paths it may execute from.
	outside, err := os.MkdirTemp("/var/tmp", "gpufleet-outside-")
	if err != nil {
		t.Skipf("no /var/tmp to write to: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(outside, "outside")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tk := executor.Task{WorkloadID: "outside", Attempt: 1, Team: "ta", Command: []string{prog}}
	err = e.Start(t.Context(), tk)
	if err == nil {
		waitExit(t, e, tk)
		t.Fatalf("Start of a program outside the allowed paths: no error; log:\n%s", output(t, e, tk.WorkloadID))
	}
	if !strings.Contains(err.Error(), "a workload runs only programs its user may execute") || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Start: %v, want the reason, wrapping fs.ErrPermission", err)
	}
}

// TestUIDClashIsReported: a host user whose IDs or subordinate IDs fall in
// the teams' range could act as a team's user, so the executor names it.
func TestUIDClashIsReported(t *testing.T) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Skip("no /etc/passwd")
	}
	// root (uid 0) is always there: a range that starts at it clashes.
	if !strings.Contains(string(b), "root:x:0:") {
		t.Skip("no root line in /etc/passwd")
	}
	got := local.UIDClash(0, 10)
	if !strings.Contains(got, "root in /etc/passwd") {
		t.Errorf("clash for 0-10: %q, want root in /etc/passwd named", got)
	}
	if got := local.UIDClash(2147000000, 2147000001); got != "" {
		t.Errorf("clash for a range nobody uses: %q", got)
	}
}
