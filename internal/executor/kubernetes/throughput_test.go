package kubernetes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpufleet/gpufleet/api"
)

// BenchmarkThroughput binds the same pods on the same KWOK cluster twice,
// side by side: by a kube-scheduler of its own (started here from the test
// environment's binaries, with a scheduler name of its own) and by a
// gpufleet server, both clients held to the same limits
// (GPUFLEET_K8S_BENCH_QPS, default 50, and GPUFLEET_K8S_BENCH_BURST, 100:
// kube-scheduler's defaults). Pods: GPUFLEET_K8S_BENCH_PODS (2,000) of one
// GPU on GPUFLEET_K8S_BENCH_NODES (300) nodes of 8 GPUs. For
// kube-scheduler the pods are created by 32 unthrottled clients, as users
// would; for gpufleet, 32 clients submit the workloads through its API. It
// reports both rates (pods Running per second, from the first create or
// submit to the last pod Running), their ratio and each first pod's time to
// Running.
//
//	GPUFLEET_K8S_KUBECONFIG=.k8senv/kubeconfig go test ./internal/executor/kubernetes -run '^$' -bench Throughput -benchtime 1x
func BenchmarkThroughput(b *testing.B) {
	path := os.Getenv(EnvKubeconfig)
	if path == "" {
		b.Skip(EnvKubeconfig + " is not set")
	}
	bin := kubeSchedulerBinary()
	if bin == "" {
		b.Skip("no kube-scheduler binary (GPUFLEET_K8S_BIN, or hack/k8s-testenv.sh build)")
	}
	nodes, pods := envIntB(b, "GPUFLEET_K8S_BENCH_NODES", 300), envIntB(b, "GPUFLEET_K8S_BENCH_PODS", 2000)
	qps, burst := envIntB(b, "GPUFLEET_K8S_BENCH_QPS", 50), envIntB(b, "GPUFLEET_K8S_BENCH_BURST", 100)
	for range b.N {
		b.StopTimer()
		kube, gf := throughputOnce(b, path, bin, nodes, pods, qps, burst)
		b.ReportMetric(kube.rate, "kube-scheduler-pods/s")
		b.ReportMetric(gf.rate, "gpufleet-pods/s")
		b.ReportMetric(gf.rate/kube.rate, "ratio")
		b.ReportMetric(kube.first.Seconds()*1000, "kube-scheduler-first-ms")
		b.ReportMetric(gf.first.Seconds()*1000, "gpufleet-first-ms")
		b.Logf("%d pods on %d × 8 GPUs, client qps %d burst %d: kube-scheduler %.1f pods/s (first Running %s), gpufleet %.1f pods/s (first Running %s), ratio %.2f",
			pods, nodes, qps, burst, kube.rate, kube.first.Round(time.Millisecond), gf.rate, gf.first.Round(time.Millisecond), gf.rate/kube.rate)
	}
}

type binding struct {
	rate  float64       // pods Running per second
	first time.Duration // to the first pod Running
}

func throughputOnce(b *testing.B, kubeconfig, bin string, nodes, pods, qps, burst int) (kube, gf binding) {
	x := newE2E(b, nodes, 8)
	// kube-scheduler, with a profile of its own name.
	name := "bench-" + x.id
	dir := b.TempDir()
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: %d, burst: %d}
leaderElection: {leaderElect: false}
profiles:
  - schedulerName: %s
`, kubeconfig, qps, burst, name)
	if err := os.WriteFile(filepath.Join(dir, "sched.yaml"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	sched := exec.Command(bin, "--config", filepath.Join(dir, "sched.yaml"), "--secure-port=0", "--v=0")
	logf, _ := os.Create(filepath.Join(dir, "sched.log"))
	sched.Stdout, sched.Stderr = logf, logf
	if err := sched.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { sched.Process.Kill(); sched.Wait(); logf.Close() }()

	ns := x.namespace("kubesched")
	if _, err := x.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{LabelManaged: "true"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Users' clients: not the scheduler's, and not throttled.
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst = 5000, 10000
	users, err := clientset.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	kube = measure(b, x, ns, pods, func(i int) error {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ks-%d", i), Namespace: ns, Labels: map[string]string{LabelManaged: "true"}},
			Spec: corev1.PodSpec{SchedulerName: name, RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: map[string]string{DefaultPoolLabel: x.id},
				Containers: []corev1.Container{{Name: containerName, Image: e2eImage, Command: sleepCmd(),
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(1, resource.DecimalSI)}}}}},
		}
		_, err := users.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		return err
	})
	// Free the GPUs for gpufleet.
	if err := users.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		b.Fatal(err)
	}
	x.waitFor(5*time.Minute, "kube-scheduler's pods gone", func() (bool, string) {
		l, err := x.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, fmt.Sprintf("%v", err)
	})
	sched.Process.Kill()

	s := x.startIn(x.data, map[string]any{"kubernetes": map[string]any{
		"kubeconfig": x.kubeconfig, "namespaceTemplate": x.nsPrefix() + "{team}", "nodeSelector": DefaultPoolLabel + "=" + x.id,
		"defaultImage": e2eImage, "qps": qps, "burst": burst}})
	x.srv = s
	gf = measure(b, x, x.namespace("default"), pods, func(i int) error {
		_, err := s.client.SubmitWorkload(context.Background(), &api.Workload{Priority: "training", Resources: api.Resources{GPUs: 1000}, Command: sleepCmd(), GracePeriodSeconds: 1}, "")
		return err
	})
	s.stop(x.t)
	return kube, gf
}

// measure runs create(i) for pods indices from 32 goroutines and waits
// until pods pods of ns are Running, as a watch of the namespace sees them
// (a watch, not a list every few milliseconds, which would load the API
// server the two compete for).
func measure(b *testing.B, x *e2e, ns string, pods int, create func(i int) error) binding {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	list, err := x.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rv := list.ResourceVersion
	watchFrom := func() watch.Interface {
		for ctx.Err() == nil {
			w, err := x.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err == nil {
				return w
			}
			time.Sleep(50 * time.Millisecond) // before the watch is tried again
		}
		b.Fatal("no watch")
		return nil
	}
	w := watchFrom()
	defer func() { w.Stop() }()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= pods {
					return
				}
				if err := create(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	running := map[string]bool{}
	var first time.Duration
	for len(running) < pods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				w = watchFrom() // the API server ends watches now and then
				continue
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if isPod {
				rv = p.ResourceVersion
			}
			if isPod && p.Status.Phase == corev1.PodRunning {
				if first == 0 {
					first = time.Since(start)
				}
				running[p.Name] = true
			}
		case <-ctx.Done():
			b.Fatalf("%d of %d pods Running in 10 minutes", len(running), pods)
		}
	}
	all := time.Since(start)
	wg.Wait()
	return binding{rate: float64(pods) / all.Seconds(), first: first}
}

// kubeSchedulerBinary finds the test environment's kube-scheduler.
func kubeSchedulerBinary() string {
	if d := os.Getenv("GPUFLEET_K8S_BIN"); d != "" {
		return filepath.Join(d, "kube-scheduler")
	}
	cache := os.Getenv("GPUFLEET_K8S_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "gpufleet-k8s")
	}
	m, _ := filepath.Glob(filepath.Join(cache, "*", "bin", "kube-scheduler"))
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

func envIntB(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	return def
}
