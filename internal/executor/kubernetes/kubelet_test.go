package kubernetes

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// fakeKubelet plays the kubelet on a fake clientset, which keeps objects
// but runs nothing: a created pod is Running at once (or Failed with
// StartError when its argv[0] is "no-such-program"), a deleted pod gets
// SIGTERM and is gone, unless its command has "ignore-sigterm": then it is
// Terminating until its grace has passed and ends with SIGKILL (137).
type fakeKubelet struct {
	client *fake.Clientset
	wg     sync.WaitGroup
	// watching receives the resource of every watch opened: the fake's
	// watches replay only the pods that exist (and the deletions in gone),
	// not every change since a resource version, so an executor is ready
	// only once its pod and node watches are open.
	watching chan string
	// gone holds each pod deleted, with the pods' resource version its
	// deletion made, for a pod watch opened from an earlier one to hear
	// of it, as the API server's watch cache replays a deletion made
	// between an informer's list and its watch (without, an executor whose
	// start deleted a pod just after its list never heard it go: 2 runs
	// in 50 under load).
	goneMu sync.Mutex
	gone   []tombstone
}

type tombstone struct {
	pod *corev1.Pod
	rv  int64
}

// watchPods opens a pod watch on the fake's tracker from the action's
// resource version and replays the deletions made since it (gone).
func (k *fakeKubelet) watchPods(a k8stesting.WatchActionImpl) (watch.Interface, error) {
	w, err := k.client.Tracker().Watch(podsGVR, a.GetNamespace(), a.ListOptions)
	if err != nil {
		return nil, err
	}
	from, _ := strconv.ParseInt(a.ListOptions.ResourceVersion, 10, 64)
	k.goneMu.Lock()
	defer k.goneMu.Unlock()
	for _, g := range k.gone {
		if from > 0 && g.rv > from && (a.GetNamespace() == "" || a.GetNamespace() == g.pod.Namespace) {
			w.(*watch.RaceFreeFakeWatcher).Delete(g.pod.DeepCopy())
		}
	}
	return w, nil
}

// deletePod deletes pod p from the tracker, keeping it in gone with a
// resource version of its deletion: the tracker gives none to a deletion,
// so the pod is first written as it is, which gives it the next one.
func (k *fakeKubelet) deletePod(p *corev1.Pod) error {
	tr := k.client.Tracker()
	if err := tr.Update(podsGVR, p, p.Namespace); err != nil {
		return err
	}
	l, err := tr.List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		return err
	}
	rv, _ := strconv.ParseInt(l.(*corev1.PodList).ResourceVersion, 10, 64)
	k.goneMu.Lock()
	k.gone = append(k.gone, tombstone{p.DeepCopy(), rv})
	k.goneMu.Unlock()
	return tr.Delete(podsGVR, p.Namespace, p.Name)
}

// cut makes the API server's version request, the executor's reach
// probe, fail with msg while the switch it returns is on.
func (k *fakeKubelet) cut(msg string) *atomic.Bool {
	var down atomic.Bool
	k.client.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New(msg)
		}
		return false, nil, nil
	})
	return &down
}

func newFakeKubelet(t *testing.T, objects ...runtime.Object) *fakeKubelet {
	k := &fakeKubelet{client: fake.NewClientset(objects...), watching: make(chan string, 64)}
	t.Cleanup(k.wg.Wait)
	k.client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var w watch.Interface
		var err error
		if a.GetResource() == podsGVR {
			w, err = k.watchPods(a.(k8stesting.WatchActionImpl))
		}
		select {
		case k.watching <- a.GetResource().Resource:
		default:
		}
		return w != nil || err != nil, w, err
	})
	k.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if len(p.Spec.Containers) > 0 && len(p.Spec.Containers[0].Command) > 0 && p.Spec.Containers[0].Command[0] == "no-such-program" {
			setTerminated(p, 128, "StartError")
			return false, nil, nil
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		return false, nil, nil // the default reactor stores it
	})
	k.client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		tr := k.client.Tracker()
		obj, err := tr.Get(podsGVR, d.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil
		}
		p := obj.(*corev1.Pod).DeepCopy()
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return true, nil, k.deletePod(p)
		}
		var grace int64
		if g := d.GetDeleteOptions().GracePeriodSeconds; g != nil {
			grace = *g
		}
		ignores := len(p.Spec.Containers) > 0 && slices.Contains(p.Spec.Containers[0].Command, "ignore-sigterm")
		if !ignores || grace == 0 {
			code := int32(143)
			if grace == 0 {
				code = 137
			}
			setTerminated(p, code, "Error")
			return true, nil, k.deletePod(p)
		}
		now := metav1.Now()
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
		tr.Update(podsGVR, p, p.Namespace)
		k.wg.Add(1)
		time.AfterFunc(time.Duration(grace)*time.Second, func() {
			defer k.wg.Done()
			setTerminated(p, 137, "Error")
			k.deletePod(p)
		})
		return true, nil, nil
	})
	return k
}

func setTerminated(p *corev1.Pod, code int32, reason string) {
	p.Status.Phase = corev1.PodFailed
	if code == 0 {
		p.Status.Phase = corev1.PodSucceeded
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.Now()},
	}}}
}

// finish ends every pod of an attempt with an exit code, as the kubelet
// reports a container that exited.
func (k *fakeKubelet) finish(t *testing.T, id core.WorkloadID, attempt, code int) {
	t.Helper()
	k.update(t, id, attempt, func(p *corev1.Pod) {
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		setTerminated(p, int32(code), reason)
	})
}

// update changes the status of every pod of an attempt.
func (k *fakeKubelet) update(t *testing.T, id core.WorkloadID, attempt int, change func(*corev1.Pod)) {
	t.Helper()
	pods, err := k.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{
		LabelSelector: LabelWorkload + "=" + dnsLabel(string(id)) + "," + LabelAttempt + "=" + itoa(attempt),
	})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of %s attempt %d: %v (%d found)", id, attempt, err, len(pods.Items))
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		change(p)
		if _, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update pod %s: %v", p.Name, err)
		}
	}
}

// newExecutor starts an executor on the fake cluster.
func (k *fakeKubelet) newExecutor(t *testing.T, opts Options) *Executor {
	t.Helper()
	opts.Client = k.client
	e, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for !seen["pods"] || !seen["nodes"] {
		select {
		case r := <-k.watching:
			seen[r] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("watches not opened: %v", seen)
		}
	}
	return e
}

// exitOf waits for the next exit.
func exitOf(t *testing.T, e executor.Executor) executor.Exit {
	t.Helper()
	select {
	case x := <-e.Exits():
		return x
	case <-time.After(10 * time.Second):
		t.Fatal("no exit within 10s")
		return executor.Exit{}
	}
}

func noExit(t *testing.T, e executor.Executor, d time.Duration) {
	t.Helper()
	select {
	case x := <-e.Exits():
		t.Errorf("unexpected exit: %+v", x)
	case <-time.After(d):
	}
}
