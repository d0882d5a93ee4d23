package core

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestValidNameIsItsExpression: ValidName, written out, accepts what the
// regular expression it replaced accepted (up to MaxNameLen characters),
// for strings drawn from the ends of its character ranges, their neighbours
// and a few others.
func TestValidNameIsItsExpression(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, s := range []string{"", "a", "-", "a-", "-a", "a-b", "a--b", "ab9", "A", "a_b", "a.b", "é", strings.Repeat("a", MaxNameLen), strings.Repeat("a", MaxNameLen+1)} {
		if got, want := ValidName(s), len(s) <= MaxNameLen && re.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOfN(rapid.SampledFrom([]rune("az09m5-`{/:,.AZ_ \x00\nß")), 0, MaxNameLen+2, -1).Draw(t, "s")
		if got, want := ValidName(s), len(s) <= MaxNameLen && re.MatchString(s); got != want {
			t.Fatalf("ValidName(%q) = %v, want %v", s, got, want)
		}
	})
}

func TestCheckMountPath(t *testing.T) {
	for _, p := range []string{"/data", "/ckpt", "/home/me/cache", "/var/lib/data", "/workspace/a-b_c.d", "/mnt/" + strings.Repeat("x", 250)} {
		if problem := CheckMountPath(p); problem != "" {
			t.Errorf("CheckMountPath(%q) = %q, want it accepted", p, problem)
		}
	}
	for _, p := range []string{
		"", "data", "./data", "/", "/data/", "/data//x", "/data/./x", "/data/../etc", "/..", "/a/..",
		"/a:b", "/a,b", `/a\b`, "/a\x00b",
		"/proc", "/proc/x", "/etc", "/etc/passwd", "/dev/shm", "/sys/fs", "/usr/bin", "/tmp", "/tmp/x",
		"/var/lib/gpufleet", "/var/lib/gpufleet/volumes", "/run/secrets", "/var/run/docker.sock", "/lib64",
		"/" + strings.Repeat("x", 256),
	} {
		if CheckMountPath(p) == "" {
			t.Errorf("CheckMountPath(%q) accepted, want a problem", p)
		}
	}
	// A prefix of a reserved name is not inside it.
	for _, p := range []string{"/procs", "/etcetera", "/tmpdata", "/usrdata"} {
		if problem := CheckMountPath(p); problem != "" {
			t.Errorf("CheckMountPath(%q) = %q, want it accepted", p, problem)
		}
	}
}

// reservedMountPaths are directories a mount may "not cover or sit
// inside": a mount at a parent of one (/var covers /var/lib/gpufleet and
// /var/run) hides it as surely as one at it.
func TestCheckMountPathRefusesParentsOfReservedPaths(t *testing.T) {
	for _, p := range []string{"/var", "/var/lib"} {
		if CheckMountPath(p) == "" {
			t.Errorf("CheckMountPath(%q) accepted; it covers a reserved path (/var/lib/gpufleet, /var/run)", p)
		}
	}
}

// /gpufleet is where the local executor puts a container task's
// checkpoint, usage and secret directories, and it refuses a mount there
// at start: the API refuses it at submit, naming the field, rather than
// accept a workload that fails when it starts.
func TestCheckMountPathRefusesTheContainerPaths(t *testing.T) {
	for _, p := range []string{"/gpufleet", "/gpufleet/secrets"} {
		if CheckMountPath(p) == "" {
			t.Errorf("CheckMountPath(%q) accepted; the local executor refuses it at start", p)
		}
	}
}
