package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

func secretTask(id core.WorkloadID) executor.Task {
	tk := gpuTask(id, "gpu-1", 1)
	tk.SecretEnv = map[string]string{"TOKEN": "v1"}
	tk.SecretFiles = map[string]map[string][]byte{"db": {"password": []byte("v2")}}
	return tk
}

// waitNoSecrets waits until the namespace holds none of the Secrets (the
// fake clientset has no garbage collector: only the executor deletes).
func waitNoSecrets(t *testing.T, k *fakeKubelet, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		testwait.Until(t, 10*time.Second, fmt.Sprintf("secret %s/%s to go", ns, n), func() (bool, string) {
			_, err := k.client.CoreV1().Secrets(ns).Get(context.Background(), n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprintf("still there (%v)", err)
		})
	}
}

// TestSecretsEndWithTheAttempt: an attempt's Secrets exist while it runs
// and are deleted when it ends, though its pod is kept for its logs.
func TestSecretsEndWithTheAttempt(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	tk := secretTask("wl-s")
	if err := e.Start(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	ns := "gpufleet-research"
	for _, n := range []string{EnvSecretName(tk.WorkloadID, 1), FilesSecretName(tk.WorkloadID, 1)} {
		s, err := k.client.CoreV1().Secrets(ns).Get(t.Context(), n, metav1.GetOptions{})
		if err != nil || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Name != PodName(tk.WorkloadID, 1, 0, 1) {
			t.Fatalf("secret %s while running: %+v, %v", n, s, err)
		}
	}
	k.finish(t, tk.WorkloadID, 1, 0)
	if x := exitOf(t, e); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Errorf("exit: %+v", x)
	}
	waitNoSecrets(t, k, ns, EnvSecretName(tk.WorkloadID, 1), FilesSecretName(tk.WorkloadID, 1))
	if _, err := k.client.CoreV1().Pods(ns).Get(t.Context(), PodName(tk.WorkloadID, 1, 0, 1), metav1.GetOptions{}); err != nil {
		t.Errorf("the ended pod is gone: %v", err)
	}
}

// TestSecretsOfAnAdoptedAttempt: after a restart, the Secrets an adopted
// attempt's pod refers to are deleted at its end too.
func TestSecretsOfAnAdoptedAttempt(t *testing.T) {
	k := newFakeKubelet(t)
	tk := secretTask("wl-adopt")
	ns := "gpufleet-research"
	for _, s := range buildSecrets(tk, ns) {
		if _, err := k.client.CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := buildPod(defaults(), tk, ns, 0, tk.Assignments, 1)
	if _, err := k.client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := k.newExecutor(t, Options{})
	if ok, err := e.Adopt(t.Context(), tk); !ok || err != nil {
		t.Fatalf("Adopt: %v, %v", ok, err)
	}
	k.finish(t, tk.WorkloadID, 1, 1)
	exitOf(t, e)
	waitNoSecrets(t, k, ns, EnvSecretName(tk.WorkloadID, 1), FilesSecretName(tk.WorkloadID, 1))
}

// TestNoSecretsLeftByAFailedStart: a pod the API server refuses leaves no
// Secret behind.
func TestNoSecretsLeftByAFailedStart(t *testing.T) {
	k := newFakeKubelet(t)
	k.client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused")
	})
	e := k.newExecutor(t, Options{})
	tk := secretTask("wl-refused")
	if err := e.Start(t.Context(), tk); err == nil {
		t.Fatal("Start: no error")
	}
	waitNoSecrets(t, k, "gpufleet-research", EnvSecretName(tk.WorkloadID, 1), FilesSecretName(tk.WorkloadID, 1))
}

// TestServiceFollowsAttempts and claims on the fake: a task with ports
// gets a Service whose selector moves to each new attempt; DeleteWorkload
// removes it and the checkpoint claim.
func TestServiceFollowsAttempts(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{CheckpointBytes: 1 << 20})
	tk := gpuTask("wl-svc", "gpu-1", 1)
	tk.Ports = []core.Port{{Name: "http", Port: 8000}}
	ns := "gpufleet-research"
	for attempt := 1; attempt <= 2; attempt++ {
		tk.Attempt = attempt
		if err := e.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
		svc, err := k.client.CoreV1().Services(ns).Get(t.Context(), ServiceName(tk.WorkloadID), metav1.GetOptions{})
		if err != nil || svc.Spec.Selector[LabelAttempt] != itoa(attempt) {
			t.Fatalf("attempt %d: service %+v, %v", attempt, svc, err)
		}
		if _, err := k.client.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), CheckpointClaimName(tk.WorkloadID), metav1.GetOptions{}); err != nil {
			t.Fatalf("attempt %d: checkpoint claim: %v", attempt, err)
		}
	}
	if err := e.DeleteWorkload(t.Context(), tk.Team, tk.WorkloadID); err != nil {
		t.Fatal(err)
	}
	if _, err := k.client.CoreV1().Services(ns).Get(t.Context(), ServiceName(tk.WorkloadID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("service after DeleteWorkload: %v", err)
	}
	if _, err := k.client.CoreV1().PersistentVolumeClaims(ns).Get(t.Context(), CheckpointClaimName(tk.WorkloadID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("checkpoint claim after DeleteWorkload: %v", err)
	}
	if err := e.DeleteWorkload(t.Context(), tk.Team, tk.WorkloadID); err != nil {
		t.Errorf("DeleteWorkload twice: %v", err)
	}
}
