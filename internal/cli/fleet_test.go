package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// get clusters says whether each cluster is reachable: yes, no, or -
// when the server does not say (one older than the field).
func TestPrintClustersReachable(t *testing.T) {
	yes, no := true, false
	var out bytes.Buffer
	e := &env{stdout: &out}
	err := printClusters(e, []api.Cluster{
		{Name: "onprem", Executor: "local", Nodes: 1, ReadyNodes: 1, GPUs: 4, Pools: []string{"onprem"}, Reachable: &yes},
		{Name: "cloud", Executor: "kubernetes", Nodes: 2, GPUs: 16, Pools: []string{"cloud", "spot"}, Reachable: &no},
		{Name: "old", Executor: "kubernetes", Pools: []string{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"NAME    EXECUTOR    REACHABLE  NODES  READY  GPUS  POOLS",
		"onprem  local       yes        1      1      4     onprem",
		"cloud   kubernetes  no         2      0      16    cloud,spot",
		"old     kubernetes  -          0      0      0     -",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("get clusters:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
}
