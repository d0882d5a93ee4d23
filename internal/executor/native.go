package executor

import (
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// NativeSubmission is a group of pods that asks gpufleet for GPUs without
// going through its API (schedulerName gpufleet on a Kubernetes cluster):
// one pod, or a gang. The executor that sees them says what they ask for;
// the control loop's admission decides, as for any submission, and
// records the workload. Wait, when set, says why the group cannot be
// admitted yet.
type NativeSubmission struct {
	Native core.Native
	// Team is the team the pods name, and TeamFrom the label that named
	// it ("gpufleet.io/team", "kueue.x-k8s.io/queue-name", "namespace
	// label gpufleet.io/team"): an admission that refuses the team names
	// it.
	Team, TeamFrom string
	// Priority is the priority class the pods name (empty: the default
	// class), and PriorityFrom where ("gpufleet.io/priority",
	// "priorityClassName").
	Priority, PriorityFrom string
	// Request is one replica's ask (the largest of the pods') and the
	// number of replicas, one per pod.
	Request     core.Request
	GracePeriod time.Duration
	// Labels are the labels the workload gets: the ones its pods share,
	// with core.LabelNativeNamespace and core.LabelNativeOwner.
	Labels map[string]string
	Wait   *NativeWait
}

// NativeWait says why native pods wait: shown on the pods (a
// PodScheduled=False condition and an Event), where kubectl users look.
type NativeWait struct {
	// Reason is one CamelCase word: the scheduler's reason for a
	// workload it has not placed, or the admission's ("InvalidTeam",
	// "GangIncomplete").
	Reason string
	// Field names the label, annotation or field at fault, when one is;
	// empty for a wait that is no one's fault.
	Field   string
	Message string
	// Warning marks what needs a change to the pods to ever run (bad
	// input), or the scheduler's explanation of a wait.
	Warning bool
}

// Text is the message shown on the pods: the field, then the message.
func (w NativeWait) Text() string {
	if w.Field == "" {
		return w.Message
	}
	return w.Field + ": " + w.Message
}

// StopExplainer is an executor that shows why a task is stopped where the
// task's users look (kubernetes: an Event on the pods of a native
// workload), before Stop.
type StopExplainer interface {
	ExplainStop(id core.WorkloadID, attempt int, reason, message string)
}
