package local_test

// Regression tests from the review of issue 17 (volumes, datasets, secret
// files): attacks that the executor refuses today.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A fully confined task cannot leave a symbolic link in a shared
// directory of the host (/var/tmp) for a later mount point to follow.
func TestAttackConfinedTaskCannotPlantLinkInVarTmp(t *testing.T) {
	e, _ := fullyIsolated(t)
	link := filepath.Join("/var/tmp", "gpufleet-review-planted-"+filepath.Base(t.TempDir()))
	t.Cleanup(func() { os.Remove(link) })
	tk := task("attack-plant-link", "sh", "-c", `if ln -s /etc "$1" 2>/dev/null; then echo MADE; else echo REFUSED; fi`, "sh", link)
	tk.Team = "evil"
	run(t, e, tk)
	if got := output(t, e, tk.WorkloadID); got != "REFUSED\n" {
		t.Errorf("the task said %q, want REFUSED", got)
	}
	if _, err := os.Lstat(link); err == nil {
		t.Errorf("a confined task made %s on the host", link)
	}
}

// A volume and a team name that are not one plain path component are
// refused by every entry point of the executor (no "..", no "/").
func TestAttackVolumeNamesThatEscape(t *testing.T) {
	e, dir := fullyIsolated(t)
	for _, c := range []struct {
		team core.TeamName
		name string
	}{{"ml", ".."}, {"ml", "../other"}, {"..", "x"}, {"ml/../other", "v"}, {"ml", "a/b"}, {"ml", "."}, {"ml", ""}} {
		if err := e.EnsureVolume(t.Context(), c.team, c.name, 1); err == nil {
			t.Errorf("EnsureVolume(%q, %q) passed", c.team, c.name)
		}
		if err := e.DeleteVolume(t.Context(), c.team, c.name); err == nil {
			t.Errorf("DeleteVolume(%q, %q) passed", c.team, c.name)
		}
		if _, err := e.VolumeUsage(t.Context(), c.team, c.name); err == nil {
			t.Errorf("VolumeUsage(%q, %q) passed", c.team, c.name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", "other")); err == nil {
		t.Error("a volume escaped its team's directory")
	}
}

// A task's links inside its volume are never followed by the server: the
// usage walk does not count what they point at, and deleting the volume
// removes the links, not their targets (another team's volume here).
func TestAttackLinksInVolumeNotFollowed(t *testing.T) {
	e, dir := fullyIsolated(t)
	if err := e.EnsureVolume(t.Context(), "victim", "data", 1); err != nil {
		t.Fatal(err)
	}
	vfile := filepath.Join(dir, "volumes", "victim", "data", "big")
	if err := os.WriteFile(vfile, make([]byte, 1<<16), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.EnsureVolume(t.Context(), "evil", "v", 1); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(dir, "volumes", "evil", "v")
	os.Symlink(filepath.Join(dir, "volumes", "victim", "data"), filepath.Join(evil, "dirlink"))
	os.Symlink(vfile, filepath.Join(evil, "filelink"))
	if n, err := e.VolumeUsage(t.Context(), "evil", "v"); err != nil || n != 0 {
		t.Errorf("VolumeUsage of a volume of links = %d, %v; want 0", n, err)
	}
	if err := e.DeleteVolume(t.Context(), "evil", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(vfile); err != nil {
		t.Errorf("deleting a volume of links removed another team's file: %v", err)
	}
}
