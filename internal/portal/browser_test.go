package portal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/app"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/portal"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// The browser test drives the portal in a real headless Chromium against a
// real gpufleet server (SQLite store, scheduler, local executor, simulated
// GPUs): sign in through the form, submit a fractional workload through the
// submit form, see it Running on the dashboard and in the list, read its
// live log on its page, cancel it. It saves a 1366×768 screenshot of each
// page in the test's artifact directory (go test -artifacts), and in
// docs/portal/ with GPUFLEET_UPDATE_SCREENSHOTS=1.
//
// Without Chromium it skips, unless GPUFLEET_REQUIRE_BROWSER=1 (CI), and
// then it fails. GPUFLEET_CHROMIUM names the browser when it is not on the
// usual paths.

const (
	viewW = 1366
	viewH = 768
)

func findChromium(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("GPUFLEET_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("GPUFLEET_REQUIRE_BROWSER") == "1" {
		t.Fatal("GPUFLEET_REQUIRE_BROWSER=1 but no Chromium was found (install Debian's chromium, or set GPUFLEET_CHROMIUM)")
	}
	t.Skip("no Chromium found; set GPUFLEET_REQUIRE_BROWSER=1 to make this a failure")
	return ""
}

// server is a real gpufleet server on loopback with four simulated H100s,
// run in-process as `gpufleet server --demo` runs it.
type server struct {
	url   string
	token string
	admin *api.Client
}

func startServer(t *testing.T) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Addr = addr
	cfg.DataDir = dir
	cfg.FakeGPUs = "4xH100-80GB"
	cfg.Demo = true
	cfg.NodeName = "node-a"
	cfg.ResyncPeriod = 100 * time.Millisecond
	// Sample GPU use often, so that the dashboard's history has points
	// within the test.
	cfg.Usage.SampleInterval = config.Duration{Duration: 250 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunWithLogger(ctx, cfg, io.Discard, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		// Workloads outlive the server by design; one that ends now
		// writes its exit status while the dir goes: try again.
		testwait.Within(10*time.Second, func() (bool, string) { return os.RemoveAll(dir) == nil, "" })
	})
	testwait.Until(t, 10*time.Second, "the server to be ready", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("server exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{url: "http://" + addr, token: strings.TrimSpace(string(tok))}
	s.admin = api.NewClient(addr, s.token)
	return s
}

// browser starts headless Chromium and records what goes wrong in the
// page: uncaught exceptions, console errors, and the browser's own error
// entries (Content-Security-Policy violations among them).
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

// One browser serves every test of the package (starting one takes
// seconds); each test has a tab of its own. TestMain stops it.
var shared struct {
	once   sync.Once
	ctx    context.Context // the browser's first tab
	cancel func()
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cancel != nil {
		shared.cancel()
	}
	os.Exit(code)
}

func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.Flag("headless", "new"),
			chromedp.NoSandbox, // root in CI containers; the pages are our own
			chromedp.DisableGPU,
			chromedp.WindowSize(viewW, viewH),
			chromedp.Flag("lang", "en-GB"),
		)
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		shared.ctx, shared.cancel = bctx, func() { bcancel(); acancel() }
		// Start the browser now, with no deadline: a deadline on the
		// first run would stop the browser with it.
		shared.err = chromedp.Do(bctx, chromedp.Navigate("about:blank"))
	})
	if shared.err != nil {
		t.Fatalf("starting %s: %v", path, shared.err)
	}
	tab, cancel := chromedp.NewContext(shared.ctx)
	if err := chromedp.Do(tab, chromedp.Navigate("about:blank")); err != nil {
		cancel()
		t.Fatalf("opening a tab: %v", err)
	}
	ctx, tcancel := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() {
		tcancel()
		cancel()
	})
	b := &browser{ctx: ctx}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(viewW, viewH)); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			switch {
			case m.IsException():
				b.problem("exception: %s (%s:%d)", m.Text, m.URL, m.Line)
			case m.Type != chromedp.ConsoleError:
			case m.Source == "network" && strings.Contains(m.URL, "/api/v1/"):
				// The API's own error answers (401 for a wrong token,
				// 404 from a server without the usage history, 400 for
				// a bad submission) are logged as failed loads; they
				// are expected, and the page shows them.
			default:
				b.problem("console error (%s): %s %s", m.Source, m.Text, m.URL)
			}
		}
	}()
	return b
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

func (b *browser) run(t *testing.T, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		body, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage shows:\n%s", step, err, body)
	}
}

// get runs one action that answers a value.
func get[T any](t *testing.T, b *browser, step string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		body, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage shows:\n%s", step, err, body)
	}
	return v
}

// clearInput empties the input of that id, as selecting its text and
// deleting it would.
func clearInput(id string) chromedp.Action[chromedp.Void] {
	js := fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); return true })()`, id)
	ev := chromedp.Evaluate[bool](js)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := ev(ctx, t)
		return chromedp.Void{}, err
	}
}

// tabTo presses Tab until the element matching sel has the focus (at most
// 40 times).
func tabTo(sel string) chromedp.Action[chromedp.Void] {
	focused := chromedp.Evaluate[bool](fmt.Sprintf(`document.activeElement !== null && document.activeElement.matches(%q)`, sel))
	tab := chromedp.KeyEvent(kb.Tab)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for range 40 {
			if _, err := tab(ctx, t); err != nil {
				return chromedp.Void{}, err
			}
			ok, err := focused(ctx, t)
			if err != nil {
				return chromedp.Void{}, err
			}
			if ok {
				return chromedp.Void{}, nil
			}
		}
		return chromedp.Void{}, fmt.Errorf("40 presses of Tab never reached %s", sel)
	}
}

// waitJS waits until the expression is true.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(25*time.Second))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if _, err := poll(ctx, t); err != nil {
			return chromedp.Void{}, fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return chromedp.Void{}, nil
	}
}

// shot saves a screenshot of the viewport as name.png.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	// Let layout and the last repaint settle.
	b.run(t, "settle", chromedp.Sleep(150*time.Millisecond))
	// Every control has a label (or an aria-label) to be named by, and
	// every button and link a text.
	unnamed := get(t, b, "find unlabelled controls", chromedp.Evaluate[[]string](`[
		...[...document.querySelectorAll('input, select, textarea')]
			.filter(e => e.type !== 'hidden' && e.labels.length === 0 && !e.getAttribute('aria-label'))
			.map(e => e.tagName.toLowerCase() + '#' + (e.id || e.name || '?')),
		...[...document.querySelectorAll('button, a[href]')]
			.filter(e => e.textContent.trim() === '' && !e.getAttribute('aria-label'))
			.map(e => e.tagName.toLowerCase() + ' ' + e.outerHTML.slice(0, 60)),
	]`))
	for _, u := range unnamed {
		t.Errorf("page %s: %s has no label or text", name, u)
	}
	// Nothing is wider than a 1366-pixel laptop screen.
	if w := get(t, b, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > viewW {
		t.Errorf("page %s is %d pixels wide: it scrolls sideways on a %d×%d screen", name, w, viewW, viewH)
	}
	png := get(t, b, "screenshot "+name, chromedp.CaptureScreenshot())
	dirs := []string{t.ArtifactDir()}
	if os.Getenv("GPUFLEET_UPDATE_SCREENSHOTS") == "1" {
		dirs = append(dirs, filepath.Join("..", "..", "docs", "portal"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// columnsJS finds what fits badly in the page's narrow columns: a workload
// ID or a placement broken across lines, a reason clipped without its full
// text in its title or longer than two lines, a table wider than its box.
const columnsJS = `(() => {
	const bad = [];
	const lines = (e) => e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight);
	for (const e of document.querySelectorAll('main .wid, main .place')) {
		if (e.getClientRects().length > 1 || lines(e) > 1.5) bad.push('broken across lines: ' + e.textContent);
	}
	for (const e of document.querySelectorAll('main .clip')) {
		if (e.title !== e.textContent) bad.push('clipped without its full text in its title: ' + e.textContent.slice(0, 40));
		if (lines(e) > 2.1) bad.push('longer than two lines: ' + e.textContent.slice(0, 40));
	}
	for (const e of document.querySelectorAll('main .table-wrap')) {
		if (e.scrollWidth > e.clientWidth + 1) bad.push('a table scrolls sideways: ' + e.scrollWidth + ' > ' + e.clientWidth + ' (columns ' +
			[...e.querySelectorAll('th')].map(th => th.textContent + ' ' + Math.round(th.getBoundingClientRect().width)).join(', ') + ')');
	}
	return bad;
})()`

// checkColumns runs columnsJS at 1366 and 1024 pixels.
func (b *browser) checkColumns(t *testing.T, page string) {
	t.Helper()
	for _, w := range []int64{viewW, 1024} {
		b.run(t, "resize", chromedp.EmulateViewport(w, viewH), chromedp.Sleep(150*time.Millisecond))
		for _, p := range get(t, b, "columns", chromedp.Evaluate[[]string](columnsJS)) {
			t.Errorf("%s at %d pixels: %s", page, w, p)
		}
	}
	b.run(t, "resize", chromedp.EmulateViewport(viewW, viewH))
}

// barScales reads each team bar's filled fraction and the scale its label
// names.
type teamBarSeen struct {
	Team  string  `json:"team"`
	Fill  float64 `json:"fill"`
	Label string  `json:"label"`
}

const teamBarsJS = `[...document.querySelectorAll(%q)].map(e => {
	const bar = e.querySelector('.bar'), fill = e.querySelector('.bar-fill');
	return {team: e.dataset.team, fill: fill.getBoundingClientRect().width / bar.getBoundingClientRect().width, label: bar.getAttribute('aria-label')};
})`

// checkQuotaScale checks that every team's bar is drawn on one scale, the
// cluster's 4 GPUs, which the page states: inference, holding 1 GPU, fills
// a quarter of its bar.
func checkQuotaScale(t *testing.T, b *browser, page, sel string) {
	t.Helper()
	bars := get(t, b, "team bars", chromedp.Evaluate[[]teamBarSeen](fmt.Sprintf(teamBarsJS, sel)))
	if len(bars) < 3 {
		t.Fatalf("%s: %d team bars, want one per team", page, len(bars))
	}
	for _, tb := range bars {
		if !strings.Contains(tb.Label, "on a scale of 4 GPUs") {
			t.Errorf("%s: team %s's bar says %q, want the shared scale of 4 GPUs", page, tb.Team, tb.Label)
		}
		if tb.Team == "inference" && (tb.Fill < 0.24 || tb.Fill > 0.26) {
			t.Errorf("%s: inference holds 1 GPU of 4 and its bar is %.0f%% full, want 25%%", page, tb.Fill*100)
		}
	}
	if note := get(t, b, "the scale", chromedp.Text(chromedp.CSS("#quota-scale"))); !strings.Contains(note, "0 to 4 GPUs") {
		t.Errorf("%s: the scale note says %q, want 0 to 4 GPUs", page, note)
	}
}

func TestPortalInBrowser(t *testing.T) {
	chrome := findChromium(t)
	began := time.Now()
	s := startServer(t)
	b := startBrowser(t, chrome)
	// A member of research, and a service account, for the users page
	// (alice signs in at the end).
	alice, err := s.admin.CreateUser(context.Background(), &api.User{Name: "alice", Teams: []string{"research"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.CreateUser(context.Background(), &api.User{Name: "research-ci", ServiceAccount: true, Teams: []string{"research"}}); err != nil {
		t.Fatal(err)
	}
	// research may hold 2 GPUs at most: a workload asking for more waits.
	limit := int64(2000)
	if _, err := s.admin.SetQuota(context.Background(), "research", &api.TeamQuota{LimitMilliGPU: &limit}); err != nil {
		t.Fatal(err)
	}
	// A workload of another team, so that the lists and nodes show more
	// than the one the test submits.
	other, err := s.admin.SubmitWorkload(context.Background(), &api.Workload{Team: "inference", Name: "serve-llm", Kind: api.KindService,
		Command: []string{"sleep", "120"}, Resources: api.Resources{GPUs: 1000}}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.CancelWorkload(context.Background(), other.ID) })
	// And one that uses 30 GiB of GPU memory on a quarter of an 80 GiB
	// GPU (a 20 GiB share).
	hog, err := s.admin.SubmitWorkload(context.Background(), &api.Workload{Team: "research", Name: "memory-hog",
		Command:   []string{"sh", "-c", `echo "utilization=0.5 memoryMiB=30720" > "$GPUFLEET_SIM_USAGE_FILE"; sleep 60`},
		Resources: api.Resources{GPUs: 250}}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.CancelWorkload(context.Background(), hog.ID) })

	// Sign in: a wrong token is refused on the form; the right one,
	// typed and sent with Enter, opens the dashboard.
	b.run(t, "open the portal",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")))
	b.shot(t, "signin")
	b.run(t, "a wrong token",
		chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"+kb.Enter),
		waitJS(`document.getElementById('token-error').textContent !== ''`))
	msg := get(t, b, "read the error", chromedp.Text(chromedp.CSS("#token-error")))
	if !strings.Contains(msg, "not valid") {
		t.Errorf("wrong token: the form says %q, want it to say the token is not valid", msg)
	}
	b.run(t, "sign in",
		clearInput("token"),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		waitJS(`document.getElementById('who-name').textContent.includes('admin')`))

	// The workload prints a marker computed by the shell (so the log shows
	// output, not the command's text), reports the use of its simulated GPU
	// share, and runs until cancelled.
	script := `sh -c 'echo "portal-marker-$((6*7))"; echo "utilization=0.8 memoryMiB=6144" > "$GPUFLEET_SIM_USAGE_FILE"; sleep 60'`
	inner := script[len(`sh -c '`) : len(script)-1]

	// The submit form: a bad GPU count comes back from the API as a field
	// error shown next to the field.
	// Reach the submit form with the keyboard only: Tab to the menu's
	// link, Enter.
	b.run(t, "open the submit form",
		tabTo(`nav a[href="#/submit"]`),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#submit-form")),
		waitJS(`document.querySelector('#team option[value="research"]') !== null`),
		chromedp.SetValue(chromedp.CSS("#team"), "research"),
		chromedp.SendKeys(chromedp.CSS("#command"), script),
		clearInput("gpus"),
		chromedp.SendKeys(chromedp.CSS("#gpus"), "1.5"),
		chromedp.Click(chromedp.CSS("#submit")),
		waitJS(`document.getElementById('gpus-error').textContent !== ''`))
	msg = get(t, b, "read the error", chromedp.Text(chromedp.CSS("#gpus-error")))
	if !strings.Contains(msg, "whole") {
		t.Errorf("1.5 GPUs: the form says %q next to the GPUs, want the API's problem (above one GPU the count must be whole)", msg)
	}
	preview := get(t, b, "the argv preview", chromedp.Text(chromedp.CSS("#argv-preview")))
	if !strings.Contains(preview, "3 arguments") || !strings.Contains(preview, inner) {
		t.Errorf("argv preview %q: want 3 arguments, the third the whole quoted script", preview)
	}
	b.shot(t, "submit-error")

	// A quarter of a GPU. The marker the log must show is computed by the
	// shell, so it is not the command's text.
	b.run(t, "submit 0.25 GPU",
		clearInput("gpus"),
		chromedp.SendKeys(chromedp.CSS("#gpus"), "0.25"),
		chromedp.Click(chromedp.CSS("#submit")),
		waitJS(`location.hash.startsWith('#/workloads/')`))
	hash := get(t, b, "read the URL", chromedp.Evaluate[string](`location.hash`))
	id := strings.TrimPrefix(hash, "#/workloads/")
	w, err := s.admin.GetWorkload(context.Background(), id)
	if err != nil {
		t.Fatalf("the form submitted %q: %v", id, err)
	}
	if w.Team != "research" || w.Resources.GPUs != 250 || len(w.Command) != 3 || w.Command[2] != inner {
		t.Errorf("submitted workload: team %s, %s GPUs, command %q; want research, 0.25, [sh -c SCRIPT]", w.Team, w.Resources.GPUs, w.Command)
	}

	// Running, on the dashboard and in the list.
	row := fmt.Sprintf(`tr[data-id=%q]`, id)
	b.run(t, "running on the dashboard",
		chromedp.Navigate(s.url+"/#/"),
		waitJS(fmt.Sprintf(`document.querySelector('#running %s') !== null`, row)))
	b.run(t, "running in the list",
		chromedp.Navigate(s.url+"/#/workloads?phase=Running"),
		waitJS(fmt.Sprintf(`document.querySelector('#workload-list %s[data-phase="Running"]') !== null`, row)))
	b.shot(t, "workloads")
	b.checkColumns(t, "workloads")

	// Its page, reached by its link: the live log shows the marker.
	b.run(t, "open its page",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#workload-list %s a`, row))),
		waitJS(`document.querySelector('#phase .phase-running') !== null`),
		waitJS(`document.getElementById('logs').textContent.includes('portal-marker-42')`))
	logs := get(t, b, "read its log", chromedp.Text(chromedp.CSS("#logs")))
	if strings.Contains(logs, "$((") {
		t.Errorf("log %q shows the command, not its output", logs)
	}
	b.shot(t, "workload")
	// Its GPU use over time: the server's samples of it, drawn as charts
	// of utilisation and memory (it reports 80% and 6 GiB).
	b.run(t, "its GPU use over time",
		waitJS(`document.querySelector('#usage-charts svg[aria-labelledby="util-chart-title util-chart-desc"] path.line.s-util') !== null`),
		waitJS(`document.getElementById('usage-note').textContent.includes('80% utilisation, 6 GiB')`),
		waitJS(`document.getElementById('mem-chart-desc').textContent.includes('Memory used (GiB): 6')`),
		// A few seconds of samples (one every 0.25 s), for the screenshot.
		waitJS(`parseInt(document.getElementById('usage-note').textContent) >= 20`))
	if h, err := s.admin.WorkloadUsage(context.Background(), id, time.Hour); err != nil || len(h.Points) == 0 || h.Points[len(h.Points)-1].GPUUtilization != 0.8 {
		t.Errorf("GET /workloads/%s/usage: %+v, %v; want its samples, the latest at 0.8", id, h, err)
	}
	// (jsDo: scrollIntoView answers a promise in newer Chromium, which an
	// "|| true" passed on.)
	b.run(t, "scroll to the chart", jsDo(`document.getElementById('usage-card').scrollIntoView({block: 'center'})`))
	b.shot(t, "workload-usage")

	b.run(t, "nodes",
		chromedp.Navigate(s.url+"/#/nodes"),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll('#nodes .allocs a')].some(a => a.textContent === %q)`, id)))
	b.shot(t, "nodes")
	// The node was last reported seconds ago (the server refreshes it at
	// each sample), not when it registered.
	age := get(t, b, "when the node was last reported", chromedp.Evaluate[float64](`(Date.now() - Date.parse(document.querySelector('#nodes [data-node="node-a"] .section-head time').getAttribute('datetime'))) / 1000`))
	if age > 10 || age < -1 {
		t.Errorf("the nodes page says node-a was last reported %.1f s ago; the server reports it every 0.25 s and the page refreshes every 5 s", age)
	}
	// On a narrower laptop (1024 pixels) every column still fits: the
	// tables do not hide their last column (health) behind a scroll bar.
	b.run(t, "narrow window", chromedp.EmulateViewport(1024, viewH), chromedp.Sleep(150*time.Millisecond))
	if over := get(t, b, "tables wider than their box", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#nodes .table-wrap')]
		.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.scrollWidth + '>' + e.clientWidth)`)); len(over) > 0 {
		t.Errorf("nodes page at 1024 pixels: tables scroll sideways (scroll width > box width): %v", over)
	}
	b.run(t, "wide window", chromedp.EmulateViewport(viewW, viewH))
	b.run(t, "teams",
		chromedp.Navigate(s.url+"/#/teams"),
		waitJS(`document.querySelector('#teams tr[data-team="research"]') !== null`))
	b.shot(t, "teams")
	checkQuotaScale(t, b, "teams page", "#teams .team-bar")

	// Users, tokens and the audit trail, each reached from the menu with
	// the keyboard.
	for _, p := range []struct{ link, ready, shot string }{
		{"#/users", `document.querySelector('#users tr[data-user="alice"]') !== null`, "users"},
		{"#/tokens", `document.querySelector('#tokens tr[data-token]') !== null`, "tokens"},
		{"#/audit", `[...document.querySelectorAll('#audit tr[data-audit]')].some(r => r.textContent.includes('create workload'))`, "audit"},
	} {
		b.run(t, "open "+p.link+" from the menu",
			chromedp.Focus(chromedp.CSS(".brand")),
			tabTo(fmt.Sprintf(`nav a[href=%q]`, p.link)),
			chromedp.KeyEvent(kb.Enter),
			waitJS(p.ready))
		b.shot(t, p.shot)
	}
	if title := get(t, b, "the audit page's title", chromedp.Title()); title != "Audit trail · gpufleet" {
		t.Errorf("audit page title %q", title)
	}
	// The audit trail, filtered by user with the keyboard: a user who
	// made nothing has no entry.
	b.run(t, "filter the audit trail",
		chromedp.Focus(chromedp.CSS("#a-user")),
		chromedp.SendKeys(chromedp.CSS("#a-user"), "nobody-here"+kb.Enter),
		waitJS(`location.hash.includes('user=nobody-here') && document.querySelector('#audit tr[data-audit]') === null && document.getElementById('audit').textContent.includes('Nothing')`))
	// An unknown page says so, with a title of its own.
	b.run(t, "an unknown page",
		chromedp.Navigate(s.url+"/#/bogus"),
		waitJS(`document.querySelector('main h1') !== null && document.querySelector('main h1').textContent === 'Not found'`))
	if title := get(t, b, "the unknown page's title", chromedp.Title()); title != "Not found · gpufleet" {
		t.Errorf("#/bogus: the title is %q, want Not found · gpufleet (not the previous page's)", title)
	}
	b.shot(t, "not-found")

	// A workload over its team's limit (4 GPUs, where research may hold
	// 2): its page says why it is pending, in the scheduler's words.
	big, err := s.admin.SubmitWorkload(context.Background(), &api.Workload{Team: "research", Name: "too-big",
		Command: []string{"true"}, Resources: api.Resources{GPUs: 4000}}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.CancelWorkload(context.Background(), big.ID) })
	// And one with a long name and a long reason, for the narrow columns.
	long, err := s.admin.SubmitWorkload(context.Background(), &api.Workload{Team: "research", Name: "nightly-evaluation-of-the-large-language-model-checkpoints",
		Command: []string{"true"}, Resources: api.Resources{GPUs: 4000}}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.CancelWorkload(context.Background(), long.ID) })
	var why string
	testwait.Until(t, 10*time.Second, "the scheduler's reason for the 4-GPU workload", func() (bool, string) {
		w, err := s.admin.GetWorkload(context.Background(), big.ID)
		if err != nil {
			return false, err.Error()
		}
		why = w.Status.Message
		return why != "", "none"
	})
	b.run(t, "why it is pending",
		chromedp.Navigate(s.url+"/#/workloads/"+big.ID),
		waitJS(fmt.Sprintf(`document.getElementById('why').textContent.includes(%q)`, why)))
	b.shot(t, "pending")

	// The memory hog: where the server enforces GPU memory shares, it
	// ends Failed with GPUMemoryLimitExceeded, and its page says so.
	var hw *api.Workload
	testwait.Within(10*time.Second, func() (bool, string) {
		if hw, err = s.admin.GetWorkload(context.Background(), hog.ID); err != nil {
			t.Fatal(err)
		}
		return hw.Status.Phase != api.PhaseRunning && hw.Status.Phase != api.PhasePending, ""
	})
	if hw.Status.Reason == "GPUMemoryLimitExceeded" {
		b.run(t, "a workload over its GPU memory share",
			chromedp.Navigate(s.url+"/#/workloads/"+hog.ID),
			waitJS(`document.querySelector('#phase .phase-failed') !== null`),
			waitJS(fmt.Sprintf(`document.getElementById('why').textContent.includes(%q)`, "GPUMemoryLimitExceeded: "+hw.Status.Message)))
		b.shot(t, "memory-limit")
	} else {
		t.Logf("the server did not stop the memory hog (%s %s): not checking its page", hw.Status.Phase, hw.Status.Reason)
	}

	// Every workload in the list, the long-named and long-reasoned pending
	// ones among them, fits its columns.
	b.run(t, "every workload",
		chromedp.Navigate(s.url+"/#/workloads?phase="),
		waitJS(fmt.Sprintf(`document.querySelector('#workload-list tr[data-id=%q] .clip') !== null`, long.ID)))
	b.checkColumns(t, "workloads, any phase")

	// Back on the dashboard, a few samples later: when the server reports
	// the workload's GPU use (it wrote 80% to its usage file), the
	// dashboard shows it.
	b.run(t, "the dashboard again",
		chromedp.Navigate(s.url+"/#/"),
		waitJS(fmt.Sprintf(`document.querySelector('#running %s') !== null`, row)))
	if w, err := s.admin.GetWorkload(context.Background(), id); err != nil {
		t.Fatal(err)
	} else if w.Status.Usage != nil {
		b.run(t, "its GPU use on the dashboard",
			waitJS(fmt.Sprintf(`document.querySelector('#running %s').textContent.includes('80%%')`, row)),
			waitJS(`!document.getElementById('tile-used').textContent.includes('not sampled')`))
	} else {
		t.Log("the server reports no GPU use for the workload: not checking the dashboard's")
	}
	checkQuotaScale(t, b, "dashboard", "#team-bars .team-bar")
	b.shot(t, "dashboard")
	b.checkColumns(t, "dashboard")

	// Cancel, confirmed in a dialog; the page then shows it Cancelled, and
	// so does the API.
	// With the keyboard: Tab to the cancel button, Enter; the dialog
	// opens on "Keep it running", Tab to "Yes, cancel it", Enter.
	b.run(t, "cancel",
		chromedp.Navigate(s.url+"/#/workloads/"+id),
		chromedp.WaitVisible(chromedp.CSS("#cancel")),
		tabTo("#cancel"),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#confirm-yes")),
		waitJS(`document.activeElement.id === 'confirm-no'`))
	b.shot(t, "cancel-confirm")
	b.run(t, "confirm",
		chromedp.KeyEvent(kb.Tab),
		waitJS(`document.activeElement.id === 'confirm-yes'`),
		chromedp.KeyEvent(kb.Enter),
		waitJS(`document.querySelector('#phase .phase-cancelled') !== null`),
		waitJS(`document.getElementById('log-state').textContent.includes('End of the log')`))
	b.shot(t, "cancelled")
	w, err = s.admin.GetWorkload(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if w.Status.Phase != api.PhaseCancelled {
		t.Errorf("after cancelling in the portal the API says %s, want Cancelled", w.Status.Phase)
	}

	// Sign out: the token is gone from the tab.
	b.run(t, "sign out",
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#token")))
	stored := get(t, b, "read sessionStorage", chromedp.Evaluate[string](`sessionStorage.getItem('gpufleet.token') || ''`))
	if stored != "" {
		t.Error("the token is still in sessionStorage after signing out")
	}

	// A member of one team sees that team only, and may submit only
	// there; when its token is revoked, the portal signs out and says why.
	b.run(t, "sign in as alice",
		chromedp.SendKeys(chromedp.CSS("#token"), alice.Token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		chromedp.Navigate(s.url+"/#/teams"),
		waitJS(`document.querySelector('#teams tr[data-team]') !== null`))
	teams := get(t, b, "alice's teams", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#teams tr[data-team]')].map(r => r.dataset.team)`))
	b.run(t, "alice's submit form",
		chromedp.Navigate(s.url+"/#/submit"),
		waitJS(`document.querySelectorAll('#team option').length > 0`))
	choices := get(t, b, "alice's choice of teams", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#team option')].map(o => o.value)`))
	if !cmp.Equal(teams, []string{"research"}) || !cmp.Equal(choices, []string{"research"}) {
		t.Errorf("alice, a member of research, sees teams %q and may submit to %q; want research alone", teams, choices)
	}
	menu := get(t, b, "alice's menu", chromedp.Evaluate[[]string](`[...document.querySelectorAll('nav a')].filter(a => a.offsetParent !== null).map(a => a.textContent)`))
	if want := []string{"Dashboard", "Workloads", "Submit", "Nodes", "Pools", "Teams", "Cost", "Acceptance", "Tokens"}; !cmp.Equal(menu, want) {
		t.Errorf("alice's menu: %q, want %q (no admin pages)", menu, want)
	}
	b.run(t, "alice's tokens",
		chromedp.Navigate(s.url+"/#/tokens"),
		waitJS(`document.querySelectorAll('#tokens tr[data-token]').length === 1 && document.querySelector('main h1').textContent === 'My tokens'`))
	b.run(t, "alice on the users page",
		chromedp.Navigate(s.url+"/#/users"),
		waitJS(`document.getElementById('users').textContent.includes('Only admins')`))
	toks, err := s.admin.Tokens(context.Background(), "alice")
	if err != nil || len(toks) != 1 {
		t.Fatalf("alice's tokens: %v %v", toks, err)
	}
	if err := s.admin.RevokeToken(context.Background(), toks[0].ID); err != nil {
		t.Fatal(err)
	}
	b.run(t, "a revoked token",
		chromedp.Navigate(s.url+"/#/workloads"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		waitJS(`document.getElementById('banner').textContent.includes('no longer accepted')`))
	if stored := get(t, b, "read sessionStorage", chromedp.Evaluate[string](`sessionStorage.getItem('gpufleet.token') || ''`)); stored != "" {
		t.Error("a revoked token is still in sessionStorage")
	}

	b.mu.Lock()
	for _, p := range b.problems {
		t.Errorf("in the page: %s", p)
	}
	b.mu.Unlock()
	t.Logf("browser flow took %v", time.Since(began).Round(time.Millisecond))
}

// The submit form's command line splitting (argv.js), run in the browser
// on a page served by the portal's handler alone.
func TestArgvSplittingInBrowser(t *testing.T) {
	chrome := findChromium(t)
	srv := httptest.NewServer(portal.New())
	t.Cleanup(srv.Close)
	b := startBrowser(t, chrome)
	b.run(t, "open the page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	type result struct {
		Args  []string `json:"args"`
		Error string   `json:"error"`
	}
	split := func(mode, line string) result {
		t.Helper()
		in, _ := json.Marshal(line)
		js := fmt.Sprintf(`import('/ui/argv.js').then(m => {
			try { return {args: m.%s(%s), error: ''} } catch (e) { return {args: null, error: e.message} }
		})`, mode, in)
		return get(t, b, "split "+line, chromedp.Evaluate[result](js, chromedp.EvalAwaitPromise))
	}
	cases := []struct {
		line string
		want result
	}{
		{"a b  c", result{Args: []string{"a", "b", "c"}}},
		{"  a\n\tb \r\n c  ", result{Args: []string{"a", "b", "c"}}},
		{`sh -c 'echo "x y"; sleep 1'`, result{Args: []string{"sh", "-c", `echo "x y"; sleep 1`}}},
		{`"a b" 'c d' e\ f`, result{Args: []string{"a b", "c d", "e f"}}},
		{`'' ""`, result{Args: []string{"", ""}}},
		{`a"b"'c'd`, result{Args: []string{"abcd"}}},
		{`"q\"b\\c\$d\e\` + "`" + `"`, result{Args: []string{`q"b\c$d\e` + "`"}}},
		{`'it''s' 'a\b'`, result{Args: []string{"its", `a\b`}}},
		{"echo $HOME * | wc > out; x && y", result{Args: []string{"echo", "$HOME", "*", "|", "wc", ">", "out;", "x", "&&", "y"}}},
		{"python train.py \\\n  --epochs 3", result{Args: []string{"python", "train.py", "--epochs", "3"}}},
		{"", result{Args: []string{}}},
		{"a 'b", result{Error: "a single quote is not closed"}},
		{`a "b`, result{Error: "a double quote is not closed"}},
		{`a \`, result{Error: "the line ends with a lone backslash"}},
	}
	for _, c := range cases {
		if got := split("splitArgs", c.line); !cmp.Equal(got, c.want, cmpopts.EquateEmpty()) {
			t.Errorf("splitArgs(%q) = %q (error %q), want %q (error %q)", c.line, got.Args, got.Error, c.want.Args, c.want.Error)
		}
	}
	lines := []struct {
		text string
		want []string
	}{
		{"python\ntrain.py\n--name=a b\n", []string{"python", "train.py", "--name=a b"}},
		{"a\r\n\r\n'b'\n\n", []string{"a", "", "'b'"}},
	}
	for _, c := range lines {
		if got := split("linesArgs", c.text); !cmp.Equal(got.Args, c.want) || got.Error != "" {
			t.Errorf("linesArgs(%q) = %+v, want %q", c.text, got, c.want)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("in the page: %s", p)
	}
}
