package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/executor/local"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// The disk-full scenario: a real server, in a process of its own, with its
// data dir on a small tmpfs that the test fills while jobs run and end.
// While the disk is full, writes answer 507 with a JSON error that says so
// and /readyz answers 503. Once space returns, with the same server and
// after a kill -9 while full: no acknowledged submission is lost, no job
// ran twice (each prints a marker, counted in its log), and none is left
// Running.

const (
	envServerDir  = "GPUFLEET_TEST_DISKFULL_DIR"
	envServerAddr = "GPUFLEET_TEST_DISKFULL_ADDR"
)

// TestDiskFullServerProcess is not a test of its own: it is the server
// process of TestDiskFull, run as the test binary's child so that it can be
// killed with SIGKILL.
func TestDiskFullServerProcess(t *testing.T) {
	dir := os.Getenv(envServerDir)
	if dir == "" {
		t.Skip("the server process of TestDiskFull; runs only as its child")
	}
	cfg := testConfig(t, dir)
	cfg.Addr = os.Getenv(envServerAddr)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	err := RunWithLogger(context.Background(), cfg, os.Stdout, log)
	fmt.Fprintf(os.Stderr, "server exited: %v\n", err)
	os.Exit(3)
}

// proc is a gpufleet server running in a child process.
type proc struct {
	*server
	cmd  *exec.Cmd
	log  string // its stdout and stderr, on the ordinary disk
	done chan error
}

func startProc(t *testing.T, dataDir, logDir string) *proc {
	t.Helper()
	addr := freeAddr(t)
	logPath := filepath.Join(logDir, fmt.Sprintf("server-%d.log", time.Now().UnixNano()))
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullServerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envServerDir+"="+dataDir, envServerAddr+"="+addr)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{server: &server{addr: addr}, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.kill9() })
	waitReady(t, addr, p.done)
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	p.admin = api.NewClient(addr, strings.TrimSpace(string(tok)))
	return p
}

// kill9 kills the server as a crash would, and waits until it is gone.
// The workloads it started live on: their supervisors are not its children
// in the sense of a session.
func (p *proc) kill9() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
	p.done <- nil // let a second kill9 return
}

// dumpLog shows the server's log when the test has failed.
func (p *proc) dumpLog(t *testing.T) {
	if !t.Failed() {
		return
	}
	b, _ := os.ReadFile(p.log)
	const keep = 30000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	t.Logf("server log %s (last %d bytes):\n%s", p.log, len(b), b)
}

// tmpfs mounts a tmpfs of size on a fresh directory for the test, and
// unmounts it at the end (lazily: a workload that outlived its server may
// still hold a file there).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: the disk-full scenario needs root, to mount a small tmpfs for the data dir (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs on %s (%v: %s)", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; unmounting lazily", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fillDisk writes a file into dir until its disk has no space left, and
// returns the function that removes it.
func fillDisk(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// marker is what every job of the scenario prints first: the number of
// times it appears in a job's log is the number of times the job ran.
const marker = "diskfull-run-marker"

// job is a one-GPU job that prints the marker, sleeps, and says it is done;
// it succeeds even when its last line cannot be written (full disk).
func job(sleep string) string {
	cmd := fmt.Sprintf("echo %s; sleep %s; echo done || true", marker, sleep)
	b, _ := json.Marshal(map[string]any{"team": "research", "command": []string{"sh", "-c", cmd}, "resources": map[string]any{"gpus": 1}})
	return string(b)
}

// waitJobsEnded waits until no process of the jobs' own (job's sh and
// its sleep) runs: no sh or sleep whose environment names one of ids as
// its workload (local.EnvWorkloadID).
func waitJobsEnded(t *testing.T, ids []string) {
	t.Helper()
	testwait.Until(t, time.Minute, "the jobs' processes to end", func() (bool, string) {
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			comm, err := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
			if err != nil || (strings.TrimSpace(string(comm)) != "sh" && strings.TrimSpace(string(comm)) != "sleep") {
				continue
			}
			env, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
			for _, id := range ids {
				if strings.Contains("\x00"+string(env), "\x00"+local.EnvWorkloadID+"="+id+"\x00") {
					return false, fmt.Sprintf("pid %s (%s) of %s runs", p.Name(), strings.TrimSpace(string(comm)), id)
				}
			}
		}
		return true, ""
	})
}

// submitUntilRefused submits short jobs on a full disk until the server
// refuses one (what an earlier checkpoint left free in the WAL may still
// take a few, durably). It returns the acknowledged IDs and the refusal.
func submitUntilRefused(t *testing.T, s *server) (acked []string, status int, body string) {
	t.Helper()
	for range 500 {
		status, body = post(t, s, "/api/v1/workloads", job("0"), nil)
		if status != http.StatusCreated {
			return acked, status, body
		}
		var w api.Workload
		if err := json.Unmarshal([]byte(body), &w); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, w.ID)
	}
	t.Fatalf("500 submissions succeeded on a full disk")
	return nil, 0, ""
}

// checkRefusedForSpace checks a refusal on a full disk: 507, JSON, code
// insufficient_storage, a message that says no space is left.
func checkRefusedForSpace(t *testing.T, status int, body string) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal([]byte(body), &eb); status != http.StatusInsufficientStorage || err != nil ||
		eb.Error.Code != api.CodeNoSpace || !strings.Contains(eb.Error.Message, "no space left") {
		t.Errorf("submit on a full disk: %d %s; want 507 with a JSON error, code %s, saying no space is left", status, body, api.CodeNoSpace)
	}
}

// readyz answers the status and body of GET /readyz.
func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitReadyz waits until /readyz answers want.
func waitReadyz(t *testing.T, addr string, want int, why string) {
	t.Helper()
	if saw, ok := testwait.Within(10*time.Second, func() (bool, string) {
		status, body := readyz(t, addr)
		return status == want, fmt.Sprintf("%d %s", status, body)
	}); !ok {
		t.Errorf("readyz %s: %s, want %d", why, saw, want)
	}
}

// startRunning submits n jobs that sleep, and waits until each runs and
// its marker is in its log (on disk before the disk fills).
func startRunning(t *testing.T, s *server, n int, sleep string) []string {
	t.Helper()
	var ids []string
	for range n {
		status, body := post(t, s, "/api/v1/workloads", job(sleep), nil)
		if status != http.StatusCreated {
			t.Fatalf("submit: %d %s", status, body)
		}
		var w api.Workload
		if err := json.Unmarshal([]byte(body), &w); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	for _, id := range ids {
		waitLog(t, s.admin, id, marker)
	}
	return ids
}

// checkRanOnce waits until each workload has ended and checks that it
// succeeded at its first attempt, having run once.
func checkRanOnce(t *testing.T, s *server, ids []string, what string) {
	t.Helper()
	for _, id := range ids {
		w := waitDone(t, s.admin, id)
		log := readLog(t, s.admin, id)
		if n := strings.Count(log, marker); w.Status.Phase != api.PhaseSucceeded || w.Status.Attempts != 1 || n != 1 {
			evs, _ := s.admin.Events(context.Background(), id)
			t.Errorf("%s %s: %s (%s) at attempt %d, ran %d times; want Succeeded at attempt 1, run once\nlog:\n%s\nevents: %+v",
				what, id, w.Status.Phase, w.Status.Reason, w.Status.Attempts, n, log, evs)
		}
	}
}

// checkNoneRunning checks that every workload has ended and none is left
// Running (or Pending), and that the acknowledged ones are all there.
func checkNoneRunning(t *testing.T, s *server, acked []string) {
	t.Helper()
	got := map[string]bool{}
	list, err := s.admin.ListWorkloads(context.Background(), api.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range list.Items {
		got[w.ID] = true
		if w.Status.Phase == api.PhaseRunning || w.Status.Phase == api.PhasePending {
			t.Errorf("%s is still %s once space returned (reason %s)", w.ID, w.Status.Phase, w.Status.Reason)
		}
	}
	for _, id := range acked {
		if !got[id] {
			t.Errorf("acknowledged workload %s is lost", id)
		}
	}
}

func TestDiskFull(t *testing.T) {
	dir := tmpfs(t, "4m")
	logDir := t.TempDir()
	p := startProc(t, dir, logDir)
	defer func() { p.dumpLog(t) }()
	var acked []string

	// 1. Jobs end while the disk is full; the same server records them
	// once space returns.
	running := startRunning(t, p.server, 4, "2")
	acked = append(acked, running...)
	free := fillDisk(t, dir)
	more, status, body := submitUntilRefused(t, p.server)
	acked = append(acked, more...)
	checkRefusedForSpace(t, status, body)
	t.Logf("on a full disk, %d submissions were acknowledged before one was refused: %d %s", len(more), status, strings.TrimSpace(body))
	waitReadyz(t, p.addr, http.StatusServiceUnavailable, "on a full disk")
	if status, body := readyz(t, p.addr); !strings.Contains(body, "no space left") {
		t.Errorf("readyz on a full disk: %d %s, want it to say no space is left", status, body)
	}
	// The jobs (sleep 2) end on a full disk, which nothing can record:
	// their processes are seen to go.
	waitJobsEnded(t, running)
	if status, body := readyz(t, p.addr); status != http.StatusServiceUnavailable {
		t.Errorf("readyz on a full disk, later: %d %s, want 503", status, body)
	}
	free()
	waitReadyz(t, p.addr, http.StatusOK, "once space returned")
	checkRanOnce(t, p.server, running, "a job that ended on a full disk")
	checkRanOnce(t, p.server, more, "a job submitted (and acknowledged) on a full disk")

	// 2. Jobs end while the disk is full, and the server is killed (-9)
	// before space returns; the next server records them.
	running = startRunning(t, p.server, 4, "2")
	acked = append(acked, running...)
	free = fillDisk(t, dir)
	more, status, body = submitUntilRefused(t, p.server)
	acked = append(acked, more...)
	checkRefusedForSpace(t, status, body)
	waitReadyz(t, p.addr, http.StatusServiceUnavailable, "on a full disk, before kill -9")
	waitJobsEnded(t, running)
	p.kill9()
	p.dumpLog(t)
	free()
	p = startProc(t, dir, logDir)
	checkRanOnce(t, p.server, running, "a job that ended on a full disk while the server was killed")
	checkRanOnce(t, p.server, more, "a job acknowledged on a full disk before kill -9")
	checkNoneRunning(t, p.server, acked)
	waitReadyz(t, p.addr, http.StatusOK, "after the restart")
}
