package local_test

import (
	"os"
	"path/filepath"
	"testing"
)

// The stop file is written where the task may plant links: a link at its
// name or at the name written first is replaced, never followed.
func TestAnnounceStopFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	usage := filepath.Join(dir, "workloads", "wl-x", "usage")
	if err := os.MkdirAll(usage, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "server-file")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"stop-attempt-1", "stop-attempt-1.tmp"} {
		if err := os.Symlink(victim, filepath.Join(usage, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.AnnounceStop("wl-x", 1, "Preempted"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("the linked file became %q", b)
	}
	fi, err := os.Lstat(filepath.Join(usage, "stop-attempt-1"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("stop file: %v %v, want a regular file", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(usage, "stop-attempt-1")); string(b) != "GPUFLEET_STOP_REASON=Preempted\n" {
		t.Errorf("stop file %q", b)
	}
}
