package kubernetes

import (
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
