package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The shape of a multi-cluster configuration loads, validates, and
// places nodes in pools by cluster and label; without clusters, the
// single-cluster flags make one cluster and one pool.
func TestClustersAndPools(t *testing.T) {
	c, err := Load(write(t, `clusters:
  - {name: onprem, executor: local, fakeGPUs: 4xH100-80GB}
  - {name: cloud, executor: kubernetes, kubeconfig: /etc/gpufleet/cloud.kubeconfig}
pools:
  - {name: onprem, cluster: onprem, region: eu-west, kind: owned}
  - {name: cloud-a100, cluster: cloud, region: us-east, kind: burst, nodeSelector: "gpu=a100", price: {onDemand: 4}}
  - {name: cloud, cluster: cloud, region: us-east, zone: us-east-1a, kind: on-demand, price: {onDemand: 3}}
burst: {after: 90s, idleRelease: 10m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := len(c.Clusters()); got != 2 {
		t.Errorf("clusters: %d", got)
	}
	if c.Burst.After.Duration != 90*time.Second || c.Burst.IdleRelease.Duration != 10*time.Minute || len(c.Burst.Classes) != 2 {
		t.Errorf("burst: %+v (the classes keep their default)", c.Burst)
	}
	for _, tc := range []struct {
		cluster string
		labels  map[string]string
		want    string
	}{
		{"onprem", nil, "onprem"},
		{"cloud", map[string]string{"gpu": "a100"}, "cloud-a100"},
		{"cloud", map[string]string{"gpu": "h100"}, "cloud"},
		{"elsewhere", nil, ""},
	} {
		p, ok := c.PoolOf(tc.cluster, tc.labels)
		if p.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("PoolOf(%s, %v) = %q %v, want %q", tc.cluster, tc.labels, p.Name, ok, tc.want)
		}
	}
	single := Default()
	single.FakeGPUs = "2xA10-24GB"
	if diff := cmp.Diff([]Cluster{{Name: "local", Executor: "local", FakeGPUs: "2xA10-24GB"}}, single.Clusters()); diff != "" {
		t.Errorf("single-cluster clusters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Pool{{Name: DefaultPool, Cluster: "local", Kind: "owned"}}, single.Pools()); diff != "" {
		t.Errorf("single-cluster pools (-want +got):\n%s", diff)
	}
}
