package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// TestLiveFirstHourVerbs: the verbs and flags of a new user's first hour,
// run against a real server.
func TestLiveFirstHourVerbs(t *testing.T) {
	s := startLiveServer(t)

	t.Run("submit --follow prints the output and exits with the workload's code", func(t *testing.T) {
		r := s.run(t, s.admin, "submit", "--follow", "--gpus", "0.25", "--", "sh", "-c", "echo one; echo two; exit 3")
		if r.code != 3 || !strings.Contains(r.stdout, "one\ntwo\n") || strings.Contains(r.stdout, "wl-") {
			t.Errorf("exit %d, stdout %q (stderr %q): want 3, the output and no ID", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "wl-") || !strings.Contains(r.stderr, ": Failed") {
			t.Errorf("stderr %q: want the ID and the failure", r.stderr)
		}
		if r := s.run(t, s.admin, "submit", "--follow", "--gpus", "0.25", "--", "echo", "fine"); r.code != 0 || r.stdout != "fine\n" && !strings.HasSuffix(r.stdout, "fine\n") {
			t.Errorf("a workload that succeeds: exit %d stdout %q, want 0", r.code, r.stdout)
		}
	})

	t.Run("logs --tail N prints the last lines", func(t *testing.T) {
		id := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.25", "--", "sh", "-c", "for i in 1 2 3 4 5; do echo line $i; done"))
		s.must(t, "wait", id)
		if got := s.must(t, "logs", "--tail", "2", id); got != "line 4\nline 5\n" {
			t.Errorf("logs --tail 2: %q", got)
		}
		if got := s.must(t, "logs", "-f", "--tail", "1", id); got != "line 5\n" {
			t.Errorf("logs -f --tail 1 of a finished workload: %q", got)
		}
		if r := s.run(t, s.admin, "logs", "--tail", "-1", id); r.code != 2 || !strings.Contains(r.stderr, "from 1 to") {
			t.Errorf("--tail -1: exit %d %q, want a usage error saying what is accepted", r.code, r.stderr)
		}
	})

	t.Run("create, delete team and user print the kubectl form", func(t *testing.T) {
		if got := s.must(t, "create", "team", "doomed", "--limit", "1"); got != "team/doomed created\n" {
			t.Errorf("create team: %q", got)
		}
		out := s.must(t, "create", "user", "carol", "--team", "doomed")
		if !strings.HasPrefix(out, "user/carol created in doomed as member") {
			t.Errorf("create user: %q", out)
		}
		carol := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
		// Over the team's limit: it stays pending.
		sub := s.run(t, carol, "submit", "--team", "doomed", "--gpus", "2", "--", "sleep", "60")
		id := strings.TrimSpace(sub.stdout)
		if sub.code != 0 || !strings.HasPrefix(id, "wl-") {
			t.Fatalf("submit: exit %d %q %q", sub.code, sub.stdout, sub.stderr)
		}
		r := s.run(t, s.admin, "delete", "team", "doomed")
		if r.code != 1 || !strings.Contains(r.stderr, id) || !strings.Contains(r.stderr, "cancel them first") {
			t.Errorf("delete a team with a pending workload: exit %d %q, want a refusal naming %s", r.code, r.stderr, id)
		}
		s.must(t, "cancel", id)
		if got := s.must(t, "delete", "team", "doomed"); got != "team/doomed deleted\n" {
			t.Errorf("delete team: %q", got)
		}
		if r := s.run(t, carol, "delete", "user", "admin"); r.code != 1 || !strings.Contains(r.stderr, "needs the admin role") {
			t.Errorf("a user deleting the admin: exit %d %q", r.code, r.stderr)
		}
		if got := s.must(t, "delete", "user", "carol"); got != "user/carol deleted\n" {
			t.Errorf("delete user: %q", got)
		}
		if r := s.run(t, carol, "whoami"); r.code != 1 {
			t.Errorf("the deleted user's token: exit %d %q, want refused", r.code, r.stdout+r.stderr)
		}
	})

	t.Run("a metrics reader scrapes and reads nothing else", func(t *testing.T) {
		out := s.must(t, "create", "user", "prometheus", "--metrics-reader")
		tok := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte("gpufleet_gpus_total")) {
			t.Errorf("/metrics: %d %.200s", resp.StatusCode, b)
		}
		if r := s.run(t, tok, "get", "workloads"); r.code != 1 || !strings.Contains(r.stderr, "metrics reader") {
			t.Errorf("get workloads as the metrics reader: exit %d %q", r.code, r.stderr)
		}
	})

	t.Run("a notebook in a preemptible class is warned at submit", func(t *testing.T) {
		r := s.run(t, s.admin, "submit", "--kind", "notebook", "--gpus", "0.25", "--", "sleep", "1")
		if r.code != 0 || !strings.HasPrefix(r.stderr, "warning: a notebook in priority class development can be preempted") || !strings.Contains(r.stderr, "--priority production") {
			t.Errorf("exit %d stderr %q: want a warning naming the class and what to use", r.code, r.stderr)
		}
		if r := s.run(t, s.admin, "submit", "--gpus", "0.25", "--", "true"); r.stderr != "" {
			t.Errorf("a job: stderr %q, want no warning", r.stderr)
		}
	})

	t.Run("get workloads --watch -o json prints a line per change", func(t *testing.T) {
		defer func(d time.Duration) { watchInterval = d }(watchInterval)
		watchInterval = 50 * time.Millisecond
		// The team's limit of 0 holds the workload Pending until the
		// watch has printed it, in its first list: each step below waits
		// for the line that the watch prints.
		s.must(t, "create", "team", "watched")
		s.must(t, "set", "quota", "watched", "--limit", "0")
		id := strings.TrimSpace(s.must(t, "submit", "--team", "watched", "--gpus", "0.25", "--", "sleep", "0.5"))
		ctx, cancel := context.WithCancel(context.Background())
		out, w := io.Pipe()
		var stderr bytes.Buffer
		code := make(chan int, 1)
		go func() {
			code <- s.runTo(t, ctx, s.admin, w, &stderr, "get", "workloads", "--team", "watched", "--watch", "-o", "json")
			w.Close()
		}()
		lines := make(chan string)
		go func() {
			defer close(lines)
			for sc := bufio.NewScanner(out); sc.Scan(); {
				lines <- sc.Text()
			}
		}()
		var phases []string
		next := func(want string) {
			t.Helper()
			for len(phases) == 0 || phases[len(phases)-1] != want {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatalf("the watch ended (%s) before %s was %s; phases seen: %v", stderr.String(), id, want, phases)
					}
					var w api.Workload
					if err := json.Unmarshal([]byte(line), &w); err != nil {
						t.Fatalf("a line that is not one JSON object: %q (%v)", line, err)
					}
					if w.ID == id && (len(phases) == 0 || phases[len(phases)-1] != w.Status.Phase) {
						phases = append(phases, w.Status.Phase)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("no line with %s %s in 30s; phases seen: %v", id, want, phases)
				}
			}
		}
		next(api.PhasePending)
		s.must(t, "set", "quota", "watched", "--limit", "unlimited")
		next(api.PhaseSucceeded)
		cancel()
		go func() {
			for range lines {
			}
		}()
		if c := <-code; c != 0 {
			t.Fatalf("watch: exit %d %s", c, stderr.String())
		}
		if len(phases) < 2 || phases[0] != api.PhasePending {
			t.Errorf("phases seen: %v, want Pending first, and changes ending in Succeeded", phases)
		}
	})

	t.Run("a gang's size reads REPLICAS×EACH", func(t *testing.T) {
		s.must(t, "create", "team", "gang")
		s.must(t, "submit", "--team", "gang", "--replicas", "3", "--gpus", "1", "--", "sleep", "0")
		if out := s.must(t, "get", "workloads", "--team", "gang"); !strings.Contains(out, " 3×1 ") {
			t.Errorf("get workloads: want the gang as 3×1:\n%s", out)
		}
	})
}
