package portal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// nodeEvidence is GET /nodes/{name}/evidence's answer.
type nodeEvidence struct {
	Items []api.Evidence `json:"items"`
}

// waitNode polls GET /nodes/node-a until ok says yes (at most 15 s) and
// answers the node.
func waitNode(t *testing.T, s *server, what string, ok func(*api.Node) bool) *api.Node {
	t.Helper()
	var n api.Node
	testwait.Until(t, 15*time.Second, "node-a to be "+what, func() (bool, string) {
		costCall(t, s, s.token, "GET", "/nodes/node-a", nil, &n)
		return ok(&n), fmt.Sprintf("it is %s (%s: %s)", n.State, n.StateReason, n.StateMessage)
	})
	return &n
}

// latestRun is the evidence of the node's last qualification run.
func latestRun(ev nodeEvidence) []api.Evidence {
	if len(ev.Items) == 0 {
		return nil
	}
	run := ev.Items[len(ev.Items)-1].Run
	var out []api.Evidence
	for _, e := range ev.Items {
		if e.Run == run {
			out = append(out, e)
		}
	}
	return out
}

// evidenceSeen is what the page shows of one command of the latest run.
type evidenceSeen struct {
	Command string `json:"command"`
	Result  string `json:"result"`
	Badge   string `json:"badge"`
	Folded  bool   `json:"folded"`  // its output is in a closed <details>
	Hidden  bool   `json:"hidden"`  // and so not drawn
	Stdout  string `json:"stdout"`  // the text of its stdout box
	Message string `json:"message"` // what the check found, when it failed
}

const evidenceJS = `[...document.querySelectorAll('#evidence section.run li.evidence-row')].map(li => {
	const d = li.querySelector('details.output'), pre = li.querySelector('pre.stdout'), m = li.querySelector('.ev-message');
	return {command: li.dataset.command, result: li.dataset.result, badge: li.querySelector('.badge.result').textContent,
		folded: !!d && !d.open && d.contains(pre), hidden: !!pre && !pre.checkVisibility(),
		stdout: pre ? pre.textContent : '', message: m ? m.textContent : ''};
})`

// gpuSeen is what the page shows of one GPU's health.
type gpuSeen struct {
	GPU    string `json:"gpu"`
	Health string `json:"health"`
	Reason string `json:"reason"`
}

const gpusJS = `[...document.querySelectorAll('#node-gpus tr[data-gpu]')].map(tr => ({gpu: tr.dataset.gpu,
	health: tr.querySelector('.badge.health').textContent, reason: (tr.querySelector('.health-reason') || {}).textContent || ''}))`

// The node page against a real server whose simulated node qualifies
// itself at start: its state, its four GPUs Healthy, the four commands'
// evidence each Pass with its raw output folded, and the timeline
// Registering → Validating → Ready; an admin cordons it from the page
// (the list shows it Cordoned), uncordons it, drains it through the
// confirmation dialog and uncordons it again; a diagnostic fault on GPU 1
// and a level-2 validation through the API show GPU 1 Failed with its
// reason and the failing diagnostic's evidence; a member sees the node and
// no button.
func TestNodePageInBrowser(t *testing.T) {
	chrome := findChromium(t)
	s := startServer(t)
	b := startBrowser(t, chrome)
	ctx := context.Background()

	waitNode(t, s, "Ready", func(n *api.Node) bool { return n.State == "Ready" })
	var ev nodeEvidence
	costCall(t, s, s.token, "GET", "/nodes/node-a/evidence", nil, &ev)
	first := latestRun(ev)
	if len(first) != 5 {
		t.Fatalf("the first qualification left %d records of evidence, want 5 (the CUDA probe's skipped): %+v", len(first), ev.Items)
	}

	b.run(t, "sign in and open node-a's page from the nodes page",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		chromedp.Navigate(s.url+"/#/nodes"),
		waitJS(`document.querySelector('#nodes tr[data-node-row="node-a"] .state [data-state="Ready"]') !== null`),
		chromedp.Click(chromedp.CSS(`#nodes tr[data-node-row="node-a"] a.node-link`)),
		waitJS(`location.hash === '#/nodes/node-a'`),
		waitJS(`document.querySelector('#node-state[data-state="Ready"]') !== null`),
		waitJS(`document.querySelectorAll('#evidence section.run li.evidence-row').length === 5`))
	if title := get(t, b, "the title", chromedp.Title()); title != "node-a · gpufleet" {
		t.Errorf("the node page's title is %q", title)
	}

	// Four GPUs, Healthy.
	wantGPUs := []gpuSeen{{"0", "Healthy", ""}, {"1", "Healthy", ""}, {"2", "Healthy", ""}, {"3", "Healthy", ""}}
	if d := cmp.Diff(wantGPUs, get(t, b, "GPU health", chromedp.Evaluate[[]gpuSeen](gpusJS))); d != "" {
		t.Errorf("GPU health on the page (-want +got):\n%s", d)
	}

	// The four commands, each Pass, and the CUDA probe, skipped on
	// simulated GPUs; each output folded and the same as the API's.
	var want []evidenceSeen
	var commands []string
	for _, e := range first {
		w := evidenceSeen{Command: strings.Join(e.Command, " "), Result: "Pass", Badge: "Pass (Simulated)", Folded: true, Hidden: true, Stdout: e.Stdout}
		if e.Check == "cuda-init" {
			// Skipped: no output to fold.
			w.Result, w.Badge, w.Message, w.Folded, w.Hidden = e.Result, e.ResultLabel(), e.Message, false, false
		}
		want = append(want, w)
		commands = append(commands, w.Command+" "+w.Result)
	}
	if d := cmp.Diff([]string{"nvidia-smi -L Pass", "nvidia-smi topo -m Pass", "gpufleet-cuda-probe NotAvailable", "dcgmi discovery --list Pass", "dcgmi diag -r 1 -j Pass"}, commands); d != "" {
		t.Errorf("the API's evidence commands (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, get(t, b, "the evidence", chromedp.Evaluate[[]evidenceSeen](evidenceJS))); d != "" {
		t.Errorf("the evidence on the page (-want +got):\n%s", d)
	}
	// Unfolded, the output is drawn.
	b.run(t, "unfold nvidia-smi -L",
		chromedp.Click(chromedp.CSS(`#evidence section.run li[data-command="nvidia-smi -L"] details.output > summary`)),
		waitJS(`document.querySelector('#evidence section.run li[data-command="nvidia-smi -L"] pre.stdout').checkVisibility()`))
	if out := get(t, b, "the unfolded output", chromedp.Evaluate[string](`document.querySelector('#evidence section.run li[data-command="nvidia-smi -L"] pre.stdout').innerText`)); !strings.Contains(out, "GPU 3: ") {
		t.Errorf("nvidia-smi -L unfolded shows %q, want its four GPUs", out)
	}

	// The timeline: Registering → Validating → Ready, in the list and in
	// the strip.
	states := func() []string {
		return get(t, b, "the timeline", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline ol.timeline li[data-to]')].map(li => li.dataset.to)`))
	}
	if d := cmp.Diff([]string{"Registering", "Validating", "Ready"}, states()); d != "" {
		t.Errorf("the timeline's states (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"Registering", "Validating", "Ready"}, get(t, b, "the strip",
		chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline .tl-strip .tl-seg')].map(e => e.dataset.state)`))); d != "" {
		t.Errorf("the timeline strip's segments (-want +got):\n%s", d)
	}
	// The strip's Ready segment runs to its right end (now).
	if end := get(t, b, "the strip's end", chromedp.Evaluate[float64](`(() => {
		const strip = document.querySelector('#timeline .tl-strip').getBoundingClientRect();
		const r = document.querySelector('#timeline .tl-seg[data-state="Ready"]').getBoundingClientRect();
		return (r.right - strip.left) / strip.width;
	})()`)); end < 0.99 || end > 1.01 {
		t.Errorf("the Ready segment ends at %.3f of the strip, want 1 (now)", end)
	}

	// Cordon from the page: Cordoned on the page, through the API and on
	// the list page; then Uncordon.
	b.run(t, "cordon",
		chromedp.Click(chromedp.CSS("#node-cordon")),
		waitJS(`document.querySelector('#node-state[data-state="Cordoned"]') !== null`),
		waitJS(`document.querySelector('#node-uncordon') !== null && document.querySelector('#node-cordon') === null`))
	if n := waitNode(t, s, "Cordoned", func(n *api.Node) bool { return true }); n.State != "Cordoned" || n.Schedulable {
		t.Errorf("after Cordon on the page the API says node-a is %s (schedulable %v)", n.State, n.Schedulable)
	}
	b.run(t, "the list shows it cordoned",
		chromedp.Navigate(s.url+"/#/nodes"),
		waitJS(`document.querySelector('#nodes tr[data-node-row="node-a"] .state [data-state="Cordoned"]') !== null`),
		waitJS(`document.querySelector('#nodes [data-node="node-a"] h2 [data-state="Cordoned"]') !== null`),
		chromedp.Navigate(s.url+"/#/nodes/node-a"),
		waitJS(`document.querySelector('#node-state[data-state="Cordoned"]') !== null`),
		chromedp.Click(chromedp.CSS("#node-uncordon")),
		waitJS(`document.querySelector('#node-state[data-state="Ready"]') !== null`),
		waitJS(`document.querySelector('#node-cordon') !== null`))
	if n := waitNode(t, s, "Ready", func(n *api.Node) bool { return true }); n.State != "Ready" || !n.Schedulable {
		t.Errorf("after Uncordon on the page the API says node-a is %s (schedulable %v)", n.State, n.Schedulable)
	}
	// Drain through its dialog, with a grace period: it has no work, so it
	// ends Cordoned (Drained) at once.
	b.run(t, "drain",
		chromedp.Click(chromedp.CSS("#node-drain")),
		waitJS(`document.getElementById('confirm-drain').open && document.activeElement.id === 'drain-no'`),
		chromedp.SendKeys(chromedp.CSS("#drain-grace"), "1m"),
		chromedp.Click(chromedp.CSS("#drain-yes")),
		waitJS(`document.querySelector('#node-state[data-state="Cordoned"]') !== null`))
	if n := waitNode(t, s, "Cordoned (Drained)", func(n *api.Node) bool { return n.State == "Cordoned" }); n.StateReason != "Drained" {
		t.Errorf("after Drain on the page node-a is %s (%s)", n.State, n.StateReason)
	}
	b.run(t, "uncordon after the drain",
		chromedp.Click(chromedp.CSS("#node-uncordon")),
		waitJS(`document.querySelector('#node-state[data-state="Ready"]') !== null`))
	if d := cmp.Diff([]string{"Registering", "Validating", "Ready", "Cordoned", "Ready", "Draining", "Cordoned", "Ready"}, states()); d != "" {
		t.Errorf("the timeline's states after cordon, uncordon, drain, uncordon (-want +got):\n%s", d)
	}
	if by := get(t, b, "who cordoned it", chromedp.Evaluate[string](`document.querySelector('#timeline li[data-reason="Cordoned"]').textContent`)); !strings.Contains(by, "by admin") {
		t.Errorf("the Cordoned event says %q, want who did it", by)
	}

	// A diagnostic fault on GPU 1 and a level-2 validation, through the
	// API: GPU 1 Failed with its reason, the others Healthy, and the new
	// run's diagnostic Fail.
	costCall(t, s, s.token, "POST", "/nodes/node-a/faults", map[string]any{"gpu": 1, "diag": "memory"}, nil)
	costCall(t, s, s.token, "POST", "/nodes/node-a/validate", map[string]any{"level": 2}, nil)
	n := waitNode(t, s, "Ready with GPU 1 Failed", func(n *api.Node) bool { return n.State == "Ready" && n.GPUs[1].Health == "Failed" })
	b.run(t, "GPU 1 failed",
		waitJS(`(document.querySelector('#node-gpus tr[data-gpu="1"] .badge.health') || {}).textContent === 'Failed'`),
		waitJS(`document.querySelectorAll('#evidence section.run li.evidence-row[data-command="dcgmi diag -r 2 -j"]').length === 1`))
	wantGPUs[1] = gpuSeen{"1", "Failed", n.GPUs[1].HealthReason + ": " + n.GPUs[1].HealthMessage}
	gotGPUs := get(t, b, "GPU health after the fault", chromedp.Evaluate[[]gpuSeen](gpusJS))
	if d := cmp.Diff(wantGPUs, gotGPUs); d != "" {
		t.Errorf("GPU health after the fault (-want +got):\n%s", d)
	}
	if !strings.Contains(gotGPUs[1].Reason, "DiagnosticFailed") || !strings.Contains(gotGPUs[1].Reason, "memory") {
		t.Errorf("GPU 1's reason on the page is %q, want the failed memory diagnostic", gotGPUs[1].Reason)
	}
	if sum := get(t, b, "the health summary", chromedp.Text(chromedp.CSS("#health-summary"))); sum != "1 Failed, 3 Healthy" {
		t.Errorf("the health summary says %q", sum)
	}
	costCall(t, s, s.token, "GET", "/nodes/node-a/evidence", nil, &ev)
	second := latestRun(ev)
	seen := get(t, b, "the evidence after the fault", chromedp.Evaluate[[]evidenceSeen](evidenceJS))
	if len(seen) != 5 || len(second) != 5 {
		t.Fatalf("the latest run: %d commands on the page, %d through the API, want 5", len(seen), len(second))
	}
	for i, e := range second {
		w := evidenceSeen{Command: strings.Join(e.Command, " "), Result: e.Result, Badge: e.ResultLabel(), Folded: e.Stdout != "", Hidden: e.Stdout != "", Stdout: e.Stdout, Message: e.Message}
		if d := cmp.Diff(w, seen[i]); d != "" {
			t.Errorf("the latest run's command %d on the page (-want +got):\n%s", i, d)
		}
	}
	if diag := seen[len(seen)-1]; diag.Result != "Fail" || !strings.Contains(diag.Message, "GPU 1") {
		t.Errorf("the level-2 diagnostic shows %s %q, want Fail naming GPU 1", diag.Result, diag.Message)
	}
	// The earlier runs are folded, below.
	if runs := get(t, b, "earlier runs", chromedp.Evaluate[int](`document.querySelectorAll('#evidence details.run:not([open])').length`)); runs != 1 {
		t.Errorf("%d earlier runs folded below the latest, want 1", runs)
	}
	if warn := get(t, b, "GPU 1's event", chromedp.Evaluate[string](`(document.querySelector('#timeline li.warning[data-gpu="1"][data-reason="DiagnosticFailed"]') || {}).textContent || ''`)); !strings.Contains(warn, "GPU 1") {
		t.Errorf("the timeline has no DiagnosticFailed warning on GPU 1 (%q)", warn)
	}
	b.run(t, "unfold the failing diagnostic, then back to the top for the screenshot",
		chromedp.Click(chromedp.CSS(`#evidence section.run li[data-command="dcgmi diag -r 2 -j"] details.output > summary`)),
		waitJS(`document.querySelector('#evidence section.run li[data-command="dcgmi diag -r 2 -j"] pre.stdout').checkVisibility()`),
		waitJS(`(window.scrollTo(0, 0), window.scrollY === 0)`))
	b.shot(t, "node")
	b.checkColumns(t, "node")
	b.run(t, "the list's health column",
		chromedp.Navigate(s.url+"/#/nodes"),
		waitJS(`(document.querySelector('#nodes tr[data-node-row="node-a"] .health') || {}).textContent === '1 Failed, 3 Healthy'`))
	b.checkColumns(t, "nodes")

	// alice, a member of research: the node, its state and health, and no
	// button.
	alice, err := s.admin.CreateUser(ctx, &api.User{Name: "alice", Teams: []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	b.run(t, "sign in as alice",
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), alice.Token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		chromedp.Navigate(s.url+"/#/nodes/node-a"),
		waitJS(`document.querySelector('#node-state[data-state="Ready"]') !== null`),
		waitJS(`(document.querySelector('#node-gpus tr[data-gpu="1"] .badge.health') || {}).textContent === 'Failed'`),
		waitJS(`document.querySelectorAll('#evidence section.run li.evidence-row').length === 5`))
	if buttons := get(t, b, "alice's buttons", chromedp.Evaluate[[]string](`[...document.querySelectorAll('main button')].map(b => b.textContent)`)); len(buttons) != 0 {
		t.Errorf("alice, a member, sees the buttons %q on the node page", buttons)
	}
	// The API refuses her anyway.
	if code := get(t, b, "alice cordons through the API", chromedp.Evaluate[int](fmt.Sprintf(`fetch('/api/v1/nodes/node-a/cordon', {method: 'POST', headers: {Authorization: 'Bearer ' + %q}}).then(r => r.status)`, alice.Token),
		chromedp.EvalAwaitPromise)); code != 403 {
		t.Errorf("alice's cordon answered %d, want 403", code)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("in the page: %s", p)
	}
}
