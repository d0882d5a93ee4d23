package kubernetes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
)

// TestE2EWithoutPriorityClasses: on a cluster where deploy/kubernetes was
// not applied (no gpufleet PriorityClasses; every pod was refused "no
// PriorityClass with name gpufleet-training was found" and every workload
// failed StartError), a server with exactly the rights of
// deploy/kubernetes/rbac.yaml creates them at start, and three workloads of
// three classes run as pods. A server whose role may not create them
// refuses to start and says what to apply.
func TestE2EWithoutPriorityClasses(t *testing.T) {
	x := newE2E(t, 1, 8)
	ctx := t.Context()
	deleteGpufleetPriorityClasses(t, x)

	rules := deployRules(t)
	without := slices.DeleteFunc(slices.Clone(rules), func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "priorityclasses")
	})
	if len(without) == len(rules) {
		t.Fatalf("deploy/kubernetes/rbac.yaml grants nothing on priorityclasses: %+v", rules)
	}

	// A role without priorityclasses: the server refuses to start.
	x.kubeconfig = x.serviceAccount("no-pc", without)
	out, err := x.runUntilExit(60 * time.Second)
	if err == nil || !strings.Contains(out, "priorityclasses.yaml") || !strings.Contains(out, "gpufleet-training") {
		t.Errorf("server without the right to create PriorityClasses: exit %v, output:\n%s\nwant a refusal naming gpufleet-training and priorityclasses.yaml", err, out)
	}
	if n := len(gpufleetPriorityClasses(t, x)); n != 0 {
		t.Errorf("%d gpufleet PriorityClasses exist after the refused start", n)
	}

	// The role of deploy/kubernetes: the server makes them, pods run.
	x.kubeconfig = x.serviceAccount("deploy", rules)
	x.start()
	want := map[string]int32{"production": 1000, "training": 500, "development": 300, "batch": 100}
	pcs := gpufleetPriorityClasses(t, x)
	for class, v := range want {
		pc, ok := pcs[PriorityClassPrefix+class]
		if !ok || pc.Value != v || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptNever {
			t.Errorf("PriorityClass %s%s: %+v (exists %v), want value %d, preemptionPolicy Never", PriorityClassPrefix, class, pc, ok, v)
		}
	}
	ids := []string{
		x.submit(api.Workload{Name: "job", Kind: api.KindJob, Resources: api.Resources{GPUs: 1000}, Command: sleepCmd(), GracePeriodSeconds: 1}),
		x.submit(api.Workload{Name: "notebook", Kind: api.KindNotebook, Resources: api.Resources{GPUs: 500}, Command: sleepCmd(), GracePeriodSeconds: 1}),
		x.submit(api.Workload{Name: "batch", Kind: api.KindJob, Priority: "batch", Resources: api.Resources{GPUs: 2000}, Command: sleepCmd(), GracePeriodSeconds: 1}),
	}
	ws := x.waitPhase(60*time.Second, api.PhaseRunning, ids...)
	x.waitAgree(30 * time.Second)
	for _, id := range ids {
		w := ws[id]
		p, err := x.pod(x.namespace("default"), PodName(coreID(id), 1, 0, 1))
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if p.Spec.PriorityClassName != PriorityClassPrefix+w.Priority || p.Spec.Priority == nil || *p.Spec.Priority != want[w.Priority] {
			t.Errorf("%s (%s): pod priority class %q value %v, want %s%s %d", id, w.Priority, p.Spec.PriorityClassName, p.Spec.Priority,
				PriorityClassPrefix, w.Priority, want[w.Priority])
		}
	}

	// One deleted while the server runs is made again by the next start
	// of a pod of its class, which runs.
	if err := x.client.SchedulingV1().PriorityClasses().Delete(ctx, PriorityClassPrefix+"training", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := x.submit(api.Workload{Name: "after-delete", Kind: api.KindJob, Resources: api.Resources{GPUs: 1000}, Command: sleepCmd(), GracePeriodSeconds: 1})
	x.waitPhase(60*time.Second, api.PhaseRunning, again)
	x.waitAgree(30 * time.Second)
}

// deployRules are the rules of the ClusterRole of deploy/kubernetes/rbac.yaml.
func deployRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		var cr rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict([]byte(doc), &cr); err == nil && cr.Kind == "ClusterRole" {
			return cr.Rules
		}
	}
	t.Fatal("no ClusterRole in deploy/kubernetes/rbac.yaml")
	return nil
}

// serviceAccount makes a service account with a ClusterRole of rules
// (both named after the test, deleted at its end) and returns the path of a
// kubeconfig that authenticates as it.
func (x *e2e) serviceAccount(name string, rules []rbacv1.PolicyRule) string {
	t := x.t
	t.Helper()
	ctx := t.Context()
	ns, full := x.namespace("sa"), x.id+"-"+name
	if _, err := x.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := x.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rbac := x.client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: full}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: full},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: full},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		rbac.ClusterRoleBindings().Delete(ctx, full, metav1.DeleteOptions{})
		rbac.ClusterRoles().Delete(ctx, full, metav1.DeleteOptions{})
	})
	secs := int64(3600)
	tok, err := x.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(x.adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctxName := kc.CurrentContext
	user := kc.Contexts[ctxName].AuthInfo
	kc.AuthInfos[user].ClientCertificateData, kc.AuthInfos[user].ClientKeyData = nil, nil
	kc.AuthInfos[user].ClientCertificate, kc.AuthInfos[user].ClientKey = "", ""
	kc.AuthInfos[user].Token = tok.Status.Token
	path := filepath.Join(x.data, "kubeconfig-"+name)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	// The rights are in place when the account can list nodes.
	sa, err := Clientset(path)
	if err != nil {
		t.Fatal(err)
	}
	x.waitFor(10*time.Second, "the service account's role to apply", func() (bool, string) {
		_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, "list nodes: " + errString(err)
	})
	return path
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// runUntilExit runs the server and returns its output once it exits; a
// server still running after timeout is killed and reported.
func (x *e2e) runUntilExit(timeout time.Duration) (string, error) {
	t := x.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpufleetBinary(t), "server", "--config", x.writeConfig())
	cmd.Env = append(os.Environ(), "HOME="+x.data)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Errorf("server still running after %v", timeout)
	}
	return string(out), err
}

// gpufleetPriorityClasses lists the cluster's PriorityClasses named
// gpufleet-*, by name.
func gpufleetPriorityClasses(t *testing.T, x *e2e) map[string]schedulingv1.PriorityClass {
	t.Helper()
	list, err := x.client.SchedulingV1().PriorityClasses().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schedulingv1.PriorityClass{}
	for _, pc := range list.Items {
		if strings.HasPrefix(pc.Name, PriorityClassPrefix) {
			out[pc.Name] = pc
		}
	}
	return out
}

// deleteGpufleetPriorityClasses makes the cluster one where
// deploy/kubernetes/priorityclasses.yaml was never applied. The servers of
// the tests that follow make them again.
func deleteGpufleetPriorityClasses(t *testing.T, x *e2e) {
	t.Helper()
	for name := range gpufleetPriorityClasses(t, x) {
		if err := x.client.SchedulingV1().PriorityClasses().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	x.waitFor(10*time.Second, "the gpufleet PriorityClasses to be gone", func() (bool, string) {
		return len(gpufleetPriorityClasses(t, x)) == 0, "some remain"
	})
}
