package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExampleUsage(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "deploy", "gpufleet.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultUsage(), c.Usage); diff != "" {
		t.Errorf("example usage section differs from the defaults (-default +example):\n%s", diff)
	}
}

func TestUsageFile(t *testing.T) {
	t.Run("fields left out keep their defaults; idle rules given replace them", func(t *testing.T) {
		c, err := Load(write(t, "usage:\n  sampleInterval: 1s\n  idle:\n    - {kind: job, team: research, threshold: 0.1, timeout: 2h, warning: 15m}\n  memory:\n    graceSamples: 2\n"))
		if err != nil {
			t.Fatal(err)
		}
		want := DefaultUsage()
		want.SampleInterval = Duration{time.Second}
		want.Idle = []IdleRule{{Kind: "job", Team: "research", Threshold: 0.1, Timeout: Duration{2 * time.Hour}, Warning: Duration{15 * time.Minute}}}
		want.Memory.GraceSamples = 2
		if diff := cmp.Diff(want, c.Usage); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("bad rules are named", func(t *testing.T) {
		c, err := Load(write(t, "usage:\n  dcgmURL: 'ftp://x'\n  sampleInterval: 1m\n  history: 30s\n  idle:\n    - {kind: cron, threshold: 2, timeout: 1h}\n    - {kind: notebook, timeout: 1h}\n    - {kind: notebook, timeout: 2h}\n    - {kind: job, timeout: 10m, warning: 10m}\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		for _, want := range []string{"usage.idle[0].kind", "usage.idle[0].threshold", "usage.idle[2]: another rule", "usage.dcgmURL",
			"usage.idle[3].warning 10m0s: must be shorter than the timeout", "usage.history 30s: must be at least the sample interval"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Validate() = %v, want it to name %s", err, want)
			}
		}
	})
}
