package apiserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/secrets"
	"github.com/gpufleet/gpufleet/internal/spec"
	"github.com/gpufleet/gpufleet/internal/store"
)

const testMiB = 1 << 20

// storageFixture is the fixture with sealed secrets, a storage limit of
// 10 MiB for research (none for vision), and the dataset imagenet.
func storageFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, store.Options{}, RateLimit{}, func(o *Options) {
		k, err := secrets.New(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		o.Secrets = &secrets.Store{Store: o.Store, Keys: k}
		o.Storage = Storage{
			Limit: func(team core.TeamName) int64 {
				if team == "research" {
					return 10 * testMiB
				}
				return -1
			},
			Datasets: map[string]bool{"imagenet": true},
		}
	})
}

// fields are the fields an error answer names, sorted.
func fields(t *testing.T, a answer) []string {
	t.Helper()
	var out []string
	for _, f := range a.errorBody(t).Fields {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

// refused checks that a is a 400 naming exactly want.
func refused(t *testing.T, what string, a answer, want ...string) {
	t.Helper()
	if a.status != http.StatusBadRequest {
		t.Errorf("%s: %d %s, want 400", what, a.status, a.body)
		return
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, fields(t, a)); diff != "" {
		t.Errorf("%s: fields (-want +got):\n%s\n%s", what, diff, a.body)
	}
}

func (f *fixture) volumeNames(team string) []string {
	f.t.Helper()
	var l api.List[api.Volume]
	f.must("admin", "GET", "/api/v1/teams/"+team+"/volumes", "", http.StatusOK, &l)
	names := []string{}
	for _, v := range l.Items {
		names = append(names, v.Name)
	}
	return names
}

func (f *fixture) workloadCount() int {
	f.t.Helper()
	var l api.List[api.Workload]
	f.must("admin", "GET", "/api/v1/workloads", "", http.StatusOK, &l)
	return len(l.Items)
}

func TestVolumesCreateListStorageDelete(t *testing.T) {
	f := storageFixture(t)
	const base = "/api/v1/teams/research/volumes"

	var got api.Volume
	f.must("member", "POST", base, `{"name":"ckpt","sizeBytes":4194304}`, http.StatusCreated, &got)
	want := api.Volume{Team: "research", Name: "ckpt", SizeBytes: 4 * testMiB, UsedBytes: -1, CreatedAt: fixtureStart}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created volume (-want +got):\n%s", diff)
	}
	f.must("member", "POST", base, `{"name":"cache","sizeBytes":2097152}`, http.StatusCreated, nil)

	// The same name again is a conflict; nothing changes.
	if a := f.do("member", "POST", base, `{"name":"ckpt","sizeBytes":1}`); a.status != http.StatusConflict {
		t.Errorf("a second ckpt: %d %s, want 409", a.status, a.body)
	}

	// Over the team's limit (6 MiB held, 10 MiB allowed): a 400 naming
	// sizeBytes, and nothing stored.
	a := f.do("member", "POST", base, `{"name":"big","sizeBytes":5242880}`)
	refused(t, "over the limit", a, "sizeBytes")
	if msg := a.errorBody(t).Fields; len(msg) == 1 && !strings.Contains(msg[0].Problem, "limit") {
		t.Errorf("over the limit: problem %q does not mention the limit", msg[0].Problem)
	}
	if diff := cmp.Diff([]string{"cache", "ckpt"}, f.volumeNames("research")); diff != "" {
		t.Errorf("volumes after the refusals (-want +got):\n%s", diff)
	}

	// Bad names and sizes name their fields.
	for _, tt := range []struct {
		body  string
		field []string
	}{
		{`{"name":"Bad_Name","sizeBytes":1}`, []string{"name"}},
		{`{"name":"../x","sizeBytes":1}`, []string{"name"}},
		{`{"name":"ok","sizeBytes":0}`, []string{"sizeBytes"}},
		{`{"name":"ok","sizeBytes":-5}`, []string{"sizeBytes"}},
		{`{"name":"ok","sizeBytes":1125899906842625}`, []string{"sizeBytes"}},
		{`{"name":"","sizeBytes":0}`, []string{"name", "sizeBytes"}},
		{`{"name":"ok","sizeBytes":1,"usedBytes":5}`, []string{"usedBytes"}},
		{`{"name":"ok","sizeBytes":1,"team":"vision"}`, []string{"team"}},
	} {
		refused(t, tt.body, f.do("member", "POST", base, tt.body), tt.field...)
	}
	if diff := cmp.Diff([]string{"cache", "ckpt"}, f.volumeNames("research")); diff != "" {
		t.Errorf("volumes after the bad requests (-want +got):\n%s", diff)
	}

	// A viewer lists them and reads the storage; may not create.
	var l api.List[api.Volume]
	f.must("viewer", "GET", base, "", http.StatusOK, &l)
	if diff := cmp.Diff([]api.Volume{
		{Team: "research", Name: "cache", SizeBytes: 2 * testMiB, UsedBytes: -1, CreatedAt: fixtureStart},
		want,
	}, l.Items); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if a := f.do("viewer", "POST", base, `{"name":"v","sizeBytes":1}`); a.status != http.StatusForbidden {
		t.Errorf("a viewer creates: %d %s, want 403", a.status, a.body)
	}
	var su api.StorageUsage
	f.must("viewer", "GET", "/api/v1/teams/research/storage", "", http.StatusOK, &su)
	if diff := cmp.Diff(api.StorageUsage{Team: "research", Volumes: 2, SizeBytes: 6 * testMiB, UsedBytes: 0, LimitBytes: 10 * testMiB}, su); diff != "" {
		t.Errorf("storage (-want +got):\n%s", diff)
	}
	f.must("bob", "GET", "/api/v1/teams/vision/storage", "", http.StatusOK, &su)
	if diff := cmp.Diff(api.StorageUsage{Team: "vision", LimitBytes: -1}, su); diff != "" {
		t.Errorf("vision's storage (-want +got):\n%s", diff)
	}
	// Another team's volumes are hidden as a missing team's.
	for _, p := range []string{base, "/api/v1/teams/research/storage"} {
		if a := f.do("bob", "GET", p, ""); a.status != http.StatusNotFound {
			t.Errorf("bob GET %s: %d %s, want 404", p, a.status, a.body)
		}
	}
	if a := f.do("admin", "GET", "/api/v1/teams/ghost/storage", ""); a.status != http.StatusNotFound {
		t.Errorf("storage of a missing team: %d %s, want 404", a.status, a.body)
	}

	// A pending workload that mounts ckpt holds it: the delete is a 409
	// naming the workload.
	var w api.Workload
	f.must("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1},"volumes":[{"name":"ckpt","path":"/ckpt"}]}`, http.StatusCreated, &w)
	if diff := cmp.Diff([]api.VolumeMount{{Name: "ckpt", Path: "/ckpt"}}, w.Volumes); diff != "" {
		t.Errorf("the submitted workload's volumes (-want +got):\n%s", diff)
	}
	f.must("viewer", "GET", base, "", http.StatusOK, &l)
	if len(l.Items) != 2 || !slices.Equal(l.Items[1].InUseBy, []string{w.ID}) {
		t.Errorf("list with %s pending: %+v, want ckpt in use by it", w.ID, l.Items)
	}
	if a := f.do("member", "DELETE", base+"/ckpt", ""); a.status != http.StatusForbidden {
		t.Errorf("a member deletes: %d %s, want 403 (team-admins)", a.status, a.body)
	}
	a = f.do("tadmin", "DELETE", base+"/ckpt", "")
	if a.status != http.StatusConflict || !strings.Contains(a.body, w.ID) {
		t.Errorf("delete while %s is pending: %d %s, want 409 naming it", w.ID, a.status, a.body)
	}
	f.must("member", "DELETE", "/api/v1/workloads/"+w.ID, "", http.StatusOK, nil)

	f.must("tadmin", "DELETE", base+"/ckpt", "", http.StatusNoContent, nil)
	if a := f.do("tadmin", "DELETE", base+"/ckpt", ""); a.status != http.StatusNotFound {
		t.Errorf("a second delete: %d %s, want 404", a.status, a.body)
	}
	if diff := cmp.Diff([]string{"cache"}, f.volumeNames("research")); diff != "" {
		t.Errorf("volumes after the delete (-want +got):\n%s", diff)
	}
	// What was deleted no longer counts: 8 MiB fits again.
	f.must("member", "POST", base, `{"name":"big","sizeBytes":8388608}`, http.StatusCreated, nil)

	// Creates and deletes are audited with their object and team, the
	// refusals with their status.
	type entry struct {
		User, Action, Object, Team string
		Status                     int
	}
	var audited []entry
	for _, e := range f.audit() {
		if strings.HasSuffix(e.Action, " volume") && (e.Object == "ckpt" || e.Object == "big") {
			audited = append(audited, entry{e.User, e.Action, e.Object, e.Team, e.Status})
		}
	}
	slices.SortStableFunc(audited, func(a, b entry) int { return strings.Compare(a.Object+a.Action, b.Object+b.Action) })
	wantAudit := []entry{
		{"member", "create volume", "big", "research", 400},
		{"member", "create volume", "big", "research", 201},
		{"member", "create volume", "ckpt", "research", 201},
		{"member", "create volume", "ckpt", "research", 409},
		{"member", "delete volume", "ckpt", "research", 403},
		{"tadmin", "delete volume", "ckpt", "research", 409},
		{"tadmin", "delete volume", "ckpt", "research", 204},
		{"tadmin", "delete volume", "ckpt", "research", 404},
	}
	if diff := cmp.Diff(wantAudit, audited); diff != "" {
		t.Errorf("audit of the volume routes (-want +got):\n%s", diff)
	}
}

func TestSubmitStorageRefs(t *testing.T) {
	f := storageFixture(t)
	f.must("member", "POST", "/api/v1/teams/research/volumes", `{"name":"ckpt","sizeBytes":1048576}`, http.StatusCreated, nil)
	f.must("bob", "POST", "/api/v1/teams/vision/volumes", `{"name":"theirs","sizeBytes":1048576}`, http.StatusCreated, nil)
	f.must("tadmin", "POST", "/api/v1/teams/research/secrets", `{"name":"hf","data":{"HF_TOKEN":"x"}}`, http.StatusCreated, nil)
	f.must("tadmin", "POST", "/api/v1/teams/research/secrets", `{"name":"conf","data":{"config.json":"{}"}}`, http.StatusCreated, nil)
	f.must("bob", "POST", "/api/v1/workloads", `{"team":"vision","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, nil)
	f.must("admin", "POST", "/api/v1/teams/vision/secrets", `{"name":"vsec","data":{"K":"v"}}`, http.StatusCreated, nil)
	before := f.workloadCount()

	submit := func(extra string) answer {
		return f.do("member", "POST", "/api/v1/workloads", `{"team":"research","command":["true"],"resources":{"gpus":1},`+extra+`}`)
	}
	for _, tt := range []struct {
		name, extra string
		fields      []string
	}{
		{"another team's volume", `"volumes":[{"name":"theirs","path":"/data"}]`, []string{"volumes[0].name"}},
		{"an unknown volume", `"volumes":[{"name":"nope","path":"/data"}]`, []string{"volumes[0].name"}},
		{"an unknown dataset", `"mounts":[{"dataset":"cifar","path":"/data"}]`, []string{"mounts[0].dataset"}},
		{"a dataset mounted read-write", `"mounts":[{"dataset":"imagenet","path":"/data","readOnly":false}]`, []string{"mounts[0].readOnly"}},
		{"path traversal", `"volumes":[{"name":"ckpt","path":"/data/../etc"}]`, []string{"volumes[0].path"}},
		{"a relative path", `"volumes":[{"name":"ckpt","path":"data"}]`, []string{"volumes[0].path"}},
		{"an unclean path", `"volumes":[{"name":"ckpt","path":"/data/"}]`, []string{"volumes[0].path"}},
		{"a reserved path", `"volumes":[{"name":"ckpt","path":"/proc/x"}]`, []string{"volumes[0].path"}},
		{"a reserved path itself", `"volumes":[{"name":"ckpt","path":"/etc"}]`, []string{"volumes[0].path"}},
		{"the root", `"volumes":[{"name":"ckpt","path":"/"}]`, []string{"volumes[0].path"}},
		{"a colon", `"volumes":[{"name":"ckpt","path":"/a:b"}]`, []string{"volumes[0].path"}},
		{"overlapping volumes", `"volumes":[{"name":"ckpt","path":"/data"},{"name":"ckpt","path":"/data/sub"}]`, []string{"volumes[1].path"}},
		{"the same path twice", `"volumes":[{"name":"ckpt","path":"/data"},{"name":"ckpt","path":"/data"}]`, []string{"volumes[1].path"}},
		{"a dataset over a volume", `"volumes":[{"name":"ckpt","path":"/data/sub"}],"mounts":[{"dataset":"imagenet","path":"/data"}]`, []string{"mounts[0].path"}},
		{"secretEnv with a file key", `"secretEnv":["conf"]`, []string{"secretEnv[0]"}},
		{"an unknown secretFiles", `"secretFiles":["nope"]`, []string{"secretFiles[0]"}},
		{"an unknown secretEnv", `"secretEnv":["nope"]`, []string{"secretEnv[0]"}},
		{"another team's secret", `"secretFiles":["vsec"]`, []string{"secretFiles[0]"}},
		{"a secret named twice", `"secretFiles":["hf","hf"]`, []string{"secretFiles[1]"}},
		{"everything wrong at once", `"volumes":[{"name":"nope","path":"/data"}],"mounts":[{"dataset":"cifar","path":"/in"}],"secretFiles":["nope"]`,
			[]string{"volumes[0].name", "mounts[0].dataset", "secretFiles[0]"}},
	} {
		refused(t, tt.name, submit(tt.extra), tt.fields...)
	}
	if got := f.workloadCount(); got != before {
		t.Errorf("%d workloads after the refused submits, want %d: nothing stored", got, before)
	}
	// A foreign team's volume is told as missing, never as another team's.
	if a := submit(`"volumes":[{"name":"theirs","path":"/data"}]`); strings.Contains(a.body, "vision") {
		t.Errorf("another team's volume: the answer names its team: %s", a.body)
	}

	// What is right is accepted and kept.
	var w api.Workload
	a := submit(`"volumes":[{"name":"ckpt","path":"/ckpt","readOnly":true}],"mounts":[{"dataset":"imagenet","path":"/data"}],"secretEnv":["hf"],"secretFiles":["conf","hf"]`)
	if a.status != http.StatusCreated {
		t.Fatalf("a good submit: %d %s", a.status, a.body)
	}
	f.must("member", "GET", "/api/v1/workloads/"+idOf(t, a), "", http.StatusOK, &w)
	if diff := cmp.Diff(api.Workload{
		Volumes:     []api.VolumeMount{{Name: "ckpt", Path: "/ckpt", ReadOnly: true}},
		Mounts:      []api.Mount{{Dataset: "imagenet", Path: "/data"}},
		SecretEnv:   []string{"hf"},
		SecretFiles: []string{"conf", "hf"},
	}, api.Workload{Volumes: w.Volumes, Mounts: dropReadOnly(w.Mounts), SecretEnv: w.SecretEnv, SecretFiles: w.SecretFiles}); diff != "" {
		t.Errorf("the accepted workload's storage (-want +got):\n%s", diff)
	}
}

func idOf(t *testing.T, a answer) string {
	t.Helper()
	var w api.Workload
	if err := json.Unmarshal([]byte(a.body), &w); err != nil || w.ID == "" {
		t.Fatalf("no workload in %s: %v", a.body, err)
	}
	return w.ID
}

// dropReadOnly clears Mount.ReadOnly, which an answer may give as true or
// leave out (a dataset is read-only either way).
func dropReadOnly(ms []api.Mount) []api.Mount {
	out := slices.Clone(ms)
	for i := range out {
		if out[i].ReadOnly != nil && *out[i].ReadOnly {
			out[i].ReadOnly = nil
		}
	}
	return out
}

func TestSecretKeysAreFileNames(t *testing.T) {
	f := storageFixture(t)
	for _, key := range []string{"../x", "a/b", ".", "..", "a b", ""} {
		body := `{"name":"s","data":{` + strconv.Quote(key) + `:"v"}}`
		refused(t, "key "+strconv.Quote(key), f.do("tadmin", "POST", "/api/v1/teams/research/secrets", body), "data."+key)
	}
	var l api.List[api.Secret]
	f.must("tadmin", "GET", "/api/v1/teams/research/secrets", "", http.StatusOK, &l)
	if len(l.Items) != 0 {
		t.Errorf("secrets after the refusals: %+v, want none", l.Items)
	}
	var sec api.Secret
	f.must("tadmin", "POST", "/api/v1/teams/research/secrets", `{"name":"ok","data":{"config.json":"{}","HF_TOKEN":"x",".env":"y","a-b_c.d":"z"}}`, http.StatusCreated, &sec)
	if diff := cmp.Diff([]string{".env", "HF_TOKEN", "a-b_c.d", "config.json"}, sec.Keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

// A secret over its 1 MiB bound is a 400 naming data, not a 413 for the
// body, and stores nothing.
func TestSecretOverItsBoundNamesData(t *testing.T) {
	f := storageFixture(t)
	big := strings.Repeat("x", spec.MaxSecretBytes+1)
	refused(t, "a secret of 1 MiB and a byte", f.do("tadmin", "POST", "/api/v1/teams/research/secrets", `{"name":"big","data":{"K":"`+big+`"}}`), "data")
	var l api.List[api.Secret]
	f.must("tadmin", "GET", "/api/v1/teams/research/secrets", "", http.StatusOK, &l)
	if len(l.Items) != 0 {
		t.Errorf("secrets after the refusal: %+v, want none", l.Items)
	}
}
