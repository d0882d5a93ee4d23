package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// Workload hosts. With Options.WorkloadHosts (proxy.baseURL, say
// https://apps.example.com, its domain a wildcard DNS name pointing at this
// server), each declared port of a workload is also served at the root of a
// host of its own, {id}-{port}.apps.example.com: an origin of its own, so
// that a server that must know its URL and shares cookies and requests
// with itself (Jupyter, with base_url /) works, and its scripts still
// cannot read the portal's session. The path goes on unchanged, the Host
// header too (Jupyter checks a WebSocket's Origin against it), and the
// answer is not sandboxed; cookies it sets for a wider domain, or under
// the proxy's own name, are dropped. Authentication and authorization are
// those of /w/{id}/{port}/.

type hostModeKey struct{}

// inHostMode reports whether a proxied request came to a workload host.
func inHostMode(r *http.Request) bool { return r.Context().Value(hostModeKey{}) != nil }

// workloadHost parses a request's host as {id}-{port} under the workload
// hosts' domain.
func (s *Server) workloadHost(r *http.Request) (id string, port int, ok bool) {
	base := s.opts.WorkloadHosts
	if base == nil {
		return "", 0, false
	}
	h := r.Host
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	label, found := strings.CutSuffix(strings.ToLower(h), "."+strings.ToLower(base.Hostname()))
	if !found || label == "" || strings.Contains(label, ".") {
		return "", 0, false
	}
	i := strings.LastIndexByte(label, '-')
	if i <= 0 {
		return "", 0, false
	}
	p, err := strconv.Atoi(label[i+1:])
	if err != nil || p < 1 || p > 65535 {
		return "", 0, false
	}
	return label[:i], p, true
}

// serveWorkloadHost proxies a request that came to a workload host.
func (s *Server) serveWorkloadHost(w http.ResponseWriter, r *http.Request, id string, port int) {
	r = r.WithContext(context.WithValue(r.Context(), hostModeKey{}, true))
	r.SetPathValue("id", id)
	r.SetPathValue("port", strconv.Itoa(port))
	r.SetPathValue("rest", strings.TrimPrefix(r.URL.Path, "/"))
	s.hostProxy.ServeHTTP(w, r)
}

// portURL is the URL of a workload's port on its own host.
func (s *Server) portURL(id core.WorkloadID, port int) string {
	u := *s.opts.WorkloadHosts
	u.Host = fmt.Sprintf("%s-%d.%s", id, port, u.Host)
	u.Path, u.RawQuery, u.Fragment = "/", "", ""
	return u.String()
}

// toAPI is the workload on the wire, with the URLs of its ports on
// workload hosts.
func (s *Server) toAPI(w *core.Workload) *api.Workload {
	out := toAPI(w)
	if s.opts.WorkloadHosts != nil {
		for i := range out.Ports {
			out.Ports[i].URL = s.portURL(w.ID, out.Ports[i].Port)
		}
	}
	return out
}

// hostCookies keeps the cookies a workload host may set: host-only ones,
// not named as the proxy's.
func hostCookies(h http.Header) {
	kept := h.Values("Set-Cookie")[:0:0]
	for _, line := range h.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err != nil || c.Domain != "" || c.Name == ProxyCookie {
			continue
		}
		kept = append(kept, line)
	}
	h.Del("Set-Cookie")
	for _, line := range kept {
		h.Add("Set-Cookie", line)
	}
}
