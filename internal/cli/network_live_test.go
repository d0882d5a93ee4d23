package cli

import (
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// reachScript tries a TCP connection and an HTTP request to each target
// of its arguments ("HOST:PORT", "[V6]:PORT") at once, 2 s each, and
// prints "TRY TARGET ok BODY" or "TRY TARGET fail WHY".
const reachScript = `import socket, sys, threading
out = {}
def try_(t):
    h, p = t.rsplit(":", 1)
    h = h.strip("[]")
    s = socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET); s.settimeout(2)
    try:
        s.connect((h, int(p))); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); data = b""
        while len(data) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        out[t] = "ok " + data.decode("latin1").split("\r\n")[-1]
    except Exception as e:
        out[t] = "fail " + type(e).__name__
    finally:
        s.close()
ts = [threading.Thread(target=try_, args=(t,)) for t in sys.argv[1:]]
[t.start() for t in ts]; [t.join() for t in ts]
for t in sys.argv[1:]:
    print("TRY", t, out[t])`

// secretServer answers "SECRET-OF-BLUE" on its declared port ($PORT, on
// every address) and on 9000 of its loopback, where a careless service
// keeps its admin port.
const secretServer = `import http.server, os, threading
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "14"); self.end_headers(); self.wfile.write(b"SECRET-OF-BLUE")
    def log_message(self, *a): pass
admin = http.server.ThreadingHTTPServer(("127.0.0.1", 9000), H)
threading.Thread(target=admin.serve_forever, daemon=True).start()
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()`

// TestLiveTenantsApartOnTheNetwork: as a user sees it, through the CLI and
// the proxy of a real server whose tasks have network namespaces. A
// workload of team red reaches nothing of team blue's service: not at the
// service's address on its declared port or its loopback-only one, nor on
// the loopback (v4 or v6), any address of the host, or the cloud metadata
// address. A workload of blue reaches its team's declared port and nothing
// else of it; blue's member reaches the service through the proxy, red's
// member does not; the service's address is in describe and -o json.
func TestLiveTenantsApartOnTheNetwork(t *testing.T) {
	s := startLiveServer(t)
	requireIsolationOf(t, s, "network namespaces")
	for _, team := range []string{"blue", "red"} {
		s.must(t, "create", "team", team)
	}
	blue, _ := s.userIn(t, "bo", "blue", "member")
	red, _ := s.userIn(t, "ria", "red", "member")
	submit := func(token string, args ...string) string {
		t.Helper()
		r := s.run(t, token, append([]string{"submit", "--gpus", "0.25"}, args...)...)
		if r.code != 0 {
			t.Fatalf("submit %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	svc := submit(blue, "--kind", "service", "--port", "8000", "--", "/usr/bin/python3", "-c", secretServer)
	proxied := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/w/"+svc+"/8000/", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, "blue's service answers its member through the proxy", func() string {
		if code, body := proxied(blue); code != 200 || body != "SECRET-OF-BLUE" {
			return body
		}
		return ""
	})
	if code, body := proxied(red); code == 200 || strings.Contains(body, "SECRET") {
		t.Errorf("red's member got blue's service through the proxy: %d %q", code, body)
	}

	var w api.Workload
	mustJSON(t, s.must(t, "get", "workload", svc, "-o", "json"), &w)
	addr := w.Status.Address
	if net.ParseIP(addr) == nil || net.ParseIP(addr).IsLoopback() {
		t.Fatalf("status.address %q, want the service's own address", addr)
	}
	if d := s.must(t, "describe", svc); !strings.Contains(d, addr) {
		t.Errorf("describe does not show the address %s:\n%s", addr, d)
	}

	targets := []string{addr + ":8000", addr + ":9000", "127.0.0.1:8000", "127.0.0.1:9000", "[::1]:8000", "169.254.169.254:80"}
	hosts := hostIPv4s(t)
	for _, ip := range hosts {
		targets = append(targets, ip+":8000", ip+":9000")
	}
	tries := func(token, team string) map[string]string {
		t.Helper()
		id := submit(token, append([]string{"--team", team, "--", "/usr/bin/python3", "-c", reachScript}, targets...)...)
		if r := s.run(t, token, "wait", id); r.code != 0 {
			t.Fatalf("the workload of %s: exit %d %s%s\n%s", team, r.code, r.stdout, r.stderr, s.must(t, "describe", id))
		}
		got := map[string]string{}
		out := s.run(t, token, "logs", id).stdout
		for _, l := range strings.Split(out, "\n") {
			if f := strings.SplitN(l, " ", 3); len(f) == 3 && f[0] == "TRY" {
				got[f[1]] = f[2]
			}
		}
		if len(got) == 0 {
			t.Fatalf("the workload of %s tried nothing:\n%s", team, out)
		}
		return got
	}
	reached := tries(red, "red")
	// Other servers on this host (other tests') come and go with their
	// bridges: an address of one gone meanwhile is no longer the host's,
	// and a connection to it is egress, which red's team is allowed.
	still := hostIPv4s(t)
	for target, got := range reached {
		host, _, _ := net.SplitHostPort(target)
		if strings.HasPrefix(got, "fail") {
			continue
		}
		if slices.Contains(hosts, host) && !slices.Contains(still, host) {
			t.Logf("%s left the host during the test (another server's bridge): not judged", host)
			continue
		}
		t.Errorf("a workload of red reached %s: %s", target, got)
	}
	friend := tries(blue, "blue")
	if got := friend[addr+":8000"]; got != "ok SECRET-OF-BLUE" {
		t.Errorf("a workload of blue to its team's declared port %s:8000: %q, want the answer", addr, got)
	}
	if got := friend[addr+":9000"]; !strings.HasPrefix(got, "fail") {
		t.Errorf("a workload of blue reached its team's loopback-only port: %s", got)
	}
}

// hostIPv4s lists the IPv4 addresses of the host's interfaces.
func hostIPv4s(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && ip.To4() != nil {
			out = append(out, ip.String())
		}
	}
	return out
}
