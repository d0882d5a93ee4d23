package kubernetes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

var _ executor.Volumes = (*Executor)(nil)

// Labels and annotations of the PersistentVolumeClaims gpufleet makes.
const (
	LabelVolume     = "gpufleet.io/volume"     // a team volume's name, as a DNS label
	LabelCheckpoint = "gpufleet.io/checkpoint" // "true" on a workload's checkpoint claim

	// The exact team and volume names (labels hold them as DNS labels).
	AnnotationTeamName   = "gpufleet.io/team-name"
	AnnotationVolumeName = "gpufleet.io/volume-name"

	// annotationSelectedNode is what kube-scheduler sets on a claim of a
	// WaitForFirstConsumer storage class to have it provisioned where the
	// pod runs; gpufleet's pods skip kube-scheduler, so gpufleet sets it.
	annotationSelectedNode = "volume.kubernetes.io/selected-node"
)

// CheckpointDir is where a pod finds its workload's checkpoint claim
// mounted, named by GPUFLEET_CHECKPOINT_DIR.
const (
	CheckpointDir    = "/var/run/gpufleet/checkpoint"
	EnvCheckpointDir = "GPUFLEET_CHECKPOINT_DIR"
)

// VolumeClaimName and CheckpointClaimName name the claims of a team volume
// (in the team's namespace) and of a workload's checkpoints.
func VolumeClaimName(name string) string            { return dnsLabel("gpufleet-vol-" + name) }
func CheckpointClaimName(id core.WorkloadID) string { return dnsLabel("gpufleet-ckpt-" + string(id)) }

func (e *Executor) accessMode() corev1.PersistentVolumeAccessMode {
	return cmp.Or(corev1.PersistentVolumeAccessMode(e.opts.VolumeAccessMode), corev1.ReadWriteOnce)
}

// buildClaim builds a claim of size bytes with the executor's access mode
// and storage class.
func (e *Executor) buildClaim(ns, name string, size int64, labels, annotations map[string]string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{e.accessMode()},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI),
			}},
		},
	}
	if e.opts.StorageClass != "" {
		sc := e.opts.StorageClass
		pvc.Spec.StorageClassName = &sc
	}
	return pvc
}

// EnsureVolume implements executor.Volumes: it creates the claim
// gpufleet-vol-<name> in the team's namespace (and the namespace), or
// raises the request of one that asks for less than size (which its storage
// class must allow); a claim with at least size is left as it is.
func (e *Executor) EnsureVolume(ctx context.Context, team core.TeamName, name string, sizeBytes int64) error {
	fail := func(err error) error { return fmt.Errorf("volume %s/%s: %w", team, name, err) }
	if name == "" || sizeBytes <= 0 {
		return fail(fmt.Errorf("want a name and a size above 0, got %q and %d", name, sizeBytes))
	}
	ns := namespaceFor(e.opts.NamespaceTemplate, team)
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return fail(err)
	}
	want := e.buildClaim(ns, VolumeClaimName(name), sizeBytes,
		map[string]string{LabelManaged: "true", LabelTeam: teamLabel(team), LabelVolume: dnsLabel(name)},
		map[string]string{AnnotationTeamName: string(team), AnnotationVolumeName: name})
	pc := e.opts.Client.CoreV1().PersistentVolumeClaims(ns)
	old, err := pc.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err = pc.Create(ctx, want, metav1.CreateOptions{}); err == nil {
			e.log.Info("volume claim created", "namespace", ns, "claim", want.Name, "bytes", sizeBytes)
			return nil
		}
	}
	if err != nil {
		return fail(fmt.Errorf("claim %s/%s: %w", ns, want.Name, err))
	}
	if old.Annotations[AnnotationVolumeName] != name || old.Annotations[AnnotationTeamName] != string(team) {
		return fail(fmt.Errorf("claim %s/%s belongs to volume %s/%s", ns, want.Name,
			old.Annotations[AnnotationTeamName], old.Annotations[AnnotationVolumeName]))
	}
	have := old.Spec.Resources.Requests[corev1.ResourceStorage]
	if have.Value() >= sizeBytes {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{
		"requests": map[string]string{string(corev1.ResourceStorage): strconv.FormatInt(sizeBytes, 10)}}}})
	if _, err := pc.Patch(ctx, want.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fail(fmt.Errorf("expand claim %s/%s from %s to %d bytes: %w", ns, want.Name, have.String(), sizeBytes, err))
	}
	return nil
}

// DeleteVolume implements executor.Volumes: it deletes the claim, and so
// (with the usual reclaim policy, Delete) the data.
func (e *Executor) DeleteVolume(ctx context.Context, team core.TeamName, name string) error {
	ns := namespaceFor(e.opts.NamespaceTemplate, team)
	err := e.opts.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, VolumeClaimName(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("volume %s/%s: delete claim %s/%s: %w", team, name, ns, VolumeClaimName(name), err)
	}
	return nil
}

// ListVolumes implements executor.Volumes: the team volumes' claims in the
// namespaces of this executor's template, sorted by team and name; a claim
// being deleted is not listed.
func (e *Executor) ListVolumes(ctx context.Context) ([]executor.VolumeRef, error) {
	list, err := e.opts.Client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx,
		metav1.ListOptions{LabelSelector: LabelManaged + "=true," + LabelVolume})
	if err != nil {
		return nil, fmt.Errorf("list volume claims: %w", err)
	}
	var out []executor.VolumeRef
	for _, c := range list.Items {
		team, name := c.Annotations[AnnotationTeamName], c.Annotations[AnnotationVolumeName]
		if name == "" || c.DeletionTimestamp != nil || !ownsNamespace(e.opts.NamespaceTemplate, c.Namespace) || c.Namespace != namespaceFor(e.opts.NamespaceTemplate, core.TeamName(team)) {
			continue
		}
		out = append(out, executor.VolumeRef{Team: core.TeamName(team), Name: name})
	}
	slices.SortFunc(out, func(a, b executor.VolumeRef) int {
		return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// VolumeUsage implements executor.Volumes: always -1, as what a claim
// holds is known to the kubelet that mounts it, not to the API server.
func (e *Executor) VolumeUsage(context.Context, core.TeamName, string) (int64, error) { return -1, nil }

// ensureCheckpoint creates the workload's checkpoint claim, once, when
// Options.CheckpointBytes is set.
func (e *Executor) ensureCheckpoint(ctx context.Context, t executor.Task, ns string) error {
	name := CheckpointClaimName(t.WorkloadID)
	pc := e.opts.Client.CoreV1().PersistentVolumeClaims(ns)
	if _, err := pc.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("checkpoint claim %s/%s: %w", ns, name, err)
	}
	c := e.buildClaim(ns, name, e.opts.CheckpointBytes, map[string]string{LabelManaged: "true", LabelTeam: teamLabel(t.Team),
		LabelWorkload: dnsLabel(string(t.WorkloadID)), LabelCheckpoint: "true"}, nil)
	if _, err := pc.Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("checkpoint claim %s/%s: %w", ns, name, err)
	}
	return nil
}

// selectNode sets the selected-node annotation on the pod's claims that
// are still Pending without one (a WaitForFirstConsumer class waits for
// it), as kube-scheduler would have.
func (e *Executor) selectNode(ctx context.Context, ns, node string, claims []string) error {
	if node == "" {
		return nil
	}
	pc := e.opts.Client.CoreV1().PersistentVolumeClaims(ns)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotationSelectedNode: node}}})
	var errs []error
	for _, name := range claims {
		c, err := pc.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("claim %s/%s: %w", ns, name, err))
			continue
		}
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" || c.Annotations[annotationSelectedNode] != "" {
			continue
		}
		if _, err := pc.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("claim %s/%s: select node %s: %w", ns, name, node, err))
		}
	}
	return errors.Join(errs...)
}

// taskClaims lists the claims a task's pods mount.
func (e *Executor) taskClaims(t executor.Task) []string {
	var out []string
	for _, v := range t.Volumes {
		out = append(out, VolumeClaimName(v.Name))
	}
	if e.opts.CheckpointBytes > 0 {
		out = append(out, CheckpointClaimName(t.WorkloadID))
	}
	return out
}

// DeleteWorkload removes what a workload keeps across its attempts: its
// Service and its checkpoint claim (and the checkpoints). Call it once the
// workload is done (and, for checkpoints, the time to keep them has
// passed); what does not exist is no error.
func (e *Executor) DeleteWorkload(ctx context.Context, team core.TeamName, id core.WorkloadID) error {
	ns := namespaceFor(e.opts.NamespaceTemplate, team)
	var errs []error
	if err := e.opts.Client.CoreV1().Services(ns).Delete(ctx, ServiceName(id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete service %s/%s: %w", ns, ServiceName(id), err))
	}
	if err := e.opts.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, CheckpointClaimName(id), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete checkpoint claim %s/%s: %w", ns, CheckpointClaimName(id), err))
	}
	return errors.Join(errs...)
}

// podVolumes adds to a pod the volumes of its task: team volumes (their
// claims, read-only when asked), datasets (host paths, read-only), the
// checkpoint claim and the secret files.
func podVolumes(o *Options, t executor.Task, p *corev1.Pod) {
	spec := &p.Spec
	c := &spec.Containers[0]
	for i, v := range t.Volumes {
		name := "vol-" + strconv.Itoa(i)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: VolumeClaimName(v.Name), ReadOnly: v.ReadOnly}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: v.Path, ReadOnly: v.ReadOnly})
	}
	dir := corev1.HostPathDirectory
	for i, d := range t.Datasets {
		name := "dataset-" + strconv.Itoa(i)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: d.HostPath, Type: &dir}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: d.Path, ReadOnly: true})
	}
	if o.CheckpointBytes > 0 {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "checkpoint", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: CheckpointClaimName(t.WorkloadID)}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "checkpoint", MountPath: CheckpointDir})
	}
	if items := secretFileItems(t.SecretFiles); len(items) > 0 {
		mode := int32(0o400)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: secretsVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: FilesSecretName(t.WorkloadID, t.Attempt), Items: items, DefaultMode: &mode}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: secretsVolume, MountPath: SecretsDir, ReadOnly: true})
	}
	if len(t.SecretEnv) > 0 {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: EnvSecretName(t.WorkloadID, t.Attempt)}}})
	}
	// /dev/shm: a container runtime's default is 64 MiB, too little for a
	// DataLoader's workers or NCCL; a memory-backed volume of 1 GiB, or
	// the replica's memory request when larger (it counts against the
	// pod's memory, as the local executor's tmpfs does).
	shm := resource.NewQuantity(max(1<<30, t.Request.MemoryMiB<<20), resource.BinarySI)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: shm}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: shmVolume, MountPath: "/dev/shm"})
}

// shmVolume is the name of a pod's /dev/shm volume.
const shmVolume = "dshm"
