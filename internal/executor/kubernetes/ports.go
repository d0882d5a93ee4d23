package kubernetes

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// The environment a task that declares ports gets, under the local
// executor's names: PORT is its first declared port, GPUFLEET_PORT_<n> and
// GPUFLEET_PORT_<NAME> each port, GPUFLEET_BASE_URL the path the proxy
// serves the first port under. A pod has a network of its own, so the
// port a task is told is the port it declared.
const (
	EnvPort    = "PORT"
	EnvBaseURL = "GPUFLEET_BASE_URL"
)

// portEnv adds the ports' variables to env; the base URL is "/" when the
// server serves each port on a host of its own (Options.PortHosts).
func portEnv(env map[string]string, id core.WorkloadID, ports []core.Port, portHosts bool) {
	for i, p := range ports {
		n := strconv.Itoa(p.Port)
		if i == 0 {
			env[EnvPort] = n
			env[EnvBaseURL] = fmt.Sprintf("/w/%s/%d/", id, p.Port)
			if portHosts {
				env[EnvBaseURL] = "/"
			}
		}
		env["GPUFLEET_PORT_"+n] = n
		if p.Name != "" {
			env["GPUFLEET_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = n
		}
	}
}

var notSvc = regexp.MustCompile(`[^a-z0-9]+`)

// portName turns a port's name into a Kubernetes port name (an IANA
// service name: at most 15 characters of [a-z0-9-], a letter among them,
// no "--", alphanumeric at both ends), or "" when nothing valid is left.
func portName(name string) string {
	s := strings.Trim(notSvc.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > 15 {
		s = strings.TrimRight(s[:15], "-")
	}
	if s == "" || len(validation.IsValidPortName(s)) > 0 {
		return ""
	}
	return s
}

// containerPorts are the container's ports, named when the port has a
// name that makes a valid, unique Kubernetes port name.
func containerPorts(ports []core.Port) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	seen := map[string]bool{}
	for _, p := range ports {
		cp := corev1.ContainerPort{ContainerPort: int32(p.Port), Protocol: corev1.ProtocolTCP}
		if n := portName(p.Name); n != "" && !seen[n] {
			seen[n] = true
			cp.Name = n
		}
		out = append(out, cp)
	}
	return out
}

// ServiceName names the Service of a workload: one per workload, kept
// across its attempts, so that its in-cluster name
// (<name>.<namespace>.svc) survives requeues.
func ServiceName(id core.WorkloadID) string { return dnsLabel("gpufleet-" + string(id)) }

// buildService builds the ClusterIP Service of a task with ports: it
// selects the pods of the task's attempt, replica 0 (the one the proxy
// reaches, as Endpoint does), on every declared port.
func buildService(t executor.Task, ns string) *corev1.Service {
	var ports []corev1.ServicePort
	for _, cp := range containerPorts(t.Ports) {
		name := cp.Name
		if name == "" {
			name = "p" + strconv.Itoa(int(cp.ContainerPort))
		}
		ports = append(ports, corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: cp.ContainerPort,
			TargetPort: intstr.FromInt32(cp.ContainerPort)})
	}
	w := dnsLabel(string(t.WorkloadID))
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: ServiceName(t.WorkloadID), Namespace: ns,
			Labels: map[string]string{LabelManaged: "true", LabelWorkload: w, LabelTeam: teamLabel(t.Team)},
		},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: ports,
			Selector: map[string]string{LabelManaged: "true", LabelWorkload: w,
				LabelAttempt: strconv.Itoa(t.Attempt), LabelReplica: "0"},
		},
	}
}

// ensureService creates the task's Service, or points the one an earlier
// attempt made at this attempt's pods.
func (e *Executor) ensureService(ctx context.Context, t executor.Task, ns string) error {
	want := buildService(t, ns)
	sc := e.opts.Client.CoreV1().Services(ns)
	old, err := sc.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := sc.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("service %s/%s: %w", ns, want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("service %s/%s: %w", ns, want.Name, err)
	}
	old = old.DeepCopy()
	old.Labels = want.Labels
	old.Spec.Selector = want.Spec.Selector
	old.Spec.Ports = want.Spec.Ports
	if _, err := sc.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("service %s/%s: %w", ns, want.Name, err)
	}
	return nil
}

// Endpoint returns where the proxy reaches a declared port of an attempt:
// "podIP:port" of the attempt's first replica, once that pod is Running
// with an IP, from the informer's cache (no API call). It returns false
// when the attempt has no such pod, the pod is not Running or has no IP
// yet, or the pod declares no such port.
func (e *Executor) Endpoint(id core.WorkloadID, attempt, port int) (string, bool) {
	for _, p := range e.attemptPods(id, attempt) {
		if p.Labels[LabelReplica] != "0" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if int(cp.ContainerPort) == port {
					return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), true
				}
			}
		}
	}
	return "", false
}
