package kubernetes

// End-to-end tests: the real gpufleet binary, run as a process with
// --executor kubernetes against a real API server with KWOK GPU nodes
// (hack/k8s-testenv.sh up). They are skipped unless GPUFLEET_K8S_KUBECONFIG
// names the cluster's kubeconfig; then they run and may fail.
//
// Each test makes its own KWOK nodes (unique names, a pool label of its
// own) and runs its own server, which sees only those nodes
// (kubernetes.nodeSelector) and puts its pods in namespaces of its own
// (kubernetes.namespaceTemplate), so that the tests do not depend on what
// else the cluster holds. Nodes and namespaces are deleted at the end.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// EnvKubeconfig names the test cluster's kubeconfig; unset skips the
// integration and end-to-end tests.
const EnvKubeconfig = "GPUFLEET_K8S_KUBECONFIG"

const e2eImage = "registry.invalid/gpufleet-e2e:1" // KWOK pulls nothing

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// gpufleetBinary builds cmd/gpufleet once per test binary, unless
// GPUFLEET_E2E_BIN names one already built (to compare two builds).
func gpufleetBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("GPUFLEET_E2E_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "gpufleet-e2e-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "gpufleet")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/gpufleet/gpufleet/cmd/gpufleet")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build cmd/gpufleet: %v\n%s", err, out.String())
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// e2e is one test's world: its nodes, its pool, its server's data dir.
type e2e struct {
	t          testing.TB
	client     clientset.Interface
	kubeconfig string
	id         string // "e2e-1a2b3c", in node, pool and namespace names
	nodes      []string
	data       string
	srv        *server
	// adminKubeconfig is the cluster's, which client uses; kubeconfig,
	// the server's, may be a service account's.
	adminKubeconfig string
}

// newE2E skips the test without a cluster; with one, it makes nodes KWOK
// GPU nodes of gpus devices each, waits until they are Ready, and makes
// sure the PriorityClasses of deploy/kubernetes exist.
func newE2E(t testing.TB, nodes, gpus int) *e2e {
	t.Helper()
	path := os.Getenv(EnvKubeconfig)
	if path == "" {
		t.Skip(EnvKubeconfig + " is not set (hack/k8s-testenv.sh up; export " + EnvKubeconfig + "=.k8senv/kubeconfig)")
	}
	if !filepath.IsAbs(path) {
		// go test runs in the package directory: a relative path is
		// taken from the repository root, as the README writes it.
		if abs, err := filepath.Abs(filepath.Join(repoRoot(t), path)); err == nil {
			if _, err := os.Stat(abs); err == nil {
				path = abs
			}
		}
	}
	client, err := Clientset(path)
	if err != nil {
		t.Fatal(err)
	}
	var b [3]byte
	rand.Read(b[:])
	x := &e2e{t: t, client: client, kubeconfig: path, adminKubeconfig: path, id: "e2e-" + hex.EncodeToString(b[:]), data: t.TempDir()}
	ctx := t.Context()
	applyPriorityClasses(t, client)
	t.Cleanup(x.cleanup)
	for i := range nodes {
		name := fmt.Sprintf("%s-n%d", x.id, i)
		x.nodes = append(x.nodes, name)
		if _, err := client.CoreV1().Nodes().Create(ctx, kwokNode(name, x.id, gpus), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
	}
	// A new node carries the not-ready taint (NoSchedule) until
	// kube-controller-manager lifts it, some seconds after the node is
	// Ready (a minute for 300 nodes here): gpufleet takes it for
	// unschedulable until then, as kube-scheduler does.
	x.waitFor(5*time.Minute, "nodes Ready, without taints", func() (bool, string) {
		l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: DefaultPoolLabel + "=" + x.id})
		if err != nil {
			return false, err.Error()
		}
		waiting := 0
		for _, n := range l.Items {
			if !nodeReady(&n) || blockingTaint(&n) != nil {
				waiting++
			}
		}
		return len(l.Items) == len(x.nodes) && waiting == 0, fmt.Sprintf("%d of %d nodes, %d not Ready or tainted", len(l.Items), len(x.nodes), waiting)
	})
	return x
}

func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// kwokNode is a node that KWOK plays (annotation kwok.x-k8s.io/node=fake)
// with the labels GPU feature discovery sets and gpus nvidia.com/gpu.
func kwokNode(name, pool string, gpus int) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(16*gpus), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(strconv.Itoa(128*gpus) + "Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
		ResourceGPU:           *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok",
				DefaultPoolLabel: pool, "gpufleet.io/testenv": "true",
				"nvidia.com/gpu.present": "true", LabelGPUProduct: "NVIDIA-H100-80GB-HBM3",
				LabelGPUMemory: "81559", LabelGPUCount: strconv.Itoa(gpus),
			},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}
}

const kwokAnnotation = "kwok.x-k8s.io/node"

var pcOnce sync.Once

// applyPriorityClasses creates the PriorityClasses of
// deploy/kubernetes/priorityclasses.yaml that do not exist yet.
func applyPriorityClasses(t testing.TB, client clientset.Interface) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "kubernetes", "priorityclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	pcOnce.Do(func() {
		for _, doc := range strings.Split(string(b), "\n---") {
			var pc schedulingv1.PriorityClass
			if err := yaml.UnmarshalStrict([]byte(doc), &pc); err != nil {
				errs = append(errs, err)
				continue
			}
			if pc.Name == "" {
				continue
			}
			if _, err := client.SchedulingV1().PriorityClasses().Create(context.Background(), &pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, err)
			}
		}
	})
	for _, err := range errs {
		t.Fatalf("priority classes: %v", err)
	}
}

// cleanup stops the server and deletes the test's pods, namespaces and
// nodes, each step with its own deadline (2,000 pods take a while).
func (x *e2e) cleanup() {
	if x.srv != nil {
		x.srv.stop(x.t)
	}
	step := func(d time.Duration, what string, f func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		if err := f(ctx); err != nil && !apierrors.IsNotFound(err) {
			x.t.Logf("cleanup: %s: %v", what, err)
		}
	}
	var nss []string
	step(30*time.Second, "list namespaces", func(ctx context.Context) error {
		list, err := x.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, x.nsPrefix()) {
				nss = append(nss, ns.Name)
			}
		}
		return nil
	})
	zero := int64(0)
	for _, ns := range nss {
		// Pods first, at once: their nodes go too, and a pod left on a
		// deleted node holds its namespace in Terminating until pod
		// garbage collection.
		step(3*time.Minute, "delete the pods of "+ns, func(ctx context.Context) error {
			return x.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		})
		step(30*time.Second, "delete namespace "+ns, func(ctx context.Context) error {
			return x.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		})
	}
	step(2*time.Minute, "delete the nodes", func(ctx context.Context) error {
		var errs []error
		for _, n := range x.nodes {
			if err := x.client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

func (x *e2e) nsPrefix() string             { return "gf-" + x.id + "-" }
func (x *e2e) namespace(team string) string { return x.nsPrefix() + team }

// waitFor checks cond until it holds, and fails the test with cond's last
// word after timeout: the server's API and the cluster's are polled.
func (x *e2e) waitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	x.t.Helper()
	testwait.Until(x.t, timeout, what, cond)
}

// server is a gpufleet server process.
type server struct {
	cmd    *exec.Cmd
	addr   string
	client *api.Client
	token  string
	done   chan error
	log    string
}

// writeConfig writes the server's configuration file for the test's data
// dir, namespaces, nodes and kubeconfig, and returns its path.
func (x *e2e) writeConfig() string { return x.writeConfigIn(x.data, nil) }

// writeConfigIn is writeConfig for a server whose data dir is data, with
// extra top-level keys.
func (x *e2e) writeConfigIn(data string, extra map[string]any) string {
	x.t.Helper()
	cfg := map[string]any{
		"addr":     "127.0.0.1:0",
		"data":     data,
		"executor": "kubernetes",
		"kubernetes": map[string]any{
			"kubeconfig":        x.kubeconfig,
			"namespaceTemplate": x.nsPrefix() + "{team}",
			"nodeSelector":      DefaultPoolLabel + "=" + x.id,
			"defaultImage":      e2eImage,
		},
	}
	for k, v := range extra {
		cfg[k] = v
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(data, "config.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		x.t.Fatal(err)
	}
	return path
}

// start runs `gpufleet server --config F` with the test's data dir, its
// namespaces and its nodes, and waits until it serves.
func (x *e2e) start() *server {
	x.t.Helper()
	s := x.startIn(x.data, nil)
	x.srv = s
	return s
}

// startIn runs a server whose data dir is data, with extra configuration,
// and waits until it serves; x.srv is left alone.
func (x *e2e) startIn(data string, extra map[string]any) *server {
	t := x.t
	t.Helper()
	bin := gpufleetBinary(t)
	cfgPath := x.writeConfigIn(data, extra)
	logPath := filepath.Join(data, fmt.Sprintf("server-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "server", "--config", cfgPath)
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), "HOME="+x.data)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1), log: logPath}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "gpufleet: API on http://"); ok {
				addrc <- a
			}
		}
	}()
	go func() {
		s.done <- cmd.Wait()
		logf.Close()
	}()
	t.Cleanup(func() {
		// A server the test left running (or stopped, SIGSTOP) is
		// stopped before what it uses goes (its database, its nodes).
		select {
		case err := <-s.done:
			s.done <- err
		default:
			cmd.Process.Signal(syscall.SIGCONT)
			s.stop(t)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("server log %s (tail):\n%s", logPath, b)
		}
	})
	select {
	case s.addr = <-addrc:
	case err := <-s.done:
		s.done <- err
		b, _ := os.ReadFile(logPath)
		t.Fatalf("gpufleet server exited before serving: %v\n%s", err, b)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("gpufleet server did not serve within 60 s")
	}
	tok, err := os.ReadFile(filepath.Join(data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(tok))
	s.client = api.NewClient(s.addr, s.token)
	return s
}

// stop sends SIGTERM and waits (SIGKILL after 10 s).
func (s *server) stop(t testing.TB) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		t.Errorf("gpufleet server ignored SIGTERM for 10 s")
	}
}

// kill9 kills the server with SIGKILL, as a crash would.
func (s *server) kill9(t testing.TB) {
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
}

// cli runs a gpufleet client command against the server.
func (x *e2e) cli(args ...string) []byte {
	x.t.Helper()
	cmd := exec.Command(gpufleetBinary(x.t), args...)
	cmd.Env = append(os.Environ(), "GPUFLEET_ADDR="+x.srv.addr, "GPUFLEET_TOKEN="+x.srv.token, "HOME="+x.data, "XDG_CONFIG_HOME="+x.data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		x.t.Fatalf("gpufleet %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// cliWorkloads is `gpufleet get workloads -o json`.
func (x *e2e) cliWorkloads() []api.Workload {
	x.t.Helper()
	var l api.List[api.Workload]
	if err := json.Unmarshal(x.cli("get", "workloads", "-o", "json"), &l); err != nil {
		x.t.Fatalf("gpufleet get workloads -o json: %v", err)
	}
	return l.Items
}

// livePods lists the test's pods that hold their node: not ended, not
// being deleted.
func (x *e2e) livePods() []corev1.Pod {
	x.t.Helper()
	list, err := x.client.CoreV1().Pods("").List(x.t.Context(), metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	if err != nil {
		x.t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if !strings.HasPrefix(p.Namespace, x.nsPrefix()) || p.DeletionTimestamp != nil ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out
}

// agree compares what `gpufleet get workloads -o json` says with the pods
// the cluster lists: every Running workload has exactly one Running pod per
// replica, of its current attempt, on the node of its placement, in its
// team's namespace; no other workload has a live pod; no live pod belongs to
// no workload. It returns "" when they agree, else the first difference.
func (x *e2e) agree() string {
	ws := x.cliWorkloads()
	pods := x.livePods()
	byWorkload := map[string][]corev1.Pod{}
	for _, p := range pods {
		byWorkload[p.Labels[LabelWorkload]] = append(byWorkload[p.Labels[LabelWorkload]], p)
	}
	for _, w := range ws {
		label := dnsLabel(w.ID)
		ps := byWorkload[label]
		delete(byWorkload, label)
		if w.Status.Phase != api.PhaseRunning || w.Status.StopRequested != "" {
			if len(ps) > 0 {
				return fmt.Sprintf("workload %s is %s (stop %q) but has %d live pods", w.ID, w.Status.Phase, w.Status.StopRequested, len(ps))
			}
			continue
		}
		want := max(w.Replicas, 1)
		if len(ps) != want {
			return fmt.Sprintf("workload %s is Running with %d replicas but has %d live pods", w.ID, want, len(ps))
		}
		for _, p := range ps {
			r, _ := strconv.Atoi(p.Labels[LabelReplica])
			var node string
			for _, pl := range w.Status.Placement {
				if pl.Replica == r {
					node = pl.Node
				}
			}
			switch {
			case p.Status.Phase != corev1.PodRunning:
				return fmt.Sprintf("workload %s: pod %s/%s is %s", w.ID, p.Namespace, p.Name, p.Status.Phase)
			case p.Spec.NodeName != node:
				return fmt.Sprintf("workload %s replica %d: pod on %q, placement on %q", w.ID, r, p.Spec.NodeName, node)
			case p.Labels[LabelAttempt] != strconv.Itoa(w.Status.Attempts):
				return fmt.Sprintf("workload %s: pod %s of attempt %s, workload at attempt %d", w.ID, p.Name, p.Labels[LabelAttempt], w.Status.Attempts)
			case p.Namespace != x.namespace(w.Team):
				return fmt.Sprintf("workload %s of team %s: pod in namespace %s", w.ID, w.Team, p.Namespace)
			}
		}
	}
	for label, ps := range byWorkload {
		return fmt.Sprintf("%d live pods of workload %q, which gpufleet does not list (%s/%s)", len(ps), label, ps[0].Namespace, ps[0].Name)
	}
	return ""
}

// waitAgree waits until agree holds.
func (x *e2e) waitAgree(timeout time.Duration) {
	x.t.Helper()
	x.waitFor(timeout, "gpufleet and the cluster agree", func() (bool, string) {
		d := x.agree()
		return d == "", d
	})
}

// submit submits w and returns its ID.
func (x *e2e) submit(w api.Workload) string {
	x.t.Helper()
	got, err := x.srv.client.SubmitWorkload(x.t.Context(), &w, "")
	if err != nil {
		x.t.Fatalf("submit %+v: %v", w, err)
	}
	return got.ID
}

// workloads lists every workload by ID, through the API.
func (x *e2e) workloads() map[string]api.Workload {
	x.t.Helper()
	ws, err := x.srv.client.AllWorkloads(x.t.Context(), api.ListOptions{})
	if err != nil {
		x.t.Fatal(err)
	}
	out := map[string]api.Workload{}
	for _, w := range ws {
		out[w.ID] = w
	}
	return out
}

// waitPhase waits until each of ids is in phase.
func (x *e2e) waitPhase(timeout time.Duration, phase string, ids ...string) map[string]api.Workload {
	x.t.Helper()
	var ws map[string]api.Workload
	x.waitFor(timeout, "workloads "+phase, func() (bool, string) {
		ws = x.workloads()
		for _, id := range ids {
			if w := ws[id]; w.Status.Phase != phase {
				return false, fmt.Sprintf("%s is %s (%s: %s)", id, w.Status.Phase, w.Status.Reason, w.Status.Message)
			}
		}
		return true, ""
	})
	return ws
}

func (x *e2e) pod(ns, name string) (*corev1.Pod, error) {
	return x.client.CoreV1().Pods(ns).Get(x.t.Context(), name, metav1.GetOptions{})
}

func sleepCmd() []string { return []string{"sleep", "infinity"} }

// TestE2EKindsAndClasses: a workload of each kind in each priority class,
// of 1, 2 and 0.5 GPUs, and a gang, run as pods on the nodes gpufleet chose,
// with the PriorityClass of their class, the GPUs they asked for and the
// default image; a cancel deletes the pods.
func TestE2EKindsAndClasses(t *testing.T) {
	x := newE2E(t, 3, 8)
	x.start()
	ctx := t.Context()
	// The server sees its own nodes only (kubernetes.nodeSelector), and
	// there are other GPU nodes in the cluster: one made here.
	other := kwokNode(x.id+"-other", x.id+"-other", 8)
	if _, err := x.client.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x.nodes = append(x.nodes, other.Name) // deleted at the end
	nodes, err := x.srv.client.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if want := x.nodes[:3]; !slices.Equal(names, want) {
		t.Errorf("gpufleet's nodes: %v, want %v", names, want)
	}
	// production only runs within a guarantee.
	g := int64(24000)
	if _, err := x.srv.client.SetQuota(ctx, "default", &api.TeamQuota{GuaranteedMilliGPU: &g}); err != nil {
		t.Fatal(err)
	}
	classes := map[string]int32{"production": 1000, "training": 500, "development": 300, "batch": 100}
	sizes := []quantity.Milli{1000, 2000, 500}
	var ids []string
	i := 0
	for _, kind := range []string{api.KindJob, api.KindService, api.KindNotebook} {
		for _, class := range []string{"production", "training", "development", "batch"} {
			ids = append(ids, x.submit(api.Workload{Name: kind + "-" + class, Kind: kind, Priority: class,
				Resources: api.Resources{GPUs: sizes[i%len(sizes)]}, Command: sleepCmd(), GracePeriodSeconds: 1}))
			i++
		}
	}
	// An image and no command, through the CLI: the image's entrypoint.
	image := strings.TrimSpace(string(x.cli("submit", "--image", "ghcr.io/acme/serve:2", "--kind", "service", "--gpus", "1")))
	gang := x.submit(api.Workload{Name: "gang", Priority: "training", Replicas: 2, Resources: api.Resources{GPUs: 1000},
		Command: sleepCmd(), GracePeriodSeconds: 1})
	ids = append(ids, gang, image)
	ws := x.waitPhase(60*time.Second, api.PhaseRunning, ids...)
	x.waitAgree(30 * time.Second)

	ns := x.namespace("default")
	for _, id := range ids {
		w := ws[id]
		for r := range max(w.Replicas, 1) {
			name := PodName(coreID(id), 1, r, max(w.Replicas, 1))
			p, err := x.pod(ns, name)
			if err != nil {
				t.Errorf("%s (%s, %s): pod %s/%s: %v", id, w.Kind, w.Priority, ns, name, err)
				continue
			}
			var node string
			var idx []string
			for _, pl := range w.Status.Placement {
				if pl.Replica == r {
					node = pl.Node
					idx = append(idx, strconv.Itoa(pl.GPUIndex))
				}
			}
			c := p.Spec.Containers[0]
			env := envOf(p)
			if p.Spec.NodeName != node || !strings.HasPrefix(node, x.id+"-") {
				t.Errorf("%s: pod on %q, gpufleet chose %q", id, p.Spec.NodeName, node)
			}
			if p.Spec.PriorityClassName != "gpufleet-"+w.Priority || p.Spec.Priority == nil || *p.Spec.Priority != classes[w.Priority] {
				t.Errorf("%s: priority class %q value %v, want gpufleet-%s %d", id, p.Spec.PriorityClassName, p.Spec.Priority, w.Priority, classes[w.Priority])
			}
			if id == image {
				if c.Image != "ghcr.io/acme/serve:2" || c.Command != nil {
					t.Errorf("%s: image %q command %q, want the image's entrypoint", id, c.Image, c.Command)
				}
			} else if c.Image != e2eImage || !slices.Equal(c.Command, sleepCmd()) {
				t.Errorf("%s: image %q command %q", id, c.Image, c.Command)
			}
			gpus := c.Resources.Limits[ResourceGPU]
			if whole := w.Resources.GPUs / 1000; w.Resources.GPUs >= 1000 {
				if gpus.Value() != int64(whole) {
					t.Errorf("%s: limits nvidia.com/gpu %s, want %d", id, gpus.String(), whole)
				}
			} else if !gpus.IsZero() || env["NVIDIA_VISIBLE_DEVICES"] != strings.Join(idx, ",") || env[EnvGPUFraction] != "0.5" {
				t.Errorf("%s: fraction: limits %s, NVIDIA_VISIBLE_DEVICES %q (want %q), fraction %q", id, gpus.String(),
					env["NVIDIA_VISIBLE_DEVICES"], strings.Join(idx, ","), env[EnvGPUFraction])
			}
			if p.Labels[LabelTeam] != "default" || p.Annotations[AnnotationNode] != node {
				t.Errorf("%s: labels %v annotations %v", id, p.Labels, p.Annotations)
			}
		}
	}

	// A cancel deletes the pods (both of the gang's).
	x.cli("cancel", gang)
	x.waitPhase(30*time.Second, api.PhaseCancelled, gang)
	x.waitAgree(30 * time.Second)
}

// TestE2EReclaim: a team without quota borrows the whole node; the team
// that owns it by guarantee submits; gpufleet reclaims: the borrowed pods
// are deleted and their workloads are Pending again, preempted once.
func TestE2EReclaim(t *testing.T) {
	x := newE2E(t, 1, 8)
	x.start()
	ctx := t.Context()
	for _, tm := range []api.Team{{Name: "owner", GuaranteedMilliGPU: 8000}, {Name: "borrower"}} {
		if _, err := x.srv.client.CreateTeam(ctx, &tm); err != nil {
			t.Fatal(err)
		}
	}
	var borrowed []string
	for range 8 {
		borrowed = append(borrowed, x.submit(api.Workload{Team: "borrower", Priority: "training",
			Resources: api.Resources{GPUs: 1000}, Command: sleepCmd(), GracePeriodSeconds: 1}))
	}
	x.waitPhase(60*time.Second, api.PhaseRunning, borrowed...)
	x.waitAgree(30 * time.Second)

	own := x.submit(api.Workload{Team: "owner", Priority: "training", Resources: api.Resources{GPUs: 4000},
		Command: sleepCmd(), GracePeriodSeconds: 1})
	ws := x.waitPhase(60*time.Second, api.PhaseRunning, own)
	x.waitAgree(30 * time.Second)

	ws = x.workloads()
	var requeued []string
	for _, id := range borrowed {
		w := ws[id]
		switch w.Status.Phase {
		case api.PhaseRunning:
			if w.Status.Preemptions != 0 {
				t.Errorf("%s: Running after %d preemptions", id, w.Status.Preemptions)
			}
		case api.PhasePending:
			requeued = append(requeued, id)
			if w.Status.Preemptions != 1 {
				t.Errorf("%s: Pending with %d preemptions, want 1", id, w.Status.Preemptions)
			}
			// Its pod is gone from the cluster.
			if _, err := x.pod(x.namespace("borrower"), PodName(coreID(id), 1, 0, 1)); !apierrors.IsNotFound(err) {
				x.waitFor(30*time.Second, "pod of "+id+" deleted", func() (bool, string) {
					_, err := x.pod(x.namespace("borrower"), PodName(coreID(id), 1, 0, 1))
					return apierrors.IsNotFound(err), fmt.Sprint(err)
				})
			}
			evs, err := x.srv.client.Events(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(evs, func(e api.Event) bool { return e.Reason == "Reclaimed" }) {
				t.Errorf("%s: no Reclaimed event in %+v", id, evs)
			}
		default:
			t.Errorf("%s: %s (%s)", id, w.Status.Phase, w.Status.Reason)
		}
	}
	if len(requeued) != 4 {
		t.Errorf("%d borrowed workloads requeued, want 4 (the owner asked for 4 of the 8 GPUs)", len(requeued))
	}
	if p := ws[own].Status.Placement; len(p) != 4 || p[0].Node != x.nodes[0] {
		t.Errorf("owner's placement: %+v", p)
	}
}

// TestE2ENodeNotReady: a node made NotReady turns its workloads Lost and
// then Pending (their pods deleted); once it is Ready again they run again,
// a second attempt each, one pod each.
func TestE2ENodeNotReady(t *testing.T) {
	x := newE2E(t, 1, 8)
	x.start()
	ctx := t.Context()
	var ids []string
	for range 2 {
		ids = append(ids, x.submit(api.Workload{Priority: "training", Resources: api.Resources{GPUs: 2000},
			Command: sleepCmd(), GracePeriodSeconds: 1}))
	}
	x.waitPhase(60*time.Second, api.PhaseRunning, ids...)
	x.waitAgree(30 * time.Second)

	node := x.nodes[0]
	setNodeReady(t, x.client, node, false)
	x.waitPhase(30*time.Second, api.PhasePending, ids...)
	for _, id := range ids {
		// Running → Lost → Pending, in the workload's events (its
		// status reason is the scheduler's word by now: Unschedulable).
		evs, err := x.srv.client.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		lost := slices.IndexFunc(evs, func(e api.Event) bool { return e.To == api.PhaseLost })
		if lost < 0 || !strings.Contains(evs[lost].Message, node) ||
			!slices.ContainsFunc(evs[lost:], func(e api.Event) bool { return e.To == api.PhasePending }) {
			t.Errorf("%s: want a Lost event naming %s, then Pending; events: %+v", id, node, evs)
		}
	}
	x.waitAgree(30 * time.Second) // no pod left
	nodes, err := x.srv.client.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name == node && n.Schedulable {
			t.Errorf("node %s is NotReady but schedulable in gpufleet", node)
		}
	}
	// They stay Pending while the node is NotReady.
	time.Sleep(2 * time.Second) // a window in which nothing may start them
	for _, id := range ids {
		if w := x.workloads()[id]; w.Status.Phase != api.PhasePending {
			t.Errorf("%s: %s on a NotReady node", id, w.Status.Phase)
		}
	}

	setNodeReady(t, x.client, node, true)
	ws := x.waitPhase(60*time.Second, api.PhaseRunning, ids...)
	for _, id := range ids {
		if ws[id].Status.Attempts != 2 {
			t.Errorf("%s: attempt %d, want 2", id, ws[id].Status.Attempts)
		}
	}
	x.waitAgree(30 * time.Second)
}

// setNodeReady makes a KWOK node NotReady or Ready again. KWOK rewrites the
// conditions of the nodes it manages within seconds, so a patch alone does
// not last: first take the node from KWOK (remove its annotation), then set
// Ready=False; to make it Ready, give it back to KWOK, which sets Ready=True.
func setNodeReady(t *testing.T, client clientset.Interface, node string, ready bool) {
	t.Helper()
	ctx := t.Context()
	if ready {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"fake"}}}`, kwokAnnotation)
		if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, kwokAnnotation)
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"E2ENotReady","message":"made NotReady by a test","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, now, now)
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestE2ERestartAfterKill9: gpufleet killed with SIGKILL, while pods are
// being created, and started again leaves exactly one pod per running
// workload; the first workloads are adopted (still their first attempt);
// an orphan pod (gpufleet's labels, no workload) is deleted and the deletion
// is in the audit trail.
func TestE2ERestartAfterKill9(t *testing.T) {
	x := newE2E(t, 2, 8)
	s := x.start()
	ctx := t.Context()
	var first []string
	for range 6 {
		first = append(first, x.submit(api.Workload{Priority: "training", Resources: api.Resources{GPUs: 1000},
			Command: sleepCmd(), GracePeriodSeconds: 1}))
	}
	x.waitPhase(60*time.Second, api.PhaseRunning, first...)
	x.waitAgree(30 * time.Second)

	// An orphan: a pod with gpufleet's labels that no workload owns.
	ns := x.namespace("default")
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "wl-orphan-1", Namespace: ns, Labels: map[string]string{
			LabelManaged: "true", LabelWorkload: "wl-orphan", LabelAttempt: "1", LabelReplica: "0", LabelTeam: "default"}},
		Spec: corev1.PodSpec{NodeName: x.nodes[1], RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: containerName, Image: e2eImage, Command: sleepCmd()}}},
	}
	if _, err := x.client.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x.waitFor(30*time.Second, "orphan Running", func() (bool, string) {
		p, err := x.pod(ns, orphan.Name)
		return err == nil && p.Status.Phase == corev1.PodRunning, fmt.Sprint(err)
	})

	// A second batch, and SIGKILL as soon as the first of it runs: some
	// of its pods are made, some not.
	var second []string
	for range 6 {
		second = append(second, x.submit(api.Workload{Priority: "training", Resources: api.Resources{GPUs: 1000},
			Command: sleepCmd(), GracePeriodSeconds: 1}))
	}
	x.waitFor(30*time.Second, "one of the second batch Running", func() (bool, string) {
		ws := x.workloads()
		return slices.ContainsFunc(second, func(id string) bool { return ws[id].Status.Phase == api.PhaseRunning }), ""
	})
	s.kill9(t)
	x.start()

	ws := x.waitPhase(60*time.Second, api.PhaseRunning, append(slices.Clone(first), second...)...)
	for _, id := range first {
		if ws[id].Status.Attempts != 1 {
			t.Errorf("%s: attempt %d after the restart, want 1 (adopted)", id, ws[id].Status.Attempts)
		}
	}
	x.waitAgree(30 * time.Second) // the orphan is gone too
	if _, err := x.pod(ns, orphan.Name); err == nil {
		x.waitFor(30*time.Second, "orphan deleted", func() (bool, string) {
			_, err := x.pod(ns, orphan.Name)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	entries, err := x.srv.client.Audit(ctx, api.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(entries, func(e api.AuditEntry) bool { return e.Action == "delete orphan pod" })
	if i < 0 {
		t.Fatalf("no 'delete orphan pod' audit entry among %d", len(entries))
	}
	if e := entries[i]; e.Object != ns+"/"+orphan.Name || e.Status != 200 || e.User != "gpufleet" || e.Team != "default" {
		t.Errorf("audit entry: %+v", e)
	}
	if n := slices.IndexFunc(entries[i+1:], func(e api.AuditEntry) bool { return e.Action == "delete orphan pod" }); n >= 0 {
		t.Errorf("more than one orphan deleted: %+v", entries[i+1+n])
	}
}

func coreID(id string) core.WorkloadID { return core.WorkloadID(id) }
