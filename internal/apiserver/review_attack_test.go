package apiserver

// Attacks found in review of issue 17 (workload hosts) that still
// succeed: each test fails until the production code is fixed. Not
// committed (CI would fail); see the review report.

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
)

// The token exchange on a workload host redirects to the request's own
// path; a path that starts with "//" is, in a Location header, another
// host: https://x-1.apps.example.com//evil.example/?gpufleet-token=t sends
// the browser to evil.example (an open redirect on the platform's own
// domain, before any sign-in, for any label that parses as {id}-{port}).
func TestAttackWorkloadHostTokenExchangeOpenRedirect(t *testing.T) {
	base, _ := url.Parse("https://apps.example.com")
	f := newFixture(t, store.Options{}, RateLimit{}, func(o *Options) { o.WorkloadHosts = base })
	for _, p := range []string{"//evil.example/", "//evil.example/%2e%2e"} {
		req, err := http.NewRequest("GET", f.srv.URL+p+"?"+ProxyCookie+"=anything", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "nosuch-8888.apps.example.com"
		c := *f.srv.Client()
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatalf("Location %q: %v", loc, err)
		}
		if target := req.URL.ResolveReference(u); target.Host != req.URL.Host {
			t.Errorf("GET %s on a workload host: %d Location %q leads to host %q, off the workload's host",
				p, resp.StatusCode, loc, target.Host)
		}
	}
}

// The token exchange sets the proxy cookie to whatever the query holds,
// before it authenticates anything. On a workload host (same-site with
// every other workload host, and not sandboxed) that is a login CSRF: a
// link https://mine-8888.apps.example.com/?gpufleet-token=<attacker's
// token> signs any user, of any team, into the attacker's workload, whose
// scripts then run same-site with the victim's own workload hosts (where
// the victim's SameSite=Strict cookie is sent) and can set cookies for
// the whole domain. The exchange should at least authenticate the token
// and check it may view the workload before it sets a cookie; better, take
// a short-lived code bound to the workload rather than an API token.
func TestAttackWorkloadHostExchangesUncheckedToken(t *testing.T) {
	base, _ := url.Parse("https://apps.example.com")
	f := newFixture(t, store.Options{}, RateLimit{}, func(o *Options) { o.WorkloadHosts = base })
	req, err := http.NewRequest("GET", f.srv.URL+"/?"+ProxyCookie+"=not-a-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "nosuch-8888.apps.example.com"
	c := *f.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == ProxyCookie {
			t.Errorf("a token that authenticates no one (for a workload that does not exist) became the proxy cookie: %d %q", resp.StatusCode, ck.String())
		}
	}
}
