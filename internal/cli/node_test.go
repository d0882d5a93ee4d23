package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/apiserver"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/qualify"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// pollDeadline bounds every wait of these tests for the server to get
// somewhere.
const pollDeadline = 15 * time.Second

// eventually checks until check returns "" (it holds), and fails the test
// with its last complaint once pollDeadline has passed. The API has no
// watch: testwait polls it.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	testwait.Until(t, pollDeadline, what, func() (bool, string) {
		msg := check()
		return msg == "", msg
	})
}

// holdsFor checks that check keeps returning "" for d: something the server
// must not do over several of its cycles (its resync period is 100 ms). No
// event marks that nothing happened: the window is the test.
func holdsFor(t *testing.T, d time.Duration, what string, check func() string) {
	t.Helper()
	testwait.Within(d, func() (bool, string) {
		if msg := check(); msg != "" {
			t.Fatalf("%s: %s", what, msg)
		}
		return false, ""
	})
}

// describeNodeJSON is describe node N -o json, decoded.
func (s *liveServer) describeNodeJSON(t *testing.T, name string) nodeDescription {
	t.Helper()
	var d nodeDescription
	if err := json.Unmarshal([]byte(s.must(t, "describe", "node", name, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (s *liveServer) workloads(t *testing.T) []api.Workload {
	t.Helper()
	var l api.List[api.Workload]
	if err := json.Unmarshal([]byte(s.must(t, "get", "workloads", "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func (s *liveServer) workloadEvents(t *testing.T, id string) []describedEvent {
	t.Helper()
	var d workloadDescription
	if err := json.Unmarshal([]byte(s.must(t, "describe", id, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	return d.Events
}

// byPhase sorts workloads by phase, and says which GPUs of node-a the
// running ones hold.
func byPhase(ws []api.Workload) (running, pending []api.Workload, onGPU map[int]string) {
	onGPU = map[int]string{}
	for _, w := range ws {
		switch w.Status.Phase {
		case api.PhaseRunning:
			running = append(running, w)
			for _, p := range w.Status.Placement {
				onGPU[p.GPUIndex] = w.ID
			}
		case api.PhasePending:
			pending = append(pending, w)
		}
	}
	return running, pending, onGPU
}

func gpuOf(n *api.Node, index int) api.GPU {
	for _, g := range n.GPUs {
		if g.Index == index {
			return g
		}
	}
	return api.GPU{Index: -1}
}

// stubbornSubmit submits a one-GPU workload that ignores SIGTERM, so that every stop
// takes its whole grace period (3 s): a drain stays Draining that long.
var stubbornSubmit = []string{"submit", "--gpus", "1", "--grace-period", "3s", "--", "sh", "-c", `trap "" TERM; sleep 600`}

// TestLiveNodeLifecycle drives the node lifecycle of a real server (one
// node, node-a, with four simulated H100s) through the CLI: qualification
// at registration, a failed diagnostic, Xid errors, drain and uncordon, and
// the refusals of bad input.
func TestLiveNodeLifecycle(t *testing.T) {
	s := startLiveServer(t)
	wantArgv := [][]string{{"nvidia-smi", "-L"}, {"nvidia-smi", "topo", "-m"}, {"dcgmi", "discovery", "--list"}, {"dcgmi", "diag", "-r", "1", "-j"}}

	ok := t.Run("a fresh node goes through Validating to Ready, with evidence for the four commands", func(t *testing.T) {
		var d nodeDescription
		eventually(t, "node-a Ready", func() string {
			d = s.describeNodeJSON(t, "node-a")
			if d.Node.State != "Ready" {
				return "state " + d.Node.State
			}
			return ""
		})
		var path []string
		for _, ev := range d.Events {
			if ev.To != "" {
				path = append(path, ev.To)
			}
		}
		if diff := cmp.Diff([]string{"Registering", "Validating", "Ready"}, path); diff != "" {
			t.Errorf("states the node went through (-want +got):\n%s", diff)
		}
		if !d.Node.Schedulable || d.Node.LastQualified == nil || d.Node.StateReason != "Qualified" {
			t.Errorf("node %+v: want schedulable, qualified", d.Node)
		}

		out := s.must(t, "get", "evidence", "--node", "node-a", "-o", "json")
		var ev api.List[api.Evidence]
		if err := json.Unmarshal([]byte(out), &ev); err != nil {
			t.Fatal(err)
		}
		var argv [][]string
		for _, e := range ev.Items {
			if e.Check == "cuda-init" {
				// Simulated GPUs have no driver: the CUDA probe is skipped, and says why.
				if e.Result != "NotAvailable" || !strings.Contains(e.Message, "simulated") {
					t.Errorf("CUDA evidence: %s %q, want NotAvailable saying the GPUs are simulated", e.Result, e.Message)
				}
				continue
			}
			argv = append(argv, e.Command)
			if e.Result != "Pass" || e.ExitCode == nil || *e.ExitCode != 0 || e.Stdout == "" || !e.Simulated || e.Run != ev.Items[0].Run || e.Node != "node-a" {
				t.Errorf("evidence of %q: result %s, exit %v, stdout %d bytes, simulated %t, run %s: want a simulated run that passed",
					e.Command, e.Result, formatExitCode(e.ExitCode), len(e.Stdout), e.Simulated, e.Run)
			}
		}
		if diff := cmp.Diff(wantArgv, argv); diff != "" {
			t.Fatalf("commands (-want +got):\n%s", diff)
		}
		for _, g := range d.Node.GPUs {
			if line := fmt.Sprintf("GPU %d: %s (UUID: %s)", g.Index, g.Model, g.UUID); !strings.Contains(ev.Items[0].Stdout, line) || !strings.Contains(ev.Items[0].Stdout, g.UUID) {
				t.Errorf("nvidia-smi -L printed %q: want %q and %s", ev.Items[0].Stdout, line, g.UUID)
			}
		}
		if last := ev.Items[len(ev.Items)-1]; !strings.Contains(last.Stdout, `"DCGM Diagnostic"`) {
			t.Errorf("dcgmi diag printed %q: want DCGM 4 JSON", last.Stdout)
		}

		// -o json is what the API answers, field for field.
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/api/v1/nodes/node-a/evidence", nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var fromAPI, fromCLI any
		if err := json.Unmarshal(raw, &fromAPI); err != nil {
			t.Fatal(err)
		}
		json.Unmarshal([]byte(out), &fromCLI)
		if diff := cmp.Diff(fromAPI, fromCLI); diff != "" {
			t.Errorf("get evidence -o json differs from the API's answer (-API +CLI):\n%s", diff)
		}

		table := s.must(t, "get", "evidence", "--node", "node-a")
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 6 || !strings.HasPrefix(lines[0], "RUN ") {
			t.Fatalf("get evidence: %q, want a header and 5 rows", table)
		}
		for i, want := range []string{"nvidia-smi -L", "nvidia-smi topo -m", "", "dcgmi discovery --list", "dcgmi diag -r 1 -j"} {
			re := `^q-\S+\s+\S+\s+` + regexp.QuoteMeta(want) + `\s+0\s+\S+\s+Pass \(Simulated\)\s+-$`
			if want == "" {
				re = `^q-\S+\s+\S+\s+gpufleet-cuda-probe\s+-\s+\S+\s+NotAvailable \(Simulated\)\s+skipped: the node's GPUs are simulated`
			}
			if !regexp.MustCompile(re).MatchString(lines[i+1]) {
				t.Errorf("get evidence row %d: %q, want it to match %s (the node's devices are simulated)", i+1, lines[i+1], re)
			}
		}

		nodes := s.must(t, "get", "nodes")
		if !regexp.MustCompile(`(?m)^NAME\s+STATUS\s+GPUS\s+HEALTH\s+ALLOCATED\s+SCHEDULABLE\nnode-a\s+Ready\s+4x H100\s+4/4 healthy\s+0/4\s+true$`).MatchString(nodes) {
			t.Errorf("get nodes:\n%s", nodes)
		}

		desc := s.must(t, "describe", "node", "node-a")
		for _, re := range []string{`(?m)^State:\s+Ready\n\s+Reason:\s+Qualified\n\s+Message:\s+passed qualification at level 1\n\s+Since:\s+\S+Z \(\d+s ago\)$`,
			`(?m)^\s+0\s+H100\s+GPU-\S+\s+Healthy\s+-\s+0/1\s+0MiB/80GiB\s+-$`,
			`(?m)^\s+\S+\s+Normal\s+Qualified\s+node\s+Validating -> Ready: passed qualification at level 1$`,
			`(?m)^\s+q-\S+\s+\S+\s+dcgmi diag -r 1 -j\s+0\s+\S+\s+Pass \(Simulated\)\s+-$`,
			`(?m)^Last qualified:\s+\S+Z \(\d+s ago\) \(Simulated: simulated devices, not a qualification\)$`} {
			if !regexp.MustCompile(re).MatchString(desc) {
				t.Errorf("describe node does not match %s:\n%s", re, desc)
			}
		}
		if strings.Contains(desc, "DCGM Diagnostic") || strings.Contains(desc, "(UUID: ") {
			t.Errorf("describe node prints raw outputs:\n%s", desc)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("a diagnostic fault on GPU 1 and node validate fail GPU 1 only", func(t *testing.T) {
		if got := s.must(t, "debug", "fault", "node-a", "--gpu", "1", "--diag", "memory"); got != "node/node-a fault injected: GPU 1 fails diagnostic test memory at its next qualification\n" {
			t.Errorf("debug fault: %q", got)
		}
		if got := s.must(t, "node", "validate", "node-a", "--level", "2"); got != "node/node-a validation requested at level 2\n"+
			"No work runs on the devices under test: the qualification starts at once; meanwhile the node takes no new work.\n" {
			t.Errorf("node validate: %q", got)
		}
		var d nodeDescription
		eventually(t, "GPU 1 failed by a level 2 diagnostic", func() string {
			d = s.describeNodeJSON(t, "node-a")
			if g := gpuOf(d.Node, 1); d.Node.State != "Ready" || g.Health != "Failed" {
				return fmt.Sprintf("node %s, GPU 1 %s", d.Node.State, g.Health)
			}
			return ""
		})
		for _, g := range d.Node.GPUs {
			want := "Healthy"
			if g.Index == 1 {
				want = "Failed"
				if g.HealthReason != "DiagnosticFailed" || !strings.Contains(g.HealthMessage, "memory") {
					t.Errorf("GPU 1: %s %q, want DiagnosticFailed naming the memory test", g.HealthReason, g.HealthMessage)
				}
			}
			if g.Health != want {
				t.Errorf("GPU %d is %s, want %s", g.Index, g.Health, want)
			}
		}
		if !d.Node.Schedulable {
			t.Errorf("the node is not schedulable: its other GPUs must keep serving")
		}
		var to []string
		for _, ev := range d.Events[3:] {
			if ev.To != "" {
				to = append(to, ev.To)
			}
		}
		if diff := cmp.Diff([]string{"Validating", "Ready"}, to); diff != "" {
			t.Errorf("states since registration (-want +got):\n%s", diff)
		}
		var diag *api.Evidence
		for i, e := range d.Evidence {
			if slices.Equal(e.Command, []string{"dcgmi", "diag", "-r", "2", "-j"}) {
				diag = &d.Evidence[i]
			}
		}
		switch {
		case diag == nil:
			t.Errorf("no evidence of dcgmi diag -r 2 -j: %+v", d.Evidence)
		case diag.Result != "Fail" || !strings.Contains(diag.Message, "GPU 1: DiagnosticFailed: memory") || strings.Contains(diag.Message, "GPU 0") ||
			strings.Contains(diag.Message, "GPU 2") || strings.Contains(diag.Message, "GPU 3"):
			t.Errorf("dcgmi diag -r 2: %s %q, want Fail for GPU 1 only", diag.Result, diag.Message)
		}

		nodes := s.must(t, "get", "nodes")
		if !regexp.MustCompile(`(?m)^node-a\s+Ready\s+4x H100\s+3/4 healthy, 1 failed\s+0/4\s+true$`).MatchString(nodes) {
			t.Errorf("get nodes:\n%s", nodes)
		}
		wide := s.must(t, "get", "nodes", "-o", "wide")
		for _, re := range []string{`(?m)^  node-a/1\s+H100\s+Failed \(DiagnosticFailed\)\s+0/1\s`, `(?m)^  node-a/2\s+H100\s+Healthy\s+0/1\s`} {
			if !regexp.MustCompile(re).MatchString(wide) {
				t.Errorf("get nodes -o wide does not match %s:\n%s", re, wide)
			}
		}
		if desc := s.must(t, "describe", "node", "node-a"); !regexp.MustCompile(`(?m)^\s+1\s+H100\s+GPU-\S+\s+Failed\s+DiagnosticFailed: memory: `).MatchString(desc) ||
			!regexp.MustCompile(`(?m)^\s+q-\S+\s+\S+\s+dcgmi diag -r 2 -j\s+0\s+\S+\s+Fail \(Simulated\)\s+GPU 1: DiagnosticFailed`).MatchString(desc) {
			t.Errorf("describe node does not show GPU 1 failed and the failed diagnostic:\n%s", desc)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("with GPU 1 failed, 3 of 4 one-GPU workloads run, none on GPU 1, and one waits", func(t *testing.T) {
		for range 4 {
			s.must(t, stubbornSubmit...)
		}
		check := func() string {
			running, pending, onGPU := byPhase(s.workloads(t))
			if id, on := onGPU[1]; on {
				t.Fatalf("%s runs on the failed GPU 1", id)
			}
			if len(running) != 3 || len(pending) != 1 {
				return fmt.Sprintf("%d running, %d pending", len(running), len(pending))
			}
			return ""
		}
		eventually(t, "3 running and 1 pending", check)
		holdsFor(t, time.Second, "3 running and 1 pending", check)
	})
	if !ok {
		return
	}

	ok = t.Run("an Xid 79 requeues the workload on GPU 0 and fails the GPU; an Xid 13 only adds an event", func(t *testing.T) {
		_, _, onGPU := byPhase(s.workloads(t))
		victim := onGPU[0]
		if victim == "" {
			t.Fatalf("no workload on GPU 0: %v", onGPU)
		}
		if got := s.must(t, "debug", "fault", "node-a", "--gpu", "0", "--xid", "79"); got != "node/node-a fault injected: Xid 79 on GPU 0\n" {
			t.Errorf("debug fault: %q", got)
		}
		// The workload ignores SIGTERM, so GPU 0 is held, and Failed, for
		// its 3 s grace period.
		n := s.describeNodeJSON(t, "node-a")
		if g := gpuOf(n.Node, 0); g.Health != "Failed" || g.HealthReason != "Xid79" {
			t.Errorf("GPU 0 right after Xid 79: %s (%s), want Failed (Xid79)", g.Health, g.HealthReason)
		}
		if ev := n.Events[len(n.Events)-1]; ev.Reason != "Xid79" || ev.GPU == nil || *ev.GPU != 0 || ev.Type != "Warning" {
			t.Errorf("the node's last event: %+v, want a Warning Xid79 on GPU 0", ev)
		}
		eventually(t, victim+" requeued naming Xid 79", func() string {
			for _, ev := range s.workloadEvents(t, victim) {
				if ev.From == api.PhaseRunning && strings.Contains(ev.Message, "Xid 79") {
					return ""
				}
			}
			return "no event of its requeue naming Xid 79"
		})
		eventually(t, "GPU 0 qualified again and serving", func() string {
			n := s.describeNodeJSON(t, "node-a")
			running, pending, onGPU := byPhase(s.workloads(t))
			if id, on := onGPU[1]; on {
				t.Fatalf("%s runs on the failed GPU 1", id)
			}
			if g := gpuOf(n.Node, 0); g.Health != "Healthy" || len(running) != 3 || len(pending) != 1 || onGPU[0] == "" {
				return fmt.Sprintf("GPU 0 %s, %d running, %d pending", g.Health, len(running), len(pending))
			}
			return ""
		})
		if d := s.describeNodeJSON(t, "node-a"); !slices.ContainsFunc(d.Evidence, func(e api.Evidence) bool {
			return slices.Equal(e.Command, []string{"dcgmi", "diag", "-r", "2", "-j", "-i", "0"}) && e.Result == "Pass"
		}) {
			t.Errorf("no evidence that GPU 0 alone passed a level 2 diagnostic: %+v", d.Evidence)
		}

		// Xid 13 is the application's error: an event on the workload that
		// holds the GPU, which keeps running; the GPU stays healthy.
		ws := s.workloads(t)
		_, _, onGPU = byPhase(ws)
		holder := onGPU[2]
		i := slices.IndexFunc(ws, func(w api.Workload) bool { return w.ID == holder })
		if i < 0 {
			t.Fatalf("no workload on GPU 2: %v", onGPU)
		}
		before := ws[i].Status.Attempts
		nodeEvents := len(s.describeNodeJSON(t, "node-a").Events)
		if got := s.must(t, "debug", "fault", "node-a", "--gpu", "2", "--xid", "13"); got != "node/node-a fault injected: Xid 13 on GPU 2\n" {
			t.Errorf("debug fault: %q", got)
		}
		eventually(t, holder+" warned of Xid 13", func() string {
			for _, ev := range s.workloadEvents(t, holder) {
				if ev.Type == "Warning" && ev.Reason == "Xid13" && strings.Contains(ev.Message, "application error") {
					return ""
				}
			}
			return "no Warning Xid13"
		})
		holdsFor(t, time.Second, "after Xid 13", func() string {
			ws := s.workloads(t)
			i := slices.IndexFunc(ws, func(w api.Workload) bool { return w.ID == holder })
			d := s.describeNodeJSON(t, "node-a")
			switch {
			case ws[i].Status.Phase != api.PhaseRunning || ws[i].Status.Attempts != before:
				return fmt.Sprintf("%s is %s (attempt %d, was %d), want still running", holder, ws[i].Status.Phase, ws[i].Status.Attempts, before)
			case gpuOf(d.Node, 2).Health != "Healthy":
				return "GPU 2 is " + gpuOf(d.Node, 2).Health
			case len(d.Events) != nodeEvents:
				return fmt.Sprintf("the node has new events: %+v", d.Events[nodeEvents:])
			}
			return ""
		})
	})
	if !ok {
		return
	}

	ok = t.Run("drain requeues running work and places nothing new; uncordon resumes placements", func(t *testing.T) {
		running, _, _ := byPhase(s.workloads(t))
		if got := s.must(t, "drain", "node", "node-a"); got != "node/node-a draining\n" {
			t.Errorf("drain: %q, want only that it is draining (its work takes 3 s to stop)", got)
		}
		if r := s.run(t, s.admin, "drain", "node", "node-a"); r.code != 1 || r.stderr != "error: drain node-a: node is already draining: conflict\n" {
			t.Errorf("draining twice: exit %d %q", r.code, r.stderr)
		}
		nothingRuns := func() string {
			n := s.describeNodeJSON(t, "node-a")
			r, p, _ := byPhase(s.workloads(t))
			if n.Node.State != "Cordoned" || n.Node.Schedulable || len(r) != 0 || len(p) != 4 {
				return fmt.Sprintf("node %s (schedulable %t), %d running, %d pending", n.Node.State, n.Node.Schedulable, len(r), len(p))
			}
			return ""
		}
		eventually(t, "drained", nothingRuns)
		holdsFor(t, time.Second, "a drained node takes no work", nothingRuns)
		for _, w := range running {
			if !slices.ContainsFunc(s.workloadEvents(t, w.ID), func(ev describedEvent) bool { return ev.From == api.PhaseRunning && ev.Reason == "Drained" }) {
				t.Errorf("%s has no event of its requeue by the drain", w.ID)
			}
		}
		if nodes := s.must(t, "get", "nodes"); !regexp.MustCompile(`(?m)^node-a\s+Cordoned\s+4x H100\s+3/4 healthy, 1 failed\s+0/4\s+false$`).MatchString(nodes) {
			t.Errorf("get nodes:\n%s", nodes)
		}
		if r := s.run(t, s.admin, "cordon", "node", "node-a"); r.code != 1 || r.stderr != "error: cordon node-a: node is already cordoned: conflict\n" {
			t.Errorf("cordoning a cordoned node: exit %d %q", r.code, r.stderr)
		}

		if got := s.must(t, "uncordon", "node", "node-a"); got != "node/node-a uncordoned\n" {
			t.Errorf("uncordon: %q", got)
		}
		threeRun := func() string {
			r, _, onGPU := byPhase(s.workloads(t))
			if id, on := onGPU[1]; on {
				t.Fatalf("%s runs on the failed GPU 1", id)
			}
			if len(r) != 3 {
				return fmt.Sprintf("%d running", len(r))
			}
			return ""
		}
		eventually(t, "placements after uncordon", threeRun)

		// --wait waits for the work to stop.
		if got := s.must(t, "drain", "node", "node-a", "--wait", "--timeout", pollDeadline.String()); got != "node/node-a draining\nnode/node-a drained\n" {
			t.Errorf("drain --wait: %q", got)
		}
		if msg := nothingRuns(); msg != "" {
			t.Errorf("after drain --wait: %s", msg)
		}
		if got := s.must(t, "uncordon", "node", "node-a"); got != "node/node-a uncordoned\n" {
			t.Errorf("uncordon: %q", got)
		}
		eventually(t, "placements after the second uncordon", threeRun)

		// Nothing runs any more: a drain is over at once.
		for _, w := range s.workloads(t) {
			s.must(t, "cancel", w.ID)
		}
		eventually(t, "nothing running", func() string {
			if r, p, _ := byPhase(s.workloads(t)); len(r)+len(p) > 0 {
				return fmt.Sprintf("%d running, %d pending", len(r), len(p))
			}
			return ""
		})
		if got := s.must(t, "drain", "node", "node-a"); got != "node/node-a draining\nnode/node-a drained\n" {
			t.Errorf("drain of an idle node: %q", got)
		}
		var n api.Node
		if err := json.Unmarshal([]byte(s.must(t, "uncordon", "node", "node-a", "-o", "json")), &n); err != nil || n.Name != "node-a" || n.State != "Ready" || !n.Schedulable {
			t.Errorf("uncordon -o json: %+v %v, want the node, Ready", n, err)
		}
	})
	if !ok {
		return
	}

	t.Run("bad input", func(t *testing.T) {
		for _, args := range [][]string{
			{"describe", "node", "nosuch"},
			{"get", "evidence", "--node", "nosuch"},
			{"cordon", "node", "nosuch"},
			{"uncordon", "node", "nosuch"},
			{"drain", "node", "nosuch"},
			{"node", "validate", "nosuch"},
			{"debug", "fault", "nosuch", "--heartbeat-lost"},
		} {
			if r := s.run(t, s.admin, args...); r.code != 1 || r.stderr != "error: node nosuch: not found\n" || r.stdout != "" {
				t.Errorf("%s: exit %d %q %q, want the server's 404", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			}
		}
		events := len(s.describeNodeJSON(t, "node-a").Events)
		for _, level := range []string{"0", "4"} {
			r := s.run(t, s.admin, "node", "validate", "node-a", "--level", level)
			want := "error: --level " + level + ": want 1 (seconds), 2 (about 2 minutes) or 3 (about 15 minutes)\nRun 'gpufleet node validate --help' for usage.\n"
			if r.code != 2 || r.stderr != want {
				t.Errorf("--level %s: exit %d %q, want a usage error", level, r.code, r.stderr)
			}
		}
		if d := s.describeNodeJSON(t, "node-a"); len(d.Events) != events {
			t.Errorf("a refused level reached the server: %+v", d.Events[events:])
		}
	})
}

// lifecycleServer is the real API server over a real store and the real
// node lifecycle (internal/qualify, not running its loop: every route acts
// at once), with nodes in the states the live server's simulated node
// cannot be put in: "real", Ready with real GPUs, and "broken", Failed.
// Its users are the admin and alice, a member of research.
func lifecycleServer(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenWith(ctx, filepath.Join(t.TempDir(), "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, core.NewTeam("research", testNow)); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		user  core.User
		token string
	}{
		{core.User{Name: "admin", Admin: true, CreatedAt: testNow}, adminToken},
		{core.User{Name: "alice", Memberships: []core.Membership{{Team: "research", Role: core.RoleMember}}, CreatedAt: testNow}, aliceToken},
	} {
		if err := st.CreateUser(ctx, u.user, core.Token{Name: "first", CreatedAt: testNow}, apiserver.HashToken(u.token)); err != nil {
			t.Fatal(err)
		}
	}
	gpu := func(i int, simulated bool) core.GPU {
		return core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: "H100", MemoryMiB: 81920, Simulated: simulated}
	}
	for _, n := range []struct {
		node core.Node
		st   core.NodeStatus
	}{
		{core.Node{Name: "real", Schedulable: true, GPUs: []core.GPU{gpu(0, false), gpu(1, false)}}, core.NodeStatus{State: core.NodeReady, Since: testNow}},
		{core.Node{Name: "broken", Schedulable: true, GPUs: []core.GPU{gpu(0, true)}},
			core.NodeStatus{State: core.NodeFailed, Reason: "GPUCountMismatch", Message: "nvidia-smi -L lists 0 GPUs, the node advertises 1", Since: testNow}},
	} {
		if err := st.RegisterNode(ctx, n.node, n.st); err != nil {
			t.Fatal(err)
		}
	}
	lc := qualify.New(qualify.Options{Store: st, Now: func() time.Time { return testNow }})
	srv := httptest.NewServer(apiserver.New(apiserver.Options{Store: st, Now: func() time.Time { return testNow }, Logger: discard(),
		OpenAPI: api.OpenAPI, PriorityClasses: core.DefaultPriorityClasses(), Lifecycle: lc}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestNodeRefusals(t *testing.T) {
	url := lifecycleServer(t)
	as := func(token string, args ...string) result {
		t.Helper()
		dir := t.TempDir()
		return runCLI(t, invocation{args: args, vars: map[string]string{"GPUFLEET_ADDR": url, "GPUFLEET_TOKEN": token, "XDG_CONFIG_HOME": dir, "HOME": dir}})
	}
	tests := []struct {
		name  string
		token string
		args  []string
		want  result
	}{
		{"uncordoning a Failed node is refused: it must pass qualification", adminToken, []string{"uncordon", "node", "broken"},
			result{code: 1, stderr: "error: uncordon broken: node is Failed (GPUCountMismatch): it returns to service by passing qualification: gpufleet node validate: conflict\n"}},
		{"a Failed node cannot be drained", adminToken, []string{"drain", "node", "broken"},
			result{code: 1, stderr: "error: drain broken: node is Failed: only a Ready or Cordoned node can be drained: conflict\n"}},
		{"a Failed node cannot be cordoned", adminToken, []string{"cordon", "node", "broken"},
			result{code: 1, stderr: "error: cordon broken: node is Failed: only a Ready node can be cordoned: conflict\n"}},
		{"a fault on a node with real GPUs is forbidden", adminToken, []string{"debug", "fault", "real", "--gpu", "0", "--xid", "79"},
			result{code: 1, stderr: "error: node real has real GPUs: faults are injected on simulated nodes only: forbidden\n"}},
		{"a member cannot cordon", aliceToken, []string{"cordon", "node", "real"},
			result{code: 1, stderr: "error: cordoning nodes needs the admin role\n"}},
		{"a fault on a GPU the node lacks", adminToken, []string{"debug", "fault", "broken", "--gpu", "7", "--diag", "memory"},
			result{code: 1, stderr: "error: node broken has no GPU 7: invalid\n"}},
		{"a grace beyond 24h", adminToken, []string{"drain", "node", "real", "--grace", "25h"},
			result{code: 1, stderr: "error: invalid request\n  grace: \"25h0m0s\": want a duration from 0s to 24h, such as 5m\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := as(tt.token, tt.args...)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// The refusals changed nothing, and a member sees the states too.
	c := api.NewClient(url, aliceToken)
	for name, want := range map[string]string{"real": "Ready", "broken": "Failed"} {
		n, err := c.Node(context.Background(), name)
		if err != nil || n.State != want {
			t.Errorf("node %s: %+v %v, want %s", name, n, err, want)
		}
	}
	var se *api.StatusError
	gpu := 0
	if _, err := api.NewClient(url, adminToken).InjectFault(context.Background(), "real", &api.Fault{GPU: &gpu, Xid: 79}); !errors.As(err, &se) || se.Status != http.StatusForbidden {
		t.Errorf("fault on a real node: %v, want 403", err)
	}
}

// TestNodeUsageErrors: mistakes in how a node verb is called are usage
// errors (exit 2), found before any request: the address is one where no
// server listens, so a request would fail otherwise.
func TestNodeUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"node", "validate", "n", "--level", "4"}, "--level 4: want 1 (seconds), 2 (about 2 minutes) or 3 (about 15 minutes)"},
		{[]string{"node", "validate", "n", "--level", "0"}, "--level 0: want 1 (seconds), 2 (about 2 minutes) or 3 (about 15 minutes)"},
		{[]string{"node", "validate", "n", "--gpu", "-1"}, "--gpu -1: a GPU index is 0 or more"},
		{[]string{"node", "validate"}, "node validate takes a node: node validate NAME"},
		{[]string{"cordon", "node"}, "cordon node: which node? give its name"},
		{[]string{"cordon", "workload", "w"}, `cordon "workload": only nodes can be cordoned (cordon node NAME)`},
		{[]string{"uncordon"}, "uncordon takes a node: uncordon node NAME"},
		{[]string{"drain", "node", "n", "--grace", "-1s"}, "--grace -1s: must not be negative"},
		{[]string{"drain", "node", "n", "--timeout", "1m"}, "--timeout applies with --wait"},
		{[]string{"debug", "fault", "n"}, "give one fault: --gpu K --diag TEST, --gpu K --xid N or --heartbeat-lost"},
		{[]string{"debug", "fault", "n", "--gpu", "0", "--diag", "memory", "--xid", "79"}, "give one fault: --gpu K --diag TEST, --gpu K --xid N or --heartbeat-lost"},
		{[]string{"debug", "fault", "n", "--xid", "79"}, "--diag and --xid are faults of a GPU: add --gpu K"},
		{[]string{"debug", "fault", "n", "--gpu", "0", "--heartbeat-lost"}, "--heartbeat-lost is a fault of the node: it takes no --gpu"},
		{[]string{"debug", "fault", "n", "--gpu", "0", "--xid", "0"}, "--xid 0: an Xid code is 1 or more"},
		{[]string{"debug", "fault", "n", "--gpu", "-2", "--xid", "79"}, "--gpu -2: a GPU index is 0 or more"},
		{[]string{"get", "evidence"}, "get evidence --node NODE: which node?"},
		{[]string{"get", "nodes", "--node", "n"}, "--node applies to evidence only"},
		{[]string{"describe", "node"}, "describe node: which node? give its name"},
		{[]string{"describe", "node", "n", "--team", "research"}, "--team applies to workloads only"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			got := runCLI(t, invocation{args: tt.args, vars: map[string]string{"GPUFLEET_ADDR": "127.0.0.1:1", "GPUFLEET_TOKEN": adminToken, "XDG_CONFIG_HOME": dir, "HOME": dir}})
			if got.code != 2 || !strings.HasPrefix(got.stderr, "error: "+tt.want+"\nRun 'gpufleet ") || got.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", got.code, got.stdout, got.stderr, tt.want)
			}
		})
	}
}

// TestNodeHealthSummary: the HEALTH column of get nodes.
func TestNodeHealthSummary(t *testing.T) {
	g := func(h string) api.GPU { return api.GPU{Health: h} }
	tests := []struct {
		gpus []api.GPU
		want string
	}{
		{nil, ""},
		{[]api.GPU{g("Healthy"), g("Healthy"), g("Healthy"), g("Healthy")}, "4/4 healthy"},
		{[]api.GPU{g("Healthy"), g("Failed"), g("Healthy"), g("Healthy")}, "3/4 healthy, 1 failed"},
		{[]api.GPU{g("Suspect"), g("Failed"), g("Failed"), g("")}, "1/4 healthy, 1 suspect, 2 failed"},
	}
	for _, tt := range tests {
		if got := healthSummary(tt.gpus); got != tt.want {
			t.Errorf("healthSummary(%v) = %q, want %q", tt.gpus, got, tt.want)
		}
	}
}

// node validate on a node with running work says what it will wait for
// and for how long (no bound, when some work has no max runtime), and the
// node takes no new work meanwhile; uncordon gives it up; --drain
// requeues the work at once, the qualification runs, and the work runs
// again.
func TestLiveNodeValidateWithRunningWork(t *testing.T) {
	s := startLiveServer(t)
	eventually(t, "node-a Ready", func() string {
		if d := s.describeNodeJSON(t, "node-a"); d.Node.State != "Ready" {
			return "state " + d.Node.State
		}
		return ""
	})
	bounded := strings.TrimSpace(s.must(t, "submit", "--gpus", "1", "--max-runtime", "10m", "--", "sleep", "300"))
	open := strings.TrimSpace(s.must(t, "submit", "--gpus", "1", "--", "sleep", "300"))
	for _, id := range []string{bounded, open} {
		eventually(t, id+" running", func() string {
			var w api.Workload
			mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
			if w.Status.Phase != api.PhaseRunning {
				return w.Status.Phase
			}
			return ""
		})
	}
	got := s.must(t, "node", "validate", "node-a", "--level", "2")
	for _, want := range []string{"node/node-a validation requested at level 2\n", "Waits for 2 running workloads (", bounded, open,
		"to end, with no bound: 1 of them has no max runtime; meanwhile the node takes no new work; node validate node-a --drain requeues them instead"} {
		if !strings.Contains(got, want) {
			t.Errorf("node validate says %q, want %q in it", got, want)
		}
	}
	var d nodeDescription
	eventually(t, "node-a Validating, waiting for its work", func() string {
		d = s.describeNodeJSON(t, "node-a")
		if d.Node.State != "Validating" || d.Node.StateReason != "WaitingForWork" {
			return d.Node.State + " " + d.Node.StateReason
		}
		return ""
	})
	if d.Node.Validation == nil || d.Node.Validation.Level != 2 || !strings.Contains(d.Node.StateMessage, "with no bound") {
		t.Errorf("describe node: validation %+v, message %q", d.Node.Validation, d.Node.StateMessage)
	}
	s.must(t, "uncordon", "node-a")

	got = s.must(t, "node", "validate", "node-a", "--drain")
	if !strings.Contains(got, "Drains for it: 2 running workloads (") || !strings.Contains(got, "requeued now, then the qualification runs") {
		t.Errorf("node validate --drain says %q", got)
	}
	for _, id := range []string{bounded, open} {
		eventually(t, id+" running again after the qualification", func() string {
			var w api.Workload
			mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
			if w.Status.Phase != api.PhaseRunning || w.Status.Attempts != 2 {
				return fmt.Sprintf("%s, attempt %d", w.Status.Phase, w.Status.Attempts)
			}
			return ""
		})
	}
	if d := s.describeNodeJSON(t, "node-a"); d.Node.State != "Ready" || d.Node.Validation != nil {
		t.Errorf("after the drained qualification: %s, validation %+v", d.Node.State, d.Node.Validation)
	}
}
