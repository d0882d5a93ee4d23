package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

// --port and ports: in -f land in the workload's ports, the flags
// replacing the file's.
func TestSubmitPortsAreSent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "serve.yaml")
	os.WriteFile(file, []byte("kind: service\ncommand: [./serve]\nresources: {gpus: 1}\nports: [8000, \"metrics=9100\", {name: admin, port: 9200}]\n"), 0o600)
	tests := []struct {
		name string
		args []string
		want []api.Port
	}{{
		name: "--port 8888 declares a port without a name",
		args: []string{"submit", "--port", "8888", "--", "jupyter", "lab"},
		want: []api.Port{{Port: 8888}},
	}, {
		name: "--port NAME=PORT names it, and the flag repeats in order",
		args: []string{"submit", "--port", "http=8000", "--port", "9000", "--", "./serve"},
		want: []api.Port{{Name: "http", Port: 8000}, {Port: 9000}},
	}, {
		name: "ports in -f take numbers, NAME=PORT and the API's mappings",
		args: []string{"submit", "-f", file},
		want: []api.Port{{Port: 8000}, {Name: "metrics", Port: 9100}, {Name: "admin", Port: 9200}},
	}, {
		name: "--port replaces the file's ports",
		args: []string{"submit", "-f", file, "--port", "web=8080"},
		want: []api.Port{{Name: "web", Port: 8080}},
	}, {
		name: "no port, no ports",
		args: []string{"submit", "--", "./train"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			if got := f.run(t, tt.args...); got.code != 0 {
				t.Fatalf("exit %d: %s", got.code, got.stderr)
			}
			bodies := f.submitted()
			if len(bodies) != 1 {
				t.Fatalf("%d submissions, want 1", len(bodies))
			}
			var w api.Workload
			mustJSON(t, string(bodies[0]), &w)
			if d := cmp.Diff(tt.want, w.Ports); d != "" {
				t.Errorf("ports sent (-want +got):\n%s", d)
			}
		})
	}
}

// A port that is not one is refused before anything is sent, naming the
// flag or the field.
func TestSubmitPortsRefused(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badFile, []byte("command: [x]\nports: [8000, \"http=eighty\"]\n"), 0o600)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"a word is no port", []string{"submit", "--port", "http", "--", "x"}, 2, `error: --port "http": want PORT or NAME=PORT`},
		{"a name without a port", []string{"submit", "--port", "http=", "--", "x"}, 2, `error: --port "http=": want PORT or NAME=PORT`},
		{"a port without a name", []string{"submit", "--port", "=80", "--", "x"}, 2, `error: --port "=80": want PORT or NAME=PORT`},
		{"out of range", []string{"submit", "--port", "70000", "--", "x"}, 1, "  ports[0].port: 70000: want a port from 1 to 65535"},
		{"zero", []string{"submit", "--port", "0", "--", "x"}, 1, "  ports[0].port: 0: want a port from 1 to 65535"},
		{"declared twice", []string{"submit", "--port", "8000", "--port", "http=8000", "--", "x"}, 1, "  ports[1].port: 8000 is declared twice"},
		{"a name twice", []string{"submit", "--port", "http=8000", "--port", "http=8001", "--", "x"}, 1, `  ports[1].name: "http" is declared twice`},
		{"a name that is not one", []string{"submit", "--port", "Web_UI=8000", "--", "x"}, 1, `  ports[0].name: "Web_UI": want lowercase letters`},
		{"a bad port in -f names its place", []string{"submit", "-f", badFile}, 1, `error: ` + badFile + `: ports[1]: "http=eighty": want PORT or NAME=PORT`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			got := f.run(t, tt.args...)
			if got.code != tt.wantCode || got.stdout != "" {
				t.Errorf("exit %d, stdout %q; want exit %d and no output", got.code, got.stdout, tt.wantCode)
			}
			if !hasLinePrefix(strings.Split(got.stderr, "\n"), tt.want) {
				t.Errorf("stderr lacks a line starting %q:\n%s", tt.want, got.stderr)
			}
			if n := len(f.submitted()); n != 0 {
				t.Errorf("%d workloads were sent, want none", n)
			}
		})
	}
}

// open prints the proxy's URL for a workload's first or named port, and a
// service's stable URL; a workload without ports, or a port it does not
// declare, is an error naming what it declares.
func TestOpenPrintsTheURL(t *testing.T) {
	f := newTestServer(t)
	ids := f.submit(
		api.Workload{Name: "nb", Kind: api.KindNotebook, Resources: api.Resources{GPUs: 250}, Command: []string{"sleep", "1d"}},
		api.Workload{Name: "llm", Kind: api.KindService, Resources: api.Resources{GPUs: 250}, Command: []string{"sleep", "1d"},
			Ports: []api.Port{{Name: "http", Port: 8000}, {Name: "metrics", Port: 9100}}},
		api.Workload{Name: "train", Resources: api.Resources{GPUs: 250}, Command: []string{"sleep", "1d"}},
	)
	f.step()
	nb, llm, train := ids[0], ids[1], ids[2]
	tests := []struct {
		name string
		args []string
		want result
	}{{
		name: "a notebook's default port, by ID",
		args: []string{"open", nb},
		want: result{stdout: f.URL + "/w/" + nb + "/8888/\n"},
	}, {
		name: "by name, the port by number",
		args: []string{"open", "nb", "8888"},
		want: result{stdout: f.URL + "/w/" + nb + "/8888/\n"},
	}, {
		name: "a service's first port, and its stable URL",
		args: []string{"open", "llm"},
		want: result{stdout: f.URL + "/w/" + llm + "/8000/\n" + f.URL + "/s/research/llm/\n"},
	}, {
		name: "a service's other port by name has no stable URL",
		args: []string{"open", llm, "metrics"},
		want: result{stdout: f.URL + "/w/" + llm + "/9100/\n"},
	}, {
		name: "a port it does not declare names those it does",
		args: []string{"open", llm, "8888"},
		want: result{code: 1, stderr: "error: workload " + llm + " does not declare port 8888; it declares http=8000, metrics=9100\n"},
	}, {
		name: "a workload without ports says so",
		args: []string{"open", train},
		want: result{code: 1, stderr: "error: workload " + train + " declares no port, so nothing of it is served (declare one at submission: --port 8888, or ports: in -f)\n"},
	}, {
		name: "no workload is a usage error",
		args: []string{"open"},
		want: result{code: 2, stderr: "error: open: which workload? give its ID or name\nRun 'gpufleet open --help' for usage.\n"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, f.run(t, tt.args...), cmp.AllowUnexported(result{})); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	t.Run("a workload that does not run yet is noted", func(t *testing.T) {
		// Submitted after the last step: nothing has started it.
		id := f.submit(api.Workload{Name: "later", Kind: api.KindNotebook, Resources: api.Resources{GPUs: 250}, Command: []string{"sleep", "1d"}})[0]
		got := f.run(t, "open", id)
		want := result{stdout: f.URL + "/w/" + id + "/8888/\n", stderr: "note: workload " + id + " is Pending: its URL answers 503 until it runs\n"}
		if d := cmp.Diff(want, got, cmp.AllowUnexported(result{})); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}

// --browser runs the system's opener with the token exchange URL, and says
// it cannot when there is none.
func TestOpenBrowser(t *testing.T) {
	f := newTestServer(t)
	id := f.submit(api.Workload{Name: "nb", Kind: api.KindNotebook, Resources: api.Resources{GPUs: 250}, Command: []string{"sleep", "1d"}})[0]
	f.step()
	opener := defaultOpener
	if n := browserOpeners[runtime.GOOS]; n != nil {
		opener = n[0]
	}
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, opener), []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/opened\"\n"), 0o755)

	vars := f.vars(t, aliceToken)
	vars["PATH"] = bin
	got := runCLI(t, invocation{args: []string{"open", "--browser", id}, vars: vars})
	want := result{stdout: f.URL + "/w/" + id + "/8888/\n"}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(result{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	opened, err := os.ReadFile(filepath.Join(bin, "opened"))
	if err != nil {
		t.Fatalf("the opener did not run: %v", err)
	}
	if want := f.URL + "/w/" + id + "/8888/?gpufleet-token=" + aliceToken + "\n"; string(opened) != want {
		t.Errorf("the opener got %q, want %q", opened, want)
	}

	t.Run("without an opener", func(t *testing.T) {
		vars := f.vars(t, aliceToken)
		vars["PATH"] = t.TempDir()
		got := runCLI(t, invocation{args: []string{"open", "--browser", id}, vars: vars})
		if got.code != 1 || got.stdout != f.URL+"/w/"+id+"/8888/\n" || !strings.HasPrefix(got.stderr, "error: cannot open a browser: "+opener+" is not on PATH") {
			t.Errorf("got %+v; want the URL, and an error saying it cannot open a browser", got)
		}
	})
}

// Against a real server: the URL that open prints answers a notebook's
// directory listing to a Bearer token of its team.
func TestLiveOpen(t *testing.T) {
	s := startLiveServer(t)
	id := strings.TrimSpace(s.must(t, "submit", "--kind", "notebook", "--gpus", "0.25", "--name", "files", "--",
		"sh", "-c", `exec /usr/bin/python3 -m http.server "$PORT"`))
	u := strings.TrimSpace(s.must(t, "open", "files"))
	if want := "http://" + s.addr + "/w/" + id + "/8888/"; u != want {
		t.Fatalf("open printed %q, want %q", u, want)
	}
	eventually(t, "the notebook answers at the URL open printed", func() string {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "Directory listing") {
			return resp.Status + ": " + string(b)
		}
		return ""
	})
}
