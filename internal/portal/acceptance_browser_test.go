package portal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gpufleet/gpufleet/api"
)

// hostileUnit is a unit a workload reports for its metric: printable and
// at most 16 characters (core.ParseMetrics), so the server keeps it; the
// portal must show it as text.
const hostileUnit = `<img src=x>`

// acceptanceCard is a card that passes in seconds on the simulated GPUs:
// a smoke stage whose workload runs 4 s (long enough to be seen Running)
// and reports its p95 latency, with the hostile unit on a metric of its
// own; and a review against the brief's p95 target.
var acceptanceCard = fmt.Sprintf(`{"card": {
	"kind": "AcceptanceCard", "name": "portal-card", "team": "research",
	"brief": {"workload": "inference", "owner": "ml-platform", "targets": {"p95LatencyMs": 200}},
	"target": {"pool": "local"},
	"stages": [
		{"name": "smoke", "type": "smoke",
		 "workload": {"resources": {"gpus": "0.25"}, "command": ["sh", "-c", %q]},
		 "criteria": ["exit_code == 0", "widgets >= 1"]},
		{"name": "review", "type": "review"}
	]}}`,
	`sleep 4; echo '{"name":"p95_latency_ms","value":120,"unit":"ms"}' >> "$GPUFLEET_METRICS_FILE"; `+
		`echo '{"name":"widgets","value":3,"unit":"`+hostileUnit+`"}' >> "$GPUFLEET_METRICS_FILE"; exit 0`)

// The Acceptance page against a real server: a card run through the API
// is listed Running, then Passed without a reload; its page shows the
// smoke stage's criterion exit_code == 0 with value 0 and verdict pass,
// the metrics (a unit made of HTML shown as text), and the report in a
// sandboxed frame; the API's refusal of a too-long note is shown next to
// the form, and a decision recorded through the form is shown, stored,
// and listed.
func TestAcceptancePageInBrowser(t *testing.T) {
	chrome := findChromium(t)
	s := startServer(t)
	b := startBrowser(t, chrome)
	ctx := context.Background()

	b.run(t, "sign in",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")))

	var run api.AcceptanceRun
	costCall(t, s, s.token, "POST", "/acceptance/runs", json.RawMessage(acceptanceCard), &run)
	if run.ID == "" || run.Status != api.RunRunning {
		t.Fatalf("POST /acceptance/runs answered %+v, want a Running run", run)
	}
	row := fmt.Sprintf(`#acceptance-runs tr[data-id=%q]`, run.ID)
	// A card that fails: its smoke stage's p95 is 120, not <= 1.
	var failed api.AcceptanceRun
	costCall(t, s, s.token, "POST", "/acceptance/runs", json.RawMessage(strings.NewReplacer(
		`"portal-card"`, `"portal-fail"`, `"widgets >= 1"`, `"p95_latency_ms <= 1"`, `sleep 4; `, ``).Replace(acceptanceCard)), &failed)

	b.run(t, "open the acceptance page from the menu",
		chromedp.Focus(chromedp.CSS(".brand")),
		tabTo(`nav a[href="#/acceptance"]`),
		chromedp.KeyEvent(kb.Enter),
		waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, row)))
	if title := get(t, b, "the title", chromedp.Title()); title != "Acceptance runs · gpufleet" {
		t.Errorf("the acceptance page's title is %q", title)
	}
	first := get(t, b, "the run's first status", chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).dataset.status`, row)))
	if first != api.RunRunning {
		t.Errorf("the run was listed %s first, want Running (its smoke stage runs 4 s)", first)
	}
	// The list reads again while a run is Running: ended, with no reload.
	b.run(t, "the run ends", waitJS(fmt.Sprintf(`document.querySelector(%q).dataset.status !== 'Running'`, row)))
	if got, err := s.admin.AcceptanceRun(ctx, run.ID); err != nil || got.Status != api.RunPassed {
		t.Fatalf("the run ended %+v (%v), want Passed", got, err)
	}
	b.run(t, "the run passes", waitJS(fmt.Sprintf(`document.querySelector('%s[data-status="Passed"]') !== null`, row)))
	cells := get(t, b, "the run's row", chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll('%s td')].map(td => td.textContent.trim())`, row)))
	if len(cells) != 6 || cells[0] != run.ID || cells[1] != "portal-card" || cells[2] != "research" || cells[3] != "Passed" || cells[4] != "—" {
		t.Errorf("the run's row is %q, want ID, card, team, Passed, no decision, age", cells)
	}
	b.shot(t, "acceptance")

	got, err := s.admin.AcceptanceRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.RunPassed {
		t.Fatalf("the page shows the run Passed; the API says %s (%s)", got.Status, got.Message)
	}

	b.run(t, "open the run",
		chromedp.Click(chromedp.CSS(row+" a.run-link")),
		waitJS(`document.querySelector('#run-stages [data-stage="smoke"] tr[data-expression="exit_code == 0"]') !== null`),
		waitJS(`(document.getElementById('run-report').getAttribute('srcdoc') || '').includes('exit_code == 0')`))
	if hash := get(t, b, "the URL", chromedp.Evaluate[string](`location.hash`)); hash != "#/acceptance/"+run.ID {
		t.Errorf("the run's page is at %q", hash)
	}
	type critSeen struct {
		Expr    string `json:"expr"`
		Value   string `json:"value"`
		Verdict string `json:"verdict"`
		Failing bool   `json:"failing"`
	}
	crits := get(t, b, "the criteria", chromedp.Evaluate[map[string][]critSeen](`(() => {
		const out = {};
		for (const st of document.querySelectorAll('#run-stages [data-stage]')) out[st.dataset.stage] = [...st.querySelectorAll('tr.criterion')].map(r => ({
			expr: r.querySelector('.expr').textContent, value: r.querySelector('.value').textContent,
			verdict: r.querySelector('.verdict').textContent, failing: r.classList.contains('failing')}));
		return out;
	})()`))
	want := map[string][]critSeen{
		"smoke":  {{"exit_code == 0", "0", "pass", false}, {"widgets >= 1", "3", "pass", false}},
		"review": {{"p95_latency_ms <= 200", "120", "pass", false}},
	}
	if fmt.Sprint(crits) != fmt.Sprint(want) {
		t.Errorf("the run's criteria are %+v, want %+v", crits, want)
	}
	// The stage's metrics, platform and workload: the unit the workload
	// wrote is text, not an element.
	unit := get(t, b, "the widgets unit", chromedp.Evaluate[string](`document.querySelector('#run-stages [data-stage="smoke"] tr[data-metric="widgets"] .unit').textContent`))
	if unit != hostileUnit {
		t.Errorf("the widgets metric's unit shows as %q, want the text %q", unit, hostileUnit)
	}
	if src := get(t, b, "metric sources", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#run-stages [data-stage="smoke"] tr[data-metric]')].map(r => r.dataset.metric + '/' + r.dataset.source)`)); !strings.Contains(strings.Join(src, " "), "exit_code/platform") || !strings.Contains(strings.Join(src, " "), "widgets/workload") {
		t.Errorf("the smoke stage's metrics are %q, want exit_code from the platform and widgets from the workload", src)
	}
	if n := get(t, b, "images in the page", chromedp.Evaluate[int](`document.querySelectorAll('main img').length`)); n != 0 {
		t.Errorf("the run's page has %d <img> elements: the unit's HTML was parsed", n)
	}
	// The report: the server's page, in a frame that may run nothing and
	// is of no origin; the unit escaped in it too.
	frame := get(t, b, "the report frame", chromedp.Evaluate[map[string]any](`(() => {
		const f = document.getElementById('run-report');
		let reachable = true;
		try { reachable = f.contentDocument !== null } catch (e) { reachable = false }
		return {sandbox: f.getAttribute('sandbox'), srcdoc: f.getAttribute('srcdoc'), src: f.getAttribute('src'), reachable};
	})()`))
	srcdoc, _ := frame["srcdoc"].(string)
	if frame["sandbox"] != "" || frame["src"] != nil || frame["reachable"] != false {
		t.Errorf("the report frame is %+v, want sandbox=\"\", no src, its document out of the portal's reach", map[string]any{"sandbox": frame["sandbox"], "src": frame["src"], "reachable": frame["reachable"]})
	}
	if !strings.Contains(srcdoc, "Acceptance run "+run.ID) || !strings.Contains(srcdoc, "&lt;img src=x") || strings.Contains(srcdoc, hostileUnit) {
		t.Errorf("the report frame holds:\n%.600s\nwant the run's report, the unit escaped", srcdoc)
	}
	// The frame's document lives under the portal's policy: its
	// stylesheet must be the one the policy allows by hash.
	resp, err := http.Get(s.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, h := range reportStyleHashes(srcdoc) {
		if !strings.Contains(csp, h) {
			t.Errorf("the report's stylesheet (%s) is not allowed by the portal's policy %q: the report shows unstyled", h, csp)
		}
	}
	b.shot(t, "acceptance-run")
	b.checkColumns(t, "acceptance-run")
	b.run(t, "scroll to the report", jsDo(`document.getElementById('report-h').scrollIntoView()`))
	b.shot(t, "acceptance-report")
	b.run(t, "scroll back", jsDo(`window.scrollTo(0, 0)`))

	// A note the API refuses (longer than 4096 bytes, past the field's
	// maxlength): its answer is shown next to the form.
	b.run(t, "a note too long",
		jsDo(`document.getElementById('a-note').value = 'x'.repeat(5000)`),
		chromedp.Click(chromedp.CSS(`#decision-form button[type=submit]`)),
		waitJS(`document.getElementById('a-decision-error').textContent.includes('note')`))
	if e := get(t, b, "the error", chromedp.Text(chromedp.CSS("#a-decision-error"))); !strings.Contains(e, "4096") || !strings.Contains(e, "HTTP 400") {
		t.Errorf("the refused decision shows %q, want the API's message naming the note's bound", e)
	}
	const note = "meets p95 <b>x</b>"
	b.run(t, "record a decision",
		clearInput("a-note"),
		chromedp.SetValue(chromedp.CSS("#a-decision"), "reserve"),
		chromedp.SendKeys(chromedp.CSS("#a-note"), note),
		chromedp.Click(chromedp.CSS(`#decision-form button[type=submit]`)),
		waitJS(`document.querySelector('#decision-recorded .decision') !== null`))
	rec := get(t, b, "the decision", chromedp.Text(chromedp.CSS("#decision-recorded")))
	if !strings.Contains(rec, "reserve") || !strings.Contains(rec, note) || !strings.Contains(rec, "by admin") {
		t.Errorf("the recorded decision shows %q, want reserve by admin with the note as text", rec)
	}
	if e := get(t, b, "the error after", chromedp.Evaluate[string](`document.getElementById('a-decision-error').textContent`)); e != "" {
		t.Errorf("after a decision is recorded the form still shows %q", e)
	}
	if got, err = s.admin.AcceptanceRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if got.Decision == nil || got.Decision.Decision != api.DecisionReserve || got.Decision.Note != note {
		t.Errorf("the API has the decision %+v, want reserve with the note %q", got.Decision, note)
	}
	b.run(t, "the report shows it",
		waitJS(`(document.getElementById('run-report').getAttribute('srcdoc') || '').includes('reserve')`))
	// A second decision is added to the first, never in its place.
	b.run(t, "record a second decision",
		chromedp.SetValue(chromedp.CSS("#a-decision"), "extend"),
		chromedp.SendKeys(chromedp.CSS("#a-note"), "two more weeks"),
		chromedp.Click(chromedp.CSS(`#decision-form button[type=submit]`)),
		waitJS(`document.querySelectorAll('#decision-history li.decision-entry').length === 2`))
	if hist := get(t, b, "the history", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#decision-history li.decision-entry .decision')].map(e => e.textContent)`)); fmt.Sprint(hist) != "[reserve extend]" {
		t.Errorf("the decisions shown are %q, want reserve then extend", hist)
	}
	b.run(t, "back to the list",
		chromedp.Click(chromedp.CSS(`.crumbs a[href="#/acceptance"]`)),
		waitJS(fmt.Sprintf(`(document.querySelector('%s .decision') || {}).textContent === 'extend'`, row)))

	// The failed run: the failing criterion highlighted with its reason,
	// the stage's message, the review skipped.
	b.run(t, "open the failed run",
		chromedp.Navigate(s.url+"/#/acceptance/"+failed.ID),
		waitJS(`(document.querySelector('#run-status .status') || {}).textContent === 'Failed'`))
	bad := get(t, b, "the failing criterion", chromedp.Evaluate[map[string]string](`(() => {
		const r = document.querySelector('#run-stages [data-stage="smoke"] tr.failing');
		const st = document.querySelector('#run-stages [data-stage="review"] .status');
		return r ? {expr: r.dataset.expression, verdict: r.querySelector('.verdict').textContent, reason: r.querySelector('.reason').textContent,
			background: getComputedStyle(r.querySelector('td')).backgroundColor, review: st ? st.textContent : '',
			message: (document.getElementById('run-message') || {}).textContent || ''} : {};
	})()`))
	if bad["expr"] != "p95_latency_ms <= 1" || bad["verdict"] != "fail" || !strings.Contains(bad["reason"], "120") ||
		bad["background"] == "rgba(0, 0, 0, 0)" || bad["review"] != "Skipped" || !strings.Contains(bad["message"], "p95_latency_ms <= 1") {
		t.Errorf("the failed run's page shows %q; want p95_latency_ms <= 1 failing, highlighted, with its value in the reason, the run's message naming it and the review Skipped", bad)
	}
	if n := get(t, b, "passing rows", chromedp.Evaluate[int](`document.querySelectorAll('#run-stages [data-stage="smoke"] tr.criterion:not(.failing)').length`)); n != 1 {
		t.Errorf("the failed run's smoke stage has %d criteria not highlighted, want 1 (exit_code == 0)", n)
	}
	b.shot(t, "acceptance-failed")
	// On the failed run, reserve is refused without the override, and
	// recorded with it and a note.
	b.run(t, "reserve a failed run",
		chromedp.SetValue(chromedp.CSS("#a-decision"), "reserve"),
		chromedp.Click(chromedp.CSS(`#decision-form button[type=submit]`)),
		waitJS(`document.getElementById('a-decision-error').textContent.includes('override')`))
	b.run(t, "reserve it with the override",
		chromedp.SetValue(chromedp.CSS("#a-decision"), "reserve"),
		chromedp.Click(chromedp.CSS("#a-override")),
		chromedp.SendKeys(chromedp.CSS("#a-note"), "the SLO was relaxed"),
		chromedp.Click(chromedp.CSS(`#decision-form button[type=submit]`)),
		waitJS(`(document.querySelector('#decision-recorded .override') || {}).textContent === '(override)'`))
	if got, err := s.admin.AcceptanceRun(ctx, failed.ID); err != nil || got.Decision == nil || !got.Decision.Override || got.Decision.Note != "the SLO was relaxed" {
		t.Errorf("the API has the failed run's decision %+v (%v), want reserve overridden with the note", got.Decision, err)
	}

	// alice, a member of research but not its team-admin, reads the runs
	// and the decision, and is offered no form.
	alice, err := s.admin.CreateUser(ctx, &api.User{Name: "alice", Teams: []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	b.run(t, "sign in as alice",
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), alice.Token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		chromedp.Navigate(s.url+"/#/acceptance/"+run.ID),
		waitJS(`document.querySelector('#decision-recorded .decision') !== null`))
	if form := get(t, b, "alice's form", chromedp.Evaluate[bool](`document.getElementById('decision-form') !== null`)); form {
		t.Error("alice, a member of research, is offered the decision form; only team-admins may decide")
	}
	if txt := get(t, b, "alice's decision box", chromedp.Text(chromedp.CSS("#run-decision"))); !strings.Contains(txt, "extend") || !strings.Contains(txt, "A team-admin of research records the decision") {
		t.Errorf("alice's decision box says %q", txt)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("in the page: %s", p)
	}
}

// jsDo runs a statement in the page.
func jsDo(stmt string) chromedp.Action[chromedp.Void] {
	ev := chromedp.Evaluate[bool](`(() => { ` + stmt + `; return true })()`)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := ev(ctx, t)
		return chromedp.Void{}, err
	}
}
