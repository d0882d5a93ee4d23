package kubernetes

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ClientOptions say how to reach a cluster and how fast to talk to it.
type ClientOptions struct {
	// Kubeconfig is the kubeconfig file; empty: the pod's service account
	// when running in a pod (KUBERNETES_SERVICE_HOST is set), else the
	// usual kubeconfig ($KUBECONFIG, ~/.kube/config), as kubectl would.
	Kubeconfig string
	// Context names the kubeconfig's context to use; empty: its current.
	Context string
	// QPS and Burst bound the client's request rate (client-go's token
	// bucket); zero: DefaultQPS and DefaultBurst.
	QPS   float32
	Burst int
}

// The client's rate by default: gpufleet creates pods in bursts (a
// scheduling cycle admits many), and client-go's own default of 5 requests
// per second would throttle a dedicated controller.
const (
	DefaultQPS   = 100
	DefaultBurst = 200
)

// RESTConfig is the client configuration ClientOptions describe.
func RESTConfig(o ClientOptions) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case o.Kubeconfig != "" || o.Context != "":
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if o.Kubeconfig != "" {
			rules.ExplicitPath = o.Kubeconfig
		}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		cfg, err = rest.InClusterConfig()
	default:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	if o.QPS > 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst > 0 {
		cfg.Burst = o.Burst
	}
	cfg.UserAgent = "gpufleet"
	return cfg, nil
}

// Clientset connects to the cluster at the kubeconfig file path (see
// ClientOptions.Kubeconfig), at the default rate.
func Clientset(path string) (clientset.Interface, error) {
	return NewClientset(ClientOptions{Kubeconfig: path})
}

// NewClientset connects to the cluster o describes.
func NewClientset(o ClientOptions) (clientset.Interface, error) {
	cfg, err := RESTConfig(o)
	if err != nil {
		return nil, err
	}
	// Built-in types in protobuf, as kube-scheduler and Kubernetes' own
	// controllers talk (cheaper to encode and decode than JSON, for the API
	// server as for gpufleet). The dynamic client (custom resources, which
	// have no protobuf) sets JSON for itself.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return clientset.NewForConfig(cfg)
}
