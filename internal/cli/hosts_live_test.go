package cli

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
)

// hostsServer serves the path, the Host header, GPUFLEET_BASE_URL and the
// headers it got, and sets a host cookie, a domain cookie and one under
// the proxy's name.
const hostsServer = `import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("path " + self.path + "\nbase " + os.environ["GPUFLEET_BASE_URL"] + "\n" + "".join(k + ": " + v + "\n" for k, v in self.headers.items())).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "_xsrf=abc; Path=/"); self.send_header("Set-Cookie", "wide=1; Domain=apps.test"); self.send_header("Set-Cookie", "gpufleet-token=forged")
        self.end_headers(); self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()`

// With proxy.baseURL, a workload's port is served at the root of a host of
// its own: the path and Host go on unchanged (what Jupyter with base_url /
// needs), the answer is not sandboxed, host-only cookies pass and wider or
// forged ones do not, and authentication is the path proxy's: 401 without
// a token, 404 for another team; the workload's URL says where.
func TestLiveWorkloadHosts(t *testing.T) {
	s := startLiveServerWith(t, func(c *config.Config) { c.Proxy.BaseURL = "http://apps.test" })
	id := strings.TrimSpace(s.must(t, "submit", "--kind", "notebook", "--gpus", "0.25", "--", "/usr/bin/python3", "-c", hostsServer))
	var w api.Workload
	mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
	want := "http://" + id + "-8888.apps.test/"
	if len(w.Ports) != 1 || w.Ports[0].URL != want {
		t.Fatalf("ports %+v, want the URL %s", w.Ports, want)
	}
	if got := s.must(t, "open", id); got != want+"\n" {
		t.Errorf("open: %q, want %q", got, want)
	}
	host := id + "-8888.apps.test"
	get := func(token, path string) (int, string, http.Header) {
		req, _ := http.NewRequest("GET", "http://"+s.addr+path, nil)
		req.Host = host
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
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
	eventually(t, "the notebook answers on its own host", func() string {
		if code, body, hdr = get(s.admin, "/lab/tree?x=1"); code != 200 {
			return body
		}
		return ""
	})
	for _, want := range []string{"path /lab/tree?x=1\n", "base /\n", "Host: " + host + "\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("the workload got no %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, s.admin) || strings.Contains(body, "X-Forwarded-Prefix") {
		t.Errorf("the workload got the token or a prefix:\n%s", body)
	}
	if hdr.Get("Content-Security-Policy") != "" {
		t.Errorf("a workload host's answer is sandboxed: %v", hdr)
	}
	if ck := hdr.Values("Set-Cookie"); len(ck) != 1 || !strings.HasPrefix(ck[0], "_xsrf=abc") {
		t.Errorf("cookies passed: %q, want only the host-only _xsrf", ck)
	}
	if code, _, _ := get("", "/"); code != 401 {
		t.Errorf("without a token: %d, want 401", code)
	}
	s.must(t, "create", "team", "others")
	created := strings.TrimSpace(s.must(t, "create", "user", "olga", "--team", "others"))
	olga := created[strings.LastIndex(created, "\n")+1:]
	if code, _, _ := get(olga, "/"); code != 404 {
		t.Errorf("another team's member: %d, want 404", code)
	}
	// A browser's token becomes a cookie for the whole host.
	req, _ := http.NewRequest("GET", "http://"+s.addr+"/lab?gpufleet-token="+s.admin, nil)
	req.Host = host
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cks := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cks) != 1 || cks[0].Path != "/" || !cks[0].HttpOnly || resp.Header.Get("Location") != "/lab" {
		t.Errorf("the token exchange on a workload host: %d %v", resp.StatusCode, resp.Header)
	}
	// The API is not served on a workload host.
	if code, body, _ := get(s.admin, "/api/v1/teams"); code == 200 && strings.Contains(body, `"items"`) {
		t.Errorf("a workload host answers the API: %d %s", code, body)
	}
}
