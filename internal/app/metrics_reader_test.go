package app

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/apiserver"
)

// TestMetricsReaderReadsOnlyMetrics: a scraper's service account with the
// metrics-reader role reads /metrics, and every other route of the server
// refuses it (403), whatever the route's own rule; only an admin creates
// one, and it joins no team.
func TestMetricsReaderReadsOnlyMetrics(t *testing.T) {
	s := start(t, t.TempDir())
	h := &hclient{t: t, addr: s.addr}
	var u api.User
	h.must(s.admin.Token, "POST", "/api/v1/users", `{"name":"prometheus","metricsReader":true}`, http.StatusCreated, &u)
	if !u.MetricsReader || !u.ServiceAccount || len(u.Memberships) != 0 || u.Token == "" {
		t.Fatalf("created %+v, want a metrics reader: a service account in no team, with a token", u)
	}
	tok := u.Token
	if a := h.do(tok, "GET", "/metrics", ""); a.status != 200 || !strings.Contains(a.body, "gpufleet_gpus_total") {
		t.Errorf("GET /metrics as the metrics reader: %d %.200s, want 200 with the metrics", a.status, a.body)
	}
	if a := h.do(tok, "GET", "/api/v1/whoami", ""); a.status != 200 || !strings.Contains(a.body, `"metricsReader":true`) {
		t.Errorf("whoami: %d %.200s", a.status, a.body)
	}
	public := map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /api/v1/healthz": true, "GET /api/v1/readyz": true, "GET /api/v1/openapi.json": true}
	for _, r := range apiserver.Routes {
		if public[r] || r == "GET /metrics" || r == "GET /api/v1/whoami" {
			continue
		}
		method, path, _ := strings.Cut(r, " ")
		path = strings.NewReplacer("{id}", "wl-x", "{name}", "prometheus", "{team}", "default", "{user}", "prometheus").Replace(path)
		body := ""
		if method != "GET" && method != "DELETE" {
			body = `{}`
		}
		a := h.do(tok, method, path, body)
		if a.status != http.StatusForbidden || !strings.Contains(a.body, "metrics reader") {
			t.Errorf("%s %s as the metrics reader: %d %.200s, want 403 saying it is a metrics reader", method, path, a.status, a.body)
		}
	}
	// It joins no team, even by an admin.
	if a := h.do(s.admin.Token, "PUT", "/api/v1/teams/default/members/prometheus", `{"role":"viewer"}`); a.status != http.StatusConflict {
		t.Errorf("adding the metrics reader to a team: %d %s, want 409", a.status, a.body)
	}
	// Only an admin makes one, and never in a team.
	if a := h.do(s.admin.Token, "POST", "/api/v1/users", `{"name":"scraper2","metricsReader":true,"memberships":[{"team":"default","role":"viewer"}]}`); a.status != http.StatusBadRequest {
		t.Errorf("a metrics reader in a team: %d %s, want 400", a.status, a.body)
	}
}
