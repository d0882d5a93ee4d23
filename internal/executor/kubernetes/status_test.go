package kubernetes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodEnd is the table of pod states and the exits they mean.
func TestPodEnd(t *testing.T) {
	term := func(code int32, reason string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.NewTime(time.Unix(100, 0))}}
	}
	wait := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pod := func(phase corev1.PodPhase, reason string, st *corev1.ContainerState) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyNever},
			Status: corev1.PodStatus{Phase: phase, Reason: reason}}
		if st != nil {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: *st}}
		}
		return p
	}
	ptr := func(s corev1.ContainerState) *corev1.ContainerState { return &s }
	tests := []struct {
		name              string
		pod               *corev1.Pod
		stopping, deleted bool
		ended             bool
		want              string
	}{
		{"pending", pod(corev1.PodPending, "", ptr(wait("ContainerCreating"))), false, false, false, ""},
		{"running", pod(corev1.PodRunning, "", &running), false, false, false, ""},
		{"succeeded", pod(corev1.PodSucceeded, "", ptr(term(0, "Completed"))), false, false, true, "code=0"},
		{"failed with a code", pod(corev1.PodFailed, "", ptr(term(3, "Error"))), false, false, true, "code=3"},
		{"137 not asked for is a code", pod(corev1.PodFailed, "", ptr(term(137, "Error"))), false, false, true, "code=137"},
		{"OOMKilled", pod(corev1.PodFailed, "", ptr(term(137, "OOMKilled"))), false, false, true, "reason=OOMKilled signal=SIGKILL"},
		{"start error", pod(corev1.PodFailed, "", ptr(term(128, "StartError"))), false, false, true, "code=128 reason=StartError"},
		{"evicted", pod(corev1.PodFailed, "Evicted", nil), false, false, true, "reason=Evicted"},
		{"evicted after running", pod(corev1.PodFailed, "Evicted", ptr(term(137, "Error"))), false, false, true, "code=137 reason=Evicted"},
		{"admission rejected", pod(corev1.PodFailed, "OutOfnvidia.com/gpu", nil), false, false, true, "reason=OutOfnvidia.com/gpu"},
		{"failed, nothing known", pod(corev1.PodFailed, "", nil), false, false, true, "reason=PodFailed"},
		{"image pull back-off", pod(corev1.PodPending, "", ptr(wait("ImagePullBackOff"))), false, false, true, "reason=ImagePullBackOff"},
		{"first pull error waits", pod(corev1.PodPending, "", ptr(wait("ErrImagePull"))), false, false, false, ""},
		{"failed while pulling", pod(corev1.PodFailed, "", ptr(wait("ErrImagePull"))), false, false, true, "reason=ErrImagePull"},
		{"terminated, phase not yet written", pod(corev1.PodRunning, "", ptr(term(1, "Error"))), false, false, true, "code=1"},
		{"stopped: SIGTERM", pod(corev1.PodFailed, "", ptr(term(143, "Error"))), true, false, true, "signal=SIGTERM"},
		{"stopped: SIGKILL after grace", pod(corev1.PodFailed, "", ptr(term(137, "Error"))), true, true, true, "signal=SIGKILL"},
		{"stopped: exited 0 on SIGTERM", pod(corev1.PodSucceeded, "", ptr(term(0, "Completed"))), true, false, true, "code=0"},
		{"stopped before it ran", pod(corev1.PodPending, "", ptr(wait("ContainerCreating"))), true, true, true, "signal=SIGTERM"},
		{"deleted outside gpufleet", pod(corev1.PodRunning, "", &running), false, true, true, "reason=Lost"},
		{"deleted after it ended", pod(corev1.PodSucceeded, "", ptr(term(0, "Completed"))), false, true, true, "code=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, ended := podEnd(tt.pod, tt.stopping, tt.deleted, time.Now())
			if ended != tt.ended || describe(x) != tt.want {
				t.Errorf("podEnd: got (%q, %v), want (%q, %v)", describe(x), ended, tt.want, tt.ended)
			}
			if ended && x.At.IsZero() {
				t.Errorf("At is zero")
			}
		})
	}
}
