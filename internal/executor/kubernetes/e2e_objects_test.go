package kubernetes

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// TestIntegrationObjects drives the executor alone against a real API
// server (GPUFLEET_K8S_KUBECONFIG; skipped without it) with a task that
// has ports, secrets, a team volume, a dataset and a checkpoint claim: the
// pod refers to each object, the objects exist and hold what they should,
// no secret value is in the pod, the Secrets go with the attempt (at its
// end, or with its pods through their owners when nobody tracks it), the
// Service follows the attempts, and Endpoint finds the pod's IP.
func TestIntegrationObjects(t *testing.T) {
	x := newE2E(t, 1, 8)
	client := x.client
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const team = "objects"
	ns := x.namespace(team)
	opts := Options{Client: client, NamespaceTemplate: x.nsPrefix() + "{team}", CheckpointBytes: 1 << 30}
	e, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}

	// Team volumes.
	for range 2 { // idempotent
		if err := e.EnsureVolume(ctx, team, "data", 10<<30); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.EnsureVolume(ctx, team, "data", 1<<30); err != nil { // smaller: left as it is
		t.Fatal(err)
	}
	pvc, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "gpufleet-vol-data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; q.Value() != 10<<30 || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) ||
		pvc.Labels[LabelManaged] != "true" || pvc.Labels[LabelTeam] != team || pvc.Labels[LabelVolume] != "data" {
		t.Errorf("claim: request %v, modes %v, labels %v", q.String(), pvc.Spec.AccessModes, pvc.Labels)
	}
	if err := e.EnsureVolume(ctx, team, "", 1); err == nil {
		t.Errorf("EnsureVolume without a name: no error")
	}
	refs, err := e.ListVolumes(ctx)
	if err != nil || !slices.Contains(refs, executor.VolumeRef{Team: team, Name: "data"}) {
		t.Fatalf("ListVolumes: %v, %v", refs, err)
	}
	if u, err := e.VolumeUsage(ctx, team, "data"); u != -1 || err != nil {
		t.Errorf("VolumeUsage: %d, %v", u, err)
	}

	node := core.NodeName(x.nodes[0])
	id := core.WorkloadID("wl-obj-" + time.Now().Format("150405"))
	tk := executor.Task{WorkloadID: id, Attempt: 1, Team: team, Image: e2eImage,
		Command: []string{"serve"}, GracePeriod: time.Second, Request: core.Request{MilliGPU: 1000},
		Assignments: []core.Assignment{{Node: node, GPUIndex: 0, GPUUUID: string(node) + "/gpu0", MilliGPU: 1000}},
		Ports:       []core.Port{{Name: "http", Port: 8000}, {Port: 9090}},
		SecretEnv:   map[string]string{"HF_TOKEN": "hf-s3cr3t-value"},
		SecretFiles: map[string]map[string][]byte{"aws": {"credentials": []byte("aws-s3cr3t-value")}},
		Volumes:     []core.VolumeMount{{Name: "data", Path: "/data", ReadOnly: true}},
		Datasets:    []executor.Dataset{{Name: "imagenet", HostPath: "/srv/imagenet", Path: "/datasets/imagenet"}},
	}
	if _, ok := e.Endpoint(id, 1, 8000); ok {
		t.Errorf("Endpoint before Start")
	}
	if err := e.Start(ctx, tk); err != nil {
		t.Fatal(err)
	}
	name := PodName(id, 1, 0, 1)
	var pod *corev1.Pod
	x.waitFor(30*time.Second, "pod Running", func() (bool, string) {
		pod, err = client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "", string(pod.Status.Phase)
	})
	b, _ := json.Marshal(pod)
	if strings.Contains(string(b), "s3cr3t") {
		t.Errorf("a secret value is in the pod object: %s", b)
	}
	c := pod.Spec.Containers[0]
	if len(c.Ports) != 2 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8000 {
		t.Errorf("container ports: %+v", c.Ports)
	}
	env := envOf(pod)
	if env["PORT"] != "8000" || env["GPUFLEET_PORT_HTTP"] != "8000" || env[executor.EnvSecretsDir] != SecretsDir || env[EnvCheckpointDir] != CheckpointDir {
		t.Errorf("env: %v", env)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != EnvSecretName(id, 1) {
		t.Errorf("envFrom: %+v", c.EnvFrom)
	}
	byPath := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		byPath[m.MountPath] = m
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	if m := byPath["/datasets/imagenet"]; !m.ReadOnly || vols[m.Name].HostPath == nil || vols[m.Name].HostPath.Path != "/srv/imagenet" {
		t.Errorf("dataset: %+v, %+v", m, vols[m.Name])
	}
	if m := byPath["/data"]; !m.ReadOnly || vols[m.Name].PersistentVolumeClaim == nil || vols[m.Name].PersistentVolumeClaim.ClaimName != "gpufleet-vol-data" {
		t.Errorf("volume: %+v, %+v", m, vols[m.Name])
	}
	if m := byPath[SecretsDir]; vols[m.Name].Secret == nil || *vols[m.Name].Secret.DefaultMode != 0o400 || !m.ReadOnly {
		t.Errorf("secret files: %+v, %+v", m, vols[m.Name])
	}
	if m := byPath[CheckpointDir]; vols[m.Name].PersistentVolumeClaim == nil || vols[m.Name].PersistentVolumeClaim.ClaimName != CheckpointClaimName(id) {
		t.Errorf("checkpoint: %+v, %+v", m, vols[m.Name])
	}

	// The Secrets hold the values and are owned by the pod.
	for sname, want := range map[string]map[string]string{
		EnvSecretName(id, 1): {"HF_TOKEN": "hf-s3cr3t-value"}, FilesSecretName(id, 1): {"f0": "aws-s3cr3t-value"},
	} {
		s, err := client.CoreV1().Secrets(ns).Get(ctx, sname, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("secret %s: %v", sname, err)
		}
		for k, v := range want {
			if string(s.Data[k]) != v {
				t.Errorf("secret %s: %s = %q", sname, k, s.Data[k])
			}
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != pod.UID {
			t.Errorf("secret %s: owners %+v, want the pod %s", sname, s.OwnerReferences, pod.UID)
		}
	}
	// The claims: the checkpoint made, both told the node (no scheduler
	// will: the pod has its node).
	for _, cname := range []string{CheckpointClaimName(id), "gpufleet-vol-data"} {
		c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, cname, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim %s: %v", cname, err)
		}
		if c.Annotations[annotationSelectedNode] != string(node) {
			t.Errorf("claim %s: annotations %v", cname, c.Annotations)
		}
	}
	svc, err := client.CoreV1().Services(ns).Get(ctx, ServiceName(id), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector[LabelAttempt] != "1" || len(svc.Spec.Ports) != 2 {
		t.Errorf("service: %+v", svc.Spec)
	}
	x.waitFor(10*time.Second, "Endpoint", func() (bool, string) {
		got, ok := e.Endpoint(id, 1, 8000)
		return ok && got == pod.Status.PodIP+":8000", got
	})
	if got, ok := e.Endpoint(id, 1, 7777); ok {
		t.Errorf("Endpoint of an undeclared port: %s", got)
	}

	// The attempt ends: its Secrets go.
	if err := e.Stop(ctx, id, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Exits():
	case <-ctx.Done():
		t.Fatal("no exit after Stop")
	}
	waitSecretsGone(x, ns, EnvSecretName(id, 1), FilesSecretName(id, 1))
	if _, ok := e.Endpoint(id, 1, 8000); ok {
		t.Errorf("Endpoint of a stopped attempt")
	}

	// Attempt 2: the Service follows it. Then a new executor (a restart)
	// that does not adopt it deletes its pod as an orphan, and the garbage
	// collector deletes its Secret with its pod.
	tk.Attempt = 2
	if err := e.Start(ctx, tk); err != nil {
		t.Fatal(err)
	}
	svc, err = client.CoreV1().Services(ns).Get(ctx, ServiceName(id), metav1.GetOptions{})
	if err != nil || svc.Spec.Selector[LabelAttempt] != "2" {
		t.Fatalf("service after a requeue: %v, %v", svc.Spec.Selector, err)
	}
	ctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	e2, err := New(ctx2, opts)
	if err != nil {
		t.Fatal(err)
	}
	x.waitFor(10*time.Second, "pod of attempt 2 pending or running", func() (bool, string) {
		return len(e2.attemptPods(id, 2)) == 1, ""
	})
	if _, err := e2.DeleteOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	waitSecretsGone(x, ns, EnvSecretName(id, 2), FilesSecretName(id, 2))

	// The workload is done: its Service and checkpoint claim go; then the
	// team volume.
	if err := e.DeleteWorkload(ctx, team, id); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Get(ctx, ServiceName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service after DeleteWorkload: %v", err)
	}
	if c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, CheckpointClaimName(id), metav1.GetOptions{}); !apierrors.IsNotFound(err) && (err != nil || c.DeletionTimestamp == nil) {
		t.Errorf("checkpoint claim after DeleteWorkload: %v", err)
	}
	if err := e.DeleteVolume(ctx, team, "data"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteVolume(ctx, team, "data"); err != nil {
		t.Errorf("DeleteVolume twice: %v", err)
	}
	refs, err = e.ListVolumes(ctx)
	if err != nil || slices.Contains(refs, executor.VolumeRef{Team: team, Name: "data"}) {
		t.Errorf("ListVolumes after DeleteVolume: %v, %v", refs, err)
	}
}

func waitSecretsGone(x *e2e, ns string, names ...string) {
	x.t.Helper()
	x.waitFor(60*time.Second, "secrets deleted", func() (bool, string) {
		for _, n := range names {
			if _, err := x.client.CoreV1().Secrets(ns).Get(context.Background(), n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, n + " still there"
			}
		}
		return true, ""
	})
}
