package portal

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of every portal answer: scripts,
// styles, images and API calls from this origin only, no inline script or
// style (but the acceptance report's one stylesheet, ReportStyleHash), no
// plugins, no framing of the portal, no <base> tricks, forms only to this
// origin.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self' " + ReportStyleHash + "; img-src 'self'; connect-src 'self'; font-src 'self'; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// ReportStyleHash allows the one inline <style> of an acceptance run's
// report (internal/accept's ReportHTML, GET
// /api/v1/acceptance/runs/{id}/report), by its SHA-256. The Acceptance
// page shows the report in an <iframe srcdoc sandbox="">, and a srcdoc
// document lives under the policy of the page that holds it: without the
// hash the report would show unstyled. A hash allows that stylesheet and
// nothing else; the tests fail when the report's stylesheet changes and
// this hash has not followed.
const ReportStyleHash = "'sha256-BvU17Tux0P+TETnHEJ/WGH99IVL6/9WxRmsKry9egEQ='"

// contentTypes maps the extensions the assets use to their types; an asset
// of another extension is not served.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// asset is one embedded file, read once.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the portal's page at "/" and its assets under "/ui/". It
// answers every other path 404; use With to put it in front of the API.
type Handler struct {
	files   map[string]asset // by URL path: "/", "/ui/app.js", ...
	modtime time.Time
}

// New reads the embedded assets.
func New() *Handler {
	h := &Handler{files: map[string]asset{}, modtime: time.Now()}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		urlPath := strings.TrimPrefix(p, "assets")
		if urlPath == "/index.html" {
			urlPath = "/"
		}
		h.files[urlPath] = asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("portal: reading the embedded assets: " + err.Error()) // cannot happen: they are compiled in
	}
	return h
}

// owns reports whether the portal serves path p: "/" and everything under
// "/ui/".
func owns(p string) bool {
	return p == "/" || strings.HasPrefix(p, "/ui/")
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	a, ok := h.files[r.URL.Path]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	// The asset names carry no version, so a browser revalidates each
	// use (a 304 when the binary has not changed): a new server's page
	// never runs with an old server's modules.
	hd.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", h.modtime, bytes.NewReader(a.body))
}

// With returns a handler that serves the portal's paths ("/" and "/ui/...")
// and passes every other request to api unchanged, so that the API's
// routes, and its JSON answers for unknown /api/ paths, keep precedence.
func With(api http.Handler) http.Handler {
	p := New()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if owns(r.URL.Path) {
			p.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// Paths lists the URL paths the portal serves, for tests.
func (h *Handler) Paths() []string {
	out := make([]string, 0, len(h.files))
	for p := range h.files {
		out = append(out, p)
	}
	return out
}
