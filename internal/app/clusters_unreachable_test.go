package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// deadKubeconfig writes a kubeconfig whose API server is a port on
// 127.0.0.1 that nothing listens on, and returns its path and the
// server's URL.
func deadKubeconfig(t *testing.T, dir string) (path, server string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server = "https://" + ln.Addr().String()
	ln.Close()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: not-a-secret
contexts:
- name: dead
  context: {cluster: dead, user: u}
current-context: dead
`, server)
	path = filepath.Join(dir, "kubeconfig-dead")
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, server
}

// TestStartExecutorsClusterUnreachable: of two clusters, a Kubernetes one
// whose API server does not answer does not fail the start; the banner
// says it is unreachable, its executor is, and its node the store knew
// from before is written NotReady and unschedulable (the node lifecycle
// makes it Lost from there), while this machine's node is registered. A
// server of that one cluster alone fails, naming its API server.
func TestStartExecutorsClusterUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	st, err := store.OpenWith(ctx, filepath.Join(dir, "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutNode(ctx, core.Node{Name: "k1", Cluster: "cloud", Pool: "cloud", Schedulable: true,
		GPUs: []core.GPU{{Index: 0, UUID: "k1/gpu0", Model: "H100", MemoryMiB: 81920}}, UpdatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, server := deadKubeconfig(t, dir)
	log := slog.New(slog.DiscardHandler)

	cfg := config.Default()
	cfg.DataDir, cfg.NodeName, cfg.Local.Isolation = dir, "here", "off"
	cfg.ClusterList = []config.Cluster{
		{Name: "onprem", Executor: "local", FakeGPUs: "1xH100-80GB"},
		{Name: "cloud", Executor: "kubernetes", Kubeconfig: kubeconfig},
	}
	cfg.PoolList = []config.Pool{
		{Name: "onprem", Cluster: "onprem", Region: "eu-west", Kind: "owned"},
		{Name: "cloud", Cluster: "cloud", Region: "us-east", Kind: "owned"},
	}
	t0 := time.Now()
	xs, err := startExecutors(ctx, cfg, st, log, nil)
	if err != nil {
		t.Fatalf("startExecutors with cluster cloud unreachable: %v", err)
	}
	defer xs.close()
	t.Logf("started in %v: %s", time.Since(t0).Round(time.Millisecond), xs.where)
	if !strings.Contains(xs.where, "cluster cloud: Kubernetes, UNREACHABLE") {
		t.Errorf("banner %q: want cluster cloud said unreachable", xs.where)
	}
	if len(xs.kubes) != 1 || xs.kubes[0].Reachable() {
		t.Errorf("kubernetes executors %d, reachable %v: want one, unreachable", len(xs.kubes), len(xs.kubes) == 1 && xs.kubes[0].Reachable())
	}
	nodes, err := st.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[core.NodeName]core.Node{}
	for _, n := range nodes {
		seen[n.Name] = n
	}
	if k, ok := seen["k1"]; !ok || !k.NotReady || k.Schedulable || k.Cluster != "cloud" || k.Pool != "cloud" {
		t.Errorf("node k1 of the unreachable cluster: %+v, want it kept, in cloud, NotReady and unschedulable", k)
	}
	if h, ok := seen["here"]; !ok || h.Cluster != "onprem" || h.NotReady {
		t.Errorf("this machine's node: %+v, want it in onprem and ready", h)
	}

	one := config.Default()
	one.DataDir, one.NodeName, one.Executor, one.Kubernetes.Kubeconfig = dir, "here", "kubernetes", kubeconfig
	if _, err := startExecutors(ctx, one, st, log, nil); err == nil || !strings.Contains(err.Error(), server) {
		t.Errorf("startExecutors of the unreachable cluster alone: %v, want an error naming %s", err, server)
	} else {
		t.Logf("one cluster alone: %v", err)
	}
}
