package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// get reads a workload back from the real server as alice.
func (f *testServer) get(id string) api.Workload {
	f.t.Helper()
	r := f.run(f.t, "get", "workload", id, "-o", "json")
	var w api.Workload
	if err := json.Unmarshal([]byte(r.stdout), &w); r.code != 0 || err != nil {
		f.t.Fatalf("get workload %s: %+v", id, r)
	}
	return w
}

// TestSubmitSizes: --memory and --gpu-memory take the same units, GB and
// GiB alike (powers of 1024), and a bad size says what is accepted.
func TestSubmitSizes(t *testing.T) {
	f := newTestServer(t)
	for _, tt := range []struct {
		args         []string
		gpuMem, host int64
	}{
		{[]string{"--gpu-memory", "20GB", "--memory", "8G"}, 20480, 8192},
		{[]string{"--gpu-memory", "20GiB", "--memory", "8gib"}, 20480, 8192},
		{[]string{"--gpu-memory", "20g", "--memory", "8192"}, 20480, 8192},
		{[]string{"--gpu-memory", "1.5GB", "--memory", "512MB"}, 1536, 512},
	} {
		args := append(append([]string{"submit", "--team", "research"}, tt.args...), "--", "true")
		r := f.run(t, args...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", tt.args, r)
		}
		w := f.get(strings.TrimSpace(r.stdout))
		if w.Resources.GPUMemoryMiB != tt.gpuMem || w.Resources.MemoryMiB != tt.host {
			t.Errorf("%v: gpuMemoryMiB %d, memoryMiB %d; want %d, %d", tt.args, w.Resources.GPUMemoryMiB, w.Resources.MemoryMiB, tt.gpuMem, tt.host)
		}
	}
	r := f.run(t, "submit", "--gpu-memory", "20 gigs", "--", "true")
	want := `error: --gpu-memory "20 gigs": want a size such as 20GiB, 20GB or 512MiB: a number and one of the units ` + quantity.MemoryUnits + "\n"
	if r.code != 2 || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("--gpu-memory '20 gigs': %+v, want exit 2 and %q", r, want)
	}
}

// TestSubmitFileInPlainWords: a file's command may be one line, split as a
// shell would; sizes in a file take units; every kind of mistake is named
// by field in the file's words, never Go's.
func TestSubmitFileInPlainWords(t *testing.T) {
	f := newTestServer(t)
	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, "w.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := f.run(t, "submit", "-f", file("team: research\ncommand: python train.py --name 'my run' \"a \\\"b\\\"\" c\\ d\nresources:\n  gpuMemoryMiB: 20GB\n  memoryMiB: 8G\n"))
	if r.code != 0 {
		t.Fatalf("submit -f with a one-line command: %+v", r)
	}
	w := f.get(strings.TrimSpace(r.stdout))
	if diff := cmp.Diff([]string{"python", "train.py", "--name", "my run", `a "b"`, "c d"}, w.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if w.Resources.GPUMemoryMiB != 20480 || w.Resources.MemoryMiB != 8192 {
		t.Errorf("resources %+v, want 20480 and 8192 MiB", w.Resources)
	}
	for _, body := range []string{"command: sleep 2\n", "command: [sleep, 2]\n"} {
		r = f.run(t, "submit", "-f", file("team: research\nresources: {gpus: 1}\nenv: {EPOCHS: 3, DEBUG: true}\n"+body))
		if r.code != 0 {
			t.Fatalf("%s: %+v", body, r)
		}
		w := f.get(strings.TrimSpace(r.stdout))
		if !cmp.Equal(w.Command, []string{"sleep", "2"}) || !cmp.Equal(w.Env, map[string]string{"EPOCHS": "3", "DEBUG": "true"}) {
			t.Errorf("%s: command %q, env %v; want [sleep 2] and EPOCHS=3 DEBUG=true", body, w.Command, w.Env)
		}
	}

	bad := []struct{ body, want string }{
		{"command: sleep 2 && echo done\n", `command: "sleep 2 && echo done" uses the shell's '&', but no shell runs the command: quote the character, or write the command as a list, e.g. [sh, -c, "sleep 2 && echo done"]`},
		{"command: echo 'unclosed\n", `command: "echo 'unclosed" has a ' that is not closed`},
		{"command: [true]\nresources:\n  gpuMemoryMiB: lots\n", `resources.gpuMemoryMiB: "lots": want a size such as 20GiB`},
		{"command: {a: b}\n", "command: must be a list of strings, not a mapping"},
		{"command: [[a]]\n", "command: must be a string, not a list"},
		{"command: [true]\nreplicas: two\n", "replicas: must be a whole number, not a string"},
		{"command: [true]\nenv: [A=1]\n", "env: must be a mapping of strings, not a list"},
		{"command: [true]\nlabels: x\n", "labels: must be a mapping of strings, not a string"},
		{"command: [true]\nmaxRuntimeSeconds: 1h\n", "maxRuntimeSeconds: must be a whole number, not a string"},
		{"command: [true]\nresources: 3\n", "resources: must be a mapping, not a number"},
		{"command: [true]\nresources:\n  gpuModels: H100\n", "resources.gpuModels: must be a list of strings, not a string"},
		{"command: [true]\nname: [a]\n", "name: must be a string, not a list"},
		{"command: [true]\ncolour: red\n", `unknown field "colour"`},
		{"command: [true]\nreplicas: 1.5\n", "replicas: must be a whole number, not 1.5 (not whole)"},
		{"command: [true]\nmaxRuntimeSeconds: 99999999999999999999\n", "maxRuntimeSeconds: must be a whole number, not 100000000000000000000 (too large)"},
		{"command: [true]\ncreatedAt: yesterday\n", `a time must be RFC 3339, such as 2025-06-01T12:00:00Z, not "yesterday"`},
		{"command: [true]\nkind: 3\n", "kind: must be a string, not a number"},
		{"command: [true]\nresources: {gpus: two}\n", `resources.gpus: "two" is not a number`},
		{"- command: [true]\n", "must be a workload spec, a mapping of fields"},
		{"", "is empty: a workload spec is expected"},
		{"command: [true]\n\tname: x\n", "line 2: found character that cannot start any token"},
		{"command: [true]\ncommand: [false]\n", `line 2: key "command" appears twice`},
	}
	for _, tt := range bad {
		p := file(tt.body)
		r := f.run(t, "submit", "-f", p)
		if r.code == 0 || !strings.Contains(r.stderr, "error: "+p+": "+tt.want) {
			t.Errorf("file %q: %+v, want an error %q", tt.body, r, tt.want)
		}
		for _, goish := range []string{"Go ", "unmarshal", "int64", "[]string", "map[", "struct", "json:", "converting", "2006", "body:"} {
			if strings.Contains(r.stderr, goish) {
				t.Errorf("file %q: %q speaks Go (%q)", tt.body, r.stderr, goish)
			}
		}
	}
}

// TestSubmitNamesTheFlag: a label that breaks the rule says the rule, and
// a region no node is in names --region and the regions there are.
func TestSubmitNamesTheFlag(t *testing.T) {
	f := newTestServer(t)
	r := f.run(t, "submit", "--team", "research", "--label", "owner=ünïcode", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "labels.owner: value \"ünïcode\" is not a valid label value: "+core.LabelRule+" (or empty) (flag --label)") {
		t.Errorf("--label owner=ünïcode: %+v, want the rule and the flag", r)
	}
	r = f.run(t, "submit", "--team", "research", "--region", "eu-west", "--", "true")
	want := "  residency: can never run as asked: no node is in region eu-west (the fleet's regions: us-east) (flag --region)\n"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("--region eu-west: %+v, want %q", r, want)
	}
	if strings.Contains(r.stderr, "labels do not match") {
		t.Errorf("--region eu-west: %q blames the labels", r.stderr)
	}
	r = f.run(t, "submit", "--team", "research", "--pool", "a", "--region", "us-east", "--", "true")
	if r.code != 0 {
		t.Errorf("--pool a --region us-east, which the node has: %+v", r)
	}
}
