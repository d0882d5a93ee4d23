package store

import (
	"encoding/base32"
	"regexp"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// TestWorkloadIDSpelling checks that IDs are spelled as they always were
// (lower-case standard base32 of the random bytes, cut to 12 digits), so
// that IDs made before and after read alike.
func TestWorkloadIDSpelling(t *testing.T) {
	for _, b := range [][8]byte{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {1, 2, 3, 4, 5, 6, 7, 8}, {0x9a, 0x3c, 0, 0x7f, 0x80, 0x11, 0xee, 0x42}} {
		want := core.WorkloadID("wl-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))[:12])
		if got := workloadID(b); got != want {
			t.Errorf("workloadID(%x) = %q, want %q", b, got, want)
		}
	}
	re := regexp.MustCompile(`^wl-[a-z2-7]{12}$`)
	seen := map[core.WorkloadID]bool{}
	for range 1000 {
		id := NewWorkloadID()
		if !re.MatchString(string(id)) {
			t.Fatalf("NewWorkloadID() = %q, not wl- and 12 base32 digits", id)
		}
		if seen[id] {
			t.Fatalf("NewWorkloadID() repeated %q", id)
		}
		seen[id] = true
	}
}
