package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestREADME walks the README's first hour and the reference pages after
// it: it starts the server as the README's first command does (on a free
// port and a fresh data dir), then runs every command of the ```sh blocks
// of the README and then of each docs/*.md, page by page in name order, in
// one shell (bash with pipefail where there is one, else sh), as a user
// would type them, and fails with the command and its output at the first
// one that fails. GPUFLEET_README names another README to walk (with the
// docs/ beside it). docs/README.md tells writers these rules.
//
// The walk happens in a fresh directory that stands for the clone: it links
// the repository's files (so that the README's `go build` works) but has its
// own .gpufleet, and the Alibaba trace is put where the README's download
// puts it, ../clusterdata/cluster-trace-gpu-v2023/csv (from $GPUFLEET_TRACE_DIR,
// else ../shared/traces/alibaba-gpu-v2023 next to the repository, else the
// small synthetic trace of internal/sim/testdata). 127.0.0.1:8080 in a
// command becomes the test server's address. A command whose comment says
// "(needs ...)" (a cluster, the network, minutes) is not run; one whose
// comment says "Ctrl-C" is stopped after a few seconds, as the README tells
// the user to, and must not fail before. In the end no workload may be left
// running.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and walks the README")
	}
	path := os.Getenv("GPUFLEET_README")
	if path == "" {
		path = filepath.Join("..", "..", "README.md")
	}
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(string(md))
	checkSetup(t, path, string(md), blocks)

	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	walk := filepath.Join(base, "gpufleet")
	linkClone(t, repo, walk)
	linkTrace(t, repo, filepath.Join(base, "clusterdata", "cluster-trace-gpu-v2023", "csv"))

	// The server's binary, for `go run` (without symbols: it links faster).
	bin := filepath.Join(base, "bin", "gpufleet")
	start := time.Now()
	if out, err := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("go build: %.1fs", time.Since(start).Seconds())
	addr := freeAddr(t)
	data := filepath.Join(walk, ".gpufleet")
	serverLog := filepath.Join(base, "server.log")
	startServer(t, bin, walk, serverLog, addr, "server", "--demo", "--addr", addr, "--data", data)

	tok, err := os.ReadFile(filepath.Join(data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(addr, strings.TrimSpace(string(tok)))
	t.Cleanup(func() { stopAll(t, client) }) // workloads outlive the server

	sh := startShell(t, walk, append(cleanEnv(), "XDG_CONFIG_HOME="+filepath.Join(base, "config")))
	pages := []readmePage{{path, blocks[1:]}}
	docs, err := filepath.Glob(filepath.Join(filepath.Dir(path), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs { // Glob sorts by name
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, readmePage{doc, readmeBlocks(string(md))})
	}
	var nBlocks, nRun, nSkipped int
	for _, page := range pages {
		path := page.path
		nBlocks += len(page.blocks)
		for _, c := range slices.Concat(page.blocks...) {
			if c.needs() {
				nSkipped++
				t.Logf("%s:%d: not run: %s", path, c.line, c.text)
				continue
			}
			nRun++
			text := strings.ReplaceAll(c.text, "127.0.0.1:8080", addr)
			var script string
			if c.interrupted() {
				code := strings.ReplaceAll(c.code(), "127.0.0.1:8080", addr)
				if strings.Contains(code, "\n") {
					t.Fatalf("%s:%d: a command to stop with Ctrl-C must be one line: %s", path, c.line, c.text)
				}
				script = interruptScript(code)
			} else {
				script = "{ " + text + "\n} </dev/null 2>&1; __readme_rc=$?\n"
			}
			start := time.Now()
			rc, out, err := sh.run(script, 2*time.Minute) // a hang guard: the build in a fresh clone compiles
			if err != nil || rc != 0 {
				status := fmt.Sprintf("exit status %d", rc)
				if err != nil {
					status = err.Error()
				}
				log, _ := os.ReadFile(serverLog)
				t.Fatalf("%s:%d: %s\n%s; output:\n%s\n\nserver log (last lines):\n%s",
					path, c.line, c.text, status, out, lastLines(string(log), 30))
			}
			t.Logf("%s:%d (%.1fs): %s\n%s", path, c.line, time.Since(start).Seconds(), c.text, out)
		}
	}
	t.Logf("walked %d ```sh blocks of %d pages (and the set-up block): %d commands run, %d not run",
		nBlocks, len(pages), nRun, nSkipped)

	// Nothing the README started may be left running.
	all, err := client.AllWorkloads(context.Background(), api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range all {
		if !finished(w) {
			t.Errorf("the README leaves %s (%s, team %s) %s", w.ID, w.Name, w.Team, w.Status.Phase)
		}
	}
}

// checkSetup fails unless the README's first ```sh block is the two set-up
// commands (start the server, run the tests), before any section.
func checkSetup(t *testing.T, path, md string, blocks [][]readmeCmd) {
	t.Helper()
	if len(blocks) == 0 || len(blocks[0]) == 0 {
		t.Fatalf("%s: no ```sh block", path)
	}
	var setup []string
	for _, c := range blocks[0] {
		setup = append(setup, strings.TrimSpace(c.code()))
	}
	want := []string{"go run ./cmd/gpufleet server --demo", "go test ./..."}
	if diff := cmp.Diff(want, setup); diff != "" {
		t.Fatalf("%s: the first ```sh block must be the two set-up commands (-want +got):\n%s", path, diff)
	}
	if heading := strings.Index(md, "\n## "); heading >= 0 && blocks[0][0].line > strings.Count(md[:heading], "\n") {
		t.Fatalf("%s: the set-up commands must come first, before any section", path)
	}
}

// readmeMaxChars bounds the README: it opens with the set-up, says what
// gpufleet is, tours it and links to docs/, where reference goes.
const readmeMaxChars = 12000

// TestREADMEIsShort checks, without running anything, that the README
// opens with the two set-up commands and stays under readmeMaxChars
// characters.
func TestREADMEIsShort(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkSetup(t, path, string(md), readmeBlocks(string(md)))
	if n := utf8.RuneCount(md); n >= readmeMaxChars {
		t.Errorf("%s is %d characters, at least %d: move reference material to docs/", path, n, readmeMaxChars)
	}
}

// readmePage is a page the walk runs: its path and its ```sh blocks.
type readmePage struct {
	path   string
	blocks [][]readmeCmd
}

func finished(w api.Workload) bool {
	switch w.Status.Phase {
	case api.PhaseSucceeded, api.PhaseFailed, api.PhaseCancelled:
		return true
	}
	return false
}

// stopAll cancels every workload that has not finished and waits until
// they have, so that no process outlives the test.
func stopAll(t *testing.T, client *api.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		all, err := client.AllWorkloads(ctx, api.ListOptions{})
		if err != nil {
			t.Errorf("list workloads: %v", err)
			return
		}
		left := 0
		for _, w := range all {
			if !finished(w) {
				left++
				if w.Status.StopRequested == "" {
					client.CancelWorkload(ctx, w.ID)
				}
			}
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%d workloads still not finished", left)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readmeCmd is one command of a ```sh block: a line, with its continuation
// lines and here-document, as the shell reads it.
type readmeCmd struct {
	line int    // of the README, from 1
	text string // as written
	// comment is the comment of its first line (for a here-document) or of
	// its last line, without the #; end is where the comment starts in text
	// (len(text) without one).
	comment string
	end     int
}

// code is the command without its trailing comment.
func (c readmeCmd) code() string { return strings.TrimRight(c.text[:c.end], " \t") }

// needs reports a command the walk does not run: its comment says what it
// needs that a test does not have.
func (c readmeCmd) needs() bool { return strings.Contains(c.comment, "(needs ") }

// interrupted reports a command the README says to stop with Ctrl-C.
func (c readmeCmd) interrupted() bool { return strings.Contains(c.comment, "Ctrl-C") }

var heredoc = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// readmeBlocks returns the commands of each ```sh block of md, in order;
// blocks in other languages are not commands.
func readmeBlocks(md string) [][]readmeCmd {
	var blocks [][]readmeCmd
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		fence, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
		if !ok {
			continue
		}
		i++
		var block []readmeCmd
		for ; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			if fence != "sh" {
				continue
			}
			s := strings.TrimSpace(lines[i])
			if s == "" || strings.HasPrefix(s, "#") {
				continue
			}
			c := readmeCmd{line: i + 1, text: lines[i]}
			for strings.HasSuffix(lines[i], `\`) && i+1 < len(lines) {
				i++
				c.text += "\n" + lines[i]
			}
			c.end = commentAt(c.text)
			if m := heredoc.FindStringSubmatch(c.text[:c.end]); m != nil {
				for i+1 < len(lines) {
					i++
					c.text += "\n" + lines[i]
					if strings.TrimLeft(lines[i], "\t") == m[1] {
						break
					}
				}
			}
			if c.end < len(c.text) {
				first, _, _ := strings.Cut(c.text[c.end:], "\n")
				c.comment = strings.TrimPrefix(first, "#")
			}
			block = append(block, c)
		}
		if fence == "sh" {
			blocks = append(blocks, block)
		}
	}
	return blocks
}

// commentAt is where the shell's comment starts in s: the first # outside
// quotes at the start of a word; len(s) when there is none.
func commentAt(s string) int {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case quote == '\'':
			if ch == '\'' {
				quote = 0
			}
		case ch == '\\':
			i++
		case quote == '"':
			if ch == '"' {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '\n':
			return len(s) // a here-document's body follows
		case ch == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return i
		}
	}
	return len(s)
}

// interruptScript runs code in the background, stops it a few seconds
// later as Ctrl-C would, and reports 0 if it was still running then, else
// its own exit status.
func interruptScript(code string) string {
	return code + ` </dev/null 2>&1 &
__readme_pid=$!
sleep 3
if kill $__readme_pid 2>/dev/null; then wait $__readme_pid; __readme_rc=0; else wait $__readme_pid; __readme_rc=$?; fi
`
}

// shell is one shell process that reads the README's commands one at a time,
// so that variables and exports carry from one to the next.
type shell struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	n     int
}

const readmeMark = "__gpufleet_readme_done__"

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// bash, as most users' shells, with pipefail so that a failure is seen
	// where it happens, at the start of a pipeline ending in tail; else sh.
	name, init := "sh", ""
	if bash, err := exec.LookPath("bash"); err == nil {
		name, init = bash, "set -o pipefail\n"
	}
	cmd := exec.Command(name)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if _, err := io.WriteString(stdin, init); err != nil {
		t.Fatal(err)
	}
	s := &shell{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		defer close(s.lines)
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				s.lines <- line
			}
			if err != nil {
				pr.Close()
				return
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what a command left behind
		<-done
	})
	return s
}

// run writes script, which must set __readme_rc, and returns that status
// and everything the script printed.
func (s *shell) run(script string, timeout time.Duration) (int, string, error) {
	s.n++
	mark := fmt.Sprintf("%s %d ", readmeMark, s.n)
	if _, err := io.WriteString(s.stdin, script+"printf '\\n"+mark+"%d\\n' \"$__readme_rc\"\n"); err != nil {
		return -1, "", err
	}
	var out strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return -1, out.String(), fmt.Errorf("the shell exited")
			}
			if rest, ok := strings.CutPrefix(line, mark); ok {
				var rc int
				fmt.Sscan(rest, &rc)
				return rc, strings.TrimSuffix(out.String(), "\n"), nil
			}
			out.WriteString(line)
		case <-deadline:
			return -1, out.String(), fmt.Errorf("still running after %s", timeout)
		}
	}
}

// linkClone makes dir stand for a clone of repo: a link to each of its
// files and folders but the dot files (.git, .gpufleet) and a built binary.
func linkClone(t *testing.T, repo, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "gpufleet" {
			continue
		}
		if err := os.Symlink(filepath.Join(repo, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// linkTrace puts the two trace files the README uses in dir.
func linkTrace(t *testing.T, repo, dir string) {
	t.Helper()
	files := map[string]string{"openb_node_list_gpu_node.csv": "", "openb_pod_list_default.csv": ""}
	src := os.Getenv("GPUFLEET_TRACE_DIR")
	if src == "" {
		src = filepath.Join(repo, "..", "shared", "traces", "alibaba-gpu-v2023")
	}
	if _, err := os.Stat(filepath.Join(src, "openb_node_list_gpu_node.csv")); err == nil {
		for f := range files {
			files[f] = filepath.Join(src, f)
		}
	} else {
		t.Logf("no trace in %s: the simulator runs on internal/sim/testdata", src)
		td := filepath.Join(repo, "internal", "sim", "testdata")
		files["openb_node_list_gpu_node.csv"] = filepath.Join(td, "nodes.csv")
		files["openb_pod_list_default.csv"] = filepath.Join(td, "pods.csv")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range files {
		abs, err := filepath.Abs(target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// cleanEnv is this process's environment without the CLI's variables, so
// that the README sets them itself.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUFLEET_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return env
}

// startServer runs bin with args in dir until the test ends, and waits
// until it is ready at addr.
func startServer(t *testing.T, bin, dir, logPath, addr string, args ...string) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	if _, ok := testwait.Within(20*time.Second, func() (bool, string) {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the server exited; log:\n%s", b)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, ""
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, ""
	}); !ok {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("server not ready after 20s; log:\n%s", b)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestReadmeBlocks checks how the walk reads the README: only ```sh
// blocks, a command per line with its continuation lines and
// here-document, and the comment that marks what is not run or is stopped.
func TestReadmeBlocks(t *testing.T) {
	md := "# t\n" +
		"```sh\n" +
		"a --x 1   # (needs a cluster)\n" +
		"\n" +
		"# a comment line\n" +
		"echo '# not a comment' \"#nor\" x#y \\\n" +
		"  --more   # Ctrl-C to stop\n" +
		"```\n" +
		"```\n" +
		"not run\n" +
		"```\n" +
		"```sh-skip\n" +
		"nor this\n" +
		"```\n" +
		"```sh\n" +
		"cat > f.yaml <<'EOF'   # a file\n" +
		"a: 1 # kept\n" +
		"EOF\n" +
		"b\n" +
		"```\n"
	type cmdView struct {
		Line               int
		Code, Comment      string
		Needs, Interrupted bool
	}
	var got [][]cmdView
	for _, b := range readmeBlocks(md) {
		var v []cmdView
		for _, c := range b {
			v = append(v, cmdView{c.line, c.code(), c.comment, c.needs(), c.interrupted()})
		}
		got = append(got, v)
	}
	want := [][]cmdView{
		{
			{Line: 3, Code: "a --x 1", Comment: " (needs a cluster)", Needs: true},
			{Line: 6, Code: "echo '# not a comment' \"#nor\" x#y \\\n  --more", Comment: " Ctrl-C to stop", Interrupted: true},
		},
		{
			{Line: 16, Code: "cat > f.yaml <<'EOF'", Comment: " a file"},
			{Line: 19, Code: "b"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readmeBlocks (-want +got):\n%s", diff)
	}
	// A here-document's body and end stay in the command's text.
	if b := readmeBlocks(md); len(b) == 2 && len(b[1]) > 0 && !strings.HasSuffix(b[1][0].text, "a: 1 # kept\nEOF") {
		t.Errorf("here-document text = %q", b[1][0].text)
	}
}
