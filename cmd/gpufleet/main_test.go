package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// These tests build the real binary and run it as a separate process, so
// that the server can be killed with SIGKILL.

func build(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gpufleet")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type proc struct {
	cmd  *exec.Cmd
	addr string
}

func serve(t *testing.T, bin, dir, addr string) *proc {
	t.Helper()
	cmd := exec.Command(bin, "server", "--addr", addr, "--data", dir, "--fake-gpus", "4xH100-80GB", "--demo", "--node-name", "e2e")
	logf, err := os.OpenFile(filepath.Join(dir, "..", "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, addr: addr}
	if _, ok := testwait.Within(20*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, ""
		}
		resp.Body.Close()
		return resp.StatusCode == 200, ""
	}); !ok {
		cmd.Process.Kill()
		b, _ := os.ReadFile(filepath.Join(dir, "..", "server.log"))
		t.Fatalf("server not ready after 20s; log:\n%s", b)
	}
	return p
}

func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestKill9DuringSubmits kills the server with SIGKILL while 500 clients
// submit at once, restarts it, and checks that every acknowledged workload
// is there exactly once and that no finished workload ran again.
func TestKill9DuringSubmits(t *testing.T) {
	bin := build(t)
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	addr := freeAddr(t)
	p := serve(t, bin, dir, addr)
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(addr, strings.TrimSpace(string(tok)))
	ctx := context.Background()

	var mu sync.Mutex
	var acked []string
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	gpus := []quantity.Milli{250, 500, 1000}
	for i := range 500 {
		wg.Go(func() {
			w := &api.Workload{Command: []string{"sh", "-c", fmt.Sprintf("echo run-%d", i)}, Resources: api.Resources{GPUs: gpus[i%3]}}
			got, err := client.SubmitWorkload(ctx, w, "")
			if err != nil {
				return // refused or cut off by the kill: not acknowledged
			}
			mu.Lock()
			acked = append(acked, got.ID)
			n := len(acked)
			mu.Unlock()
			if n == 200 {
				once.Do(func() {
					p.cmd.Process.Kill() // SIGKILL
					p.cmd.Wait()
					close(killed)
				})
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("only %d submits were acknowledged; the kill never happened", len(acked))
	}
	t.Logf("%d submits acknowledged before and around the kill", len(acked))

	p = serve(t, bin, dir, addr)
	defer p.stop()
	all, err := client.AllWorkloads(ctx, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, w := range all {
		count[w.ID]++
	}
	for _, id := range acked {
		if count[id] != 1 {
			t.Errorf("acknowledged workload %s is there %d times after the restart", id, count[id])
		}
	}
	for id, n := range count {
		if n != 1 {
			t.Errorf("workload %s listed %d times", id, n)
		}
	}

	// Every workload finishes; each ran once per attempt, and an attempt is
	// repeated only if its first run never finished.
	deadline := time.Now().Add(4 * time.Minute) // generous: CI runs a control plane and a browser alongside
	for _, id := range acked {
		var w *api.Workload
		testwait.Until(t, time.Until(deadline), id+" to finish", func() (bool, string) {
			if w, err = client.GetWorkload(ctx, id); err != nil {
				t.Fatal(err)
			}
			p := w.Status.Phase
			return p == api.PhaseSucceeded || p == api.PhaseFailed || p == api.PhaseCancelled, "it is " + p
		})
		if w.Status.Phase != api.PhaseSucceeded {
			t.Errorf("%s: %s (%s: %s), want Succeeded", id, w.Status.Phase, w.Status.Reason, w.Status.Message)
		}
		rc, err := client.Logs(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := rc.Read(buf)
			b.WriteString(string(buf[:n]))
			if err != nil {
				break
			}
		}
		rc.Close()
		log := b.String()
		runs := strings.Count(log, "--- gpufleet: attempt ")
		// An attempt placed just before the kill may never have started
		// (it is then found Lost and requeued), so runs ≤ attempts.
		if runs < 1 || runs > w.Status.Attempts {
			t.Errorf("%s: %d runs in the log, %d attempts recorded", id, runs, w.Status.Attempts)
		}
		for a := 1; a < w.Status.Attempts; a++ {
			if _, err := os.Stat(filepath.Join(dir, "workloads", id, fmt.Sprintf("attempt-%d", a), "exit")); err == nil {
				t.Errorf("%s: attempt %d had finished, yet the workload ran again", id, a)
			}
		}
	}
}
