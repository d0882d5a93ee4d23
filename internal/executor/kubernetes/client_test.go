package kubernetes

import (
	"os"
	"path/filepath"
	"testing"
)

// A kubeconfig's named context is the one used, and the rate options
// replace the defaults.
func TestRESTConfigContextAndRate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
contexts:
- {name: ca, context: {cluster: a, user: u}}
- {name: cb, context: {cluster: b, user: u}}
current-context: ca
users:
- {name: u, user: {token: t}}
`), 0o600)
	cfg, err := RESTConfig(ClientOptions{Kubeconfig: path})
	if err != nil || cfg.Host != "https://a.example:6443" || cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst {
		t.Errorf("current context: %v %s qps %g burst %d", err, cfg.Host, cfg.QPS, cfg.Burst)
	}
	cfg, err = RESTConfig(ClientOptions{Kubeconfig: path, Context: "cb", QPS: 20, Burst: 40})
	if err != nil || cfg.Host != "https://b.example:6443" || cfg.QPS != 20 || cfg.Burst != 40 {
		t.Errorf("context cb, rate 20/40: %v %s qps %g burst %d", err, cfg.Host, cfg.QPS, cfg.Burst)
	}
	if _, err := RESTConfig(ClientOptions{Kubeconfig: path, Context: "nosuch"}); err == nil {
		t.Error("an unknown context is accepted")
	}
}
