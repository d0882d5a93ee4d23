package apiserver

// Regression tests from the review of issue 17 (workload hosts): attacks
// that the server refuses today.

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"
)

// A workload host keeps only the host-only cookies its workload sets: a
// cookie for the wider domain (tossed at its neighbours' hosts) or one
// named as the proxy's own is dropped, whatever the case of the attribute.
func TestAttackWorkloadHostCookieTossing(t *testing.T) {
	h := http.Header{}
	for _, c := range []string{
		"wide=1; Domain=apps.example.com; Path=/",
		"wide2=1; domain=.APPS.example.com",
		ProxyCookie + "=stolen; Path=/",
		ProxyCookie + "=x; Path=/w/",
		"keep=1; Path=/; HttpOnly",
	} {
		h.Add("Set-Cookie", c)
	}
	hostCookies(h)
	if got := h.Values("Set-Cookie"); !slices.Equal(got, []string{"keep=1; Path=/; HttpOnly"}) {
		t.Errorf("kept %q, want only the host-only cookie", got)
	}
}

// Only a host of exactly one label, {id}-{port}, under the workload
// hosts' domain is a workload host; others (deeper labels, a look-alike
// domain, no port, port 0 or past 65535) go to the API, and case and a
// port in Host do not change which workload is meant.
func TestAttackWorkloadHostParsing(t *testing.T) {
	base, _ := url.Parse("https://apps.example.com")
	s := &Server{opts: Options{WorkloadHosts: base}}
	for host, want := range map[string]string{
		"abc-8888.apps.example.com":      "abc:8888",
		"ABC-8888.APPS.EXAMPLE.COM":      "abc:8888",
		"abc-8888.apps.example.com:443":  "abc:8888",
		"a-b-80.apps.example.com":        "a-b:80",
		"x.abc-8888.apps.example.com":    "",
		"abc-8888.apps.example.com.evil": "",
		"abc-8888.evilapps.example.com":  "",
		"abc-8888apps.example.com":       "",
		"apps.example.com":               "",
		"abc.apps.example.com":           "",
		"-8888.apps.example.com":         "",
		"abc-0.apps.example.com":         "",
		"abc-65536.apps.example.com":     "",
		"abc-.apps.example.com":          "",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		id, port, ok := s.workloadHost(r)
		got := ""
		if ok {
			got = id + ":" + strconv.Itoa(port)
		}
		if got != want {
			t.Errorf("Host %q: workload host %q, want %q", host, got, want)
		}
	}
}
