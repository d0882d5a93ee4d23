package local_test

// Attacks on the local executor's sandbox by a workload (untrusted code),
// run against the real executor with full isolation (root + Landlock).

import (
	"encoding/base64"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// TestAttackLDPreloadRunsAsRootInTheSupervisor: the task's environment is
// the supervisor's and the sandbox's, which run as root before they drop
// privileges. A workload that names, in LD_PRELOAD, a library that an
// earlier attempt left in its checkpoint directory has it loaded by the
// dynamically linked server binary acting as supervisor, as root, outside
// every confinement: here it copies the admin token into the log.
func TestAttackLDPreloadRunsAsRootInTheSupervisor(t *testing.T) {
	e, dir := fullyIsolated(t)
	gcc := needTool(t, "gcc")
	if err := os.WriteFile(filepath.Join(dir, "admin-token"), []byte("ADMIN-TOKEN-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "evil.c")
	so := filepath.Join(t.TempDir(), "evil.so")
	code := `#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
	if (geteuid() != 0) return;
	char buf[256] = {0};
	FILE *f = fopen("` + filepath.Join(dir, "admin-token") + `", "r");
	if (f) { fgets(buf, sizeof buf, f); fclose(f); }
	printf("PWNED euid=%d token=%s\n", geteuid(), buf);
	fflush(stdout);
}
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", so, src).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v: %s", err, out)
	}
	lib, err := os.ReadFile(so)
	if err != nil {
		t.Fatal(err)
	}

	// Attempt 1: the task writes the library into its checkpoint
	// directory (from its environment: it cannot read the test's files).
	tk := task("ldp", "sh", "-c", `printf %s "$LIB" | base64 -d > "$GPUFLEET_CHECKPOINT_DIR/x.so" && echo saved`)
	tk.Team = "tb"
	tk.Env = map[string]string{"LIB": base64.StdEncoding.EncodeToString(lib)}
	if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("attempt 1: %+v; log:\n%s", x, readLog(t, e, tk.WorkloadID))
	}
	// Attempt 2 (a requeue, or another workload of the team naming this
	// path): LD_PRELOAD names it.
	tk2 := task("ldp", "true")
	tk2.Team, tk2.Attempt = "tb", 2
	tk2.Env = map[string]string{"LD_PRELOAD": filepath.Join(dir, "workloads", "ldp", "checkpoint", "x.so")}
	run(t, e, tk2)
	if log := readLog(t, e, tk2.WorkloadID); strings.Contains(log, "PWNED") {
		t.Errorf("a library the task chose ran as root in the supervisor or the sandbox:\n%s", log)
	}
}

// TestAttackJoinTheSupervisorsGroupDefeatsStop: the task's main process
// moves itself into its supervisor's process group (same session, so
// setpgid allows it). Stop signals the task's process group, which no
// longer exists (ESRCH, ignored), so neither SIGTERM nor SIGKILL reaches
// it: the task cannot be cancelled, preempted or timed out, and keeps its
// GPUs.
func TestAttackJoinTheSupervisorsGroupDefeatsStop(t *testing.T) {
	e, _ := fullyIsolated(t)
	py := systemPython(t)
	// The task tries to join its supervisor's process group (its parent's);
	// it leads a session of its own, so it cannot.
	tk := task("pgid", py, "-c", `import os, sys, time
try:
    os.setpgid(0, os.getppid())
except OSError as e:
    print("refused", e.errno)
print("moved", os.getpgid(0) != os.getpid()); sys.stdout.flush()
time.sleep(60)`)
	tk.Team = "tb"
	start(t, e, tk)
	if out := waitOutput(t, e, tk.WorkloadID, "moved "); !strings.Contains(out, "moved False") {
		t.Errorf("the task left its process group: %s", out)
	}
	if err := e.Stop(t.Context(), tk.WorkloadID, 1, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-e.Exits():
		if x.WorkloadID != tk.WorkloadID {
			t.Fatalf("exit of %s", x.WorkloadID)
		}
	case <-time.After(5 * time.Second):
		// Clean up through the pid the executor knows.
		for _, p := range e.Processes() {
			if p.WorkloadID == tk.WorkloadID {
				_ = exec.Command("kill", "-9", itoa(p.PID)).Run()
			}
		}
		waitExit(t, e, tk)
		t.Errorf("Stop with no grace: the task was still running 5 s later (it left its process group for its supervisor's)")
	}
}

// TestAttackSysVIPCIsShared: tasks share the host's IPC namespace, so a
// task of one team lists (and, where their modes allow, attaches to)
// another team's System V shared memory, semaphores and message queues.
func TestAttackSysVIPCIsShared(t *testing.T) {
	e, _ := fullyIsolated(t)
	needTool(t, "ipcmk")
	needTool(t, "ipcs")
	victim := task("ipcv", "sh", "-c", `id=$(ipcmk -M 4096 -p 0666 | awk '{print $NF}'); echo "made $id"; sleep 30; ipcrm -m $id`)
	victim.Team = "ta"
	start(t, e, victim)
	out := waitOutput(t, e, victim.WorkloadID, "made ")
	shmid := strings.TrimSpace(strings.TrimPrefix(out[strings.Index(out, "made "):], "made "))
	t.Cleanup(func() { exec.Command("ipcrm", "-m", shmid).Run() })
	got := fields(t, e, "ipca", "tb", 1, `ipcs -m | awk -v id=`+shmid+` '$2==id {print "SEEN", $3}'; echo "END ok"`, nil)
	if got["SEEN"] != "" {
		t.Errorf("team tb's task lists team ta's shared memory segment %s (owner %s): tasks share the IPC namespace", shmid, got["SEEN"])
	}
	if err := e.Stop(t.Context(), victim.WorkloadID, 1, 0); err != nil {
		t.Fatal(err)
	}
	waitExit(t, e, victim)
}

// TestAttackPathnameSocketOnTheHost: a pathname UNIX socket of the host's
// that anyone may connect to (mode 0666, in /run as dbus', journald's or a
// local agent's are) is reachable: Landlock (ABI 7) does not restrict
// connect(2), and the mount namespace hides only the data directory and
// /tmp.
func TestAttackPathnameSocketOnTheHost(t *testing.T) {
	e, _ := fullyIsolated(t)
	py := systemPython(t)
	path := "/run/gpufleet-attack.sock"
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("listen %s: %v", path, err)
	}
	defer l.Close()
	defer os.Remove(path)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello-from-host\n"))
			c.Close()
		}
	}()
	got := fields(t, e, "sock", "tb", 1, py+` -c '
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("`+path+`"); print("PATHSOCK", s.recv(100).decode().strip())
except OSError as e:
    print("PATHSOCK refused", e.errno)
'`, nil)
	if !strings.HasPrefix(got["PATHSOCK"], "refused") {
		t.Errorf("a host service's UNIX socket in /run: %q, want refused", got["PATHSOCK"])
	}
}

// TestAttackInheritedDescriptors: a descriptor the server inherited
// without close-on-exec (from its service manager, a wrapper script, a
// pipe to a log collector) is passed on to every task through the
// supervisor and the sandbox, and reading from an open descriptor is not
// something Landlock checks. Here the test (standing for the server's
// parent) holds the admin token open.
func TestAttackInheritedDescriptors(t *testing.T) {
	e, dir := fullyIsolated(t)
	token := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(token, []byte("ADMIN-TOKEN-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(token, syscall.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	got := fields(t, e, "fds", "tb", 1, `for f in /proc/self/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "head -c 100 <&$n" 2>/dev/null | grep -q SECRET && echo "INHERITED $n"; done; echo "END ok"`, nil)
	if got["INHERITED"] != "" {
		t.Errorf("the task read the admin token from descriptor %s, which the server inherited: tasks should get only 0, 1 and 2", got["INHERITED"])
	}
}

// TestAttackEveryNVIDIADeviceToEveryTask: the Landlock rule grants every
// /dev/nvidia* node (read, write, ioctl) to every task, whatever its
// assignment, so a task given GPU 0, or no GPU at all, opens the devices
// of GPUs that other teams' workloads hold (CUDA_VISIBLE_DEVICES is only
// advice to the CUDA runtime, which the task may unset). A regular file
// named like a device stands for /dev/nvidia1 here.
func TestAttackEveryNVIDIADeviceToEveryTask(t *testing.T) {
	fake := "/dev/nvidia-gpufleet-attack-test"
	if err := os.WriteFile(fake, []byte("gpu-of-another-team\n"), 0o666); err != nil {
		t.Skipf("cannot make %s: %v", fake, err)
	}
	defer os.Remove(fake)
	e, _ := fullyIsolated(t) // after the file exists: New lists the devices
	got := fields(t, e, "nogpu", "tb", 1, `echo "VISIBLE [$CUDA_VISIBLE_DEVICES]"; cat `+fake+` >/dev/null 2>&1 && echo "OPEN ok" || echo "OPEN refused"; echo "END ok"`, nil)
	if got["VISIBLE"] != "[]" {
		t.Fatalf("CUDA_VISIBLE_DEVICES %s, want none", got["VISIBLE"])
	}
	if got["OPEN"] != "refused" {
		t.Errorf("a task assigned no GPU opened %s: %s (every NVIDIA device is granted to every task)", fake, got["OPEN"])
	}
}
