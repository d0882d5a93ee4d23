package portal_test

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/portal"
)

var styleBlock = regexp.MustCompile(`(?s)<style>(.*?)</style>`)

// reportStyleHashes are the CSP source expressions of the inline
// stylesheets of a report page.
func reportStyleHashes(page string) []string {
	var out []string
	for _, m := range styleBlock.FindAllStringSubmatch(page, -1) {
		sum := sha256.Sum256([]byte(m[1]))
		out = append(out, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return out
}

// The portal's policy allows the acceptance report's stylesheet (the
// report is shown in a srcdoc frame, under the portal's policy) and only
// it: when the report's CSS changes, portal.ReportStyleHash must follow.
func TestAcceptanceReportStyleHash(t *testing.T) {
	now := api.AcceptanceRun{ID: "ar-1", Status: api.RunPassed, Stages: []api.StageRun{{Name: "smoke", Type: api.StageSmoke, Status: api.StagePassed}}}
	page, err := accept.ReportHTML(&now, nil, accept.Checklist(&now, nil))
	if err != nil {
		t.Fatal(err)
	}
	hashes := reportStyleHashes(string(page))
	if len(hashes) != 1 {
		t.Fatalf("the report has %d inline stylesheets, want 1: %q", len(hashes), hashes)
	}
	if hashes[0] != portal.ReportStyleHash {
		t.Errorf("the report's stylesheet hashes to %s; portal.ReportStyleHash is %s: update it (and nothing else in the policy)", hashes[0], portal.ReportStyleHash)
	}
}
