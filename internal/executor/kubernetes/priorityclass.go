package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/core"
)

// applyHint says what an operator does when the server may not create its
// PriorityClasses.
const applyHint = "apply deploy/kubernetes/priorityclasses.yaml (kubectl apply -f deploy/kubernetes/priorityclasses.yaml, " +
	"adding a PriorityClass for each class of your own), or grant the server get and create on priorityclasses.scheduling.k8s.io " +
	"as deploy/kubernetes/rbac.yaml does"

// ensurePriorityClasses makes sure the PriorityClass "gpufleet-<class>" of
// each of gpufleet's priority classes exists, creating those the cluster
// lacks with the class's value. A pod naming a PriorityClass that does not
// exist is refused by the API server, so without them every workload would
// fail to start. An existing PriorityClass is kept as it is (its value
// cannot change); one with another value than gpufleet's is logged.
func (e *Executor) ensurePriorityClasses(ctx context.Context) error {
	var errs []error
	for _, c := range e.opts.PriorityClasses {
		if err := e.ensurePriorityClass(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubernetes executor: %w; %s", errors.Join(errs...), applyHint)
	}
	return nil
}

func (e *Executor) ensurePriorityClass(ctx context.Context, c core.PriorityClass) error {
	name := PriorityClassPrefix + c.Name
	pcs := e.opts.Client.SchedulingV1().PriorityClasses()
	got, err := pcs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		if int64(got.Value) != int64(c.Value) {
			e.log.Warn("PriorityClass has another value than gpufleet's class: kube-scheduler and kubelet eviction rank its pods by the cluster's",
				"priorityClass", name, "value", got.Value, "gpufleet", c.Value)
		}
		return nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		// Forbidden: a role that may create but not read; the create
		// says whether it exists.
	default:
		return fmt.Errorf("PriorityClass %s: %w", name, err)
	}
	if c.Value < math.MinInt32 || c.Value > math.MaxInt32 {
		return fmt.Errorf("PriorityClass %s: value %d does not fit a PriorityClass", name, c.Value)
	}
	never := corev1.PreemptNever
	_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/managed-by": "gpufleet"}},
		Value:      int32(c.Value),
		// gpufleet preempts by itself, and pods bound by nodeName never
		// meet kube-scheduler's preemption (as priorityclasses.yaml).
		PreemptionPolicy: &never,
		Description:      fmt.Sprintf("gpufleet %s workloads (created by gpufleet)", c.Name),
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		e.log.Info("PriorityClass created", "priorityClass", name, "value", c.Value)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("PriorityClass %s does not exist and this server may not create it (%v)", name, err)
	}
	return fmt.Errorf("PriorityClass %s: create: %w", name, err)
}

// createPod creates a pod. One refused for want of its PriorityClass
// (deleted since New made it, or just made and not yet seen by the API
// server's admission) makes the class again and is tried again for a few
// seconds, rather than the workload failing for it.
func (e *Executor) createPod(ctx context.Context, p *corev1.Pod) error {
	pods := e.opts.Client.CoreV1().Pods(p.Namespace)
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err == nil {
		p.UID = created.UID // the owner of the attempt's Secrets
	}
	c, ours := e.priorityClass(p.Spec.PriorityClassName)
	if !ours || !missingPriorityClass(err) {
		return err
	}
	if perr := e.ensurePriorityClass(ctx, c); perr != nil {
		return fmt.Errorf("%w (%v; %s)", err, perr, applyHint)
	}
	for range 25 {
		if created, err = pods.Create(ctx, p, metav1.CreateOptions{}); !missingPriorityClass(err) {
			if err == nil {
				p.UID = created.UID
			}
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}

// missingPriorityClass reports whether the API server refused a pod for
// want of its PriorityClass (the Priority admission plugin's answer).
func missingPriorityClass(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "no PriorityClass with name")
}

// priorityClass finds gpufleet's class of a Kubernetes PriorityClass name.
func (e *Executor) priorityClass(name string) (core.PriorityClass, bool) {
	for _, c := range e.opts.PriorityClasses {
		if PriorityClassPrefix+c.Name == name {
			return c, true
		}
	}
	return core.PriorityClass{}, false
}
