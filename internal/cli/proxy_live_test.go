package cli

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// echoServer answers every request with its path and its headers, one per
// line: what the workload received.
const echoServer = `import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("path " + self.path + "\n" + "".join(k + ": " + v + "\n" for k, v in self.headers.items())).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.send_header("Set-Cookie", "x=1"); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        n = len(self.rfile.read(int(self.headers["Content-Length"])))
        body = ("got %d bytes\n" % n).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()`

// The proxy serves a notebook's port to its team: 200 for a member (the
// workload sees no gpufleet token or cookie, and the path without the
// prefix), 404 for another team, 401 without a token, 503 once it stopped;
// a browser's token in the query becomes a cookie.
func TestLiveProxy(t *testing.T) {
	s := startLiveServer(t)
	id := strings.TrimSpace(s.must(t, "submit", "--kind", "notebook", "--gpus", "0.25", "--", "/usr/bin/python3", "-c", echoServer))
	var w api.Workload
	mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
	if len(w.Ports) != 1 || w.Ports[0].Port != core.NotebookPort {
		t.Fatalf("a notebook's ports: %+v, want 8888 by default", w.Ports)
	}
	url := "http://" + s.addr + "/w/" + id + "/8888/some/page?q=1"
	get := func(token string, cookie *http.Cookie) (int, string, http.Header) {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		req.AddCookie(&http.Cookie{Name: "mine", Value: "kept"})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	var code int
	var body string
	var hdr http.Header
	eventually(t, "the notebook answers through the proxy", func() string {
		code, body, hdr = get(s.admin, nil)
		if code != 200 {
			return body
		}
		return ""
	})
	if !strings.HasPrefix(body, "path /some/page?q=1\n") || strings.Contains(body, s.admin) || strings.Contains(strings.ToLower(body), "authorization") {
		t.Errorf("what the workload received:\n%s", body)
	}
	if !strings.Contains(body, "X-Forwarded-Prefix: /w/"+id+"/8888") || !strings.Contains(body, "mine=kept") {
		t.Errorf("the workload should see the prefix and the caller's own cookies:\n%s", body)
	}
	if !strings.HasPrefix(hdr.Get("Content-Security-Policy"), "sandbox") || hdr.Get("Set-Cookie") != "" {
		t.Errorf("answer headers %v: want it sandboxed, without the workload's cookies", hdr)
	}
	// An upload larger than an API call's body (a file for a notebook).
	up, _ := http.NewRequest("POST", "http://"+s.addr+"/w/"+id+"/8888/upload", strings.NewReader(strings.Repeat("u", 3<<20)))
	up.Header.Set("Authorization", "Bearer "+s.admin)
	if resp, err := http.DefaultTransport.RoundTrip(up); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "got 3145728 bytes\n" {
			t.Errorf("a 3 MiB upload through the proxy: %d %q", resp.StatusCode, b)
		}
	}
	if code, _, _ := get("", nil); code != 401 {
		t.Errorf("without a token: %d, want 401", code)
	}
	// Another team's member.
	s.must(t, "create", "team", "others")
	created := strings.TrimSpace(s.must(t, "create", "user", "olga", "--team", "others"))
	olga := created[strings.LastIndex(created, "\n")+1:]
	if code, body, _ := get(olga, nil); code != 404 {
		t.Errorf("another team's member: %d %s, want 404", code, body)
	}
	// A browser: the token in the query becomes a cookie for this path.
	req, _ := http.NewRequest("GET", "http://"+s.addr+"/w/"+id+"/8888/?gpufleet-token="+s.admin, nil)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "gpufleet-token" {
			ck = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || ck == nil || !ck.HttpOnly || ck.Path != "/w/"+id+"/8888/" || strings.Contains(resp.Header.Get("Location"), "gpufleet-token") {
		t.Fatalf("the token exchange: %d %v %+v", resp.StatusCode, resp.Header, ck)
	}
	if code, body, _ := get("", ck); code != 200 || strings.Contains(body, s.admin) {
		t.Errorf("with the cookie: %d\n%s", code, body)
	}
	// Not declared, and stopped.
	if code, _, _ := func() (int, string, http.Header) {
		u := url
		url = "http://" + s.addr + "/w/" + id + "/9999/"
		defer func() { url = u }()
		return get(s.admin, nil)
	}(); code != 404 {
		t.Errorf("a port it does not declare: %d, want 404", code)
	}
	s.must(t, "cancel", id)
	s.run(t, s.admin, "wait", id)
	if code, _, hdr := get(s.admin, nil); code != 503 || hdr.Get("Retry-After") == "" {
		t.Errorf("a stopped workload: %d %v, want 503 with Retry-After", code, hdr)
	}
}
