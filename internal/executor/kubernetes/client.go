package kubernetes

import (
	"fmt"
	"os"

	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Clientset connects to a cluster: with the kubeconfig file at path when
// one is given; else with the pod's service account when running in a pod
// (KUBERNETES_SERVICE_HOST is set); else with the usual kubeconfig
// ($KUBECONFIG, ~/.kube/config), as kubectl would.
func Clientset(path string) (clientset.Interface, error) {
	var cfg *rest.Config
	var err error
	switch {
	case path != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		cfg, err = rest.InClusterConfig()
	default:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	// gpufleet creates pods in bursts (a scheduling cycle admits many):
	// client-go's default of 5 requests per second would throttle it.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "gpufleet"
	return clientset.NewForConfig(cfg)
}
