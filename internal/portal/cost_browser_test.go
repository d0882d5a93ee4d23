package portal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// costCall sends one request to the server's API with token and decodes
// the answer into out (when not nil); it fails the test unless the answer
// is 2xx.
func costCall(t *testing.T, s *server, token, method, path string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+"/api/v1"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// costChanged tells the control of that id that its value changed, as
// choosing an option does (SetValue alone does not).
func costChanged(id string) chromedp.Action[chromedp.Void] {
	ev := chromedp.Evaluate[bool](fmt.Sprintf(`document.getElementById(%q).dispatchEvent(new Event('change', {bubbles: true}))`, id))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := ev(ctx, t)
		return chromedp.Void{}, err
	}
}

// costRow finds the row named name in a report.
func costRow(r api.CostReport, name string) (api.CostRow, bool) {
	for _, x := range r.Items {
		if x.Name == name {
			return x, true
		}
	}
	return api.CostRow{}, false
}

// units reads an amount the page wrote ("1234.50 USD", "0.0003 USD /
// image") as currency units.
func units(t *testing.T, what, text string) float64 {
	t.Helper()
	f := strings.Fields(strings.TrimSpace(text))
	if len(f) < 2 || f[1] != "USD" {
		t.Fatalf("%s: %q is not an amount in USD", what, text)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", what, text, err)
	}
	return v
}

// The Cost page against a real server: a price of 3600 per GPU-hour (one
// unit per GPU-second) on the local pool, a 1-GPU job of research of about
// 3 s that reports 10 accepted images, and one of inference; then budgets
// (research 100 with an alert at 50%, inference 2, which its job's cost
// exceeds). The page must show each team's cost over time as stacked bars
// whose research segments add up to what the job held (its GPU-seconds ×
// 1), the job's row with its cost per accepted output, a budget bar per
// team (research's filled to spent/100, its alert mark at 50%; inference's
// red) and a banner naming inference, on the page and on the dashboard;
// the idle share for the admin only; grouping by a label and another
// window through the form, into the URL; and, for a member of research,
// research alone.
func TestCostPageInBrowser(t *testing.T) {
	chrome := findChromium(t)
	s := startServer(t)
	b := startBrowser(t, chrome)
	ctx := context.Background()

	costCall(t, s, s.token, "POST", "/prices", map[string]any{"pool": "local", "kind": "on-demand", "rate": 3600}, nil)
	alice, err := s.admin.CreateUser(ctx, &api.User{Name: "alice", Teams: []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Name: "cost-probe", Labels: map[string]string{"project": "vision"},
		Command:   []string{"sh", "-c", `echo "accepted=10 rejected=2 unit=images" > "$GPUFLEET_OUTPUTS_FILE"; sleep 3`},
		Resources: api.Resources{GPUs: 1000}}, "")
	if err != nil {
		t.Fatal(err)
	}
	burn, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "inference", Name: "cost-burn",
		Command: []string{"sleep", "3"}, Resources: api.Resources{GPUs: 1000}}, "")
	if err != nil {
		t.Fatal(err)
	}
	done := func(id string) *api.Workload {
		t.Helper()
		var w *api.Workload
		testwait.Until(t, 30*time.Second, id+" to succeed", func() (bool, string) {
			if w, err = s.admin.GetWorkload(ctx, id); err != nil {
				t.Fatal(err)
			}
			if p := w.Status.Phase; p != api.PhasePending && p != api.PhaseRunning && p != api.PhaseSucceeded {
				t.Fatalf("%s ended %s %s: %s", id, p, w.Status.Reason, w.Status.Message)
			}
			return w.Status.Phase == api.PhaseSucceeded, fmt.Sprintf("%s (%s) is %s %s: %s", id, w.Name, w.Status.Phase, w.Status.Reason, w.Status.Message)
		})
		return w
	}
	pw := done(probe.ID)
	done(burn.ID)
	// What the job held: one GPU from its start to its end, at one unit a
	// second. Its allocation may begin a little before the start and end a
	// little after the exit is recorded.
	held := pw.Status.FinishedAt.Sub(*pw.Status.StartedAt).Seconds()
	if held < 3 {
		t.Fatalf("the 3-second job ran %.2f s", held)
	}

	costCall(t, s, s.token, "PUT", "/teams/research/budget", map[string]any{"monthly": 100, "alertPercent": 50, "hard": true}, nil)
	costCall(t, s, s.token, "PUT", "/teams/inference/budget", map[string]any{"monthly": 2, "alertPercent": 50, "hard": true}, nil)

	// The API's own figures, for what the page must show.
	var byTeam api.CostReport
	costCall(t, s, s.token, "GET", "/cost?by=team&since=24h", nil, &byTeam)
	research, ok := costRow(byTeam, "research")
	if !ok {
		t.Fatalf("GET /cost?by=team has no research row: %+v", byTeam)
	}
	if got := research.AcceleratorCost.String(); math.Abs(float64(research.AcceleratorCost)/1e6-held) > 1.5 {
		t.Errorf("research's accelerator cost is %s; its one job held 1 GPU for %.2f s at 1 a second", got, held)
	}
	// The server evaluates budgets at most BudgetRefresh (10 s) apart: wait
	// until it reports both, inference's exceeded, as the page must show.
	var spent float64
	testwait.Until(t, 15*time.Second, "GET /budgets to say research's is 100 and inference's is exceeded", func() (bool, string) {
		var budgets api.BudgetList
		costCall(t, s, s.token, "GET", "/budgets", nil, &budgets)
		seen := map[string]api.BudgetStatus{}
		for _, bs := range budgets.Items {
			seen[bs.Team] = bs
		}
		r, i := seen["research"], seen["inference"]
		spent = float64(r.Spent) / 1e6
		return r.Monthly == 100*quantity.MoneyUnit && i.Exceeded, fmt.Sprintf("%+v", budgets.Items)
	})

	b.run(t, "sign in",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")))
	// The dashboard's banner names the exceeded budget.
	b.run(t, "the dashboard's budget banner",
		waitJS(`document.querySelector('#budget-alerts li[data-team="inference"]') !== null`))
	b.run(t, "open the cost page from the menu",
		chromedp.Focus(chromedp.CSS(".brand")),
		tabTo(`nav a[href="#/cost"]`),
		chromedp.KeyEvent(kb.Enter),
		waitJS(`document.querySelector('#cost-chart rect.seg[data-key="research"]') !== null`),
		waitJS(fmt.Sprintf(`document.querySelector('#cost-table tr[data-name=%q]') !== null`, probe.ID)),
		waitJS(`document.querySelector('#budgets .budget-bar[data-team="research"]') !== null`))
	if title := get(t, b, "the title", chromedp.Title()); title != "Cost · gpufleet" {
		t.Errorf("the cost page's title is %q", title)
	}

	// The plot: research's segments add up to what research cost.
	seg := get(t, b, "the plot's segments", chromedp.Evaluate[map[string]float64](`(() => {
		const sum = {};
		for (const r of document.querySelectorAll('#cost-chart rect.seg')) sum[r.dataset.key] = (sum[r.dataset.key] || 0) + parseFloat(r.dataset.value);
		return sum;
	})()`))
	if math.Abs(seg["research"]-float64(research.TotalCost)/1e6) > 1e-4 || seg["research"] < 3 || seg["research"] > held+1.5 {
		t.Errorf("research's bars add up to %v; the report says %s and its job held 1 GPU for %.2f s", seg["research"], research.TotalCost, held)
	}
	if seg["inference"] < 3 {
		t.Errorf("inference's bars add up to %v, want its 3-second job's cost", seg["inference"])
	}
	// Stacked: in each bar a segment starts where the one below it ends.
	if gaps := get(t, b, "stacking", chromedp.Evaluate[[]string](`(() => {
		const bad = [], by = {};
		for (const r of document.querySelectorAll('#cost-chart rect.seg')) (by[r.dataset.start] = by[r.dataset.start] || []).push(r);
		for (const [start, rs] of Object.entries(by)) {
			rs.sort((a, b) => parseFloat(b.getAttribute('y')) - parseFloat(a.getAttribute('y')));
			for (let i = 1; i < rs.length; i++) {
				const below = parseFloat(rs[i-1].getAttribute('y')), top = parseFloat(rs[i].getAttribute('y')) + parseFloat(rs[i].getAttribute('height'));
				if (Math.abs(below - top) > 0.05) bad.push(start + ': ' + rs[i].dataset.key + ' ends at ' + top + ', ' + rs[i-1].dataset.key + ' starts at ' + below);
			}
		}
		return bad;
	})()`)); len(gaps) > 0 {
		t.Errorf("the bars are not stacked: %q", gaps)
	}

	// The job's row: its cost, its 10 accepted images, and cost / 10.
	row := fmt.Sprintf(`#cost-table tr[data-name=%q]`, probe.ID)
	costText := get(t, b, "the job's cost", chromedp.Text(chromedp.CSS(row+" .cost")))
	accepted := get(t, b, "its accepted outputs", chromedp.Text(chromedp.CSS(row+" .accepted")))
	perText := get(t, b, "its cost per output", chromedp.Text(chromedp.CSS(row+" .per-output")))
	c := units(t, "the job's cost", costText)
	if c < 3 || c > held+1.5 {
		t.Errorf("the job's row says it cost %q; it held 1 GPU for %.2f s at 1 a second", costText, held)
	}
	if accepted != "10 images" {
		t.Errorf("the job's row says %q accepted, want the 10 images of its outputs file", accepted)
	}
	if per := units(t, "per output", perText); math.Abs(per-c/10) > 0.0051 || !strings.HasSuffix(perText, "/ image") {
		t.Errorf("the job's cost per accepted output is %q, want its cost %q / 10 per image", perText, costText)
	}
	if name := get(t, b, "the job's name", chromedp.Text(chromedp.CSS(row+" td:first-child"))); !strings.Contains(name, "cost-probe") {
		t.Errorf("the job's row is named %q, want its name cost-probe beside its ID", name)
	}
	// What it used of its host, as the API's report by workload says,
	// under its name: with no request, its CPU-seconds and peak memory;
	// nothing where the executor measured nothing (no cgroups), never 0%.
	var byWorkload api.CostReport
	costCall(t, s, s.token, "GET", "/cost?by=workload&since=24h", nil, &byWorkload)
	pr, _ := costRow(byWorkload, probe.ID)
	used := get(t, b, "its CPU and memory used", chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector('%s .used') || {textContent: ''}).textContent`, row)))
	switch e := pr.Efficiency; {
	case e == nil && used != "":
		t.Errorf("the job's use was not measured, yet its row shows %q", used)
	case e != nil && e.CPUSeconds != nil && !shownCPUSeconds(used, *e.CPUSeconds):
		t.Errorf("the job's row shows %q used, want its %v CPU-seconds", used, *e.CPUSeconds)
	case e != nil && e.PeakMemoryBytes != nil && !strings.Contains(used, "peak "):
		t.Errorf("the job's row shows %q used, want its peak memory", used)
	case regexp.MustCompile(`(^|[^0-9.])0%`).MatchString(used):
		t.Errorf("the job's row shows %q used", used)
	}
	// The total keeps images and jobs apart, each with its cost per
	// accepted output, as the tile does; nothing says "several units".
	type unitSeen struct {
		Unit     string `json:"unit"`
		Accepted string `json:"accepted"`
		Per      string `json:"per"`
	}
	totalUnits := get(t, b, "the total's units", chromedp.Evaluate[[]unitSeen](`[...document.querySelectorAll('#cost-table tr[data-total] .accepted .unit-line')].map(e => ({
		unit: e.dataset.unit, accepted: e.textContent,
		per: document.querySelector('#cost-table tr[data-total] .per-output .unit-line[data-unit="' + e.dataset.unit + '"]').textContent}))`))
	if len(totalUnits) != 2 || totalUnits[0].Unit != "images" || totalUnits[0].Accepted != "10 images" || !strings.HasSuffix(totalUnits[0].Per, "USD / image") ||
		totalUnits[1].Unit != "job" || totalUnits[1].Accepted != "1 job" || !strings.HasSuffix(totalUnits[1].Per, "USD / job") {
		t.Errorf("the total's outputs: %+v, want 10 images and 1 job, each with its cost per accepted output", totalUnits)
	}
	if tileText := get(t, b, "the per-output tile", chromedp.Text(chromedp.CSS("#tile-per-output"))); !strings.Contains(tileText, "/ image") || !strings.Contains(tileText, "/ job") || strings.Contains(tileText, "several") {
		t.Errorf("the per-output tile says %q, want a cost per image and per job", tileText)
	}

	// The budget bars: research's filled to spent / 100 with its alert mark
	// at 50%; inference's red, and named by the banner.
	type barSeen struct {
		Fill   float64 `json:"fill"`
		Alert  float64 `json:"alert"`
		State  string  `json:"state"`
		Over   bool    `json:"over"`
		Label  string  `json:"label"`
		Forcst string  `json:"forecast"`
	}
	bars := get(t, b, "budget bars", chromedp.Evaluate[map[string]barSeen](`(() => {
		const out = {};
		for (const e of document.querySelectorAll('#budgets .budget-bar')) {
			const bar = e.querySelector('.bar'), fill = e.querySelector('.bar-fill'), mark = e.querySelector('.bar-marker.alert');
			const w = bar.getBoundingClientRect().width;
			out[e.dataset.team] = {fill: fill.getBoundingClientRect().width / w, alert: (mark.getBoundingClientRect().left - bar.getBoundingClientRect().left) / w,
				state: e.dataset.state, over: fill.classList.contains('over'), label: bar.getAttribute('aria-label'), forecast: e.querySelector('.forecast-text').textContent};
		}
		return out;
	})()`))
	rb, ib := bars["research"], bars["inference"]
	if math.Abs(rb.Fill-spent/100) > 0.01 || spent < 3 || math.Abs(rb.Alert-0.5) > 0.01 || rb.State != "ok" {
		t.Errorf("research's budget bar: %+v; want it filled to spent %.2f / 100, its alert mark at 50%%, not alerting", rb, spent)
	}
	if !strings.Contains(rb.Label, "of 100.00 USD") {
		t.Errorf("research's budget bar says %q, want the budget of 100.00 USD", rb.Label)
	}
	if ib.State != "exceeded" || !ib.Over || ib.Fill < 0.99 {
		t.Errorf("inference spent more than its budget of 2 and its bar is %+v, want it full and red", ib)
	}
	if !strings.HasPrefix(ib.Forcst, "spent since ") || strings.Contains(ib.Forcst, "runs out") {
		t.Errorf("inference's spent budget says %q, want since when it was spent (and no run-out time)", ib.Forcst)
	}
	banner := get(t, b, "the banner", chromedp.Text(chromedp.CSS("#budget-alerts")))
	if !strings.Contains(banner, "inference has reached its hard budget") || strings.Contains(banner, "research") {
		t.Errorf("the banner says %q, want inference's budget reached and nothing of research's", banner)
	}
	if idle := get(t, b, "the idle tile", chromedp.Evaluate[string](`(document.getElementById('tile-idle') || {}).textContent || ''`)); !strings.Contains(idle, "Idle cost share") {
		t.Errorf("the admin sees no idle cost share (tile: %q)", idle)
	}
	t.Logf("the job held 1 GPU for %.2f s; the page says it cost %s (%s per output); research's bars add up to %.6f, its budget bar %+v; inference's %+v",
		held, costText, perText, seg["research"], rb, ib)
	b.shot(t, "cost")
	b.checkColumns(t, "cost")

	// Grouped by the label project, through the form: one row, vision,
	// with the job's cost; and the choice is in the URL.
	b.run(t, "group by a label",
		chromedp.SetValue(chromedp.CSS("#c-by"), "label"),
		costChanged("c-by"),
		waitJS(`!document.getElementById('c-label').closest('.field').hidden`),
		chromedp.SendKeys(chromedp.CSS("#c-label"), "project"+kb.Enter),
		waitJS(`document.querySelector('#cost-table tr[data-name="vision"]') !== null`))
	if hash := get(t, b, "the URL", chromedp.Evaluate[string](`location.hash`)); hash != "#/cost?since=24h&by=label%3Aproject" {
		t.Errorf("grouped by the label project, the URL is %q", hash)
	}
	if v := units(t, "vision's cost", get(t, b, "vision's cost", chromedp.Text(chromedp.CSS(`#cost-table tr[data-name="vision"] .cost`)))); math.Abs(v-c) > 0.0051 {
		t.Errorf("the label vision cost %v; its one workload cost %v", v, c)
	}
	// Another window.
	b.run(t, "the last 7 days",
		chromedp.SetValue(chromedp.CSS("#c-since"), "7d"),
		costChanged("c-since"),
		waitJS(`location.hash === '#/cost?since=7d&by=label%3Aproject'`),
		waitJS(`document.getElementById('cost-bars-title').textContent.includes('per 6 hours')`),
		waitJS(`document.querySelector('#cost-chart rect.seg[data-key="research"]') !== null`))

	// alice, a member of research: research alone, no idle share, and no
	// banner (inference's budget is not hers to see).
	b.run(t, "sign in as alice",
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), alice.Token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		chromedp.Navigate(s.url+"/#/cost?since=24h&by=team"),
		waitJS(`document.querySelector('#cost-table tr[data-name="research"]') !== null && document.querySelector('#budgets .budget-bar') !== null`))
	seen := get(t, b, "what alice sees", chromedp.Evaluate[map[string][]string](`({
		chart: [...new Set([...document.querySelectorAll('#cost-chart rect.seg')].map(r => r.dataset.key))],
		table: [...document.querySelectorAll('#cost-table tr[data-name]')].map(r => r.dataset.name).filter(n => n),
		budgets: [...document.querySelectorAll('#budgets .budget-bar')].map(e => e.dataset.team),
		idle: document.getElementById('tile-idle') ? ['shown'] : [],
		banner: [...document.querySelectorAll('#budget-alerts li')].map(e => e.dataset.team),
	})`))
	want := map[string][]string{"chart": {"research"}, "table": {"research"}, "budgets": {"research"}, "idle": {}, "banner": {}}
	if d := cmp.Diff(want, seen); d != "" {
		t.Errorf("alice, a member of research, sees (-want +got):\n%s", d)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("in the page: %s", p)
	}
}

// shownCPUSeconds reports whether text shows sec CPU-seconds as the CLI
// writes them: to a hundredth below 10, "<0.01" below that.
func shownCPUSeconds(text string, sec float64) bool {
	m := regexp.MustCompile(`(<0\.01|[0-9.]+) CPU-s`).FindStringSubmatch(text)
	if m == nil {
		return false
	}
	if m[1] == "<0.01" {
		return sec < 0.005
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return err == nil && math.Abs(v-sec) <= 0.05
}
