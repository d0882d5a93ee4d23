package spec

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

func fieldNames(fe []api.FieldError) []string {
	out := []string{}
	for _, f := range fe {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

func TestCheckWorkloadStorage(t *testing.T) {
	yes, no := true, false
	base := func() api.Workload {
		return api.Workload{Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}
	}
	for _, tt := range []struct {
		name   string
		edit   func(w *api.Workload)
		fields []string
	}{
		{"fine", func(w *api.Workload) {
			w.Volumes = []api.VolumeMount{{Name: "ckpt", Path: "/ckpt"}, {Name: "cache", Path: "/cache", ReadOnly: true}}
			w.Mounts = []api.Mount{{Dataset: "imagenet", Path: "/data"}, {Dataset: "coco", Path: "/coco", ReadOnly: &yes}}
			w.SecretEnv, w.SecretFiles = []string{"hf"}, []string{"conf", "hf"}
		}, []string{}},
		{"siblings with a common prefix", func(w *api.Workload) {
			w.Volumes = []api.VolumeMount{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data2"}}
		}, []string{}},
		{"traversal", func(w *api.Workload) { w.Volumes = []api.VolumeMount{{Name: "a", Path: "/data/../etc"}} }, []string{"volumes[0].path"}},
		{"relative", func(w *api.Workload) { w.Volumes = []api.VolumeMount{{Name: "a", Path: "data"}} }, []string{"volumes[0].path"}},
		{"reserved", func(w *api.Workload) { w.Volumes = []api.VolumeMount{{Name: "a", Path: "/proc/x"}} }, []string{"volumes[0].path"}},
		{"no path", func(w *api.Workload) { w.Volumes = []api.VolumeMount{{Name: "a"}} }, []string{"volumes[0].path"}},
		{"bad volume name", func(w *api.Workload) { w.Volumes = []api.VolumeMount{{Name: "A/b", Path: "/a"}} }, []string{"volumes[0].name"}},
		{"overlap below", func(w *api.Workload) {
			w.Volumes = []api.VolumeMount{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data/sub"}}
		}, []string{"volumes[1].path"}},
		{"overlap above", func(w *api.Workload) {
			w.Volumes = []api.VolumeMount{{Name: "a", Path: "/data/sub"}, {Name: "b", Path: "/data"}}
		}, []string{"volumes[1].path"}},
		{"same path", func(w *api.Workload) {
			w.Volumes = []api.VolumeMount{{Name: "a", Path: "/x"}, {Name: "b", Path: "/y"}, {Name: "c", Path: "/x"}}
		}, []string{"volumes[2].path"}},
		{"mount over a volume", func(w *api.Workload) {
			w.Volumes = []api.VolumeMount{{Name: "a", Path: "/data"}}
			w.Mounts = []api.Mount{{Dataset: "d", Path: "/data/in"}}
		}, []string{"mounts[0].path"}},
		{"dataset read-write", func(w *api.Workload) { w.Mounts = []api.Mount{{Dataset: "d", Path: "/in", ReadOnly: &no}} }, []string{"mounts[0].readOnly"}},
		{"bad dataset name", func(w *api.Workload) { w.Mounts = []api.Mount{{Dataset: "", Path: "/in"}} }, []string{"mounts[0].dataset"}},
		{"too many mounts", func(w *api.Workload) {
			for i := range MaxMounts + 1 {
				w.Volumes = append(w.Volumes, api.VolumeMount{Name: "v", Path: "/v" + strings.Repeat("x", i+1)})
			}
		}, []string{"volumes"}},
		{"bad secret name", func(w *api.Workload) { w.SecretFiles = []string{"../x"} }, []string{"secretFiles[0]"}},
		{"secret twice", func(w *api.Workload) { w.SecretEnv = []string{"a", "b", "a"} }, []string{"secretEnv[2]"}},
		{"too many secrets", func(w *api.Workload) {
			for range MaxSecretRefs {
				w.SecretEnv = append(w.SecretEnv, "s"+strings.Repeat("e", len(w.SecretEnv)))
			}
			w.SecretFiles = []string{"f"}
		}, []string{"secretEnv"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := base()
			tt.edit(&w)
			if diff := cmp.Diff(tt.fields, fieldNames(CheckWorkload(&w))); diff != "" {
				t.Errorf("fields (-want +got):\n%s\n%v", diff, CheckWorkload(&w))
			}
		})
	}
}

func TestCheckVolume(t *testing.T) {
	for _, tt := range []struct {
		v      api.Volume
		fields []string
	}{
		{api.Volume{Name: "ckpt", SizeBytes: 1}, []string{}},
		{api.Volume{Name: "ckpt", SizeBytes: quantity.MaxSizeBytes}, []string{}},
		{api.Volume{Name: "ckpt", SizeBytes: quantity.MaxSizeBytes + 1}, []string{"sizeBytes"}},
		{api.Volume{Name: "ckpt", SizeBytes: 0}, []string{"sizeBytes"}},
		{api.Volume{Name: "ckpt", SizeBytes: -1}, []string{"sizeBytes"}},
		{api.Volume{Name: "Ckpt", SizeBytes: 1}, []string{"name"}},
		{api.Volume{Name: "a/b", SizeBytes: 1}, []string{"name"}},
		{api.Volume{Name: "", SizeBytes: 0}, []string{"name", "sizeBytes"}},
	} {
		if diff := cmp.Diff(tt.fields, fieldNames(CheckVolume(tt.v))); diff != "" {
			t.Errorf("%+v: fields (-want +got):\n%s", tt.v, diff)
		}
	}
}

func TestSecretKeys(t *testing.T) {
	for _, k := range []string{"HF_TOKEN", "config.json", ".env", "a-b", "0key", strings.Repeat("k", 64)} {
		if fe := CheckSecret(api.Secret{Name: "s", Data: map[string]string{k: "v"}}); len(fe) != 0 {
			t.Errorf("key %q: %v, want it accepted", k, fe)
		}
	}
	for _, k := range []string{"../x", "a/b", ".", "..", "", "a b", `a\b`, "é", strings.Repeat("k", 65)} {
		fe := CheckSecret(api.Secret{Name: "s", Data: map[string]string{k: "v"}})
		if diff := cmp.Diff([]string{"data." + k}, fieldNames(fe)); diff != "" {
			t.Errorf("key %q: fields (-want +got):\n%s", k, diff)
		}
	}
	for k, want := range map[string]bool{"HF_TOKEN": true, "_x": true, "a1": true, "config.json": false, "1a": false, "a-b": false, ".env": false} {
		if got := core.EnvNameRE.MatchString(k); got != want {
			t.Errorf("EnvNameRE(%q) = %v, want %v", k, got, want)
		}
	}
}
