package kubernetes

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// BenchmarkThroughput binds the same pods on the same KWOK nodes twice, one
// scheduler after the other: by a kube-scheduler of its own (started here
// from the test environment's binaries, with a scheduler name of its own)
// and by a gpufleet server, both clients held to the same limits
// (GPUFLEET_K8S_BENCH_QPS, default 50, and GPUFLEET_K8S_BENCH_BURST, 100:
// kube-scheduler's defaults). Pods: GPUFLEET_K8S_BENCH_PODS (2,000) of one
// GPU on GPUFLEET_K8S_BENCH_NODES (300) nodes of 8 GPUs, made once for all
// iterations. For kube-scheduler the pods are created by 32 users' clients;
// for gpufleet, 32 clients submit the workloads through its API. They send
// as fast as they are answered, which measures the rate (a pod's startup
// latency is then mostly its wait in the queue), or, with
// GPUFLEET_K8S_BENCH_RATE, that many pods a second together, which, below
// both schedulers' rates, measures what a pod's start takes.
//
// gpufleet's store is on tmpfs, as the test environment's etcd does not
// sync either (GPUFLEET_K8S_BENCH_STORE=disk puts it on the disk; see
// race.gpufleet).
//
// Each scheduler is measured as it runs by itself: started before the
// clock starts and ready (its informers synced), the other one stopped and
// its pods gone. Iteration i puts kube-scheduler first when i is even and
// gpufleet first when it is odd (-benchtime 2x runs both orders), unless
// GPUFLEET_K8S_BENCH_FIRST names the one to run first ("kube-scheduler" or
// "gpufleet") every time.
//
// It reports, for each, pods Running per second (from the first create or
// submit to the last pod Running, as a watch sees them), pod startup
// latency p50 and p99, and the CPU its process used per pod; and
// gpufleet's rate over kube-scheduler's. Metrics are means over the
// iterations; each iteration is logged.
//
// A pod's startup latency runs from when it was due (the offered load's
// schedule: the clock's start for a flood, start + i/rate for the i-th pod
// at GPUFLEET_K8S_BENCH_RATE) to Running seen (-p50-ms, -p99-ms). The 32
// senders wait for each answer, so a scheduler whose creates or submits
// are answered slowly sends its later pods late, and a latency counted
// from the send would leave out that wait (coordinated omission: the load
// slows down with the system it measures). The latency from the send is
// reported beside it (-sent-p50-ms, -sent-p99-ms).
//
//	GPUFLEET_K8S_KUBECONFIG=.k8senv/kubeconfig go test ./internal/executor/kubernetes -run '^$' -bench Throughput -benchtime 2x
func BenchmarkThroughput(b *testing.B) {
	path := os.Getenv(EnvKubeconfig)
	if path == "" {
		b.Skip(EnvKubeconfig + " is not set")
	}
	bin := kubeSchedulerBinary()
	if bin == "" {
		b.Skip("no kube-scheduler binary (GPUFLEET_K8S_BIN, or hack/k8s-testenv.sh build)")
	}
	r := &race{b: b, kubeconfig: path, bin: bin,
		pods: envIntB(b, "GPUFLEET_K8S_BENCH_PODS", 2000), rate: envIntB(b, "GPUFLEET_K8S_BENCH_RATE", 0),
		qps: envIntB(b, "GPUFLEET_K8S_BENCH_QPS", 50), burst: envIntB(b, "GPUFLEET_K8S_BENCH_BURST", 100)}
	nodes := envIntB(b, "GPUFLEET_K8S_BENCH_NODES", 300)
	first := os.Getenv("GPUFLEET_K8S_BENCH_FIRST")
	if first != "" && first != "kube-scheduler" && first != "gpufleet" {
		b.Fatalf("GPUFLEET_K8S_BENCH_FIRST=%q: want kube-scheduler or gpufleet", first)
	}
	r.setUp(nodes)
	var kubes, gfs []sideResult
	for i := 0; b.Loop(); i++ {
		kubeFirst := first == "kube-scheduler" || (first == "" && i%2 == 0)
		var kube, gf sideResult
		if kubeFirst {
			kube, gf = r.kubeScheduler(), r.gpufleet()
		} else {
			gf, kube = r.gpufleet(), r.kubeScheduler()
		}
		order := "kube-scheduler first"
		if !kubeFirst {
			order = "gpufleet first"
		}
		b.Logf("%s; %d pods on %d × 8 GPUs, client qps %d burst %d: kube-scheduler %s; gpufleet %s; ratio %.2f",
			order, r.pods, nodes, r.qps, r.burst, kube, gf, gf.rate/kube.rate)
		kubes, gfs = append(kubes, kube), append(gfs, gf)
	}
	report := func(prefix string, rs []sideResult) {
		b.ReportMetric(meanOf(rs, func(s sideResult) float64 { return s.rate }), prefix+"-pods/s")
		b.ReportMetric(meanOf(rs, func(s sideResult) float64 { return ms(s.p50) }), prefix+"-p50-ms")
		b.ReportMetric(meanOf(rs, func(s sideResult) float64 { return ms(s.p99) }), prefix+"-p99-ms")
		b.ReportMetric(meanOf(rs, func(s sideResult) float64 { return ms(s.sentP50) }), prefix+"-sent-p50-ms")
		b.ReportMetric(meanOf(rs, func(s sideResult) float64 { return ms(s.sentP99) }), prefix+"-sent-p99-ms")
		b.ReportMetric(meanOf(rs, func(s sideResult) float64 { return ms(s.cpu) / float64(r.pods) }), prefix+"-cpu-ms/pod")
		b.ReportMetric(meanOf(rs, func(s sideResult) float64 { return ms(s.clusterCPU) / float64(r.pods) }), prefix+"-cluster-cpu-ms/pod")
	}
	report("kube-scheduler", kubes)
	report("gpufleet", gfs)
	ratios := make([]float64, len(kubes))
	for i := range kubes {
		ratios[i] = gfs[i].rate / kubes[i].rate
	}
	b.ReportMetric(meanOf(ratios, func(f float64) float64 { return f }), "ratio")
}

// race is BenchmarkThroughput's world: the nodes, the kube-scheduler's
// namespace and the users' client.
type race struct {
	b                  *testing.B
	x                  *e2e
	kubeconfig, bin    string
	pods, qps, burst   int
	rate               int // pods sent a second; 0: as fast as answered
	users              clientset.Interface
	kubeNS, gpufleetNS string
}

// sideResult is one scheduler's run.
type sideResult struct {
	rate     float64       // pods Running per second
	first    time.Duration // to the first pod Running
	p50, p99 time.Duration // pod startup latency: due (the offered schedule) → Running seen
	// sentP50, sentP99: create or submit sent → Running seen.
	sentP50, sentP99 time.Duration
	cpu              time.Duration // CPU the scheduler's process used while measured
	// clusterCPU is the CPU the cluster's own processes (clusterProcs)
	// used while measured.
	clusterCPU time.Duration
	pods       int
}

func (s sideResult) String() string {
	return fmt.Sprintf("%.1f pods/s, startup p50 %s p99 %s (from the send: p50 %s p99 %s), first Running %s, %.2f ms CPU/pod, the cluster %.2f ms CPU/pod", s.rate,
		s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond), s.sentP50.Round(time.Millisecond), s.sentP99.Round(time.Millisecond),
		s.first.Round(time.Millisecond), ms(s.cpu)/float64(max(1, s.pods)), ms(s.clusterCPU)/float64(max(1, s.pods)))
}

func (r *race) setUp(nodes int) {
	b := r.b
	// newE2E waits until no node carries the not-ready taint, which
	// kube-controller-manager lifts a minute after 300 nodes are Ready: a
	// race started before that has kube-scheduler fail its pods and retry
	// them from its backoff queue (the old harness's 39 pods/s at any
	// client limit, at 5x the CPU per pod).
	r.x = newE2E(b, nodes, 8)
	r.kubeNS, r.gpufleetNS = r.x.namespace("kubesched"), r.x.namespace("default")
	if _, err := r.x.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.kubeNS, Labels: map[string]string{LabelManaged: "true"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	// Users' clients: not the scheduler's, and not throttled.
	rc, err := clientcmd.BuildConfigFromFlags("", r.x.kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst = 5000, 10000
	if r.users, err = clientset.NewForConfig(rc); err != nil {
		b.Fatal(err)
	}
}

// kubeScheduler starts a kube-scheduler with a profile of its own name,
// waits until it is ready (its /readyz: informers synced), has the users
// create the pods, and stops it once they run; then deletes the pods.
func (r *race) kubeScheduler() sideResult {
	b, x := r.b, r.x
	name := "bench-" + x.id
	dir := b.TempDir()
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: %q, qps: %d, burst: %d}
leaderElection: {leaderElect: false}
profiles:
  - schedulerName: %s
`, r.kubeconfig, r.qps, r.burst, name)
	if err := os.WriteFile(filepath.Join(dir, "sched.yaml"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	port := freePort(b)
	sched := exec.Command(r.bin, "--config", filepath.Join(dir, "sched.yaml"), "--v=0",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez")
	logf, err := os.Create(filepath.Join(dir, "sched.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	sched.Stdout, sched.Stderr = logf, logf
	if err := sched.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { sched.Process.Kill(); sched.Wait() }()
	waitReady(b, port)
	create := func(i int) (string, error) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ks-%d", i), Namespace: r.kubeNS, Labels: map[string]string{LabelManaged: "true"}},
			Spec: corev1.PodSpec{SchedulerName: name, RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: map[string]string{DefaultPoolLabel: x.id},
				Containers: []corev1.Container{{Name: containerName, Image: e2eImage, Command: sleepCmd(),
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(1, resource.DecimalSI)}}}}},
		}
		_, err := r.users.CoreV1().Pods(r.kubeNS).Create(context.Background(), p, metav1.CreateOptions{})
		return p.Name, err
	}
	res := r.measure(r.kubeNS, func(p *corev1.Pod) string { return p.Name }, sched.Process.Pid, create)
	r.clear(r.kubeNS)
	return res
}

// gpufleet starts a gpufleet server on a data dir of its own, has 32
// clients submit the workloads, and stops it once their pods run; then
// deletes the pods.
//
// The data dir is in /dev/shm (where there is one) unless
// GPUFLEET_K8S_BENCH_STORE=disk: the test environment's etcd runs with
// --unsafe-no-fsync, so kube-scheduler's path syncs nothing, and a store on
// the shared disk would have gpufleet alone wait for fsyncs (two a pod: the
// submit's and the plan's) behind etcd's and KWOK's writes.
func (r *race) gpufleet() sideResult {
	x := r.x
	data := r.b.TempDir()
	if os.Getenv("GPUFLEET_K8S_BENCH_STORE") != "disk" {
		if dir, err := os.MkdirTemp("/dev/shm", "gpufleet-race-"); err == nil {
			data = dir
			defer os.RemoveAll(dir)
		}
	}
	s := x.startIn(data, map[string]any{"kubernetes": map[string]any{
		"kubeconfig": x.kubeconfig, "namespaceTemplate": x.nsPrefix() + "{team}", "nodeSelector": DefaultPoolLabel + "=" + x.id,
		"defaultImage": e2eImage, "qps": r.qps, "burst": r.burst}})
	submit := func(i int) (string, error) {
		w, err := s.client.SubmitWorkload(context.Background(), &api.Workload{Priority: "training", Resources: api.Resources{GPUs: 1000}, Command: sleepCmd(), GracePeriodSeconds: 1}, "")
		if err != nil {
			return "", err
		}
		return dnsLabel(w.ID), nil
	}
	res := r.measure(r.gpufleetNS, func(p *corev1.Pod) string { return p.Labels[LabelWorkload] }, s.cmd.Process.Pid, submit)
	s.stop(x.t)
	r.clear(r.gpufleetNS)
	return res
}

// clear deletes the pods of ns and waits until they are gone, so that the
// next scheduler finds the nodes empty.
func (r *race) clear(ns string) {
	x := r.x
	if err := r.users.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		r.b.Fatal(err)
	}
	x.waitFor(5*time.Minute, "the pods of "+ns+" gone", func() (bool, string) {
		l, err := x.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, fmt.Sprintf("%v", err)
	})
}

// measure has create(i) run for the pods' indices from 32 goroutines and
// waits until the pods of ns are Running, as a watch of the namespace sees
// them (a watch, not a list every few milliseconds, which would load the
// API server the schedulers share). key names a pod as create does: its
// name, or its workload's label; pid is the scheduler's process, whose CPU
// is counted while the pods start.
func (r *race) measure(ns string, key func(*corev1.Pod) string, pid int, create func(i int) (string, error)) sideResult {
	b, x, pods := r.b, r.x, r.pods
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	running := map[string]time.Time{}
	see := func(p *corev1.Pod) {
		if _, seen := running[key(p)]; !seen && p.Status.Phase == corev1.PodRunning {
			running[key(p)] = time.Now()
		}
	}
	w := watchPodsOf(ctx, b, x.client, ns, see)
	defer func() { w.Stop() }()
	var mu sync.Mutex
	sent := make(map[string]time.Time, pods)
	due := make(map[string]time.Time, pods)
	cluster := clusterPIDs()
	cpu0, cluster0, t0 := procCPU(pid), cpuOf(cluster), time.Now()
	// The offered load: the pods' indices, each handed out once it is
	// due (at once in a flood; on the ticks of the rate otherwise, or at
	// once when the senders kept it waiting past its time).
	idx := make(chan int)
	go func() {
		defer close(idx)
		var tick <-chan time.Time
		if r.rate > 0 {
			tk := time.NewTicker(time.Second / time.Duration(r.rate))
			defer tk.Stop()
			tick = tk.C
		}
		for i := range pods {
			for tick != nil && time.Now().Before(dueAt(t0, i, r.rate)) {
				<-tick
			}
			select {
			case idx <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range idx {
				when := dueAt(t0, i, r.rate)
				at := time.Now()
				k, err := create(i)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				sent[k], due[k] = at, when
				mu.Unlock()
			}
		})
	}
	defer wg.Wait()
	rewatched := 0
	for len(running) < pods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				rewatched++
				w = watchPodsOf(ctx, b, x.client, ns, see)
				continue
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				see(p)
			}
		case <-ctx.Done():
			b.Fatalf("%d of %d pods Running in 10 minutes (the watch opened again %d times)", len(running), pods, rewatched)
		}
	}
	res := sideResult{rate: float64(pods) / time.Since(t0).Seconds(), cpu: procCPU(pid) - cpu0, pods: pods}
	for name, d := range cpuOf(cluster) {
		res.clusterCPU += d - cluster0[name]
	}
	wg.Wait()
	for k, at := range running {
		if _, ok := sent[k]; !ok {
			b.Fatalf("pod %s Running, but never created", k)
		}
		if res.first == 0 || at.Sub(t0) < res.first {
			res.first = at.Sub(t0)
		}
	}
	fromDue, fromSent := latencies(due, running), latencies(sent, running)
	res.p50, res.p99 = percentile(fromDue, 50), percentile(fromDue, 99)
	res.sentP50, res.sentP99 = percentile(fromSent, 50), percentile(fromSent, 99)
	return res
}

// dueAt is when the i-th pod of a run started at t0 is due: at once in a
// flood (rate 0), else i/rate after t0.
func dueAt(t0 time.Time, i, rate int) time.Time {
	if rate <= 0 {
		return t0
	}
	return t0.Add(time.Duration(i) * time.Second / time.Duration(rate))
}

// latencies is, in seconds, how long after from[k] each pod k was
// Running.
func latencies(from, running map[string]time.Time) []float64 {
	lat := make([]float64, 0, len(running))
	for k, at := range running {
		lat = append(lat, at.Sub(from[k]).Seconds())
	}
	return lat
}

// watchPodsOf lists the pods of ns, has see look at each, and watches
// them from there: a watch that ends is so opened again without losing
// what happened meanwhile.
func watchPodsOf(ctx context.Context, b *testing.B, c clientset.Interface, ns string, see func(*corev1.Pod)) watch.Interface {
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range list.Items {
		see(&list.Items[i])
	}
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// percentile is accept's nearest-rank percentile p of seconds, as a
// duration.
func percentile(seconds []float64, p float64) time.Duration {
	v, _ := accept.Percentile(seconds, p)
	return time.Duration(v * float64(time.Second))
}

func meanOf[T any](xs []T, f func(T) float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += f(x)
	}
	return sum / float64(max(1, len(xs)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// freePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func freePort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

var insecure = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// waitReady waits until the kube-scheduler serving on port answers /readyz
// (its informers synced and its event handlers run).
func waitReady(b *testing.B, port int) {
	testwait.Until(b, time.Minute, "kube-scheduler's /readyz", func() (bool, string) {
		resp, err := insecure.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// procCPU is the CPU time, user and system, that process pid has used.
func procCPU(pid int) time.Duration {
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(bs)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / 100 // USER_HZ
}

// clusterProcs are the test environment's processes that serve both
// schedulers (hack/k8s-testenv.sh): the API server, etcd, KWOK (every
// node's kubelet) and kube-controller-manager, by their /proc comm.
var clusterProcs = []string{"kube-apiserver", "etcd", "kwok", "kube-controller"}

// clusterPIDs finds the processes of clusterProcs running on this machine,
// by name (the test environment is local; none found: a remote cluster,
// whose CPU is then reported as 0).
func clusterPIDs() map[string]int {
	pids := map[string]int{}
	ds, _ := os.ReadDir("/proc")
	for _, d := range ds {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", d.Name(), "comm"))
		if name := strings.TrimSpace(string(comm)); err == nil && slices.Contains(clusterProcs, name) {
			pids[name+"/"+d.Name()] = pid
		}
	}
	return pids
}

// cpuOf is the CPU each of pids has used.
func cpuOf(pids map[string]int) map[string]time.Duration {
	m := make(map[string]time.Duration, len(pids))
	for name, pid := range pids {
		m[name] = procCPU(pid)
	}
	return m
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

// TestRaceLatencyFromDue: a flood's pods are all due at the start, a paced
// run's i-th pod i/rate after it, and a pod sent late counts its wait
// before the send.
func TestRaceLatencyFromDue(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	if got := dueAt(t0, 1999, 0); !got.Equal(t0) {
		t.Errorf("a flood's pod 1999 due at %v, want %v", got, t0)
	}
	if got, want := dueAt(t0, 80, 40), t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("pod 80 at 40 pods/s due at %v, want %v", got, want)
	}
	due := map[string]time.Time{"a": t0, "b": t0}
	sent := map[string]time.Time{"a": t0, "b": t0.Add(3 * time.Second)}
	running := map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(4 * time.Second)}
	got := map[string][]float64{"due": latencies(due, running), "sent": latencies(sent, running)}
	for k := range got {
		slices.Sort(got[k])
	}
	want := map[string][]float64{"due": {1, 4}, "sent": {1, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
}
