package kubernetes

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientset "k8s.io/client-go/kubernetes"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The ProvisioningRequest API of cluster-autoscaler
// (cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1).
// Its Go module is not a dependency: the objects are unstructured.
const (
	ProvisioningGroup    = "autoscaling.x-k8s.io"
	ProvisioningVersion  = "v1"
	ProvisioningResource = "provisioningrequests"
	ProvisioningKind     = "ProvisioningRequest"
	// ClassAtomicScaleUp is the class gpufleet asks for: all the pods'
	// nodes or none, booked for a while once made.
	ClassAtomicScaleUp = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
	// AnnotationConsumeProvisioning, on a pod, says which request's
	// capacity it uses.
	AnnotationConsumeProvisioning = "autoscaling.x-k8s.io/consume-provisioning-request"
	// LabelPoolOf labels a request and its PodTemplate with the pool asked.
	LabelPoolOf = "gpufleet.io/pool"
)

// ProvisioningGVR is the resource of ProvisioningRequests.
var ProvisioningGVR = schema.GroupVersionResource{Group: ProvisioningGroup, Version: ProvisioningVersion, Resource: ProvisioningResource}

// ErrNoProvisioningAPI: the cluster serves no ProvisioningRequest API (the
// CRD of cluster-autoscaler is not installed).
var ErrNoProvisioningAPI = errors.New("the cluster has no ProvisioningRequest API (autoscaling.x-k8s.io/v1 provisioningrequests); install cluster-autoscaler's ProvisioningRequest CRD")

// ProvisionerOptions configures a Provisioner.
type ProvisionerOptions struct {
	Client  clientset.Interface
	Dynamic dynamic.Interface
	// NamespaceTemplate and PoolLabel as in Options (their defaults too).
	NamespaceTemplate, PoolLabel string
	// Image is the PodTemplate's container image (it never runs).
	Image  string
	Logger *slog.Logger
}

// Provisioner asks a cluster's autoscaler for nodes with
// ProvisioningRequests. It is safe for concurrent use.
type Provisioner struct {
	opts ProvisionerOptions
	log  *slog.Logger
}

// NewProvisioner returns a Provisioner.
func NewProvisioner(opts ProvisionerOptions) (*Provisioner, error) {
	if opts.Client == nil || opts.Dynamic == nil {
		return nil, errors.New("kubernetes provisioner: a client and a dynamic client are needed")
	}
	opts.NamespaceTemplate = cmp.Or(opts.NamespaceTemplate, DefaultNamespaceTemplate)
	opts.PoolLabel = cmp.Or(opts.PoolLabel, DefaultPoolLabel)
	opts.Image = cmp.Or(opts.Image, DefaultImage)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Provisioner{opts: opts, log: opts.Logger}, nil
}

// Provisioner returns a Provisioner for the executor's cluster, with its
// namespace template, pool label, image and logger.
func (e *Executor) Provisioner(dyn dynamic.Interface) (*Provisioner, error) {
	return NewProvisioner(ProvisionerOptions{
		Client: e.opts.Client, Dynamic: dyn, NamespaceTemplate: e.opts.NamespaceTemplate,
		PoolLabel: e.opts.PoolLabel, Image: e.opts.DefaultImage, Logger: e.log,
	})
}

// Namespace is the namespace of a team's requests (the team's pods').
func (p *Provisioner) Namespace(team core.TeamName) string {
	return namespaceFor(p.opts.NamespaceTemplate, team)
}

// HasAPI reports whether the cluster serves ProvisioningRequests.
func (p *Provisioner) HasAPI() (bool, error) {
	list, err := p.opts.Client.Discovery().ServerResourcesForGroupVersion(ProvisioningGroup + "/" + ProvisioningVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s/%s: %w", ProvisioningGroup, ProvisioningVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == ProvisioningResource {
			return true, nil
		}
	}
	return false, nil
}

// Provision creates, in the team's namespace, a PodTemplate of the
// workload's pod shape and a ProvisioningRequest of class
// ClassAtomicScaleUp for Count such pods, both labelled gpufleet.io/managed,
// workload, team and pool, and returns the request's name. The pods select
// the request's PoolSelector, or when it is empty the pool label
// (Options.PoolLabel) set to its Pool. If a request
// of this workload for this pool exists already and has not failed (a
// server that restarted), it returns that one instead. It fails with
// ErrNoProvisioningAPI when the cluster has no such API.
func (p *Provisioner) Provision(ctx context.Context, req core.ProvisionRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("provision %s in pool %s: %w", req.Workload, req.Pool, err)
	}
	ok, err := p.HasAPI()
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(ErrNoProvisioningAPI)
	}
	ns := p.Namespace(req.Team)
	labels := map[string]string{
		LabelManaged: "true", LabelWorkload: dnsLabel(string(req.Workload)),
		LabelTeam: teamLabel(req.Team), LabelPoolOf: dnsLabel(req.Pool),
	}
	res := p.opts.Dynamic.Resource(ProvisioningGVR).Namespace(ns)
	existing, err := res.List(ctx, metav1.ListOptions{LabelSelector: selectorOf(labels)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fail(fmt.Errorf("list provisioning requests: %w", err))
	}
	if existing != nil {
		for _, it := range existing.Items {
			if st, _ := stateOf(&it); st != core.ProvisionFailed && it.GetDeletionTimestamp() == nil {
				return it.GetName(), nil
			}
		}
	}
	if err := p.ensureNamespace(ctx, ns); err != nil {
		return fail(err)
	}
	var tpl *corev1.PodTemplate
	for range 3 { // a name taken: draw another
		tpl, err = p.opts.Client.CoreV1().PodTemplates(ns).Create(ctx, p.podTemplate(req, ns, labels), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		return fail(fmt.Errorf("pod template: %w", err))
	}
	pr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ProvisioningGroup + "/" + ProvisioningVersion,
		"kind":       ProvisioningKind,
		"metadata": map[string]any{
			"name": tpl.Name, "namespace": ns, "labels": toAny(labels),
		},
		"spec": map[string]any{
			"provisioningClassName": ClassAtomicScaleUp,
			"podSets": []any{map[string]any{
				"podTemplateRef": map[string]any{"name": tpl.Name},
				"count":          int64(req.Count),
			}},
		},
	}}
	made, err := res.Create(ctx, pr, metav1.CreateOptions{})
	if err != nil {
		_ = p.opts.Client.CoreV1().PodTemplates(ns).Delete(context.WithoutCancel(ctx), tpl.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = ErrNoProvisioningAPI // the CRD went between the check and now
		}
		return fail(err)
	}
	// The request owns its template, so that the garbage collector
	// deletes the template with it whoever deletes the request.
	tpl.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: ProvisioningGroup + "/" + ProvisioningVersion, Kind: ProvisioningKind,
		Name: made.GetName(), UID: made.GetUID(),
	}}
	if _, err := p.opts.Client.CoreV1().PodTemplates(ns).Update(ctx, tpl, metav1.UpdateOptions{}); err != nil {
		p.log.Warn("owner of a provisioning pod template", "namespace", ns, "name", tpl.Name, "err", err)
	}
	p.log.Info("provisioning request created", "namespace", ns, "name", made.GetName(), "workload", req.Workload, "pool", req.Pool, "pods", req.Count, "gpus", req.GPUs)
	return made.GetName(), nil
}

// podTemplate is the pod shape of req: one container asking for the GPUs
// (and CPU and memory when given), with a node selector of the pool's
// labels, the workload's own (gpufleet's well-known ones left out) and
// the GPU model's product label, so that the autoscaler picks a node
// group whose nodes gpufleet puts in the pool.
func (p *Provisioner) podTemplate(req core.ProvisionRequest, ns string, labels map[string]string) *corev1.PodTemplate {
	sel := maps.Clone(req.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	// gpufleet's well-known labels are not the nodes' own.
	delete(sel, core.LabelPool)
	delete(sel, core.LabelRegion)
	delete(sel, core.LabelNode)
	if len(req.PoolSelector) > 0 {
		maps.Copy(sel, req.PoolSelector)
	} else {
		sel[p.opts.PoolLabel] = req.Pool
	}
	if req.GPUModel != "" {
		// GPU feature discovery writes the product's spaces as dashes.
		sel[LabelGPUProduct] = strings.ReplaceAll(strings.TrimSpace(req.GPUModel), " ", "-")
	}
	limits := corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(req.GPUs), resource.DecimalSI)}
	requests := limits.DeepCopy()
	if req.MilliCPU > 0 {
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(req.MilliCPU, resource.DecimalSI)
	}
	if req.MemoryMiB > 0 {
		requests[corev1.ResourceMemory] = *resource.NewQuantity(req.MemoryMiB<<20, resource.BinarySI)
	}
	return &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{
			Name:      provisionName(req),
			Namespace: ns, Labels: labels,
		},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
			Spec: corev1.PodSpec{
				NodeSelector:  sel,
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: p.opts.Image,
					Resources: corev1.ResourceRequirements{Limits: limits, Requests: requests},
				}},
			},
		},
	}
}

// ProvisionStatus reads a request's conditions: Failed (Failed=True, or
// CapacityRevoked=True, or the request is gone), else Provisioned
// (Provisioned=True), else Pending; the message is the deciding
// condition's reason and message. The request is looked for in the
// namespace of req's team.
func (p *Provisioner) ProvisionStatus(ctx context.Context, req core.ProvisionRequest, name string) (core.ProvisionState, string, error) {
	ns := p.Namespace(req.Team)
	obj, err := p.opts.Dynamic.Resource(ProvisioningGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if ok, derr := p.HasAPI(); derr == nil && !ok {
			return "", "", fmt.Errorf("provisioning request %s/%s: %w", ns, name, ErrNoProvisioningAPI)
		}
		return core.ProvisionFailed, fmt.Sprintf("provisioning request %s/%s no longer exists", ns, name), nil
	}
	if err != nil {
		return "", "", fmt.Errorf("provisioning request %s/%s: %w", ns, name, err)
	}
	st, msg := stateOf(obj)
	return st, msg, nil
}

// DeleteProvision deletes a request and its PodTemplate; one already gone
// is no error. The pods it was for are the executor's to delete; the
// cluster's autoscaler scales the nodes down once they are unneeded.
func (p *Provisioner) DeleteProvision(ctx context.Context, req core.ProvisionRequest, name string) error {
	ns := p.Namespace(req.Team)
	bg := metav1.DeletePropagationBackground
	err := p.opts.Dynamic.Resource(ProvisioningGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete provisioning request %s/%s: %w", ns, name, err)
	}
	if err := p.opts.Client.CoreV1().PodTemplates(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod template %s/%s: %w", ns, name, err)
	}
	p.log.Info("provisioning request deleted", "namespace", ns, "name", name)
	return nil
}

// stateOf reads the conditions of a request.
func stateOf(obj *unstructured.Unstructured) (core.ProvisionState, string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	get := func(typ string) (bool, string) {
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if !ok || m["type"] != typ {
				continue
			}
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return m["status"] == string(metav1.ConditionTrue), strings.TrimSpace(typ + ": " + strings.Trim(reason+": "+msg, ": "))
		}
		return false, ""
	}
	if ok, msg := get("Failed"); ok {
		return core.ProvisionFailed, msg
	}
	if ok, msg := get("CapacityRevoked"); ok {
		return core.ProvisionFailed, msg
	}
	if ok, msg := get("Provisioned"); ok {
		return core.ProvisionProvisioned, msg
	}
	_, msg := get("Provisioned")
	if msg == "" {
		_, msg = get("Accepted")
	}
	return core.ProvisionPending, msg
}

func (p *Provisioner) ensureNamespace(ctx context.Context, ns string) error {
	nsc := p.opts.Client.CoreV1().Namespaces()
	_, err := nsc.Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = nsc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{LabelManaged: "true"},
		}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// provisionName names a request and its template:
// "gpufleet-<workload>-<pool>-<random>", a DNS label.
func provisionName(req core.ProvisionRequest) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	base := dnsLabel("gpufleet-" + string(req.Workload) + "-" + req.Pool)
	return dnsLabel(base[:min(len(base), 56)] + "-" + hex.EncodeToString(b[:]))
}

func selectorOf(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Dynamic connects a dynamic client to a cluster, found as Clientset
// finds it.
func Dynamic(path string) (dynamic.Interface, error) {
	return NewDynamic(ClientOptions{Kubeconfig: path})
}

// NewDynamic is the dynamic client of the cluster o describes.
func NewDynamic(o ClientOptions) (dynamic.Interface, error) {
	cfg, err := RESTConfig(o)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}
