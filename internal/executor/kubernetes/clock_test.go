package kubernetes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestExitsUseTheClock: an exit whose pod says no finish time is stamped by
// Options.Now, as for the other executors; one whose container finished
// keeps the kubelet's time.
func TestExitsUseTheClock(t *testing.T) {
	at := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }

	t.Run("a pod deleted outside gpufleet", func(t *testing.T) {
		k := newFakeKubelet(t)
		e := k.newExecutor(t, Options{Now: clock})
		if err := e.Start(t.Context(), gpuTask("wl-c", "n1", 1)); err != nil {
			t.Fatal(err)
		}
		if err := k.client.Tracker().Delete(podsGVR, "gpufleet-research", "wl-c-1"); err != nil {
			t.Fatal(err)
		}
		if x := exitOf(t, e); x.Reason != ReasonLost || !x.At.Equal(at) {
			t.Errorf("exit %+v, want Lost at %v (Options.Now)", x, at)
		}
	})
	t.Run("a node lost", func(t *testing.T) {
		node := gpuNode("n1", 8, true, false)
		k := newFakeKubelet(t, node)
		e := k.newExecutor(t, Options{Now: clock})
		if err := e.Start(t.Context(), gpuTask("wl-n", "n1", 1)); err != nil {
			t.Fatal(err)
		}
		down := node.DeepCopy()
		down.Status.Conditions[0].Status = corev1.ConditionUnknown
		if _, err := k.client.CoreV1().Nodes().UpdateStatus(t.Context(), down, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if x := exitOf(t, e); x.Reason != ReasonLost || !x.At.Equal(at) {
			t.Errorf("exit %+v, want Lost at %v (Options.Now)", x, at)
		}
	})
	t.Run("podEnd is pure", func(t *testing.T) {
		finished := metav1.NewTime(at.Add(-time.Minute))
		p := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: finished}}}}}}
		if x, ended := podEnd(p, false, false, at); !ended || !x.At.Equal(finished.Time) {
			t.Errorf("a finished container: %+v, %t; want ended at its FinishedAt %v", x, ended, finished.Time)
		}
		p.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.Time{}
		if x, ended := podEnd(p, false, false, at); !ended || !x.At.Equal(at) {
			t.Errorf("no FinishedAt: %+v, %t; want ended at now %v", x, ended, at)
		}
	})
}
