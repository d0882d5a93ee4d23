package kubernetes

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

func defaults() *Options {
	return &Options{NamespaceTemplate: DefaultNamespaceTemplate, DefaultImage: DefaultImage, Fractions: FractionVisibleDevices}
}

func envOf(p *corev1.Pod) map[string]string {
	m := map[string]string{}
	for _, v := range p.Spec.Containers[0].Env {
		m[v.Name] = v.Value
	}
	return m
}

func TestWholeGPUPod(t *testing.T) {
	tk := gpuTask("wl-abc", "gpu-3", 2)
	tk.Image = "ghcr.io/acme/train:1"
	tk.Env = map[string]string{"EPOCHS": "3", EnvGPUFraction: "0.5"}
	tk.Request.MilliCPU, tk.Request.MemoryMiB = 4000, 8192
	p := buildPod(defaults(), tk, "gpufleet-research", 0, tk.Assignments, 1)

	if p.Name != "wl-abc-1" || p.Namespace != "gpufleet-research" || p.Spec.NodeName != "gpu-3" {
		t.Errorf("name, namespace, node: %s/%s on %q", p.Namespace, p.Name, p.Spec.NodeName)
	}
	if diff := cmp.Diff(map[string]string{LabelManaged: "true", LabelWorkload: "wl-abc", LabelAttempt: "1", LabelReplica: "0", LabelTeam: "research"}, p.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if got := p.Annotations[AnnotationGPUUUIDs]; got != "gpu-3/gpu0,gpu-3/gpu1" {
		t.Errorf("uuids annotation: %q", got)
	}
	if p.Spec.PriorityClassName != "gpufleet-training" || p.Spec.RestartPolicy != corev1.RestartPolicyNever || *p.Spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("spec: class %q, restart %q, grace %d", p.Spec.PriorityClassName, p.Spec.RestartPolicy, *p.Spec.TerminationGracePeriodSeconds)
	}
	c := p.Spec.Containers[0]
	if c.Image != "ghcr.io/acme/train:1" || !cmp.Equal(c.Command, []string{"python", "train.py"}) || len(c.Args) != 0 {
		t.Errorf("container: image %q command %q args %q", c.Image, c.Command, c.Args)
	}
	if q := c.Resources.Limits[ResourceGPU]; q.Value() != 2 {
		t.Errorf("gpu limit: %v", q.String())
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.MilliValue() != 4000 {
		t.Errorf("cpu request: %v", q.String())
	}
	if q := c.Resources.Requests[corev1.ResourceMemory]; !q.Equal(resource.MustParse("8Gi")) {
		t.Errorf("memory request: %v", q.String())
	}
	env := envOf(p)
	if env["EPOCHS"] != "3" || env[EnvWorkloadID] != "wl-abc" || env[EnvAttempt] != "1" {
		t.Errorf("env: %v", env)
	}
	if _, ok := env[EnvGPUFraction]; ok {
		t.Errorf("a whole-GPU pod carries %s", EnvGPUFraction)
	}
	if _, ok := env["NVIDIA_VISIBLE_DEVICES"]; ok {
		t.Errorf("a whole-GPU pod sets NVIDIA_VISIBLE_DEVICES; the device plugin does")
	}
}

func TestDefaultImageAndNoPriority(t *testing.T) {
	tk := executor.Task{WorkloadID: "WL_X", Attempt: 2, Command: []string{"true"}}
	p := buildPod(defaults(), tk, "ns", 0, nil, 1)
	if p.Spec.Containers[0].Image != DefaultImage || p.Spec.PriorityClassName != "" || p.Spec.NodeName != "" || p.Name != "wl-x-2" {
		t.Errorf("pod: image %q class %q node %q name %q", p.Spec.Containers[0].Image, p.Spec.PriorityClassName, p.Spec.NodeName, p.Name)
	}
	if p.Spec.Containers[0].Resources.Limits != nil {
		t.Errorf("limits: %v", p.Spec.Containers[0].Resources.Limits)
	}
}

func TestFractionalPod(t *testing.T) {
	tk := executor.Task{WorkloadID: "wl-f", Attempt: 1, Command: []string{"serve"}, Request: core.Request{MilliGPU: 500},
		Assignments: []core.Assignment{{Node: "n1", GPUIndex: 5, GPUUUID: "n1/gpu5", MilliGPU: 500, MemoryMiB: 40960}}}
	p := buildPod(defaults(), tk, "ns", 0, tk.Assignments, 1)
	env := envOf(p)
	if env["NVIDIA_VISIBLE_DEVICES"] != "5" || env[EnvGPUFraction] != "0.5" || env[EnvGPUMemoryLimit] != "40960" {
		t.Errorf("env: %v", env)
	}
	if _, ok := p.Spec.Containers[0].Resources.Limits[ResourceGPU]; ok {
		t.Errorf("visible-devices fraction asks the device plugin for a GPU")
	}
	o := defaults()
	o.Fractions = FractionTimeSlicing
	p = buildPod(o, tk, "ns", 0, tk.Assignments, 1)
	if q := p.Spec.Containers[0].Resources.Limits[ResourceGPU]; q.Value() != 1 {
		t.Errorf("time-slicing: gpu limit %v, want 1", q.String())
	}
	if _, ok := envOf(p)["NVIDIA_VISIBLE_DEVICES"]; ok {
		t.Errorf("time-slicing sets NVIDIA_VISIBLE_DEVICES")
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{PodName("wl-a", 3, 0, 1), "wl-a-3"},
		{PodName("wl-a", 3, 1, 4), "wl-a-3-r1"},
		{namespaceFor(DefaultNamespaceTemplate, "ML_Team"), "gpufleet-ml-team"},
		{namespaceFor("{team}-jobs", ""), "default-jobs"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestGraceSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 0, 300 * time.Millisecond: 1, 30 * time.Second: 30, -time.Second: 0} {
		if got := graceSeconds(d); got != want {
			t.Errorf("graceSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

// TestImageWithoutCommand: an image and no command is a pod that runs the
// image's entrypoint (no command in the container); neither is refused.
func TestImageWithoutCommand(t *testing.T) {
	tk := gpuTask("wl-img", "gpu-1", 1)
	tk.Image, tk.Command = "ghcr.io/acme/serve:2", nil
	p := buildPod(defaults(), tk, "ns", 0, tk.Assignments, 1)
	if c := p.Spec.Containers[0]; c.Image != tk.Image || c.Command != nil || c.Args != nil {
		t.Errorf("container: image %q command %q args %q", c.Image, c.Command, c.Args)
	}
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	tk.Image = ""
	if err := e.Start(t.Context(), tk); err == nil || !strings.Contains(err.Error(), "no image") {
		t.Errorf("Start without command or image: got %v", err)
	}
}

// TestPodPortsSecretsVolumes: ports become named container ports and the
// local executor's variables; secrets reach the pod only by reference;
// volumes, datasets, checkpoints and secret files are mounted.
func TestPodPortsSecretsVolumes(t *testing.T) {
	tk := gpuTask("wl-obj", "gpu-1", 1)
	tk.Ports = []core.Port{{Name: "http", Port: 8000}, {Port: 9090}, {Name: "Jupyter_Lab-Server-Long", Port: 8888}}
	tk.Env = map[string]string{"HF_TOKEN": "from-env", "KEEP": "1"}
	tk.SecretEnv = map[string]string{"HF_TOKEN": "s3cr3t-env-value"}
	tk.SecretFiles = map[string]map[string][]byte{"aws": {"credentials": []byte("s3cr3t-file-value"), "config": []byte("c")}}
	tk.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}, {Name: "models", Path: "/models", ReadOnly: true}}
	tk.Datasets = []executor.Dataset{{Name: "imagenet", HostPath: "/srv/imagenet", Path: "/datasets/imagenet"}}
	o := defaults()
	o.CheckpointBytes = 1 << 30
	p := buildPod(o, tk, "ns", 0, tk.Assignments, 1)
	c := p.Spec.Containers[0]

	wantPorts := []corev1.ContainerPort{{Name: "http", ContainerPort: 8000, Protocol: corev1.ProtocolTCP},
		{ContainerPort: 9090, Protocol: corev1.ProtocolTCP}, {Name: "jupyter-lab-ser", ContainerPort: 8888, Protocol: corev1.ProtocolTCP}}
	if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	env := envOf(p)
	for k, v := range map[string]string{"PORT": "8000", "GPUFLEET_PORT_HTTP": "8000", "GPUFLEET_PORT_8000": "8000",
		"GPUFLEET_PORT_9090": "9090", "GPUFLEET_PORT_JUPYTER_LAB_SERVER_LONG": "8888", "GPUFLEET_BASE_URL": "/w/wl-obj/8000/",
		executor.EnvSecretsDir: SecretsDir, EnvCheckpointDir: CheckpointDir, "KEEP": "1"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["HF_TOKEN"]; ok {
		t.Errorf("HF_TOKEN is in env, where it would win over the secret's envFrom")
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != EnvSecretName("wl-obj", 1) {
		t.Errorf("envFrom: %+v", c.EnvFrom)
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), "s3cr3t") {
		t.Errorf("a secret value is in the pod: %s", b)
	}

	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for path, want := range map[string]struct {
		claim string
		ro    bool
	}{"/data": {"gpufleet-vol-data", false}, "/models": {"gpufleet-vol-models", true}, CheckpointDir: {"gpufleet-ckpt-wl-obj", false}} {
		m := mounts[path]
		v := vols[m.Name].PersistentVolumeClaim
		if v == nil || v.ClaimName != want.claim || m.ReadOnly != want.ro || v.ReadOnly != want.ro {
			t.Errorf("mount %s: %+v of %+v, want claim %s read-only %v", path, m, v, want.claim, want.ro)
		}
	}
	m := mounts["/datasets/imagenet"]
	if hp := vols[m.Name].HostPath; hp == nil || hp.Path != "/srv/imagenet" || !m.ReadOnly {
		t.Errorf("dataset mount %+v of %+v", m, vols[m.Name])
	}
	m = mounts[SecretsDir]
	sv := vols[m.Name].Secret
	if sv == nil || sv.SecretName != FilesSecretName("wl-obj", 1) || *sv.DefaultMode != 0o400 || !m.ReadOnly {
		t.Fatalf("secret files mount %+v of %+v", m, vols[m.Name])
	}
	var paths []string
	for _, it := range sv.Items {
		paths = append(paths, it.Key+"="+it.Path)
		if *it.Mode != 0o400 {
			t.Errorf("item %s: mode %o", it.Path, *it.Mode)
		}
	}
	if diff := cmp.Diff([]string{"f0=aws/config", "f1=aws/credentials"}, paths); diff != "" {
		t.Errorf("secret items (-want +got):\n%s", diff)
	}
	secrets := buildSecrets(tk, "ns")
	if len(secrets) != 2 || string(secrets[0].Data["HF_TOKEN"]) != "s3cr3t-env-value" || string(secrets[1].Data["f1"]) != "s3cr3t-file-value" {
		t.Errorf("secrets: %+v", secrets)
	}
	if got := podSecrets(p); !cmp.Equal(got, []string{EnvSecretName("wl-obj", 1), FilesSecretName("wl-obj", 1)}) {
		t.Errorf("podSecrets: %q", got)
	}

	svc := buildService(tk, "ns")
	if svc.Name != "gpufleet-wl-obj" || svc.Spec.Selector[LabelAttempt] != "1" || len(svc.Spec.Ports) != 3 || svc.Spec.Ports[1].Name != "p9090" {
		t.Errorf("service: %+v", svc)
	}

	// Without ports, secrets or volumes, none of it: /dev/shm alone.
	p = buildPod(defaults(), gpuTask("wl-plain", "gpu-1", 1), "ns", 0, nil, 1)
	if c := p.Spec.Containers[0]; len(c.Ports)+len(c.EnvFrom) != 0 || len(c.VolumeMounts) != 1 || len(p.Spec.Volumes) != 1 {
		t.Errorf("plain pod: %+v", p.Spec)
	}
	if _, ok := envOf(p)[EnvCheckpointDir]; ok {
		t.Errorf("%s without a checkpoint claim", EnvCheckpointDir)
	}
}

func TestPortName(t *testing.T) {
	for in, want := range map[string]string{"http": "http", "HTTP_Alt": "http-alt", "8080": "", "--": "", "a--b": "a-b", "metrics-exporter-x": "metrics-exporte"} {
		if got := portName(in); got != want {
			t.Errorf("portName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPodSharedMemory: every pod gets a memory-backed /dev/shm of 1 GiB,
// or its memory request when that is larger (a container runtime's
// default of 64 MiB fails DataLoader workers and NCCL).
func TestPodSharedMemory(t *testing.T) {
	for _, tc := range []struct {
		memoryMiB int64
		want      string
	}{{0, "1Gi"}, {512, "1Gi"}, {3072, "3Gi"}} {
		tk := gpuTask("wl-shm", "gpu-1", 1)
		tk.Request.MemoryMiB = tc.memoryMiB
		p := buildPod(defaults(), tk, "ns", 0, nil, 1)
		var size string
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil {
				size = v.EmptyDir.SizeLimit.String()
			}
		}
		mounted := slices.ContainsFunc(p.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/dev/shm" })
		if size != tc.want || !mounted {
			t.Errorf("memory request %d MiB: /dev/shm of %q, mounted %t; want %s", tc.memoryMiB, size, mounted, tc.want)
		}
	}
}
