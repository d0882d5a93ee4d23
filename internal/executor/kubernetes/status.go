package kubernetes

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/gpufleet/internal/executor"
)

// stuckReasons are the waiting reasons of a container that will not start
// without someone changing the pod: the attempt ends with that reason
// (ErrImagePull alone is a first failure that the kubelet retries, and turns
// into ImagePullBackOff).
var stuckReasons = []string{"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError"}

// ReasonLost is the exit reason of an attempt whose pod vanished without
// gpufleet asking: the control loop requeues it.
const ReasonLost = "Lost"

// podEnd tells whether a pod has ended and how. It is pure: the table of
// pod states and their exits is tested on it. stopping is true when gpufleet
// asked for the pod to go (Stop), which makes exit codes 137 and 143 read
// as SIGKILL and SIGTERM. deleted is true when the pod object is gone. The
// exit is at the container's FinishedAt, or at now when it has none.
func podEnd(p *corev1.Pod, stopping, deleted bool, now time.Time) (executor.Exit, bool) {
	stopping = stopping || p.DeletionTimestamp != nil
	cs := taskStatus(p)
	at := now
	x := executor.Exit{}
	if cs != nil && cs.State.Terminated != nil {
		if t := cs.State.Terminated.FinishedAt; !t.IsZero() {
			at = t.Time
		}
	}
	x.At = at

	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		fillTerminated(&x, p, cs, stopping)
		return x, true
	}
	if cs != nil && cs.State.Waiting != nil && slices.Contains(stuckReasons, cs.State.Waiting.Reason) {
		x.Reason, x.Message = cs.State.Waiting.Reason, cs.State.Waiting.Message
		return x, true
	}
	if !deleted {
		if cs != nil && cs.State.Terminated != nil && p.Spec.RestartPolicy == corev1.RestartPolicyNever {
			// The container has ended and the kubelet has not yet
			// written the phase: that is the end.
			fillTerminated(&x, p, cs, stopping)
			return x, true
		}
		return executor.Exit{}, false
	}
	// Deleted before it ended by itself.
	if cs != nil && cs.State.Terminated != nil {
		fillTerminated(&x, p, cs, stopping)
		return x, true
	}
	if stopping {
		x.Signal = "SIGTERM"
		if cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "ContainerCreating" {
			x.Message = "stopped while " + cs.State.Waiting.Reason
		}
		return x, true
	}
	x.Reason = ReasonLost
	x.Message = fmt.Sprintf("pod %s/%s was deleted outside gpufleet", p.Namespace, p.Name)
	if p.Spec.NodeName != "" {
		x.Message += " (node " + p.Spec.NodeName + ")"
	}
	return x, true
}

// fillTerminated fills an exit from a pod that has ended.
func fillTerminated(x *executor.Exit, p *corev1.Pod, cs *corev1.ContainerStatus, stopping bool) {
	var term *corev1.ContainerStateTerminated
	if cs != nil {
		term = cs.State.Terminated
	}
	if term != nil {
		code := int(term.ExitCode)
		switch {
		case term.Reason == "OOMKilled":
			x.Reason, x.Signal = "OOMKilled", "SIGKILL"
			x.Message = fmt.Sprintf("out of memory (exit code %d)", code)
		case stopping && code == 137:
			x.Signal = "SIGKILL"
		case stopping && code == 143:
			x.Signal = "SIGTERM"
		default:
			x.ExitCode = &code
			// "Error" and "Completed" only restate the exit code.
			if term.Reason != "" && term.Reason != "Error" && term.Reason != "Completed" {
				x.Reason, x.Message = term.Reason, term.Message
			}
		}
	} else if cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "ContainerCreating" {
		// Failed before the container ran: ErrImagePull, say.
		x.Reason, x.Message = cs.State.Waiting.Reason, cs.State.Waiting.Message
	}
	// The pod's own reason (Evicted, OutOfnvidia.com/gpu, NodeAffinity,
	// UnexpectedAdmissionError, Preempting, Shutdown) says more than the
	// container's.
	if p.Status.Reason != "" && x.Reason != "OOMKilled" {
		x.Reason, x.Message = p.Status.Reason, p.Status.Message
	}
	if p.Status.Phase == corev1.PodFailed && x.Reason == "" && x.Signal == "" && (x.ExitCode == nil || *x.ExitCode == 0) {
		x.ExitCode = nil
		x.Reason, x.Message = "PodFailed", p.Status.Message
	}
}

// taskStatus is the status of the pod's task container, if reported. A
// native pod's containers are its own: its first container that failed,
// else its first that ended, else its first.
func taskStatus(p *corev1.Pod) *corev1.ContainerStatus {
	var ended *corev1.ContainerStatus
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		if cs.Name == containerName {
			return cs
		}
		if t := cs.State.Terminated; t != nil && (ended == nil || t.ExitCode != 0 && ended.State.Terminated.ExitCode == 0) {
			ended = cs
		}
	}
	if ended == nil && len(p.Status.ContainerStatuses) > 0 && p.Labels[LabelManaged] != "true" {
		return &p.Status.ContainerStatuses[0]
	}
	return ended
}
