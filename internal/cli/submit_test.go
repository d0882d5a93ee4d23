package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

func TestSubmitSendsTheWorkload(t *testing.T) {
	yamlFile := filepath.Join(t.TempDir(), "workload.yaml")
	os.WriteFile(yamlFile, []byte(`
name: from-file
team: research
resources:
  gpus: 2
  cpu: 4
command: [python, train.py]
env:
  A: from-file
  B: kept
`), 0o600)

	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string // the JSON body the server gets
	}{{
		name: "no GPU flag asks for one GPU",
		args: []string{"submit", "--", "python", "train.py"},
		want: `{"resources":{"gpus":1},"command":["python","train.py"]}`,
	}, {
		name: "--gpus 0.25 asks for a quarter of a GPU",
		args: []string{"submit", "--gpus", "0.25", "--", "python", "train.py"},
		want: `{"resources":{"gpus":0.25},"command":["python","train.py"]}`,
	}, {
		name: "--gpu-memory 20GiB asks for MiB of one GPU and no count",
		args: []string{"submit", "--gpu-memory", "20GiB", "--gpu-model", "H100", "--gpu-model", "A100", "--", "./serve"},
		want: `{"resources":{"gpus":0,"gpuMemoryMiB":20480,"gpuModels":["H100","A100"]},"command":["./serve"]}`,
	}, {
		name: "flags after the command belong to the command",
		args: []string{"submit", "--gpus", "2", "python", "train.py", "--epochs", "3", "--gpus", "9"},
		want: `{"resources":{"gpus":2},"command":["python","train.py","--epochs","3","--gpus","9"]}`,
	}, {
		name: "every spec flag lands in its field",
		args: []string{"submit", "--name", "train", "--team", "research", "--priority", "batch", "--kind", "service",
			"--cpu", "0.5", "--memory", "8GiB", "--env", "A=1", "--env", "B=x=y", "--label", "app=bert",
			"--workdir", "out/run1", "--max-runtime", "1h30m", "--grace-period", "45s", "--", "./serve", "--port", "80"},
		want: `{"name":"train","team":"research","kind":"service","priority":"batch",
			"resources":{"gpus":1,"cpu":0.5,"memoryMiB":8192},"command":["./serve","--port","80"],
			"env":{"A":"1","B":"x=y"},"workingDir":"out/run1","maxRuntimeSeconds":5400,"gracePeriodSeconds":45,
			"labels":{"app":"bert"}}`,
	}, {
		name: "--image without a command runs the image's entrypoint",
		args: []string{"submit", "--image", "ghcr.io/acme/serve:2", "--kind", "service"},
		want: `{"kind":"service","image":"ghcr.io/acme/serve:2","resources":{"gpus":1},"command":null}`,
	}, {
		name: "--image with a command",
		args: []string{"submit", "--image", "ghcr.io/acme/train:1", "--", "python", "train.py"},
		want: `{"image":"ghcr.io/acme/train:1","resources":{"gpus":1},"command":["python","train.py"]}`,
	}, {
		name: "-f YAML is the base and flags override it",
		args: []string{"submit", "-f", yamlFile, "--name", "from-flag", "--env", "A=from-flag"},
		want: `{"name":"from-flag","team":"research","resources":{"gpus":2,"cpu":4},"command":["python","train.py"],
			"env":{"A":"from-flag","B":"kept"}}`,
	}, {
		name: "--gpu-memory replaces the file's GPU count",
		args: []string{"submit", "-f", yamlFile, "--gpu-memory", "10G"},
		want: `{"name":"from-file","team":"research","resources":{"gpus":0,"gpuMemoryMiB":10240,"cpu":4},"command":["python","train.py"],
			"env":{"A":"from-file","B":"kept"}}`,
	}, {
		name:  "-f - reads JSON from standard input and the arguments replace its command",
		args:  []string{"submit", "-f", "-", "echo", "hi"},
		stdin: `{"resources":{"gpus":"0.5"},"command":["ignored"]}`,
		want:  `{"resources":{"gpus":0.5},"command":["echo","hi"]}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			got := runCLI(t, invocation{args: tt.args, vars: f.vars(t, aliceToken), stdin: tt.stdin})
			if diff := cmp.Diff(result{stdout: "wl-1\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Fatalf("run (-want +got):\n%s", diff)
			}
			bodies := f.submitted()
			if len(bodies) != 1 {
				t.Fatalf("got %d submissions, want 1", len(bodies))
			}
			if diff := cmp.Diff(decodeJSON(t, tt.want), decodeJSON(t, string(bodies[0]))); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubmitRejectsBeforeSending(t *testing.T) {
	dir := t.TempDir()
	badField := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badField, []byte("command: [a]\nresources:\n  gpus: 1\n  gpuz: 2\n"), 0o600)
	badTopField := filepath.Join(dir, "bad-top.yaml")
	os.WriteFile(badTopField, []byte("command: [a]\ncolour: red\nresources:\n  gpus: 1\n"), 0o600)

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string // lines that must appear
		wantText   []string // text that must appear anywhere in stderr
	}{{
		name:       "--gpus 1.5 fails the local check on resources.gpus",
		args:       []string{"submit", "--gpus", "1.5", "--", "python", "train.py"},
		wantCode:   1,
		wantStderr: []string{"error: invalid workload, nothing was submitted", "  resources.gpus: 1.5 GPUs: above one GPU the count must be whole"},
	}, {
		name:       "every local problem is listed",
		args:       []string{"submit", "--gpus", "0.5", "--gpu-memory", "1GiB", "--kind", "batch"},
		wantCode:   1,
		wantStderr: []string{"  kind: must be one of job, service, notebook", "  resources.gpuMemoryMiB: give either gpus or gpuMemoryMiB, not both", "  command: must not be empty"},
	}, {
		name:     "--replicas 0 is refused rather than sent as one",
		args:     []string{"submit", "--replicas", "0", "--gpus", "1", "--", "python", "train.py"},
		wantCode: 2,
		wantText: []string{"--replicas 0: a gang has at least one replica"},
	}, {
		name:       "an image that is not a reference is named",
		args:       []string{"submit", "--image", "acme/train:1 --privileged"},
		wantCode:   1,
		wantStderr: []string{"error: invalid workload, nothing was submitted", "  image: is not an image reference"},
	}, {
		name:       "an empty program is named, image or not",
		args:       []string{"submit", "--image", "acme/train:1", "--", "", "x"},
		wantCode:   1,
		wantStderr: []string{"  command[0]: must not be empty"},
	}, {
		name:       "an unknown field in -f is named",
		args:       []string{"submit", "-f", badTopField},
		wantCode:   1,
		wantStderr: []string{`error: ` + badTopField + `: unknown field "colour"`},
	}, {
		name:       "an unknown nested field in -f is named",
		args:       []string{"submit", "-f", badField},
		wantCode:   1,
		wantStderr: []string{`error: ` + badField + `: `},
		wantText:   []string{"gpuz", "unknown field"},
	}, {
		name:       "a quantity that is not a number is a usage error",
		args:       []string{"submit", "--gpus", "two", "--", "x"},
		wantCode:   2,
		wantStderr: []string{`error: --gpus "two": `},
	}, {
		name:       "an env flag without '=' is a usage error",
		args:       []string{"submit", "--env", "A", "--", "x"},
		wantCode:   2,
		wantStderr: []string{`error: --env "A": want KEY=VALUE`},
	}, {
		name:       "a sub-second --max-runtime is a usage error",
		args:       []string{"submit", "--max-runtime", "1.5s", "--", "x"},
		wantCode:   2,
		wantStderr: []string{`error: --max-runtime "1.5s": want whole seconds`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			got := f.run(t, tt.args...)
			if got.code != tt.wantCode || got.stdout != "" {
				t.Errorf("got code %d, stdout %q; want code %d and no output", got.code, got.stdout, tt.wantCode)
			}
			lines := strings.Split(got.stderr, "\n")
			for _, want := range tt.wantStderr {
				if !hasLinePrefix(lines, want) {
					t.Errorf("stderr lacks a line starting %q; got:\n%s", want, got.stderr)
				}
			}
			for _, want := range tt.wantText {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("stderr lacks %q; got:\n%s", want, got.stderr)
				}
			}
			if n := len(f.submitted()); n != 0 {
				t.Errorf("%d workloads were sent, want none", n)
			}
		})
	}
}

func TestSubmitPrintsServerFieldProblems(t *testing.T) {
	f := newTestServer(t)
	got := f.run(t, "submit", "--team", "nope", "--", "x")
	want := result{code: 1, stderr: "error: invalid request\n  team: team \"nope\" does not exist or you are not a member\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSubmitOutputJSONPrintsTheWorkload(t *testing.T) {
	f := newTestServer(t)
	got := f.run(t, "submit", "-o", "json", "--gpus", "0.5", "--", "x")
	if got.code != 0 {
		t.Fatalf("code %d, stderr %s", got.code, got.stderr)
	}
	var w api.Workload
	if err := json.Unmarshal([]byte(got.stdout), &w); err != nil {
		t.Fatal(err)
	}
	if w.ID != "wl-1" || w.Team != "research" || w.Owner != "alice" || w.Resources.GPUs != 500 || w.Status.Phase != api.PhasePending {
		t.Errorf("got %+v", w)
	}
}

func TestSubmitIdempotencyKeyIsSent(t *testing.T) {
	f := newTestServer(t)
	for range 2 {
		if got := f.run(t, "submit", "--idempotency-key", "k1", "--", "x"); got.stdout != "wl-1\n" {
			t.Errorf("got %+v, want wl-1 both times", got)
		}
	}
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

func hasLinePrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
