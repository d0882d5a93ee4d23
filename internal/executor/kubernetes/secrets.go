package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// SecretsDir is where a pod finds its secret files:
// $GPUFLEET_SECRETS_DIR/<secret>/<key>, mode 0400.
const SecretsDir = "/var/run/gpufleet/secrets"

// secretsVolume is the pod volume of the secret files.
const secretsVolume = "gpufleet-secrets"

// secretPrefix starts the name of every Secret the executor makes, so that
// the ones a pod refers to are told from others.
const secretPrefix = "gpufleet-"

// EnvSecretName and FilesSecretName name the Secrets of one attempt: its
// secret environment (used through envFrom) and its secret files (a
// volume). Each lives as long as the attempt.
func EnvSecretName(id core.WorkloadID, attempt int) string {
	return dnsLabel(secretPrefix+dnsLabel(string(id))+"-"+strconv.Itoa(attempt)) + "-env"
}

func FilesSecretName(id core.WorkloadID, attempt int) string {
	return dnsLabel(secretPrefix+dnsLabel(string(id))+"-"+strconv.Itoa(attempt)) + "-files"
}

// secretFileItems lists a task's secret files in a stable order: the key
// each has in the files Secret ("f0", "f1", ...: a secret's name and key
// together need not make a valid data key) and its path in the volume.
func secretFileItems(files map[string]map[string][]byte) []corev1.KeyToPath {
	var paths []string
	for s, kv := range files {
		for k := range kv {
			paths = append(paths, s+"/"+k)
		}
	}
	slices.Sort(paths)
	mode := int32(0o400)
	items := make([]corev1.KeyToPath, len(paths))
	for i, p := range paths {
		items[i] = corev1.KeyToPath{Key: "f" + strconv.Itoa(i), Path: p, Mode: &mode}
	}
	return items
}

// attemptLabels are the labels of the objects that belong to one attempt.
func attemptLabels(t executor.Task) map[string]string {
	return map[string]string{LabelManaged: "true", LabelWorkload: dnsLabel(string(t.WorkloadID)),
		LabelAttempt: strconv.Itoa(t.Attempt), LabelTeam: teamLabel(t.Team)}
}

// buildSecrets builds the Secrets of an attempt: none when it takes no
// secret. Values go into the Secrets only, never into the pod.
func buildSecrets(t executor.Task, ns string) []*corev1.Secret {
	var out []*corev1.Secret
	if len(t.SecretEnv) > 0 {
		data := make(map[string][]byte, len(t.SecretEnv))
		for k, v := range t.SecretEnv {
			data[k] = []byte(v)
		}
		out = append(out, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: EnvSecretName(t.WorkloadID, t.Attempt), Namespace: ns, Labels: attemptLabels(t)},
			Type:       corev1.SecretTypeOpaque, Data: data,
		})
	}
	if items := secretFileItems(t.SecretFiles); len(items) > 0 {
		data := make(map[string][]byte, len(items))
		for _, it := range items {
			s, k, _ := strings.Cut(it.Path, "/")
			data[it.Key] = t.SecretFiles[s][k]
		}
		out = append(out, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: FilesSecretName(t.WorkloadID, t.Attempt), Namespace: ns, Labels: attemptLabels(t)},
			Type:       corev1.SecretTypeOpaque, Data: data,
		})
	}
	return out
}

// createSecrets creates an attempt's Secrets; on an error none is left.
func (e *Executor) createSecrets(ctx context.Context, secrets []*corev1.Secret) error {
	for i, s := range secrets {
		_, err := e.opts.Client.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Left by a start that failed half-way: this attempt's values win.
			_, err = e.opts.Client.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		}
		if err != nil {
			e.deleteSecrets(context.WithoutCancel(ctx), s.Namespace, secretNames(secrets[:i]))
			// The API server's message names keys and sizes, never a value.
			return fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

func secretNames(secrets []*corev1.Secret) []string {
	names := make([]string, len(secrets))
	for i, s := range secrets {
		names[i] = s.Name
	}
	return names
}

// ownSecrets makes an attempt's pods the owners of its Secrets, so that
// the garbage collector deletes them with the pods should the executor
// not delete them itself at the attempt's end (a server that died).
func (e *Executor) ownSecrets(ctx context.Context, ns string, names []string, pods []*corev1.Pod) error {
	var refs []metav1.OwnerReference
	for _, p := range pods {
		refs = append(refs, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID})
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if _, err := e.opts.Client.CoreV1().Secrets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("secret %s/%s: owners: %w", ns, name, err))
		}
	}
	return errors.Join(errs...)
}

// deleteSecrets deletes Secrets; those already gone are no error.
func (e *Executor) deleteSecrets(ctx context.Context, ns string, names []string) error {
	var errs []error
	for _, name := range names {
		err := e.opts.Client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete secret %s/%s: %w", ns, name, err))
		}
	}
	return errors.Join(errs...)
}

// podSecrets lists the executor's Secrets a pod refers to (envFrom and
// volumes), so that an adopted attempt's are deleted at its end too.
func podSecrets(p *corev1.Pod) []string {
	var out []string
	add := func(name string) {
		if strings.HasPrefix(name, secretPrefix) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for _, c := range p.Spec.Containers {
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil {
				add(ef.SecretRef.Name)
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil {
			add(v.Secret.SecretName)
		}
	}
	return out
}
