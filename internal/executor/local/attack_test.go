package local_test

// Attacks on the local executor's sandbox by a workload (untrusted code),
// run against the real executor with full isolation (root + Landlock).

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// needTool skips a test where the machine lacks a program the attack uses.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("no %s here", name)
	}
	return p
}

// systemPython returns a python3 under the read-only system paths.
func systemPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no python3 in /usr/bin")
	return ""
}

// TestAttackAbstractSocketOutsideDomain: an abstract UNIX socket of the
// host (here the test's) cannot be reached (Landlock scope).
func TestAttackAbstractSocketOutsideDomain(t *testing.T) {
	e, _ := fullyIsolated(t)
	py := systemPython(t)
	l, err := net.Listen("unix", "@gpufleet-attack-abstract")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := fields(t, e, "abs", "tb", 1, py+` -c '
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0gpufleet-attack-abstract"); print("ABSTRACT connected")
except OSError as e:
    print("ABSTRACT refused", e.errno)
'`, nil)
	if !strings.HasPrefix(got["ABSTRACT"], "refused") {
		t.Errorf("abstract socket: %q, want refused", got["ABSTRACT"])
	}
}

// TestAttackNoPrivilegeLeft: the task has no capability, cannot gain one
// through a setuid binary (no_new_privs), cannot change the mount table
// (even in a user namespace of its own) to uncover the data directory, and
// sees no process of root's.
func TestAttackNoPrivilegeLeft(t *testing.T) {
	e, dir := fullyIsolated(t)
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte("ADMIN-TOKEN-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `
echo "CAPEFF $(grep CapEff /proc/self/status | awk '{print $2}')"
echo "CAPBND $(grep CapBnd /proc/self/status | awk '{print $2}')"
su=$(command -v su || command -v mount)
out=$($su -c id root 2>&1 </dev/null; echo rc=$?); echo "SETUID $(echo "$out" | grep -c 'uid=0')"
umount ` + dir + ` 2>/dev/null && echo "UMOUNT ok" || echo "UMOUNT refused"
unshare -Urm sh -c 'umount -l ` + dir + ` && cat ` + filepath.Join(dir, "admin-token") + `' 2>/dev/null | grep -q SECRET && echo "USERNS token" || echo "USERNS nothing"
echo "ROOTPROCS $(ps -eo uid= 2>/dev/null | awk '$1==0' | wc -l)"
echo "PID1 $(cat /proc/1/cmdline 2>/dev/null | tr '\0' ' ' | head -c 40)"
ln ` + filepath.Join(dir, "admin-token") + ` "$GPUFLEET_CHECKPOINT_DIR/t" 2>/dev/null && echo "HARDLINK ok" || echo "HARDLINK refused"
`
	got := fields(t, e, "priv", "tb", 1, script, nil)
	want := map[string]string{"CAPEFF": "0000000000000000", "SETUID": "0", "UMOUNT": "refused", "USERNS": "nothing", "ROOTPROCS": "0", "HARDLINK": "refused"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if got["PID1"] != "" {
		t.Errorf("the task reads /proc/1/cmdline: %q", got["PID1"])
	}
}

// TestAttackOtherTeamsProcessesAndFiles: a task of team tb gets nothing of
// a running task of team ta, nor of another workload of its own team,
// through /proc (root, cwd, fd, environ, mem, maps), nor through
// /proc/self/mountinfo's paths.
func TestAttackOtherTeamsProcessesAndFiles(t *testing.T) {
	e, dir := fullyIsolated(t)
	ids := map[core.WorkloadID]core.TeamName{"vta": "ta", "vtb": "tb"}
	pids := map[core.WorkloadID]string{}
	for id, team := range ids {
		v := task(id, "sh", "-c", `echo secret-`+string(id)+` > own-file; echo ready; exec sleep 30`)
		v.Team = team
		v.Env = map[string]string{"VICTIM_SECRET": "env-secret-" + string(id)}
		start(t, e, v)
		waitOutput(t, e, id, "ready")
		for _, p := range e.Processes() {
			if p.WorkloadID == id {
				pids[id] = itoa(p.PID)
			}
		}
	}
	var script strings.Builder
	for id, pid := range pids {
		for _, f := range []string{"environ", "cwd/own-file", "root" + filepath.Join(dir, "workloads", string(id), "work", "own-file"), "fd/1", "maps", "mem"} {
			script.WriteString(`head -c 100 /proc/` + pid + `/` + f + ` 2>/dev/null | grep -aq secret && echo "LEAK ` + string(id) + `:` + f + `"` + "\n")
		}
		script.WriteString(`cat ` + filepath.Join(dir, "workloads", string(id), "work", "own-file") + ` 2>/dev/null | grep -q secret && echo "LEAK ` + string(id) + `:path"` + "\n")
		script.WriteString(`cat ../../` + string(id) + `/work/own-file 2>/dev/null | grep -q secret && echo "LEAK ` + string(id) + `:dotdot"` + "\n")
	}
	script.WriteString(`for m in $(awk '{print $5}' /proc/self/mountinfo); do cat $m/../../../admin-token $m/../../admin-token 2>/dev/null; done | grep -q . && echo "LEAK mountinfo"` + "\n")
	script.WriteString("echo \"END ok\"\n")
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte("ADMIN\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tk := task("atk", "sh", "-c", script.String())
	tk.Team = "tb"
	run(t, e, tk)
	if out := output(t, e, "atk"); strings.Contains(out, "LEAK") || !strings.Contains(out, "END ok") {
		t.Errorf("attacker's output:\n%s", out)
	}
	for id := range pids {
		if err := e.Stop(t.Context(), id, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range pids {
		select {
		case <-e.Exits():
		case <-time.After(timeout):
			t.Fatal("victims did not end")
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
