package api

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

func fieldNames(fe []FieldError) []string {
	out := []string{}
	for _, f := range fe {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

func TestCheckMountPath(t *testing.T) {
	for _, p := range []string{"/data", "/ckpt", "/home/me/cache", "/var/lib/data", "/workspace/a-b_c.d", "/mnt/" + strings.Repeat("x", 250)} {
		if problem := CheckMountPath(p); problem != "" {
			t.Errorf("CheckMountPath(%q) = %q, want it accepted", p, problem)
		}
	}
	for _, p := range []string{
		"", "data", "./data", "/", "/data/", "/data//x", "/data/./x", "/data/../etc", "/..", "/a/..",
		"/a:b", "/a,b", `/a\b`, "/a\x00b",
		"/proc", "/proc/x", "/etc", "/etc/passwd", "/dev/shm", "/sys/fs", "/usr/bin", "/tmp", "/tmp/x",
		"/var/lib/gpufleet", "/var/lib/gpufleet/volumes", "/run/secrets", "/var/run/docker.sock", "/lib64",
		"/" + strings.Repeat("x", 256),
	} {
		if CheckMountPath(p) == "" {
			t.Errorf("CheckMountPath(%q) accepted, want a problem", p)
		}
	}
	// A prefix of a reserved name is not inside it.
	for _, p := range []string{"/procs", "/etcetera", "/tmpdata", "/usrdata"} {
		if problem := CheckMountPath(p); problem != "" {
			t.Errorf("CheckMountPath(%q) = %q, want it accepted", p, problem)
		}
	}
}

func TestWorkloadStorageValidation(t *testing.T) {
	yes, no := true, false
	base := func() Workload { return Workload{Command: []string{"true"}, Resources: Resources{GPUs: 1000}} }
	for _, tt := range []struct {
		name   string
		edit   func(w *Workload)
		fields []string
	}{
		{"fine", func(w *Workload) {
			w.Volumes = []VolumeMount{{Name: "ckpt", Path: "/ckpt"}, {Name: "cache", Path: "/cache", ReadOnly: true}}
			w.Mounts = []Mount{{Dataset: "imagenet", Path: "/data"}, {Dataset: "coco", Path: "/coco", ReadOnly: &yes}}
			w.SecretEnv, w.SecretFiles = []string{"hf"}, []string{"conf", "hf"}
		}, []string{}},
		{"siblings with a common prefix", func(w *Workload) {
			w.Volumes = []VolumeMount{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data2"}}
		}, []string{}},
		{"traversal", func(w *Workload) { w.Volumes = []VolumeMount{{Name: "a", Path: "/data/../etc"}} }, []string{"volumes[0].path"}},
		{"relative", func(w *Workload) { w.Volumes = []VolumeMount{{Name: "a", Path: "data"}} }, []string{"volumes[0].path"}},
		{"reserved", func(w *Workload) { w.Volumes = []VolumeMount{{Name: "a", Path: "/proc/x"}} }, []string{"volumes[0].path"}},
		{"no path", func(w *Workload) { w.Volumes = []VolumeMount{{Name: "a"}} }, []string{"volumes[0].path"}},
		{"bad volume name", func(w *Workload) { w.Volumes = []VolumeMount{{Name: "A/b", Path: "/a"}} }, []string{"volumes[0].name"}},
		{"overlap below", func(w *Workload) {
			w.Volumes = []VolumeMount{{Name: "a", Path: "/data"}, {Name: "b", Path: "/data/sub"}}
		}, []string{"volumes[1].path"}},
		{"overlap above", func(w *Workload) {
			w.Volumes = []VolumeMount{{Name: "a", Path: "/data/sub"}, {Name: "b", Path: "/data"}}
		}, []string{"volumes[1].path"}},
		{"same path", func(w *Workload) {
			w.Volumes = []VolumeMount{{Name: "a", Path: "/x"}, {Name: "b", Path: "/y"}, {Name: "c", Path: "/x"}}
		}, []string{"volumes[2].path"}},
		{"mount over a volume", func(w *Workload) {
			w.Volumes = []VolumeMount{{Name: "a", Path: "/data"}}
			w.Mounts = []Mount{{Dataset: "d", Path: "/data/in"}}
		}, []string{"mounts[0].path"}},
		{"dataset read-write", func(w *Workload) { w.Mounts = []Mount{{Dataset: "d", Path: "/in", ReadOnly: &no}} }, []string{"mounts[0].readOnly"}},
		{"bad dataset name", func(w *Workload) { w.Mounts = []Mount{{Dataset: "", Path: "/in"}} }, []string{"mounts[0].dataset"}},
		{"too many mounts", func(w *Workload) {
			for i := range MaxMounts + 1 {
				w.Volumes = append(w.Volumes, VolumeMount{Name: "v", Path: "/v" + strings.Repeat("x", i+1)})
			}
		}, []string{"volumes"}},
		{"bad secret name", func(w *Workload) { w.SecretFiles = []string{"../x"} }, []string{"secretFiles[0]"}},
		{"secret twice", func(w *Workload) { w.SecretEnv = []string{"a", "b", "a"} }, []string{"secretEnv[2]"}},
		{"too many secrets", func(w *Workload) {
			for range MaxSecretRefs {
				w.SecretEnv = append(w.SecretEnv, "s"+strings.Repeat("e", len(w.SecretEnv)))
			}
			w.SecretFiles = []string{"f"}
		}, []string{"secretEnv"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := base()
			tt.edit(&w)
			if diff := cmp.Diff(tt.fields, fieldNames(w.Validate())); diff != "" {
				t.Errorf("fields (-want +got):\n%s\n%v", diff, w.Validate())
			}
		})
	}
}

func TestVolumeValidate(t *testing.T) {
	for _, tt := range []struct {
		v      Volume
		fields []string
	}{
		{Volume{Name: "ckpt", SizeBytes: 1}, []string{}},
		{Volume{Name: "ckpt", SizeBytes: quantity.MaxSizeBytes}, []string{}},
		{Volume{Name: "ckpt", SizeBytes: quantity.MaxSizeBytes + 1}, []string{"sizeBytes"}},
		{Volume{Name: "ckpt", SizeBytes: 0}, []string{"sizeBytes"}},
		{Volume{Name: "ckpt", SizeBytes: -1}, []string{"sizeBytes"}},
		{Volume{Name: "Ckpt", SizeBytes: 1}, []string{"name"}},
		{Volume{Name: "a/b", SizeBytes: 1}, []string{"name"}},
		{Volume{Name: "", SizeBytes: 0}, []string{"name", "sizeBytes"}},
	} {
		if diff := cmp.Diff(tt.fields, fieldNames(tt.v.Validate())); diff != "" {
			t.Errorf("%+v: fields (-want +got):\n%s", tt.v, diff)
		}
	}
}

func TestSecretKeys(t *testing.T) {
	for _, k := range []string{"HF_TOKEN", "config.json", ".env", "a-b", "0key", strings.Repeat("k", 64)} {
		if fe := (Secret{Name: "s", Data: map[string]string{k: "v"}}).Validate(); len(fe) != 0 {
			t.Errorf("key %q: %v, want it accepted", k, fe)
		}
	}
	for _, k := range []string{"../x", "a/b", ".", "..", "", "a b", `a\b`, "é", strings.Repeat("k", 65)} {
		fe := (Secret{Name: "s", Data: map[string]string{k: "v"}}).Validate()
		if diff := cmp.Diff([]string{"data." + k}, fieldNames(fe)); diff != "" {
			t.Errorf("key %q: fields (-want +got):\n%s", k, diff)
		}
	}
	for k, want := range map[string]bool{"HF_TOKEN": true, "_x": true, "a1": true, "config.json": false, "1a": false, "a-b": false, ".env": false} {
		if got := EnvNameRE.MatchString(k); got != want {
			t.Errorf("EnvNameRE(%q) = %v, want %v", k, got, want)
		}
	}
}

// reservedMountPaths are directories a mount may "not cover or sit
// inside": a mount at a parent of one (/var covers /var/lib/gpufleet and
// /var/run) hides it as surely as one at it.
func TestCheckMountPathRefusesParentsOfReservedPaths(t *testing.T) {
	for _, p := range []string{"/var", "/var/lib"} {
		if CheckMountPath(p) == "" {
			t.Errorf("CheckMountPath(%q) accepted; it covers a reserved path (/var/lib/gpufleet, /var/run)", p)
		}
	}
}

// /gpufleet is where the local executor puts a container task's
// checkpoint, usage and secret directories, and it refuses a mount there
// at start: the API refuses it at submit, naming the field, rather than
// accept a workload that fails when it starts.
func TestCheckMountPathRefusesTheContainerPaths(t *testing.T) {
	for _, p := range []string{"/gpufleet", "/gpufleet/secrets"} {
		if CheckMountPath(p) == "" {
			t.Errorf("CheckMountPath(%q) accepted; the local executor refuses it at start", p)
		}
	}
}
