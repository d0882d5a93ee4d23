package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gpufleet.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
}

func TestLoadOverridesDefaults(t *testing.T) {
	c, err := Load(write(t, `
addr: 127.0.0.1:9999
priorityClasses:
  - {name: production, value: 1000, preemptible: false, mayBorrow: false}
  - {name: training, value: 500, preemptible: true, mayBorrow: true}
  - {name: development, value: 300, preemptible: true, mayBorrow: true}
scheduler:
  starvationAfter: 2m
  fairShareReclaim: false
  minRuntime: 30s
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9999" || c.DataDir != Default().DataDir {
		t.Errorf("addr %q data %q: want the file's address and the default data dir", c.Addr, c.DataDir)
	}
	want := Scheduler{StarvationAfter: Duration{2 * time.Minute}, FairShareReclaim: false, MinRuntime: Duration{30 * time.Second}}
	if diff := cmp.Diff(want, c.Scheduler); diff != "" {
		t.Errorf("scheduler (-want +got):\n%s", diff)
	}
	if len(c.PriorityClasses) != 3 {
		t.Errorf("%d classes, want the file's 3", len(c.PriorityClasses))
	}
	if err := c.Validate(); err != nil {
		t.Errorf("valid file: %v", err)
	}
}

func TestBadConfigIsRefused(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"unknown field", "adress: x\n", "adress"},
		{"bad duration", "scheduler: {starvationAfter: soon}\n", "scheduler.starvationAfter: duration \"soon\": want a value like 10m"},
		{"bad sample interval", "usage: {sampleInterval: banana}\n", "usage.sampleInterval: duration \"banana\""},
		{"duration without a unit", "usage: {history: 10}\n", "usage.history: duration \"10\""},
		{"bad idle timeout", "usage: {idle: [{kind: notebook, timeout: 1h}, {kind: job, timeout: forever}]}\n", "usage.idle[1].timeout: duration \"forever\""},
		{"duplicate class", "priorityClasses: [{name: training, value: 1}, {name: training, value: 2}, {name: development, value: 3}]\n", "defined twice"},
		{"same value twice", "priorityClasses: [{name: training, value: 1}, {name: development, value: 1}]\n", "two classes have it"},
		{"missing default class", "priorityClasses: [{name: training, value: 1}]\n", `"development" is needed`},
		{"pool of an unknown cluster", "clusters: [{name: onprem, executor: local}]\npools: [{name: a, cluster: onprem, region: eu-west, kind: owned}, {name: b, cluster: nowhere, region: us-east, kind: owned}]\n", "pools[1].cluster \"nowhere\""},
		{"two pools claim the same nodes", "clusters: [{name: onprem, executor: local}]\npools: [{name: a, cluster: onprem, region: eu-west, kind: owned}, {name: b, cluster: onprem, region: eu-west, kind: owned}]\n", "pools[1]: cluster onprem already has a pool of all its nodes"},
		{"burst pool without a price", "clusters: [{name: k, executor: kubernetes}]\npools: [{name: cloud, cluster: k, region: us-east, kind: burst}]\n", "pools[0].price"},
		{"pool without a region", "clusters: [{name: onprem, executor: local}]\npools: [{name: a, cluster: onprem, kind: owned}]\n", "pools[0].region"},
		{"pool kind", "clusters: [{name: onprem, executor: local}]\npools: [{name: a, cluster: onprem, region: eu-west, kind: rented}]\n", "pools[0].kind"},
		{"cluster executor", "clusters: [{name: x, executor: slurm}]\npools: [{name: a, cluster: x, region: eu-west, kind: owned}]\n", "clusters[0].executor"},
		{"clusters without pools", "clusters: [{name: onprem, executor: local}]\n", "pools: clusters are configured"},
		{"burst class", "burst: {classes: [gold]}\n", "burst.classes[0]"},
		{"proxy base URL with a path", "proxy: {baseURL: https://apps.example.com/x}\n", "proxy.baseURL"},
		{"proxy base URL of an IP", "proxy: {baseURL: http://10.0.0.1}\n", "DNS name"},
		{"proxy base URL without a scheme", "proxy: {baseURL: apps.example.com}\n", "http or https"},
		{"storage limit", "storage: {teamLimit: lots}\n", "storage.teamLimit"},
		{"dataset path", "storage: {datasets: {imagenet: data/imagenet}}\n", "storage.datasets.imagenet"},
		{"dataset name", "storage: {datasets: {Image_Net: /srv/x}}\n", "storage.datasets.Image_Net"},
		{"container runtime", "local: {containerRuntime: runc}\n", "local.containerRuntime"},
		{"container args", "local: {containerArgs: [run]}\n", "local.containerArgs[0]"},
		{"task path", "local: {path: \"/opt/conda/bin:bin\"}\n", "local.path: entry 2"},
		{"network range", "local: {network: {cidr: 8.8.0.0/16}}\n", "local.network.cidr"},
		{"egress rule", "local: {network: {teams: {research: {egress: deny, allow: [10.0.0.0/33]}}}}\n", "local.network.teams.research.allow[0]"},
		{"egress word", "local: {network: {egress: maybe}}\n", "local.network.egress"},
		{"volume access mode", "executor: kubernetes\nkubernetes: {volumeAccessMode: Shared}\n", "kubernetes.volumeAccessMode"},
		{"checkpoint size", "executor: kubernetes\nkubernetes: {checkpointSize: big}\n", "kubernetes.checkpointSize"},
		{"idle-only that cannot be preempted", "priorityClasses: [{name: training, value: 1}, {name: development, value: 2}, {name: scavenger, value: 0, idleOnly: true, mayBorrow: true}]\n", "must be preemptible"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(t, tc.body))
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseFakeGPUs(t *testing.T) {
	got, err := ParseFakeGPUs("2xH100-80GB,2xA10-24GB")
	if err != nil {
		t.Fatal(err)
	}
	want := []FakeGPU{{Count: 2, Model: "H100", MemoryMiB: 81920}, {Count: 2, Model: "A10", MemoryMiB: 24576}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "4xH100", "0xH100-80GB", "65xH100-80GB", "4xH100-0GB", "H100-80GB"} {
		if _, err := ParseFakeGPUs(bad); err == nil {
			t.Errorf("ParseFakeGPUs(%q) accepted", bad)
		}
	}
}

// TestExampleConfig keeps deploy/gpufleet.example.yaml loadable and equal
// to the defaults it documents.
func TestExampleConfig(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "deploy", "gpufleet.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := Default()
	if diff := cmp.Diff(d.PriorityClasses, c.PriorityClasses); diff != "" {
		t.Errorf("example classes differ from the defaults (-default +example):\n%s", diff)
	}
	if diff := cmp.Diff(d.Scheduler, c.Scheduler); diff != "" {
		t.Errorf("example scheduler options differ from the defaults (-default +example):\n%s", diff)
	}
	if diff := cmp.Diff(d.Limits, c.Limits); diff != "" {
		t.Errorf("example limits differ from the defaults (-default +example):\n%s", diff)
	}
}

func TestLimits(t *testing.T) {
	t.Run("a file that sets one limit keeps the others' defaults", func(t *testing.T) {
		c, err := Load(write(t, "limits:\n  burst: 50\n"))
		if err != nil {
			t.Fatal(err)
		}
		want := DefaultLimits()
		want.Burst = 50
		if diff := cmp.Diff(want, c.Limits); diff != "" {
			t.Errorf("limits (-want +got):\n%s", diff)
		}
	})
	t.Run("zero turns a limit off", func(t *testing.T) {
		c, err := Load(write(t, "limits: {maxPendingPerTeam: 0, maxPendingPerUser: 0, requestsPerSecond: 0, burst: 0}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("limits all off: %v", err)
		}
	})
	bad := []struct{ name, body, want string }{
		{"negative team bound", "limits: {maxPendingPerTeam: -1}\n", "limits.maxPendingPerTeam"},
		{"negative user bound", "limits: {maxPendingPerUser: -5}\n", "limits.maxPendingPerUser"},
		{"negative rate", "limits: {requestsPerSecond: -1}\n", "limits.requestsPerSecond"},
		{"a rate without a burst", "limits: {requestsPerSecond: 5, burst: 0}\n", "limits.burst"},
		{"unknown limit", "limits: {maxRunning: 3}\n", "maxRunning"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(write(t, tc.body))
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
