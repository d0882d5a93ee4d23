package kubernetes

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The cluster's end of this is TestE2EWithoutPriorityClasses (a real API
// server, RBAC and admission); these run without a cluster.

var testClasses = []core.PriorityClass{{Name: "training", Value: 500}, {Name: "batch", Value: 100}}

// admitPriorityClasses refuses a pod whose PriorityClass does not exist, as
// the API server's Priority admission plugin does.
func admitPriorityClasses(k *fakeKubelet) {
	k.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		name := p.Spec.PriorityClassName
		if _, err := k.client.Tracker().Get(schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1", Resource: "priorityclasses"}, "", name); err != nil {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, p.Name, fmt.Errorf("no PriorityClass with name %s was found", name))
		}
		return false, nil, nil
	})
}

func priorityClasses(t *testing.T, k *fakeKubelet) map[string]schedulingv1.PriorityClass {
	t.Helper()
	list, err := k.client.SchedulingV1().PriorityClasses().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schedulingv1.PriorityClass{}
	for _, pc := range list.Items {
		out[pc.Name] = pc
	}
	return out
}

// TestNewCreatesMissingPriorityClasses: the missing PriorityClasses are made
// with gpufleet's values and preemptionPolicy Never; one that exists is
// kept as it is; a pod of each class is then admitted.
func TestNewCreatesMissingPriorityClasses(t *testing.T) {
	existing := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-batch"}, Value: 7}
	k := newFakeKubelet(t, existing)
	admitPriorityClasses(k)
	e := k.newExecutor(t, Options{PriorityClasses: testClasses})
	pcs := priorityClasses(t, k)
	if pc := pcs["gpufleet-training"]; pc.Value != 500 || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("gpufleet-training: %+v, want value 500, preemptionPolicy Never", pc)
	}
	if pc := pcs["gpufleet-batch"]; pc.Value != 7 {
		t.Errorf("gpufleet-batch: value %d, want the existing one's (7) kept", pc.Value)
	}
	for i, class := range []string{"training", "batch"} {
		tk := gpuTask(core.WorkloadID(fmt.Sprintf("wl-%d", i)), "gpu-1", 1)
		tk.Priority = class
		if err := e.Start(t.Context(), tk); err != nil {
			t.Errorf("start a %s workload: %v", class, err)
		}
	}
}

// TestNewRefusesWhenItMayNotCreatePriorityClasses: a server whose role may
// not create its missing PriorityClasses does not start, and says which
// are missing and what to apply.
func TestNewRefusesWhenItMayNotCreatePriorityClasses(t *testing.T) {
	k := newFakeKubelet(t)
	k.client.PrependReactor("*", "priorityclasses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "scheduling.k8s.io", Resource: "priorityclasses"}, "", fmt.Errorf("RBAC: not allowed"))
	})
	_, err := New(t.Context(), Options{Client: k.client, PriorityClasses: testClasses})
	if err == nil {
		t.Fatal("New started without its PriorityClasses")
	}
	for _, want := range []string{"gpufleet-training", "gpufleet-batch", "deploy/kubernetes/priorityclasses.yaml", "deploy/kubernetes/rbac.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestStartMakesADeletedPriorityClassAgain: a PriorityClass deleted after
// New is made again when a pod of its class is refused for want of it, and
// the pod is created: the workload does not fail for it.
func TestStartMakesADeletedPriorityClassAgain(t *testing.T) {
	k := newFakeKubelet(t)
	admitPriorityClasses(k)
	e := k.newExecutor(t, Options{PriorityClasses: testClasses})
	if err := k.client.SchedulingV1().PriorityClasses().Delete(t.Context(), "gpufleet-training", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context(), gpuTask("wl-a", "gpu-1", 1)); err != nil {
		t.Fatalf("start after the PriorityClass was deleted: %v", err)
	}
	if _, err := k.client.CoreV1().Pods("gpufleet-research").Get(t.Context(), "wl-a-1", metav1.GetOptions{}); err != nil {
		t.Errorf("pod: %v", err)
	}
	if pc, ok := priorityClasses(t, k)["gpufleet-training"]; !ok || pc.Value != 500 {
		t.Errorf("gpufleet-training after the start: %+v (exists %v), want value 500", pc, ok)
	}
}
