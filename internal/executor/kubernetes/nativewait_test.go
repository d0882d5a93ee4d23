package kubernetes

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// TestNativeWaitShownOnceThoughTheCacheLags: the control loop may ask
// again before the informer's copy of a pod carries the condition the
// first NativeWait wrote (CI once saw two FractionsUnsupported Events on
// one pod). Here the cache never catches up at all: the same wait still
// makes one Event, and a different wait one more.
func TestNativeWaitShownOnceThoughTheCacheLags(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "half", UID: "u1"}}
	client := fake.NewClientset(pod.DeepCopy())
	// The fake does not fill in generateName, as the API server does.
	var made int
	client.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*corev1.Event)
		made++
		ev.Name = ev.GenerateName + strconv.Itoa(made)
		return false, nil, nil
	})
	ix := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := ix.Add(pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	e := &Executor{opts: Options{Client: client, RequestTimeout: 10 * time.Second}, natives: corelisters.NewPodLister(ix)}
	n := core.Native{Namespace: "ns", Pods: []core.NativePod{{Name: "half", UID: "u1"}}}
	frac := executor.NativeWait{Reason: ReasonFractions, Field: AnnotationGPUs, Message: "0.5 is a share", Warning: true}
	other := executor.NativeWait{Reason: "Quota", Message: "over quota"}
	for _, w := range []executor.NativeWait{frac, frac, frac, other, other} {
		if err := e.NativeWait(context.Background(), n, w); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs.Items {
		got = append(got, ev.Reason)
	}
	if diff := cmp.Diff([]string{ReasonFractions, "Quota"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
