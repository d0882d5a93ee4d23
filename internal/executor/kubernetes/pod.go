package kubernetes

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// Labels and annotations that tie a pod (and a namespace) to gpufleet.
const (
	LabelManaged  = "gpufleet.io/managed" // "true" on every pod and namespace gpufleet made
	LabelWorkload = "gpufleet.io/workload"
	LabelAttempt  = "gpufleet.io/attempt"
	LabelReplica  = "gpufleet.io/replica"
	LabelTeam     = "gpufleet.io/team"
	// LabelFence is the fencing token of the leader that created the pod
	// (Options.Fence), when several servers share the store.
	LabelFence = "gpufleet.io/fence"

	AnnotationGPUUUIDs = "gpufleet.io/gpu-uuids" // the devices gpufleet chose, comma-separated
	AnnotationGPUIndex = "gpufleet.io/gpu-indexes"
	AnnotationMilliGPU = "gpufleet.io/milli-gpu" // the share of each device
	AnnotationNode     = "gpufleet.io/node"      // the node gpufleet chose
)

// ResourceGPU is the extended resource the NVIDIA device plugin advertises.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// Environment variables set in every container, as the local executor does.
const (
	EnvWorkloadID     = "GPUFLEET_WORKLOAD_ID"
	EnvAttempt        = "GPUFLEET_ATTEMPT"
	EnvReplica        = "GPUFLEET_REPLICA"
	EnvReplicas       = "GPUFLEET_REPLICAS"
	EnvGPUUUIDs       = "GPUFLEET_GPU_UUIDS"
	EnvGPUFraction    = "GPUFLEET_GPU_FRACTION"
	EnvGPUMemoryLimit = "GPUFLEET_GPU_MEMORY_LIMIT_MIB"
)

// containerName is the one container of every pod.
const containerName = "task"

// PriorityClassPrefix is put before a workload's priority class to name the
// Kubernetes PriorityClass of its pods (deploy/kubernetes creates them).
const PriorityClassPrefix = "gpufleet-"

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsLabel turns s into a valid DNS-1123 label (lowercase, [a-z0-9-], at most
// 63 characters, alphanumeric at both ends).
func dnsLabel(s string) string {
	s = notDNS.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > 63 {
		s = s[:63]
	}
	s = strings.Trim(s, "-")
	if s == "" {
		s = "x"
	}
	return s
}

// PodName names replica r of an attempt: "wl-abc-1" for a single pod,
// "wl-abc-1-r0" for the replicas of a gang.
func PodName(id core.WorkloadID, attempt, replica, replicas int) string {
	base := fmt.Sprintf("%s-%d", dnsLabel(string(id)), attempt)
	if replicas > 1 {
		base += fmt.Sprintf("-r%d", replica)
	}
	return dnsLabel(base)
}

// namespaceFor applies the namespace template to a team.
func namespaceFor(template string, team core.TeamName) string {
	if team == "" {
		team = "default"
	}
	return dnsLabel(strings.ReplaceAll(template, "{team}", string(team)))
}

// ownsNamespace reports whether ns can be the namespace template's for
// some team: it starts with what comes before "{team}" and ends with what
// comes after it (both as namespaceFor writes them).
func ownsNamespace(template, ns string) bool {
	before, after, ok := strings.Cut(template, "{team}")
	if !ok {
		return ns == namespaceFor(template, "")
	}
	before, after = strings.ToLower(before), strings.ToLower(after)
	return len(ns) > len(before)+len(after) && strings.HasPrefix(ns, before) && strings.HasSuffix(ns, after)
}

// replicaAssignments groups a task's assignments by replica, in replica
// order; a task without assignments still has one replica per Count.
func replicaAssignments(t executor.Task) [][]core.Assignment {
	n := t.Request.Count()
	for _, a := range t.Assignments {
		n = max(n, a.Replica+1)
	}
	out := make([][]core.Assignment, n)
	for _, a := range t.Assignments {
		out[a.Replica] = append(out[a.Replica], a)
	}
	for _, as := range out {
		slices.SortFunc(as, func(a, b core.Assignment) int { return cmp.Compare(a.GPUIndex, b.GPUIndex) })
	}
	return out
}

// graceSeconds rounds a grace period up to whole seconds, as the API wants.
func graceSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}

// buildPod builds the pod of one replica of a task (see the package
// documentation for the choices made here).
func buildPod(o *Options, t executor.Task, ns string, replica int, as []core.Assignment, replicas int) *corev1.Pod {
	image := cmp.Or(t.Image, o.DefaultImage)
	var node string
	var uuids, idx []string
	for _, a := range as {
		node = string(a.Node)
		if !slices.Contains(uuids, a.GPUUUID) {
			uuids = append(uuids, a.GPUUUID)
			idx = append(idx, strconv.Itoa(a.GPUIndex))
		}
	}

	env := map[string]string{}
	for k, v := range t.Env {
		// A secret's variable, which comes through envFrom, wins over
		// the task's own: in a container, env wins over envFrom.
		if _, secret := t.SecretEnv[k]; !secret {
			env[k] = v
		}
	}
	portEnv(env, t.WorkloadID, t.Ports, o.PortHosts)
	if len(t.SecretFiles) > 0 {
		env[executor.EnvSecretsDir] = SecretsDir
	}
	if o.CheckpointBytes > 0 {
		env[EnvCheckpointDir] = CheckpointDir
	}
	for _, k := range []string{EnvGPUFraction, EnvGPUMemoryLimit, EnvReplicas, EnvReplica} {
		delete(env, k)
	}
	env[EnvWorkloadID] = string(t.WorkloadID)
	env[EnvAttempt] = strconv.Itoa(t.Attempt)
	env[EnvGPUUUIDs] = strings.Join(uuids, ",")
	if replicas > 1 {
		env[EnvReplicas] = strconv.Itoa(replicas)
		env[EnvReplica] = strconv.Itoa(replica)
	}

	limits := corev1.ResourceList{}
	requests := corev1.ResourceList{}
	switch {
	case t.Request.Fractional():
		if len(as) > 0 {
			env[EnvGPUFraction] = strconv.FormatFloat(float64(as[0].MilliGPU)/1000, 'f', -1, 64)
			env[EnvGPUMemoryLimit] = strconv.FormatInt(as[0].MemoryMiB, 10)
		}
		switch o.Fractions {
		case FractionTimeSlicing:
			// One replica of a time-sliced device; the device plugin picks it.
			limits[ResourceGPU] = *resource.NewQuantity(1, resource.DecimalSI)
		default: // FractionVisibleDevices
			// No device-plugin resource: the container runtime exposes
			// the device gpufleet chose, by index on that node.
			env["NVIDIA_VISIBLE_DEVICES"] = strings.Join(idx, ",")
			env["NVIDIA_DRIVER_CAPABILITIES"] = cmp.Or(env["NVIDIA_DRIVER_CAPABILITIES"], "compute,utility")
		}
	case len(as) > 0:
		limits[ResourceGPU] = *resource.NewQuantity(int64(len(as)), resource.DecimalSI)
	case t.Request.WholeGPUs() > 0:
		limits[ResourceGPU] = *resource.NewQuantity(int64(t.Request.WholeGPUs()), resource.DecimalSI)
	}
	if t.Request.MilliCPU > 0 {
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(t.Request.MilliCPU, resource.DecimalSI)
	}
	if t.Request.MemoryMiB > 0 {
		requests[corev1.ResourceMemory] = *resource.NewQuantity(t.Request.MemoryMiB<<20, resource.BinarySI)
	}
	if len(limits) == 0 {
		limits = nil
	}
	if len(requests) == 0 {
		requests = nil
	}

	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vars := make([]corev1.EnvVar, len(keys))
	for i, k := range keys {
		vars[i] = corev1.EnvVar{Name: k, Value: env[k]}
	}

	grace := graceSeconds(t.GracePeriod)
	no := false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(t.WorkloadID, t.Attempt, replica, replicas),
			Namespace: ns,
			Labels: map[string]string{
				LabelManaged:  "true",
				LabelWorkload: dnsLabel(string(t.WorkloadID)),
				LabelAttempt:  strconv.Itoa(t.Attempt),
				LabelReplica:  strconv.Itoa(replica),
				LabelTeam:     teamLabel(t.Team),
			},
			Annotations: map[string]string{
				AnnotationGPUUUIDs: strings.Join(uuids, ","),
				AnnotationGPUIndex: strings.Join(idx, ","),
			},
		},
		Spec: corev1.PodSpec{
			// Bound by gpufleet: kube-scheduler never sees the pod.
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			EnableServiceLinks:            &no,
			AutomountServiceAccountToken:  &no,
			Tolerations: []corev1.Toleration{
				// GPU nodes are often tainted so that only GPU pods land
				// there (NoSchedule, or NoExecute to evict the rest);
				// gpufleet's pods are GPU pods.
				{Key: string(ResourceGPU), Operator: corev1.TolerationOpExists},
			},
			Containers: []corev1.Container{{
				Name:      containerName,
				Image:     image,
				Command:   t.Command,
				Env:       vars,
				Ports:     containerPorts(t.Ports),
				Resources: corev1.ResourceRequirements{Limits: limits, Requests: requests},
				// Workloads are untrusted code: no privilege escalation,
				// no capabilities, the runtime's default seccomp profile
				// (what the "restricted" Pod Security Standard asks, but
				// for running as non-root, which many images do not).
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
	if node != "" {
		p.Annotations[AnnotationNode] = node
	}
	if len(as) > 0 {
		p.Annotations[AnnotationMilliGPU] = strconv.FormatInt(as[0].MilliGPU, 10)
	}
	if t.Priority != "" {
		p.Spec.PriorityClassName = PriorityClassPrefix + t.Priority
	}
	if strings.HasPrefix(t.WorkingDir, "/") {
		p.Spec.Containers[0].WorkingDir = t.WorkingDir
	}
	podVolumes(o, t, p)
	return p
}

// teamLabel is a team's name as a label value.
func teamLabel(team core.TeamName) string { return dnsLabel(cmp.Or(string(team), "default")) }

func itoa(n int) string { return strconv.Itoa(n) }
