package apiserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// EndpointSource says where a workload's attempt serves a declared port:
// the local executor's Endpoint (a host port whose listener belongs to the
// workload's user), the kubernetes one's (a pod IP, when the server
// reaches pods), or the multi executor's (the cluster that runs it).
type EndpointSource interface {
	Endpoint(id core.WorkloadID, attempt, port int) (string, bool)
}

// ProxyCookie carries a caller's token to the proxy for a browser, which
// cannot send an Authorization header when it follows a link. It is set,
// HttpOnly and for the workload's path only, by a first request with
// ?gpufleet-token=, and never forwarded to the workload.
const ProxyCookie = "gpufleet-token"

// proxyRoutes are the proxy's rows: like the table's, they say who may
// call (a viewer of the workload's team), but they are served apart: any
// method, any path below, the answer the workload's own.
var proxyRoutes = []route{
	{pattern: "/w/{id}/{port}/{rest...}", access: teamRole, need: core.RoleViewer},
	{pattern: "/s/{team}/{name}/{rest...}", access: teamRole, need: core.RoleViewer},
}

func (s *Server) proxyHandlers() {
	s.mux.Handle(proxyRoutes[0].pattern, s.proxy(&proxyRoutes[0], s.byID))
	s.mux.Handle(proxyRoutes[1].pattern, s.proxy(&proxyRoutes[1], s.byService))
	s.hostProxy = s.proxy(&proxyRoutes[0], s.byID)
	for _, p := range []string{"/w/{id}/{port}", "/s/{team}/{name}"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
		})
	}
}

// target is what a proxied request reaches: a workload's declared port, and
// the prefix of the path that named it.
type target struct {
	w      *core.Workload
	port   int
	prefix string
}

// byID resolves /w/{id}/{port}/.
func (s *Server) byID(c *call) (target, error) {
	w, err := s.workload(c)
	if err != nil {
		return target{}, err
	}
	port, err := strconv.Atoi(c.r.PathValue("port"))
	if err != nil || !declares(w, port) {
		return target{}, notFound("port", fmt.Sprintf("%s of workload %s (it declares %s)", c.r.PathValue("port"), w.ID, declared(w)))
	}
	return target{w: w, port: port, prefix: fmt.Sprintf("/w/%s/%d", w.ID, port)}, nil
}

// byService resolves /s/{team}/{name}/: the team's service of that name
// that runs now (its newest), at its first declared port, so the URL
// outlives requeues and restarts.
func (s *Server) byService(c *call) (target, error) {
	team, name := core.TeamName(c.r.PathValue("team")), c.r.PathValue("name")
	if err := c.authorize(team, "service", string(team)+"/"+name); err != nil {
		return target{}, err
	}
	ws, err := s.opts.Store.Workloads(c.r.Context(), store.WorkloadFilter{Teams: []core.TeamName{team}, Phases: []core.Phase{core.Pending, core.Running}})
	if err != nil {
		return target{}, err
	}
	var found *core.Workload
	for _, w := range ws {
		if w.Name == name && w.Kind == core.KindService && len(w.Ports) > 0 && (found == nil || w.Status.Phase == core.Running && (w.Status.Ready || !found.Status.Ready)) {
			found = w
		}
	}
	if found == nil {
		return target{}, notFound("service", string(team)+"/"+name)
	}
	return target{w: found, port: found.Ports[0].Port, prefix: fmt.Sprintf("/s/%s/%s", team, name)}, nil
}

func declares(w *core.Workload, port int) bool {
	for _, p := range w.Ports {
		if p.Port == port {
			return true
		}
	}
	return false
}

func declared(w *core.Workload) string {
	if len(w.Ports) == 0 {
		return "no port"
	}
	var s []string
	for _, p := range w.Ports {
		s = append(s, strconv.Itoa(p.Port))
	}
	return "ports " + strings.Join(s, ", ")
}

// proxy serves a workload's port to viewers of its team: the caller is
// authenticated (Bearer token, or the proxy cookie) and authorized like
// any API call; the request goes on without the caller's token or cookie,
// its path without the prefix (X-Forwarded-Prefix says it), and the
// answer (WebSocket upgrades included) comes back as the workload gives
// it. A workload that does not run now answers 503 with Retry-After.
// Each exchange is a session (sessions.go): once the caller's rights are
// lost, a streamed answer is cut and a WebSocket closed (with a close
// frame saying why: wsclose.go).
func (s *Server) proxy(rt *route, resolve func(*call) (target, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A browser's first visit exchanges the token in the query for a
		// cookie, then comes back without it. The token is checked first,
		// as a Bearer token for this very target: a link carrying someone
		// else's token (one's own, to sign a victim in as oneself) sets
		// nothing unless that token may view the workload.
		exchange := ""
		if tok := r.URL.Query().Get(ProxyCookie); tok != "" {
			exchange = tok
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+tok)
		} else if r.Header.Get("Authorization") == "" {
			if ck, err := r.Cookie(ProxyCookie); err == nil && ck.Value != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+ck.Value)
			}
		}
		// Authenticated, limited and authorized as any API call (run), by
		// a row of its own for this request, which streams: its rights
		// are checked again while it lasts.
		row := &route{pattern: rt.pattern, access: rt.access, need: rt.need, stream: func(s *Server, w http.ResponseWriter, c *call) error {
			tg, err := resolve(c)
			if err != nil {
				return err
			}
			if exchange != "" {
				s.setProxyCookie(w, c.r, exchange)
				return nil
			}
			return s.forward(w, c.r, tg)
		}}
		if _, err := s.run(w, &call{r: r, rt: row}); err != nil {
			s.fail(w, r, err)
		}
	})
}

// forward proxies an authorized request to its target, which must run
// (503 with Retry-After otherwise), until the request's session ends.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, tg target) error {
	run := tg.w
	addr, retry, err := s.endpoint(run, tg.port, true)
	if err != nil {
		w.Header().Set("Retry-After", retry)
		return err
	}
	// A proxied exchange may last (a notebook's WebSocket): the server's
	// write deadline is for API answers.
	hostMode := inHostMode(r)
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	rc.SetReadDeadline(time.Time{})
	if isWebSocket(r) {
		// Its frames pass through wsCloser, which closes it with a
		// frame saying why when the session ends.
		w = &wsHijacker{ResponseWriter: w, ctx: r.Context()}
	}
	rp := &httputil.ReverseProxy{
		Transport: s.upstream,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: addr})
			if hostMode {
				// Its own origin: the path and host as the caller gave them.
				pr.Out.URL.Path, pr.Out.URL.RawPath = pr.In.URL.Path, pr.In.URL.RawPath
				pr.Out.Host = pr.In.Host
			} else {
				pr.Out.URL.Path = "/" + pr.In.PathValue("rest")
				pr.Out.URL.RawPath = ""
			}
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Cookie")
			for _, ck := range pr.In.Cookies() {
				if ck.Name != ProxyCookie {
					pr.Out.AddCookie(ck)
				}
			}
			pr.SetXForwarded()
			if !hostMode {
				pr.Out.Header.Set("X-Forwarded-Prefix", tg.prefix)
			}
		},
		// What a workload serves shares the portal's origin: it runs
		// sandboxed (an origin of its own), so that its scripts cannot
		// read the portal's session or call the API as the viewer.
		ModifyResponse: func(resp *http.Response) error {
			if hostMode {
				hostCookies(resp.Header)
				return nil
			}
			resp.Header.Set("Content-Security-Policy", "sandbox allow-scripts allow-forms allow-popups allow-downloads allow-modals")
			resp.Header.Del("Set-Cookie")
			return nil
		},
		// What it cannot copy (a client gone, a session ended) goes to the
		// server's log.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set("Retry-After", "5")
			s.fail(w, r, fmt.Errorf("workload %s does not answer on port %d: %v: %w", run.ID, tg.port, err, core.ErrUnavailable))
		},
	}
	rp.ServeHTTP(w, r)
	return nil
}

// endpoint is where a workload serves a declared port now (the
// executor's Endpoint of its attempt), or why it cannot be reached, as
// core.ErrUnavailable, with the seconds a client should wait before it
// tries again: it does not run, it is not ready yet (when ready is asked
// and it has a readyPath), or it does not serve the port here.
func (s *Server) endpoint(w *core.Workload, port int, ready bool) (addr, retryAfter string, err error) {
	if w.Status.Phase != core.Running || s.opts.Endpoints == nil {
		return "", "5", fmt.Errorf("workload %s is %s, not running: %w", w.ID, w.Status.Phase, core.ErrUnavailable)
	}
	if ready && w.ReadyPath != "" && !w.Status.Ready {
		return "", "2", fmt.Errorf("workload %s is not ready: GET %s has not answered 2xx: %w", w.ID, w.ReadyPath, core.ErrUnavailable)
	}
	addr, ok := s.opts.Endpoints.Endpoint(w.ID, w.Status.Attempts, port)
	if !ok {
		return "", "5", fmt.Errorf("workload %s does not serve port %d here: %w", w.ID, port, core.ErrUnavailable)
	}
	return addr, "", nil
}

// dialEndpoint opens a connection to an address endpoint gave: the one
// way the proxy, port-forward and the acceptance load generator
// (DialWorkload) reach a workload.
func (s *Server) dialEndpoint(ctx context.Context, addr string) (net.Conn, error) {
	if d, ok := s.opts.Endpoints.(Dialer); ok {
		// The executor's way: from inside the workload's network
		// namespace, where it has one.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return d.DialContext(ctx, "tcp", addr)
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// Dialer is an EndpointSource that reaches the addresses it gives in a way
// of its own (the local executor: from inside the workload's network
// namespace, where a server on localhost is reached too).
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// DialWorkload opens a connection to a declared port of a running
// workload, as the proxy reaches it and with the proxy's refusals (one
// that is not ready is not reached): acceptrun.Dialer, so that the load
// generator's requests go where the proxy's go. The workload is read
// anew, so a dial after a restart reaches its new attempt.
func (s *Server) DialWorkload(ctx context.Context, id core.WorkloadID, port int) (net.Conn, error) {
	w, err := s.opts.Store.Workload(ctx, id)
	if err != nil {
		return nil, err
	}
	if !declares(w, port) {
		return nil, fmt.Errorf("workload %s declares no port %d (it declares %s)", id, port, declared(w))
	}
	addr, _, err := s.endpoint(w, port, true)
	if err != nil {
		return nil, err
	}
	return s.dialEndpoint(ctx, addr)
}

// setProxyCookie answers a checked token exchange: the cookie, for the
// workload's path (or a workload host's whole), and a redirect to the same
// place without the token. The place is the request's own path, cleaned,
// so that no request can redirect off the server ("//evil.example/").
func (s *Server) setProxyCookie(w http.ResponseWriter, r *http.Request, tok string) {
	q := r.URL.Query()
	q.Del(ProxyCookie)
	scope := "/" // a workload host's, for all of it
	if !inHostMode(r) {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
		scope = "/" + parts[0] + "/" + parts[1] + "/"
		if len(parts) > 2 {
			scope += strings.SplitN(parts[2], "/", 2)[0] + "/"
		}
	}
	http.SetCookie(w, &http.Cookie{Name: ProxyCookie, Value: tok, Path: scope, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https", MaxAge: int((12 * time.Hour).Seconds())})
	to := path.Clean("/" + r.URL.Path)
	if strings.HasSuffix(r.URL.Path, "/") && to != "/" {
		to += "/"
	}
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// portForward answers GET /workloads/{id}/portforward?port=N: once
// authorized (a member of the workload's team), the connection becomes a
// stream to the workload's port, as kubectl port-forward does (gpufleet
// port-forward). With Upgrade: websocket, the stream is the binary
// messages of a WebSocket, closed when its session ends with a close frame
// saying why (1008, policy violation); with Upgrade: tcp, it is raw TCP,
// which is just closed.
func (s *Server) portForward(w http.ResponseWriter, c *call) error {
	wl, err := s.workload(c)
	if err != nil {
		return err
	}
	ws := isWebSocket(c.r)
	if !ws && !strings.EqualFold(c.r.Header.Get("Upgrade"), "tcp") {
		return invalid("Upgrade", "a port-forward needs the header Upgrade: websocket, or Upgrade: tcp for a raw stream (gpufleet port-forward does it)")
	}
	port, err := strconv.Atoi(c.r.URL.Query().Get("port"))
	if err != nil || !declares(wl, port) {
		return notFound("port", fmt.Sprintf("%s of workload %s (it declares %s)", c.r.URL.Query().Get("port"), wl.ID, declared(wl)))
	}
	addr, _, err := s.endpoint(wl, port, false)
	if err != nil {
		return err
	}
	up, err := s.dialEndpoint(c.r.Context(), addr)
	if err != nil {
		return fmt.Errorf("workload %s does not answer on port %d: %v: %w", wl.ID, port, err, core.ErrUnavailable)
	}
	defer up.Close()
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	rc.SetReadDeadline(time.Time{})
	if ws {
		return forwardWebSocket(w, c.r, up)
	}
	conn, brw, err := rc.Hijack()
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"); err != nil {
		return nil
	}
	// A raw stream has no room for a reason: it is closed when its
	// session ends.
	stop := context.AfterFunc(c.r.Context(), func() { conn.Close(); up.Close() })
	defer stop()
	splice(conn, brw, up)
	return nil
}

// splice copies between a client and a workload's port both ways, until
// either side ends. What the client sent after its request may be in
// from's buffer.
func splice(client io.Writer, from io.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(up, from)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		io.Copy(client, up)
		done <- struct{}{}
	}()
	<-done
}

// forwardWebSocket carries a port-forward over a WebSocket until either
// side ends it or its session ends, when its close frame says why.
func forwardWebSocket(w http.ResponseWriter, r *http.Request, up net.Conn) error {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept answered the client
	}
	ctx := r.Context()
	// The stream outlives the session's context only to say why it ended.
	nc := websocket.NetConn(context.WithoutCancel(ctx), c, websocket.MessageBinary)
	ended := make(chan struct{})
	go func() {
		splice(nc, nc, up)
		close(ended)
	}()
	select {
	case <-ended:
		c.Close(websocket.StatusNormalClosure, "")
	case <-ctx.Done():
		up.Close() // nothing more passes
		if why := endedWhy(ctx); why != "" {
			c.Close(websocket.StatusPolicyViolation, closeReason(why))
		} else {
			c.Close(websocket.StatusGoingAway, "the server is stopping")
		}
	}
	return nil
}
