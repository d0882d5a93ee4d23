package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// tableLookup is a nativeLookup from tables: owners by name (with their
// size), PodGroups' minCounts, namespaces' labels.
type tableLookup struct {
	owners     map[string]int // "Kind/name" → size
	ownerErr   error
	podGroups  map[string]int
	namespaces map[string]map[string]string
}

func (l tableLookup) owner(_ context.Context, _ string, ref metav1.OwnerReference) (core.NativeOwner, int, error) {
	top := core.NativeOwner{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}
	if l.ownerErr != nil {
		return top, 0, l.ownerErr
	}
	return top, l.owners[ref.Kind+"/"+ref.Name], nil
}

func (l tableLookup) podGroup(_ context.Context, _, name string) (int, error) {
	n, ok := l.podGroups[name]
	if !ok {
		return 0, errors.New("not found (deleted, or its API is not served)")
	}
	return n, nil
}

func (l tableLookup) namespaceLabels(ns string) map[string]string { return l.namespaces[ns] }

// npod is a native pod of team asking for gpus GPUs, changed by mods.
func npod(name, team string, gpus int64, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "train", "idx": name},
			Annotations: map[string]string{}, CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Spec: corev1.PodSpec{SchedulerName: DefaultSchedulerName, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}},
	}
	if team != "" {
		p.Labels[LabelTeam] = team
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func gangOfSize(name, size string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels[LabelGang] = name
		p.Annotations[AnnotationGangSize] = size
	}
}

func ownedBy(apiVersion, kind, name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: "uid-" + types.UID(name), Controller: new(true)}}
	}
}

// summary is what a test reads of a submission: the pods, the gang, the
// team and class, the ask, or the wait.
func summary(s executor.NativeSubmission) string {
	var pods []string
	for _, p := range s.Native.Pods {
		pods = append(pods, p.Name)
	}
	head := fmt.Sprintf("%s[%s]", s.Native.Name, strings.Join(pods, ","))
	if s.Native.Group != "" {
		head += " by " + s.Native.Group
	}
	if s.Wait != nil {
		return fmt.Sprintf("%s waits: %s %s: %s", head, s.Wait.Reason, s.Wait.Field, s.Wait.Message)
	}
	return fmt.Sprintf("%s: team %s (%s), class %q (%s), %d×%d mGPU %d mCPU %d MiB, selector %v", head, s.Team, s.TeamFrom, s.Priority, s.PriorityFrom,
		s.Request.Count(), s.Request.MilliGPU, s.Request.MilliCPU, s.Request.MemoryMiB, s.Request.NodeSelector)
}

// TestNativeSubmissions is the table of native pods and the submissions
// they make: teams, classes, gangs of every kind, and the waits that name
// what is wrong.
func TestNativeSubmissions(t *testing.T) {
	look := tableLookup{
		owners:     map[string]int{"Job/train": 2, "PyTorchJob/mnist": 2, "ReplicaSet/web": 0},
		podGroups:  map[string]int{"pg": 2, "basic": 0},
		namespaces: map[string]map[string]string{"ml": {"team": "vision"}},
	}
	opts := NativeOptions{SchedulerName: DefaultSchedulerName, TeamAliases: map[string]string{"queue-a": "research"}, NamespaceTeamLabel: "team"}
	tests := []struct {
		name  string
		pods  []*corev1.Pod
		taken []string
		look  *tableLookup
		opts  *NativeOptions
		want  []string
	}{
		{"a pod alone", []*corev1.Pod{npod("a", "k", 1)}, nil, nil, nil,
			[]string{`a[a]: team k (gpufleet.io/team), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"team from Kueue's queue, through an alias", []*corev1.Pod{npod("a", "", 2, func(p *corev1.Pod) { p.Labels[LabelKueueQueue] = "queue-a" })}, nil, nil, nil,
			[]string{`a[a]: team research (kueue.x-k8s.io/queue-name), class "" (), 1×2000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"team from KAI's queue", []*corev1.Pod{npod("a", "", 1, func(p *corev1.Pod) { p.Labels[LabelKAIQueue] = "k" })}, nil, nil, nil,
			[]string{`a[a]: team k (kai.scheduler/queue), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"team from the namespace", []*corev1.Pod{npod("a", "", 1)}, nil, nil, nil,
			[]string{`a[a]: team vision (label team of namespace ml), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"no team", []*corev1.Pod{npod("a", "", 1)}, nil, &tableLookup{}, nil,
			[]string{`a[a] waits: NoTeam gpufleet.io/team: the pod names no team: gpufleet reads it from the pod's label gpufleet.io/team, kueue.x-k8s.io/queue-name, kai.scheduler/queue, or the namespace's label team`}},
		{"class from gpufleet.io/priority, then priorityClassName", []*corev1.Pod{
			npod("a", "k", 1, func(p *corev1.Pod) {
				p.Labels[LabelPriority] = "batch"
				p.Spec.PriorityClassName = "gpufleet-production"
			}),
			npod("b", "k", 1, func(p *corev1.Pod) { p.Spec.PriorityClassName = "gpufleet-production" }),
			npod("c", "k", 1, func(p *corev1.Pod) { p.Spec.PriorityClassName = "cluster-default" }),
		}, nil, nil, nil, []string{
			`a[a]: team k (gpufleet.io/team), class "batch" (gpufleet.io/priority), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`,
			`b[b]: team k (gpufleet.io/team), class "production" (priorityClassName), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`,
			`c[c]: team k (gpufleet.io/team), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`,
		}},
		{"a gang waits for its pods", []*corev1.Pod{npod("g0", "k", 1, gangOfSize("g", "2"))}, nil, nil, nil,
			[]string{`g[g0] by gpufleet.io/gang waits: GangIncomplete gpufleet.io/gang-size: gang "g" has 1 of its 2 pods; gpufleet admits them all at once when the rest are made`}},
		{"a gang whose pods select different nodes", []*corev1.Pod{
			npod("g0", "k", 1, gangOfSize("g", "2")),
			npod("g1", "k", 2, gangOfSize("g", "2"), func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }),
		}, nil, nil, nil, []string{`g[g0,g1] by gpufleet.io/gang waits: InvalidGang spec.nodeSelector: the pods of gang "g" select different nodes: gpufleet places a gang's pods alike`}},
		{"a whole gang: the largest ask of its pods", []*corev1.Pod{npod("g0", "k", 1, gangOfSize("g", "2")), npod("g1", "k", 2, gangOfSize("g", "2"))}, nil, nil, nil,
			[]string{`g[g0,g1] by gpufleet.io/gang: team k (gpufleet.io/team), class "" (), 2×2000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"a gang larger than its size", []*corev1.Pod{npod("g0", "k", 1, gangOfSize("g", "1")), npod("g1", "k", 1, gangOfSize("g", "1"))}, nil, nil, nil,
			[]string{`g[g0,g1] by gpufleet.io/gang waits: InvalidGang gpufleet.io/gang-size: gang "g" has 2 pods, more than its size 1`}},
		{"sizes that disagree", []*corev1.Pod{npod("g0", "k", 1, gangOfSize("g", "2")), npod("g1", "k", 1, gangOfSize("g", "3"))}, nil, nil, nil,
			[]string{`g[g0,g1] by gpufleet.io/gang waits: InvalidGang gpufleet.io/gang-size: the pods of gang "g" disagree on its size (2, 3): give them all the same`}},
		{"a size that is no number", []*corev1.Pod{npod("g0", "k", 1, gangOfSize("g", "two"))}, nil, nil, nil,
			[]string{`g0[g0] waits: InvalidGang gpufleet.io/gang-size: "two" is not a whole number of pods from 1 to 256`}},
		{"teams that disagree", []*corev1.Pod{npod("g0", "k", 1, gangOfSize("g", "2")), npod("g1", "j", 1, gangOfSize("g", "2"))}, nil, nil, nil,
			[]string{`g[g0,g1] by gpufleet.io/gang waits: InvalidGang gpufleet.io/team: the pods of gang "g" name different teams (k, j): a gang is one team's`}},
		{"Kueue's pod group", []*corev1.Pod{
			npod("q0", "k", 1, func(p *corev1.Pod) {
				p.Labels[LabelKueuePodGroup] = "q"
				p.Annotations[AnnotationKueueGroupCount] = "2"
			}),
			npod("q1", "k", 1, func(p *corev1.Pod) {
				p.Labels[LabelKueuePodGroup] = "q"
				p.Annotations[AnnotationKueueGroupCount] = "2"
			}),
		}, nil, nil, nil, []string{`q[q0,q1] by kueue.x-k8s.io/pod-group-name: team k (gpufleet.io/team), class "" (), 2×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"KAI's pod group without a size", []*corev1.Pod{npod("p0", "k", 1, func(p *corev1.Pod) { p.Annotations[AnnotationKAIPodGroup] = "p" })}, nil, nil, nil,
			[]string{`p0[p0] waits: InvalidGang pod-group-name: the size of pod group "p" is unknown: set kai.scheduler/batch-min-member (or gpufleet.io/gang-size) on its pods`}},
		{"an upstream PodGroup", []*corev1.Pod{
			npod("u0", "k", 1, func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: new("pg")} }),
			npod("u1", "k", 1, func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: new("pg")} }),
		}, nil, nil, nil, []string{`pg[u0,u1] by PodGroup: team k (gpufleet.io/team), class "" (), 2×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"a basic PodGroup: each pod alone", []*corev1.Pod{
			npod("u0", "k", 1, func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: new("basic")} }),
		}, nil, nil, nil, []string{`u0[u0]: team k (gpufleet.io/team), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"a PodGroup that is missing", []*corev1.Pod{
			npod("u0", "k", 1, func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: new("gone")} }),
		}, nil, nil, nil, []string{`u0[u0] waits: InvalidGang spec.schedulingGroup.podGroupName: PodGroup gone: not found (deleted, or its API is not served)`}},
		{"a Job's pods, grouped by their owner", []*corev1.Pod{
			npod("train-x", "k", 1, ownedBy("batch/v1", "Job", "train")), npod("train-y", "k", 1, ownedBy("batch/v1", "Job", "train")),
		}, nil, nil, nil, []string{`train[train-x,train-y] by owner: team k (gpufleet.io/team), class "" (), 2×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"a Job's pod made again beside one that runs", []*corev1.Pod{
			npod("train-x", "k", 1, ownedBy("batch/v1", "Job", "train"), func(p *corev1.Pod) { p.Spec.NodeName = "n1" }),
			npod("train-z", "k", 1, ownedBy("batch/v1", "Job", "train")),
		}, nil, nil, nil, []string{`train[train-z] by owner: team k (gpufleet.io/team), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"pods a workload holds already count, and are not submitted again", []*corev1.Pod{
			npod("w-0", "k", 1, ownedBy("kubeflow.org/v1", "PyTorchJob", "mnist")), npod("w-1", "k", 1, ownedBy("kubeflow.org/v1", "PyTorchJob", "mnist")),
		}, []string{"uid-w-0", "uid-w-1"}, nil, nil, nil},
		{"a ReplicaSet's pods are each alone", []*corev1.Pod{npod("web-1", "k", 1, ownedBy("apps/v1", "ReplicaSet", "web"))}, nil, nil, nil,
			[]string{`web-1[web-1]: team k (gpufleet.io/team), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[]`}},
		{"an owner that cannot be read", []*corev1.Pod{npod("a", "k", 1, ownedBy("batch/v1", "Job", "train"))}, nil,
			&tableLookup{ownerErr: errors.New("forbidden")}, nil,
			[]string{`a[a] waits: OwnerUnreadable metadata.ownerReferences: Job train, which gpufleet reads to group its pods: forbidden`}},
		{"a share of a GPU", []*corev1.Pod{npod("half", "k", 0, func(p *corev1.Pod) { p.Annotations[AnnotationGPUs] = "0.5" })}, nil, nil, nil,
			[]string{`half[half] waits: FractionsUnsupported gpufleet.io/gpus: "0.5" asks for a share of a GPU; gpufleet admits pods made with kubectl for whole GPUs only, since a share needs a device-sharing path it does not set up for them yet: ask for whole GPUs (resources.limits nvidia.com/gpu), or submit the share through gpufleet (gpufleet submit --gpus 0.5)`}},
		{"a share of a GPU waits as such, whatever its team", []*corev1.Pod{npod("half", "", 1, func(p *corev1.Pod) { p.Annotations[AnnotationKAIFraction] = "0.5" })},
			nil, &tableLookup{}, nil,
			[]string{`half[half] waits: FractionsUnsupported gpu-fraction: "0.5" asks for a share of a GPU; gpufleet admits pods made with kubectl for whole GPUs only, since a share needs a device-sharing path it does not set up for them yet: ask for whole GPUs (resources.limits nvidia.com/gpu), or submit the share through gpufleet (gpufleet submit --gpus 0.5)`}},
		{"KAI's share of a GPU", []*corev1.Pod{npod("half", "k", 0, func(p *corev1.Pod) { p.Annotations[AnnotationKAIMemory] = "20000" })}, nil, nil, nil,
			[]string{`half[half] waits: FractionsUnsupported gpu-memory: "20000" asks for a share of a GPU; gpufleet admits pods made with kubectl for whole GPUs only, since a share needs a device-sharing path it does not set up for them yet: ask for whole GPUs (resources.limits nvidia.com/gpu), or submit the share through gpufleet (gpufleet submit --gpus 20000)`}},
		{"a count that is not whole", []*corev1.Pod{npod("odd", "k", 1, func(p *corev1.Pod) { p.Annotations[AnnotationGPUs] = "1.5" })}, nil, nil, nil,
			[]string{`odd[odd] waits: InvalidGPURequest gpufleet.io/gpus: "1.5" is not a whole number of GPUs: above one GPU the count must be whole (a share is of one GPU)`}},
		{"a count that disagrees with the limits", []*corev1.Pod{npod("two", "k", 1, func(p *corev1.Pod) { p.Annotations[AnnotationGPUs] = "2" })}, nil, nil, nil,
			[]string{`two[two] waits: InvalidGPURequest gpufleet.io/gpus: "2" GPUs, but the containers' resources.limits nvidia.com/gpu add up to 1: the device plugin gives a container the GPUs of its limit, so set the limit to the count`}},
		{"no GPU", []*corev1.Pod{npod("cpu", "k", 0)}, nil, nil, nil,
			[]string{`cpu[cpu] waits: NoGPU resources.limits[nvidia.com/gpu]: the pod asks for no GPU, and gpufleet places GPU pods: leave schedulerName out to have kube-scheduler place it`}},
		{"pods not gpufleet's, bound, ended or being deleted are left alone", []*corev1.Pod{
			npod("other", "k", 1, func(p *corev1.Pod) { p.Spec.SchedulerName = "default-scheduler" }),
			npod("ours", "k", 1, func(p *corev1.Pod) { p.Labels[LabelManaged] = "true" }),
			npod("bound", "k", 1, func(p *corev1.Pod) { p.Spec.NodeName = "n1" }),
			npod("done", "k", 1, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			npod("going", "k", 1, func(p *corev1.Pod) { p.DeletionTimestamp = new(metav1.Now()) }),
		}, nil, nil, nil, nil},
		{"a cluster of several selects its nodes", []*corev1.Pod{npod("a", "k", 1)}, nil, nil,
			&NativeOptions{SchedulerName: DefaultSchedulerName, Cluster: "east"},
			[]string{`a[a]: team k (gpufleet.io/team), class "" (), 1×1000 mGPU 2000 mCPU 4096 MiB, selector map[gpufleet.io/cluster:east]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, o := look, opts
			if tt.look != nil {
				l = *tt.look
			}
			if tt.opts != nil {
				o = *tt.opts
			}
			r := nativeReader{opts: o, look: l}
			taken := func(uid string) bool {
				for _, u := range tt.taken {
					if u == uid {
						return true
					}
				}
				return false
			}
			var got []string
			for _, s := range r.submissions(context.Background(), tt.pods, taken) {
				got = append(got, summary(s))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("submissions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNativeSubmissionLabels: a workload of native pods carries the labels
// its pods share, its namespace and its owner, and its pods' UIDs.
func TestNativeSubmissionLabels(t *testing.T) {
	r := nativeReader{opts: NativeOptions{SchedulerName: DefaultSchedulerName}, look: tableLookup{owners: map[string]int{"PyTorchJob/mnist": 2}}}
	pods := []*corev1.Pod{
		npod("mnist-worker-0", "k", 1, ownedBy("kubeflow.org/v1", "PyTorchJob", "mnist"), func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = new(int64(5)) }),
		npod("mnist-worker-1", "k", 1, ownedBy("kubeflow.org/v1", "PyTorchJob", "mnist"), func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = new(int64(20)) }),
	}
	subs := r.submissions(context.Background(), pods, func(string) bool { return false })
	if len(subs) != 1 {
		t.Fatalf("%d submissions, want 1", len(subs))
	}
	s := subs[0]
	want := executor.NativeSubmission{
		Native: core.Native{Namespace: "ml", Name: "mnist", Group: "owner",
			Pods:  []core.NativePod{{Name: "mnist-worker-0", UID: "uid-mnist-worker-0"}, {Name: "mnist-worker-1", UID: "uid-mnist-worker-1"}},
			Owner: &core.NativeOwner{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "mnist", UID: "uid-mnist"}},
		Team: "k", TeamFrom: LabelTeam,
		Request:     core.Request{MilliGPU: 1000, MilliCPU: 2000, MemoryMiB: 4096, Replicas: 2},
		GracePeriod: 20 * time.Second,
		Labels:      map[string]string{"app": "train", LabelTeam: "k", core.LabelNativeNamespace: "ml", core.LabelNativeOwner: "PyTorchJob/ml/mnist"},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("submission (-want +got):\n%s", diff)
	}
}

// TestPodResources: GPUs from limits (requests when there is none), CPU and
// memory from requests, summed over containers, or an init container's
// when larger.
func TestPodResources(t *testing.T) {
	c := func(gpuLimit, gpuRequest int64, cpu, mem string) corev1.Container {
		r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
		if gpuLimit > 0 {
			r.Limits[ResourceGPU] = *resource.NewQuantity(gpuLimit, resource.DecimalSI)
		}
		if gpuRequest > 0 {
			r.Requests[ResourceGPU] = *resource.NewQuantity(gpuRequest, resource.DecimalSI)
		}
		return corev1.Container{Resources: r}
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Containers:     []corev1.Container{c(2, 0, "500m", "1Gi"), c(0, 1, "1", "512Mi")},
		InitContainers: []corev1.Container{c(1, 0, "4", "256Mi")},
	}}
	g, cpu, mem := podResources(p)
	if diff := cmp.Diff([3]int64{3, 4000, 1536}, [3]int64{g, cpu, mem}); diff != "" {
		t.Errorf("gpus, milli-CPU, MiB (-want +got):\n%s", diff)
	}
}

// TestOwnerSizes: how many pods a Job, a JobSet and a PyTorchJob run at
// once.
func TestOwnerSizes(t *testing.T) {
	job := func(parallelism, completions *int32, succeeded int32) *batchv1.Job {
		return &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: parallelism, Completions: completions}, Status: batchv1.JobStatus{Succeeded: succeeded}}
	}
	i32 := func(n int32) *int32 { return &n }
	for _, tt := range []struct {
		name string
		job  *batchv1.Job
		want int
	}{
		{"defaults", job(nil, nil, 0), 1},
		{"parallelism", job(i32(4), nil, 0), 4},
		{"fewer completions left", job(i32(4), i32(6), 3), 3},
		{"all done", job(i32(4), i32(6), 6), 1},
	} {
		if got := jobSize(tt.job); got != tt.want {
			t.Errorf("Job %s: size %d, want %d", tt.name, got, tt.want)
		}
	}
	js := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicatedJobs": []any{
		map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"parallelism": int64(4)}}},
		map[string]any{"template": map[string]any{"spec": map[string]any{}}},
	}}}}
	if got := jobSetSize(js); got != 9 {
		t.Errorf("JobSet: size %d, want 9 (2×4 + 1×1)", got)
	}
	pt := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
		"Master": map[string]any{"replicas": int64(1)}, "Worker": map[string]any{"replicas": int64(3)},
	}}}}
	if got := pyTorchJobSize(pt); got != 4 {
		t.Errorf("PyTorchJob: size %d, want 4", got)
	}
	if err := unstructured.SetNestedField(pt.Object, int64(2), "spec", "runPolicy", "schedulingPolicy", "minAvailable"); err != nil {
		t.Fatal(err)
	}
	if got := pyTorchJobSize(pt); got != 2 {
		t.Errorf("PyTorchJob with minAvailable 2: size %d, want 2", got)
	}
}

// TestNativeEnd: a native pod ends by its phase (its own containers' exit
// codes), by gpufleet's eviction, or by a deletion no one in gpufleet
// asked for; being deleted is not an end while the pod holds its GPUs.
func TestNativeEnd(t *testing.T) {
	now := time.Unix(2000, 0)
	pod := func(phase corev1.PodPhase, codes ...int32) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ml"}, Status: corev1.PodStatus{Phase: phase}}
		for i, c := range codes {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: c}}})
		}
		return p
	}
	deleting := pod(corev1.PodRunning)
	deleting.DeletionTimestamp = new(metav1.NewTime(now))
	code := func(n int) *int { return &n }
	for _, tt := range []struct {
		name              string
		pod               *corev1.Pod
		stopping, deleted bool
		ended             bool
		want              executor.Exit
	}{
		{"running", pod(corev1.PodRunning), false, false, false, executor.Exit{}},
		{"succeeded", pod(corev1.PodSucceeded, 0, 0), false, false, true, executor.Exit{ExitCode: code(0), At: now}},
		{"failed: its failed container's code", pod(corev1.PodFailed, 0, 3), false, false, true, executor.Exit{ExitCode: code(3), At: now}},
		{"being deleted still holds its GPUs", deleting, false, false, false, executor.Exit{}},
		{"deleted by someone else", pod(corev1.PodRunning), false, true, true,
			executor.Exit{Reason: ReasonPodDeleted, Message: "pod ml/p was deleted (by its owner or a user) before it ended", At: now}},
		{"evicted by gpufleet", pod(corev1.PodRunning), true, true, true, executor.Exit{Signal: "SIGTERM", At: now}},
	} {
		got, ended := nativeEnd(tt.pod, tt.stopping, tt.deleted, now)
		if ended != tt.ended {
			t.Errorf("%s: ended %v, want %v", tt.name, ended, tt.ended)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: exit (-want +got):\n%s", tt.name, diff)
		}
	}
}
