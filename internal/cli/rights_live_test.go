package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
)

// Open streams end with their rights: a followed log, a port-forward and
// a proxied exchange (a WebSocket, a streamed answer) end within
// rightsDeadline of their token's revocation or expiry, their user's
// deletion or the loss of the role they need in the workload's team, and
// say why where their protocol can.

// rightsDeadline is how soon after its rights are lost an open stream must
// end.
const rightsDeadline = 5 * time.Second

// tickServer is a workload's web server, on every address (the proxy
// reaches it however the workload's network is laid out): GET /ws is a
// WebSocket (RFC 6455, by hand: the standard library has none) that sends
// "tick N" every 50 ms; GET /stream a chunked answer of a "tick N" line
// every 50 ms; anything else, "ok".
const tickServer = `import base64, hashlib, http.server, os, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def ticks(self, frame):
        i = 0
        while True:
            i += 1
            self.wfile.write(frame(("tick %d" % i).encode())); self.wfile.flush()
            time.sleep(0.05)
    def do_GET(self):
        if self.path == "/ws":
            key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
            self.send_response(101)
            self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
            self.end_headers(); self.wfile.flush()
            self.ticks(lambda m: bytes([0x81, len(m)]) + m)
        elif self.path == "/stream":
            self.send_response(200); self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            self.ticks(lambda m: b"%x\r\n%s\n\r\n" % (len(m) + 1, m))
        else:
            self.send_response(200); self.send_header("Content-Length", "3"); self.end_headers(); self.wfile.write(b"ok\n")
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()`

// echoTCP is a workload's line echo server on every address.
const echoTCP = `import os, socketserver
class H(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(line); self.wfile.flush()
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()`

// lockedBuffer is output a test reads while the CLI writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// background is a CLI run that goes on while the test acts.
type background struct {
	stdout, stderr lockedBuffer
	code           chan int
}

// start runs the CLI with token in the background; it is interrupted at
// the test's end if it still runs.
func (s *liveServer) start(t *testing.T, token string, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{code: make(chan int, 1)}
	go func() { b.code <- s.runTo(t, ctx, token, &b.stdout, &b.stderr, args...) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.code:
		case <-time.After(10 * time.Second):
		}
	})
	return b
}

// end waits for the run to end and returns its exit code; it fails t when
// the run lasts d more.
func (b *background) end(t *testing.T, d time.Duration, what string) int {
	t.Helper()
	select {
	case code := <-b.code:
		b.code <- code // for the cleanup
		return code
	case <-time.After(d):
		t.Fatalf("%s: still running %s later; output so far:\n%s%s", what, d, b.stdout.String(), b.stderr.String())
	}
	return 0
}

// userIn creates a user with role in team and returns its token and the
// token's ID.
func (s *liveServer) userIn(t *testing.T, name, team, role string) (token, id string) {
	t.Helper()
	token = lastLine(s.must(t, "create", "user", name, "--team", team, "--role", role))
	var ts api.List[api.Token]
	mustJSON(t, s.must(t, "token", "list", "--user", name, "-o", "json"), &ts)
	if len(ts.Items) != 1 {
		t.Fatalf("%s's tokens: %+v", name, ts.Items)
	}
	return token, ts.Items[0].ID
}

// `gpufleet logs -f` with a member's token, a viewer's or an expiring
// one: each ends within rightsDeadline of its right's loss, its last line
// saying why, and fails; the others go on.
func TestLiveLogsFollowEndsWithItsRights(t *testing.T) {
	s := startLiveServer(t)
	s.must(t, "create", "team", "lab")
	id := strings.TrimSpace(s.must(t, "submit", "--team", "lab", "--gpus", "0.25", "--", "sh", "-c", `i=0; while :; do i=$((i+1)); echo "line $i"; sleep 0.1; done`))
	mia, miaID := s.userIn(t, "mia", "lab", "member")
	ned, _ := s.userIn(t, "ned", "lab", "member")
	vic, _ := s.userIn(t, "vic", "lab", "viewer")
	s.userIn(t, "eve", "lab", "viewer")
	eve := lastLine(s.must(t, "token", "create", "--user", "eve", "--expires-in", "8s"))
	expires := time.Now().Add(8 * time.Second)

	streams := map[string]*background{}
	for name, tok := range map[string]string{"mia": mia, "ned": ned, "vic": vic, "eve": eve} {
		streams[name] = s.start(t, tok, "logs", "-f", id)
	}
	for name, b := range streams {
		eventually(t, name+"'s log streams", func() string {
			if strings.Count(b.stdout.String(), "line ") < 3 {
				return "output so far: " + strconv.Quote(b.stdout.String()+b.stderr.String())
			}
			return ""
		})
	}
	for _, tc := range []struct {
		user string
		lose []string // the admin's command
		want string
	}{
		{"mia", []string{"token", "revoke", miaID}, "the token was revoked"},
		{"ned", []string{"delete", "user", "ned"}, "the user ned was deleted"},
		{"vic", []string{"delete", "member", "lab", "vic"}, "vic is no longer in team lab"},
	} {
		lost := time.Now()
		s.must(t, tc.lose...)
		b := streams[tc.user]
		code := b.end(t, rightsDeadline, tc.user+"'s logs -f after "+strings.Join(tc.lose, " "))
		took := time.Since(lost)
		if code != 1 || b.stderr.String() != "" {
			t.Errorf("%s's logs -f: exit %d, stderr %q; want 1, the reason on its last line only", tc.user, code, b.stderr.String())
		}
		if got, want := lastLine(b.stdout.String()), strings.TrimSuffix(closeLineFor(tc.want), "\n"); got != want {
			t.Errorf("%s's stream ended with %q, want %q; stderr %q", tc.user, got, want, b.stderr.String())
		}
		t.Logf("%s's logs -f ended %s after %s", tc.user, took.Round(time.Millisecond), strings.Join(tc.lose, " "))
	}
	// eve's token expires: its stream ends then, not before.
	b := streams["eve"]
	if time.Now().Before(expires) {
		select {
		case <-b.code:
			t.Fatalf("eve's stream ended before its token expired (in %s):\n%s%s", time.Until(expires).Round(time.Millisecond), b.stdout.String(), b.stderr.String())
		default:
		}
	}
	if code := b.end(t, time.Until(expires)+rightsDeadline, "eve's logs -f after its token expired"); code != 1 {
		t.Errorf("eve's logs -f: exit %d, want 1", code)
	}
	if late := time.Since(expires); late < 0 || late > rightsDeadline {
		t.Errorf("eve's stream ended %s after its token expired, want within %s of it", late.Round(time.Millisecond), rightsDeadline)
	}
	if got, want := lastLine(b.stdout.String()), strings.TrimSuffix(closeLineFor("the token expired"), "\n"); got != want {
		t.Errorf("eve's stream ended with %q, want %q", got, want)
	}
}

// closeLineFor is the line a text stream ends with when its session ends
// (apiserver's closeLine).
func closeLineFor(reason string) string {
	return "--- gpufleet: stream closed: " + reason + " ---\n"
}

// `gpufleet port-forward` with a member's token: once the token is
// revoked, or its user made a viewer (port-forward needs a member), the
// tunnel carries nothing more and closes within rightsDeadline, and the
// command says why and fails. A raw tunnel closes too.
func TestLivePortForwardEndsWithItsRights(t *testing.T) {
	s := startLiveServer(t)
	s.must(t, "create", "team", "lab")
	id := strings.TrimSpace(s.must(t, "submit", "--team", "lab", "--kind", "service", "--port", "7000", "--gpus", "0.25", "--", "/usr/bin/python3", "-c", echoTCP))
	mia, miaID := s.userIn(t, "mia", "lab", "member")
	maxTok, _ := s.userIn(t, "max", "lab", "member")
	for _, tc := range []struct {
		user, token string
		lose        []string
		want        string
	}{
		{"mia", mia, []string{"token", "revoke", miaID}, "the token was revoked"},
		{"max", maxTok, []string{"set", "member", "lab", "max", "--role", "viewer"}, "max is now a viewer of team lab; this needs the member role"},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		local := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		pf := s.start(t, tc.token, "port-forward", id, local+":7000")
		var conn net.Conn
		var echo *bufio.Reader
		eventually(t, tc.user+"'s tunnel echoes", func() string {
			if conn != nil {
				conn.Close()
			}
			if conn, err = net.Dial("tcp", "127.0.0.1:"+local); err != nil {
				return err.Error()
			}
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			echo = bufio.NewReader(conn)
			if _, err := io.WriteString(conn, "ping\n"); err != nil {
				return err.Error()
			}
			if line, err := echo.ReadString('\n'); line != "ping\n" {
				return "read " + strconv.Quote(line) + ": " + errString(err) + "\n" + pf.stderr.String()
			}
			return ""
		})
		conn.SetDeadline(time.Time{})
		lost := time.Now()
		s.must(t, tc.lose...)
		stopsEchoing(t, conn, echo, lost, tc.user+"'s tunnel after "+strings.Join(tc.lose, " "))
		conn.Close()
		if code := pf.end(t, rightsDeadline, tc.user+"'s port-forward"); code == 0 || !strings.Contains(pf.stderr.String(), tc.want) {
			t.Errorf("%s's port-forward: exit %d, stderr %q; want a failure naming %q", tc.user, code, pf.stderr.String(), tc.want)
		}
	}
	// A raw stream (Upgrade: tcp, api.Client.DialPortForward) has no room
	// for a reason: it just closes.
	rae, raeID := s.userIn(t, "rae", "lab", "member")
	conn, err := api.NewClient(s.addr, rae).DialPortForward(context.Background(), id, 7000)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo := bufio.NewReader(conn)
	io.WriteString(conn, "ping\n")
	if line, err := echo.ReadString('\n'); line != "ping\n" {
		t.Fatalf("the raw tunnel echoed %q, %v", line, err)
	}
	lost := time.Now()
	s.must(t, "token", "revoke", raeID)
	stopsEchoing(t, conn, echo, lost, "rae's raw tunnel after token revoke")
}

// stopsEchoing checks that a stream to an echo server carries nothing
// more and closes within rightsDeadline of lost: what is sent is not
// echoed, and reading ends.
func stopsEchoing(t *testing.T, conn net.Conn, echo *bufio.Reader, lost time.Time, what string) {
	t.Helper()
	conn.SetDeadline(lost.Add(rightsDeadline))
	for i := 0; ; i++ {
		io.WriteString(conn, "after "+strconv.Itoa(i)+"\n")
		line, err := echo.ReadString('\n')
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || time.Since(lost) > rightsDeadline {
				t.Fatalf("%s: still open %s later", what, time.Since(lost).Round(time.Millisecond))
			}
			break
		}
		if time.Since(lost) > rightsDeadline {
			t.Fatalf("%s: still echoes %q %s later", what, line, time.Since(lost).Round(time.Millisecond))
		}
	}
	t.Logf("%s: closed %s later", what, time.Since(lost).Round(time.Millisecond))
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// The proxy to a workload's port: a WebSocket closes with a close frame
// (1008) saying why, and a streamed answer is cut, within rightsDeadline
// of the token's revocation, of the user's deletion (the browser's way in,
// by the proxy cookie), of its removal from the team or, on the
// workload's own host, of its token's expiry.
func TestLiveProxyEndsWithItsRights(t *testing.T) {
	s := startLiveServerWith(t, func(c *config.Config) { c.Proxy.BaseURL = "http://apps.test" })
	s.must(t, "create", "team", "lab")
	id := strings.TrimSpace(s.must(t, "submit", "--team", "lab", "--kind", "notebook", "--gpus", "0.25", "--", "/usr/bin/python3", "-c", tickServer))
	base := "http://" + s.addr + "/w/" + id + "/8888"
	eventually(t, "the notebook answers through the proxy", func() string {
		req, _ := http.NewRequest("GET", base+"/", nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return resp.Status
		}
		return ""
	})
	mia, miaID := s.userIn(t, "mia", "lab", "viewer")
	ned, _ := s.userIn(t, "ned", "lab", "viewer")
	vic, _ := s.userIn(t, "vic", "lab", "viewer")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A WebSocket, by bearer token and by the proxy cookie a browser gets,
	// under /w/ or on the workload's host.
	wsBy := func(host string, hdr http.Header) *websocket.Conn {
		t.Helper()
		u := base + "/ws"
		if host != "" {
			u = "http://" + s.addr + "/ws"
		}
		c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{Host: host, HTTPHeader: hdr})
		if err != nil {
			t.Fatalf("WebSocket through the proxy: %v %+v", err, resp)
		}
		t.Cleanup(func() { c.CloseNow() })
		for range 3 {
			if _, msg, err := c.Read(ctx); err != nil || !strings.HasPrefix(string(msg), "tick ") {
				t.Fatalf("WebSocket message %q, %v", msg, err)
			}
		}
		return c
	}
	bearer := wsBy("", http.Header{"Authorization": {"Bearer " + mia}})
	cookie := wsBy("", http.Header{"Cookie": {"gpufleet-token=" + ned}})
	s.userIn(t, "wes", "lab", "viewer")
	wes := lastLine(s.must(t, "token", "create", "--user", "wes", "--expires-in", "6s"))
	expires := time.Now().Add(6 * time.Second)
	onHost := wsBy(id+"-8888.apps.test", http.Header{"Authorization": {"Bearer " + wes}})
	// A streamed answer.
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+vic)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a streamed answer through the proxy: %v %v", resp, err)
	}
	defer resp.Body.Close()
	stream := bufio.NewReader(resp.Body)
	if line, err := stream.ReadString('\n'); !strings.HasPrefix(line, "tick ") {
		t.Fatalf("streamed %q, %v", line, err)
	}

	closedWith := func(who string, c *websocket.Conn, lost time.Time, want string) {
		t.Helper()
		rctx, rcancel := context.WithDeadline(ctx, lost.Add(rightsDeadline))
		defer rcancel()
		for {
			_, msg, err := c.Read(rctx)
			if err == nil {
				continue // ticks sent before the end
			}
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != want {
				t.Errorf("%s's WebSocket ended with %v (last message %q) %s after its rights were lost, want close 1008 %q",
					who, err, msg, time.Since(lost).Round(time.Millisecond), want)
				return
			}
			t.Logf("%s's WebSocket closed %s after its rights were lost", who, time.Since(lost).Round(time.Millisecond))
			return
		}
	}
	lost := time.Now()
	s.must(t, "token", "revoke", miaID)
	closedWith("mia", bearer, lost, "the token was revoked")
	lost = time.Now()
	s.must(t, "delete", "user", "ned")
	closedWith("ned", cookie, lost, "the user ned was deleted")

	lost = time.Now()
	s.must(t, "delete", "member", "lab", "vic")
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream)
		done <- err
	}()
	select {
	case <-done:
		t.Logf("vic's streamed answer cut %s after its removal from the team", time.Since(lost).Round(time.Millisecond))
	case <-time.After(rightsDeadline):
		t.Errorf("vic's streamed answer still runs %s after its removal from the team", rightsDeadline)
	}
	closedWith("wes", onHost, expires, "the token expired")
}
