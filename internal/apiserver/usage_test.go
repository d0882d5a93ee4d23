package apiserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store"
)

// TestUsageWindowBounds: ?window= of GET /usage is a duration from 1s to
// 24h, as the error says; anything else is a 400 naming the parameter.
func TestUsageWindowBounds(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	for _, w := range []string{"banana", "48h", "-1h", "0", "1ns", "500ms", "24h0m1s"} {
		a := f.do("member", "GET", "/api/v1/usage?window="+w, "")
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"field":"window"`) {
			t.Errorf("window=%s: %d %s, want 400 naming window", w, a.status, a.body)
		}
	}
	for _, w := range []string{"", "1s", "30m", "24h"} {
		if a := f.do("member", "GET", "/api/v1/usage?window="+w, ""); a.status != http.StatusOK {
			t.Errorf("window=%s: %d %s, want 200", w, a.status, a.body)
		}
	}
}
