package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGPUCheckCPUHalf runs hack/gpu-check.sh as a machine without a GPU
// can: it says "no NVIDIA GPU" and exits 2 where nvidia-smi finds none,
// and with --simulate (the CPU half: simulated GPUs, the default
// isolation) every check it can run passes and it leaves nothing running.
func TestGPUCheckCPUHalf(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the check runs several teams: it needs per-team users (root)")
	}
	for _, tool := range []string{"bash", "curl", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "hack", "gpu-check.sh"))
	bin := build(t)
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		out, err := exec.Command(script, "--bin", bin).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "no NVIDIA GPU") {
			t.Errorf("gpu-check without a GPU: %v, want exit status 2 saying no NVIDIA GPU; output:\n%s", err, out)
		}
	}
	out, err := exec.Command(script, "--simulate", "--bin", bin).CombinedOutput()
	t.Logf("gpu-check --simulate:\n%s", out)
	if err != nil {
		t.Fatalf("gpu-check --simulate: %v", err)
	}
	m := regexp.MustCompile(`summary: (\d+) passed, 0 failed`).FindStringSubmatch(string(out))
	if m == nil || m[1] == "0" {
		t.Errorf("gpu-check --simulate: want a summary with checks passed and none failed")
	}
	for _, check := range []string{"isolation", "node-ready", "share", "usage", "memory-share", "memory-limit", "network", "acceptance"} {
		if !regexp.MustCompile(`(?m)^PASS .* ` + check + ` `).Match(out) {
			t.Errorf("gpu-check --simulate: check %s did not pass", check)
		}
	}
	if left, _ := exec.Command("pgrep", "-f", "gpufleet-check").Output(); len(left) > 0 {
		t.Errorf("gpu-check left processes behind: %s", left)
	}
}
