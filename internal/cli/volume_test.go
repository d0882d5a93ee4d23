package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

func TestParseMountFlag(t *testing.T) {
	type mount struct {
		Name, Path string
		ReadOnly   bool
	}
	for _, tt := range []struct {
		in   string
		want mount
	}{
		{"ckpt:/ckpt", mount{"ckpt", "/ckpt", false}},
		{"ckpt:/ckpt:ro", mount{"ckpt", "/ckpt", true}},
		{"ckpt:/ckpt:rw", mount{"ckpt", "/ckpt", false}},
		{"my-data:/home/me/data", mount{"my-data", "/home/me/data", false}},
	} {
		name, path, ro, err := parseMountFlag(tt.in)
		if err != nil {
			t.Errorf("parseMountFlag(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, mount{name, path, ro}); diff != "" {
			t.Errorf("parseMountFlag(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, tt := range []struct{ in, problem string }{
		{"ckpt", "NAME:/path"},
		{"ckpt:", "path"},
		{":/ckpt", "not a name"},
		{"Ckpt:/ckpt", "not a name"},
		{"ckpt:ckpt", "absolute"},
		{"ckpt:/ckpt:rx", "NAME:/path"},
		{"ckpt:/ckpt:ro:x", "NAME:/path"},
		{"ckpt:/data/../etc", ".."},
		{"ckpt:/proc/x", "/proc"},
		{"ckpt:/etc", "/etc"},
		{"ckpt:/", "/"},
		{"ckpt:/data/", "clean"},
	} {
		_, _, _, err := parseMountFlag(tt.in)
		if err == nil {
			t.Errorf("parseMountFlag(%q) accepted, want a problem mentioning %q", tt.in, tt.problem)
		} else if !strings.Contains(err.Error(), tt.problem) {
			t.Errorf("parseMountFlag(%q) = %v, want it to mention %q", tt.in, err, tt.problem)
		}
	}
}

// The storage flags land in the workload's fields, and a bad one is
// refused before anything is sent, naming the flag.
func TestSubmitStorageFlags(t *testing.T) {
	f := newTestServer(t)
	ctx := context.Background()
	for _, n := range []string{"ckpt", "cache"} {
		if err := f.st.CreateVolume(ctx, core.Volume{Team: "research", Name: n, SizeBytes: 1 << 20, UsedBytes: -1, CreatedAt: testNow}, -1); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.st.CreateSecret(ctx, store.Secret{Team: "research", Name: "conf", Keys: []string{"config.json"}, Sealed: []byte("sealed"), CreatedAt: testNow}); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, invocation{args: []string{"submit", "--volume", "ckpt:/ckpt", "--volume", "cache:/cache:ro",
		"--secret-file", "conf", "--", "python", "train.py"}, vars: f.vars(t, aliceToken)})
	if diff := cmp.Diff(result{stdout: "wl-1\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Fatalf("run (-want +got):\n%s", diff)
	}
	bodies := f.submitted()
	if len(bodies) != 1 {
		t.Fatalf("got %d submissions, want 1", len(bodies))
	}
	want := `{"resources":{"gpus":1},"command":["python","train.py"],"secretFiles":["conf"],
		"volumes":[{"name":"ckpt","path":"/ckpt"},{"name":"cache","path":"/cache","readOnly":true}]}`
	if diff := cmp.Diff(decodeJSON(t, want), decodeJSON(t, string(bodies[0]))); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	// --mount sends a dataset mount; this server allows none, and says so
	// naming the field.
	f = newTestServer(t)
	got = runCLI(t, invocation{args: []string{"submit", "--mount", "imagenet:/data", "--", "x"}, vars: f.vars(t, aliceToken)})
	if got.code == 0 || !strings.Contains(got.stderr, "mounts[0].dataset") {
		t.Errorf("--mount on a server without datasets: exit %d, stderr %q, want mounts[0].dataset", got.code, got.stderr)
	}
	if bodies := f.submitted(); len(bodies) != 1 {
		t.Errorf("got %d submissions, want 1", len(bodies))
	} else if diff := cmp.Diff(decodeJSON(t, `{"resources":{"gpus":1},"command":["x"],"mounts":[{"dataset":"imagenet","path":"/data"}]}`),
		decodeJSON(t, string(bodies[0]))); diff != "" {
		t.Errorf("--mount body (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--volume", "ckpt"}, `--volume "ckpt"`},
		{[]string{"--volume", "ckpt:/proc/x"}, `--volume "ckpt:/proc/x"`},
		{[]string{"--mount", "imagenet:data"}, `--mount "imagenet:data"`},
	} {
		f := newTestServer(t)
		args := append(append([]string{"submit"}, tt.args...), "--", "x")
		r := runCLI(t, invocation{args: args, vars: f.vars(t, aliceToken)})
		if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want a failure naming %s", tt.args, r.code, r.stderr, tt.want)
		}
		if n := len(f.submitted()); n != 0 {
			t.Errorf("%v: %d submissions, want none", tt.args, n)
		}
	}
}

// create volume, get volumes, get storage and delete volume against a real
// API server.
func TestVolumeVerbs(t *testing.T) {
	f := newTestServer(t)
	vars := f.vars(t, aliceToken)
	r := runCLI(t, invocation{args: []string{"create", "volume", "research", "data", "--size", "2GiB"}, vars: vars})
	if r.code != 0 || !strings.Contains(r.stdout, "volume/data created in research") {
		t.Fatalf("create volume: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	v, err := f.st.Volume(context.Background(), "research", "data")
	if err != nil || v.SizeBytes != 2<<30 {
		t.Errorf("stored volume: %+v %v, want 2 GiB", v, err)
	}
	for _, args := range [][]string{
		{"create", "volume", "research", "data"},                   // no --size
		{"create", "volume", "research", "Bad", "--size", "1GiB"},  // bad name
		{"create", "volume", "research", "x", "--size", "lots"},    // bad size
		{"create", "volume", "research", "data", "--size", "1GiB"}, // exists
		{"create", "volume", "vision", "data", "--size", "1GiB"},   // not alice's team
	} {
		if r := runCLI(t, invocation{args: args, vars: vars}); r.code == 0 {
			t.Errorf("%v: exit 0, stdout %q", args, r.stdout)
		}
	}
	r = runCLI(t, invocation{args: []string{"get", "volumes", "--team", "research"}, vars: vars})
	if r.code != 0 || !strings.Contains(r.stdout, "data") {
		t.Errorf("get volumes: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, invocation{args: []string{"get", "storage", "--team", "research"}, vars: vars})
	if r.code != 0 || !strings.Contains(r.stdout, "research") {
		t.Errorf("get storage: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// alice is a member, not a team-admin: the admin deletes.
	if r := runCLI(t, invocation{args: []string{"delete", "volume", "research", "data"}, vars: vars}); r.code == 0 {
		t.Errorf("a member deletes a volume: exit 0, stdout %q", r.stdout)
	}
	r = runCLI(t, invocation{args: []string{"delete", "volume", "research", "data"}, vars: f.vars(t, adminToken)})
	if r.code != 0 || r.stdout != "volume/data deleted\n" {
		t.Errorf("delete volume: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := f.st.Volume(context.Background(), "research", "data"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("after delete volume: %v, want ErrNotFound", err)
	}
}

// A dataset is always mounted read-only: --mount DATASET:/path:rw asks for
// what the server refuses (mounts[i].readOnly: false), so it is refused
// before sending, not silently mounted read-only.
func TestSubmitMountFlagRefusesReadWrite(t *testing.T) {
	f := newTestServer(t)
	r := runCLI(t, invocation{args: []string{"submit", "--mount", "imagenet:/data:rw", "--", "x"}, vars: f.vars(t, aliceToken)})
	if r.code == 0 || !strings.Contains(r.stderr, `--mount "imagenet:/data:rw"`) {
		t.Errorf("exit %d, stderr %q, want a failure naming --mount", r.code, r.stderr)
	}
	if n := len(f.submitted()); n != 0 {
		t.Errorf("%d submissions, want none", n)
	}
}
