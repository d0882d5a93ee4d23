package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestFullDiskAnswers507AndNotReady: on a server whose store's disk is full,
// a submission answers 507 with a JSON error that names the problem, and
// /readyz answers 503; once space returns, both recover without a restart.
func TestFullDiskAnswers507AndNotReady(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: filling a disk needs root, to mount a small tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs on %s (%v: %s)", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "gpufleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, core.NewTeam("research", fixtureStart)); err != nil {
		t.Fatal(err)
	}
	tok := NewToken()
	if err := st.CreateUser(ctx, core.User{Name: "admin", Admin: true, CreatedAt: fixtureStart}, core.Token{Name: "first", CreatedAt: fixtureStart}, HashToken(tok)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: st, Logs: noLogs{}}))
	t.Cleanup(srv.Close)
	do := func(method, path, body string) answer {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, body: string(b), header: resp.Header}
	}
	const job = `{"team":"research","command":["true"],"resources":{"gpus":1}}`
	if a := do("GET", "/readyz", ""); a.status != http.StatusOK {
		t.Fatalf("readyz before the disk fills: %d %s", a.status, a.body)
	}

	// Fill the disk, then submit until the store refuses: what an earlier
	// checkpoint left free in the WAL may still take a few.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	var full answer
	for i := 0; ; i++ {
		full = do("POST", "/api/v1/workloads", job)
		if full.status != http.StatusCreated {
			break
		}
		if i == 2000 {
			t.Fatal("every submission succeeded on a full disk")
		}
	}
	if full.status != http.StatusInsufficientStorage {
		t.Fatalf("submit on a full disk: %d %s, want 507", full.status, full.body)
	}
	if ct := full.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("507 Content-Type %q, want application/json", ct)
	}
	e := full.errorBody(t)
	if e.Code != api.CodeNoSpace || !strings.Contains(e.Message, "no space left") {
		t.Errorf("507 error %+v: want code %s and a message that says no space is left", e, api.CodeNoSpace)
	}
	if a := do("GET", "/readyz", ""); a.status != http.StatusServiceUnavailable || !strings.Contains(a.errorBody(t).Message, "no space left") {
		t.Errorf("readyz on a full disk: %d %s, want 503 saying no space is left", a.status, a.body)
	}
	// Reads still answer.
	if a := do("GET", "/api/v1/workloads", ""); a.status != http.StatusOK {
		t.Errorf("list on a full disk: %d %s, want 200", a.status, a.body)
	}

	// Space returns: ready again (by the store's own probe), and writes
	// succeed.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 5*time.Second, "readyz to answer 200 once space returned", func() (bool, string) {
		a := do("GET", "/readyz", "")
		return a.status == http.StatusOK, fmt.Sprintf("%d %s", a.status, a.body)
	})
	if a := do("POST", "/api/v1/workloads", job); a.status != http.StatusCreated {
		t.Errorf("submit once space returned: %d %s", a.status, a.body)
	}
}
