package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The owners whose pods gpufleet groups into one gang.
const (
	kindJob        = "Job"
	kindJobSet     = "JobSet"
	kindPyTorchJob = "PyTorchJob"
	groupBatch     = "batch"
	groupJobSet    = "jobset.x-k8s.io"
	groupKubeflow  = "kubeflow.org"
)

// How long clusterLookup keeps what it read, and what it failed to read.
const (
	lookupFor      = 5 * time.Second
	lookupErrorFor = time.Second
)

// clusterLookup is the executor's nativeLookup: it reads Jobs and
// PodGroups with the clientset, JobSets and PyTorchJobs with the dynamic
// client (none: their pods wait, saying so), namespaces from the
// informer's cache, and keeps each answer a few seconds, since every pod
// of a gang asks the same.
type clusterLookup struct {
	client     clientset.Interface
	dyn        dynamic.Interface
	namespaces corelisters.NamespaceLister // nil: no namespace label maps teams

	mu    sync.Mutex
	cache map[string]lookedUp
}

type lookedUp struct {
	top  core.NativeOwner
	size int
	err  error
	at   time.Time
}

var _ nativeLookup = (*clusterLookup)(nil)

// cached returns what read gives for key, read again once it is older than
// lookupFor (lookupErrorFor for an error).
func (l *clusterLookup) cached(key string, read func() (core.NativeOwner, int, error)) (core.NativeOwner, int, error) {
	now := time.Now()
	l.mu.Lock()
	c, ok := l.cache[key]
	l.mu.Unlock()
	if ok && (now.Sub(c.at) < lookupFor && c.err == nil || now.Sub(c.at) < lookupErrorFor) {
		return c.top, c.size, c.err
	}
	top, size, err := read()
	l.mu.Lock()
	if l.cache == nil || len(l.cache) > 10_000 {
		l.cache = map[string]lookedUp{}
	}
	l.cache[key] = lookedUp{top, size, err, now}
	l.mu.Unlock()
	return top, size, err
}

func (l *clusterLookup) owner(ctx context.Context, ns string, ref metav1.OwnerReference) (core.NativeOwner, int, error) {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	key := fmt.Sprintf("owner/%s/%s/%s/%s", ns, ref.Kind, ref.Name, ref.UID)
	return l.cached(key, func() (core.NativeOwner, int, error) {
		top := core.NativeOwner{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}
		switch {
		case gv.Group == groupBatch && ref.Kind == kindJob:
			j, err := l.client.BatchV1().Jobs(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return top, 0, readError(err)
			}
			if up := metav1.GetControllerOfNoCopy(j); up != nil && up.Kind == kindJobSet {
				return l.owner(ctx, ns, *up)
			}
			return top, jobSize(j), nil
		case gv.Group == groupJobSet && ref.Kind == kindJobSet:
			obj, err := l.get(ctx, gv.WithResource("jobsets"), ns, ref.Name)
			if err != nil {
				return top, 0, err
			}
			return top, jobSetSize(obj), nil
		case gv.Group == groupKubeflow && ref.Kind == kindPyTorchJob:
			obj, err := l.get(ctx, gv.WithResource("pytorchjobs"), ns, ref.Name)
			if err != nil {
				return top, 0, err
			}
			return top, pyTorchJobSize(obj), nil
		}
		return top, 0, nil
	})
}

func (l *clusterLookup) get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	if l.dyn == nil {
		return nil, errors.New("this server has no dynamic client to read it with")
	}
	obj, err := l.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	return obj, readError(err)
}

// readError says why an owner could not be read, in words for the pods'
// Events.
func readError(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return errors.New("not found (deleted, or its API is not served)")
	case apierrors.IsForbidden(err):
		return fmt.Errorf("gpufleet may not read it (deploy/kubernetes/rbac.yaml gives get on jobs, jobsets and pytorchjobs): %w", err)
	}
	return err
}

func (l *clusterLookup) podGroup(ctx context.Context, ns, name string) (int, error) {
	_, n, err := l.cached("podgroup/"+ns+"/"+name, func() (core.NativeOwner, int, error) {
		pg, err := l.client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return core.NativeOwner{}, 0, readError(err)
		}
		if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
			return core.NativeOwner{}, max(1, int(g.MinCount)), nil
		}
		return core.NativeOwner{}, 0, nil
	})
	return n, err
}

func (l *clusterLookup) namespaceLabels(ns string) map[string]string {
	if l.namespaces == nil {
		return nil
	}
	n, err := l.namespaces.Get(ns)
	if err != nil {
		return nil
	}
	return n.Labels
}

// jobSize is how many pods a Job runs at once: its parallelism (1 when
// unset), no more than the completions it still needs.
func jobSize(j *batchv1.Job) int {
	n := 1
	if p := j.Spec.Parallelism; p != nil {
		n = int(*p)
	}
	if c := j.Spec.Completions; c != nil {
		n = min(n, int(*c)-int(j.Status.Succeeded))
	}
	return max(n, 1)
}

// jobSetSize is how many pods a JobSet runs at once: over its replicated
// Jobs, replicas times each Job's parallelism.
func jobSetSize(obj *unstructured.Unstructured) int {
	rjs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "replicatedJobs")
	n := 0
	for _, rj := range rjs {
		m, ok := rj.(map[string]any)
		if !ok {
			continue
		}
		replicas := intField(m, 1, "replicas")
		parallelism := intField(m, 1, "template", "spec", "parallelism")
		n += replicas * parallelism
	}
	return max(n, 1)
}

// pyTorchJobSize is a PyTorchJob's gang: its runPolicy's minAvailable
// when set (what the training-operator gives gang schedulers), else the
// replicas of all its replica types.
func pyTorchJobSize(obj *unstructured.Unstructured) int {
	if n := intField(obj.Object, 0, "spec", "runPolicy", "schedulingPolicy", "minAvailable"); n > 0 {
		return n
	}
	specs, _, _ := unstructured.NestedMap(obj.Object, "spec", "pytorchReplicaSpecs")
	n := 0
	for _, s := range specs {
		if m, ok := s.(map[string]any); ok {
			n += intField(m, 1, "replicas")
		}
	}
	return max(n, 1)
}

// intField reads a whole number at path in an unstructured object, or def
// when it is not there.
func intField(obj map[string]any, def int, path ...string) int {
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if !found || err != nil {
		return def
	}
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	case int:
		return n
	}
	return def
}
