package portal_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/portal"
)

// fakeAPI stands in for the API server: it answers every path it gets with
// JSON naming the path, so that a test sees which requests reach it.
var fakeAPI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	json.NewEncoder(w).Encode(map[string]map[string]string{"error": {"code": "not_found", "message": "no such endpoint " + r.URL.Path}})
})

func do(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPageAndAssetsHeaders(t *testing.T) {
	h := portal.With(fakeAPI)
	cases := []struct {
		path  string
		ctype string
	}{
		{"/", "text/html; charset=utf-8"},
		{"/ui/app.js", "text/javascript; charset=utf-8"},
		{"/ui/pages/dashboard.js", "text/javascript; charset=utf-8"},
		{"/ui/style.css", "text/css; charset=utf-8"},
		{"/ui/favicon.svg", "image/svg+xml"},
	}
	for _, c := range cases {
		resp := do(t, h, "GET", c.path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", c.path, resp.StatusCode)
			continue
		}
		got := map[string]string{}
		for _, k := range []string{"Content-Type", "Content-Security-Policy", "X-Content-Type-Options", "Cache-Control", "X-Frame-Options"} {
			got[k] = resp.Header.Get(k)
		}
		want := map[string]string{
			"Content-Type":            c.ctype,
			"Content-Security-Policy": portal.CSP,
			"X-Content-Type-Options":  "nosniff",
			"Cache-Control":           "no-cache",
			"X-Frame-Options":         "DENY",
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("GET %s headers (-want +got):\n%s", c.path, d)
		}
		if resp.Header.Get("ETag") == "" {
			t.Errorf("GET %s: no ETag", c.path)
		}
		// Revalidation answers 304 without a body.
		again := do(t, h, "GET", c.path, "If-None-Match", resp.Header.Get("ETag"))
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", c.path, again.StatusCode)
		}
	}
}

// The policy is strict: only this origin, and no inline script or style
// anywhere ('unsafe-inline' and 'unsafe-eval' would defeat it).
func TestCSPIsStrict(t *testing.T) {
	dirs := map[string]string{}
	for _, d := range strings.Split(portal.CSP, ";") {
		f := strings.Fields(d)
		if len(f) > 0 {
			dirs[f[0]] = strings.Join(f[1:], " ")
		}
	}
	for _, need := range []string{"default-src", "script-src", "connect-src", "img-src"} {
		if dirs[need] != "'self'" {
			t.Errorf("%s is %q, want 'self'", need, dirs[need])
		}
	}
	// Styles: this origin's, and the acceptance report's one stylesheet
	// by its hash (TestAcceptanceReportStyleHash).
	if want := "'self' " + portal.ReportStyleHash; dirs["style-src"] != want {
		t.Errorf("style-src is %q, want %q", dirs["style-src"], want)
	}
	for _, d := range []string{"object-src", "base-uri", "frame-ancestors"} {
		if dirs[d] != "'none'" {
			t.Errorf("%s is %q, want 'none'", d, dirs[d])
		}
	}
	if strings.Contains(portal.CSP, "unsafe") || strings.Contains(portal.CSP, "*") || strings.Contains(portal.CSP, "http") {
		t.Errorf("CSP %q allows more than this origin's own files", portal.CSP)
	}
}

var (
	htmlRef   = regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`)
	importRef = regexp.MustCompile(`(?m)(?:^import\s[^'"]*|^export\s[^'"]*\sfrom\s|import\()\s*['"]([^'"]+)['"]`)
	inlineJS  = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|javascript:`)
	inlineCSS = regexp.MustCompile(`(?i)<style|\sstyle\s*=`)
	risky     = regexp.MustCompile(`\.innerHTML\s*=|\.outerHTML\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function\(|setAttribute\(\s*['"]style`)
)

// Every file the page refers to, from index.html and through the modules'
// imports, is served; the page has no inline script or style (the CSP
// would block them) and no module builds HTML from strings.
func TestEveryReferencedAssetExists(t *testing.T) {
	h := portal.With(fakeAPI)
	index := body(t, do(t, h, "GET", "/"))
	if inlineJS.MatchString(index) || inlineCSS.MatchString(index) {
		t.Errorf("index.html has inline script or style, which the CSP blocks:\n%s", index)
	}
	seen := map[string]bool{}
	var queue []string
	for _, m := range htmlRef.FindAllStringSubmatch(index, -1) {
		queue = append(queue, m[1])
	}
	if !slices.Contains(queue, "/ui/app.js") || !slices.Contains(queue, "/ui/style.css") {
		t.Fatalf("index.html refers to %q; want /ui/app.js and /ui/style.css among them", queue)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if !strings.HasPrefix(p, "/ui/") {
			t.Errorf("the page refers to %s, outside /ui/ (no CDN, no other origin)", p)
			continue
		}
		resp := do(t, h, "GET", p)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the page refers to %s, which answers %d", p, resp.StatusCode)
			continue
		}
		if !strings.HasSuffix(p, ".js") {
			continue
		}
		src := body(t, resp)
		if m := risky.FindString(src); m != "" {
			t.Errorf("%s uses %q: build elements with dom.js's h() instead (user data must never be parsed as HTML)", p, m)
		}
		for _, m := range importRef.FindAllStringSubmatch(src, -1) {
			queue = append(queue, resolve(p, m[1]))
		}
	}
	// Every served module is reachable from the page (no dead files).
	served := portal.New().Paths()
	for _, p := range served {
		if p != "/" && !seen[p] {
			t.Errorf("%s is embedded but nothing refers to it", p)
		}
	}
	if len(seen) < 10 {
		t.Errorf("followed only %d references: %v", len(seen), seen)
	}
}

// resolve resolves a relative module path against the module that imports
// it.
func resolve(from, ref string) string {
	if strings.HasPrefix(ref, "/") {
		return ref
	}
	dir := from[:strings.LastIndex(from, "/")]
	for {
		switch {
		case strings.HasPrefix(ref, "./"):
			ref = ref[2:]
		case strings.HasPrefix(ref, "../"):
			ref = ref[3:]
			dir = dir[:strings.LastIndex(dir, "/")]
		default:
			return dir + "/" + ref
		}
	}
}

// The API keeps its paths: /api/..., /healthz and anything the portal does
// not own reach it unchanged, so an unknown API path is still the API's JSON
// 404; the portal's own unknown paths are plain 404s, and it takes only GET
// and HEAD.
func TestAPIKeepsItsPaths(t *testing.T) {
	h := portal.With(fakeAPI)
	for _, p := range []string{"/api/v1/nope", "/api/", "/api/v1/workloads", "/healthz", "/metrics", "/index.html", "/uix"} {
		resp := do(t, h, "GET", p)
		b := body(t, resp)
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(b), &e); err != nil || e.Error.Message != "no such endpoint "+p {
			t.Errorf("GET %s did not reach the API: %d %q", p, resp.StatusCode, b)
		}
		if resp.Header.Get("Content-Security-Policy") != "" {
			t.Errorf("GET %s: the portal's headers on an API answer", p)
		}
	}
	if resp := do(t, h, "GET", "/ui/nope.js"); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") == "application/json" {
		t.Errorf("GET /ui/nope.js: %d %s, want the portal's plain 404", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		resp := do(t, h, m, "/")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: %d Allow %q, want 405 Allow GET, HEAD", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	if resp := do(t, h, "HEAD", "/ui/app.js"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /ui/app.js: %d", resp.StatusCode)
	}
}

// The same through a real server, as `gpufleet server` wires it: the page
// at /, the API's JSON answers for unknown API paths.
func TestRealServerServesPortalAndAPI(t *testing.T) {
	s := startServer(t)
	resp, err := http.Get(s.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != portal.CSP || !strings.Contains(page, `src="/ui/app.js"`) {
		t.Errorf("GET /: %d, CSP %q, page %.80q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), page)
	}
	for _, tok := range []string{"", s.token} {
		req, _ := http.NewRequest("GET", s.url+"/api/v1/no-such-thing", nil)
		want := http.StatusUnauthorized
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
			want = http.StatusNotFound
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := body(t, resp)
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(b), &e) != nil || e.Error.Code == "" {
			t.Errorf("GET /api/v1/no-such-thing (token %v): %d %s %q, want %d with a JSON error", tok != "", resp.StatusCode, resp.Header.Get("Content-Type"), b, want)
		}
	}
}
