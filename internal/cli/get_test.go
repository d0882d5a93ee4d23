package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// fiveSubmitted submits five workloads, wl-1 to wl-5; wl-2 and wl-4
// belong to vision (submitted by the admin).
func fiveSubmitted(f *testServer) {
	for i := 1; i <= 5; i++ {
		w := api.Workload{Name: fmt.Sprintf("w%d", i), Team: "research", Resources: api.Resources{GPUs: 1000}, Command: []string{"x"}}
		tok := aliceToken
		if i%2 == 0 {
			w.Team, tok = "vision", adminToken
		}
		f.setNow(testNow.Add(-time.Duration(11-i) * time.Minute))
		if _, err := api.NewClient(f.URL, tok).SubmitWorkload(context.Background(), &w, ""); err != nil {
			f.t.Fatal(err)
		}
	}
	f.setNow(testNow)
}

func TestGetWorkloadsJSONFollowsPages(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantIDs   []string
		wantLists int // list requests the CLI made
	}{
		{"every page is read", []string{}, []string{"wl-1", "wl-2", "wl-3", "wl-4", "wl-5"}, 3},
		{"--limit returns fewer", []string{"--limit", "3"}, []string{"wl-1", "wl-2", "wl-3"}, 2},
		{"--limit above the count returns all", []string{"--limit", "50"}, []string{"wl-1", "wl-2", "wl-3", "wl-4", "wl-5"}, 3},
		{"--team filters on the server", []string{"--team", "vision"}, []string{"wl-2", "wl-4"}, 2}, // the second page is empty
		{"--phase filters on the server", []string{"--phase", "Running"}, []string{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			fiveSubmitted(f)
			f.pageSize = 2
			got := f.runAs(t, adminToken, append([]string{"get", "workloads", "-o", "json"}, tt.args...)...)
			if got.code != 0 {
				t.Fatalf("code %d: %s", got.code, got.stderr)
			}
			var l api.List[api.Workload]
			if err := json.Unmarshal([]byte(got.stdout), &l); err != nil {
				t.Fatalf("stdout is not a list: %v\n%s", err, got.stdout)
			}
			ids := []string{}
			for _, w := range l.Items {
				ids = append(ids, w.ID)
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("IDs (-want +got):\n%s", diff)
			}
			if l.NextPageToken != "" || strings.Contains(got.stdout, "nextPageToken") {
				t.Errorf("output carries a page token: %s", got.stdout)
			}
			if !strings.HasPrefix(got.stdout, "{\n  \"items\": [") {
				t.Errorf("output is not an indented {\"items\": [...]}:\n%s", got.stdout)
			}
			var lists []string
			for _, r := range f.requests("/api/v1/workloads") {
				if r == "GET /api/v1/workloads" || strings.HasPrefix(r, "GET /api/v1/workloads?") {
					lists = append(lists, r)
				}
			}
			if len(lists) != tt.wantLists {
				t.Errorf("made %d list requests (%q), want %d", len(lists), lists, tt.wantLists)
			}
		})
	}
}

func TestGetWorkloadsJSONIsWhatTheServerHolds(t *testing.T) {
	f := newTestServer(t)
	fiveSubmitted(f)
	got := f.runAs(t, adminToken, "get", "workloads", "-o", "json")
	var l api.List[api.Workload]
	json.Unmarshal([]byte(got.stdout), &l)
	want, err := f.admin().AllWorkloads(context.Background(), api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, l.Items); diff != "" || len(want) != 5 {
		t.Errorf("%d workloads, (-want +got):\n%s", len(want), diff)
	}
}

func TestGetWorkloadsTable(t *testing.T) {
	f := newTestServer(t)
	f.submitAt(aliceToken, testNow.Add(-10*time.Minute), api.Workload{Name: "train", Team: "research", Priority: "batch", Resources: api.Resources{GPUs: 250}, Command: []string{"exit", "3"}})
	f.step() // starts it, and it ends with code 3
	f.submitAt(adminToken, testNow.Add(-9*time.Minute), api.Workload{Team: "vision", Resources: api.Resources{GPUMemoryMiB: 20480}, Command: []string{"sleep"}})

	got := f.runAs(t, adminToken, "get", "workloads")
	want := "" +
		"ID    NAME   TEAM      PRIORITY  GPUS   PHASE    REASON     EXIT  ATTEMPTS  NODE  AGE\n" +
		"wl-1  train  research  batch     0.25   Failed   Error      3     1         gpu1  10m\n" +
		"wl-2  sleep  vision    training  20GiB  Pending  Submitted  -     0         -     9m\n"
	if diff := cmp.Diff(result{stdout: want}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	f.step() // starts wl-2 on gpu1
	got = f.runAs(t, adminToken, "get", "workload", "wl-2")
	want = "" +
		"ID    NAME   TEAM    PRIORITY  GPUS   PHASE    REASON     EXIT  ATTEMPTS  NODE  AGE\n" +
		"wl-2  sleep  vision  training  20GiB  Running  Scheduled  -     1         gpu1  9m\n"
	if diff := cmp.Diff(result{stdout: want}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// busyNodes fills gpu1 with running workloads, 2.75 of its 4 GPUs: two
// halves with 40 GiB each, three quarters with 60 GiB and a whole GPU, and
// records what the monitor sampled of its GPUs.
func busyNodes(f *testServer) {
	f.submit(
		api.Workload{Name: "a", Team: "research", Resources: api.Resources{GPUMemoryMiB: 40960}, Command: []string{"sleep"}},
		api.Workload{Name: "b", Team: "research", Resources: api.Resources{GPUMemoryMiB: 40960}, Command: []string{"sleep"}},
		api.Workload{Name: "c", Team: "research", Resources: api.Resources{GPUMemoryMiB: 61440}, Command: []string{"sleep"}},
		api.Workload{Name: "d", Team: "research", Resources: api.Resources{GPUs: 1000}, Command: []string{"sleep"}},
	)
	f.step()
	f.sample([]core.GPUSample{
		{Node: "gpu1", Index: 0, UUID: "GPU-0", Utilization: 0.9, MemoryUsedMiB: 30720},
		{Node: "gpu1", Index: 1, UUID: "GPU-1", Utilization: 0.3, MemoryUsedMiB: 1000},
	})
}

func TestGetNodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{{
		name: "table sums allocations per node",
		args: []string{"get", "nodes"},
		want: "" +
			"NAME  STATUS  GPUS           HEALTH       ALLOCATED  SCHEDULABLE\n" +
			"gpu1  Ready   4x H100        4/4 healthy  2.75/4     true\n" +
			"gpu2  Ready   1x A10, 1x L4  2/2 healthy  0/2        false\n",
	}, {
		name: "wide adds a row per GPU",
		args: []string{"get", "nodes", "-o", "wide"},
		want: "" +
			"NAME      STATUS  GPUS           HEALTH       ALLOCATED  SCHEDULABLE  GPU-MEMORY     UTIL  MEM-USED  POOL  UUID   WORKLOADS\n" +
			"gpu1      Ready   4x H100        4/4 healthy  2.75/4     true         220GiB/320GiB  60%   31720MiB  a     -      -\n" +
			"  gpu1/0          H100           Healthy      1/1                     80GiB/80GiB    90%   30GiB           GPU-0  wl-1@0.5,wl-2@0.5\n" +
			"  gpu1/1          H100           Healthy      0.75/1                  60GiB/80GiB    30%   1000MiB         GPU-1  wl-3@0.75\n" +
			"  gpu1/2          H100           Healthy      1/1                     80GiB/80GiB    -     -               GPU-2  wl-4@1\n" +
			"  gpu1/3          H100           Healthy      0/1                     0MiB/80GiB     -     -               GPU-3  -\n" +
			"gpu2      Ready   1x A10, 1x L4  2/2 healthy  0/2        false        0MiB/48GiB     -     -         -     -      -\n" +
			"  gpu2/0          A10            Healthy      0/1                     0MiB/24GiB     -     -               GPU-4  -\n" +
			"  gpu2/1          L4             Healthy      0/1                     0MiB/24GiB     -     -               GPU-5  -\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			busyNodes(f)
			got := f.run(t, tt.args...)
			if diff := cmp.Diff(result{stdout: tt.want}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetStructuredOutput(t *testing.T) {
	f := newTestServer(t)
	fiveSubmitted(f)
	busyNodes(f) // wl-6 to wl-9
	ctx := context.Background()
	wls, err := f.admin().AllWorkloads(ctx, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := f.admin().Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	teams, err := f.admin().Teams(ctx)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		args   []string
		decode func([]byte, any) error
		into   func() any
		want   any
	}{
		{"one workload prints as the object", []string{"get", "workload", "wl-3", "-o", "json"}, json.Unmarshal,
			func() any { return new(api.Workload) }, &wls[2]},
		{"nodes print as a list", []string{"get", "nodes", "-o", "json"}, json.Unmarshal,
			func() any { return new(api.List[api.Node]) }, &api.List[api.Node]{Items: nodes}},
		{"teams print as a list", []string{"get", "teams", "-o", "json"}, json.Unmarshal,
			func() any { return new(api.List[api.Team]) }, &api.List[api.Team]{Items: teams}},
		{"yaml uses the API's field names", []string{"get", "workloads", "--limit", "1", "-o", "yaml"}, func(b []byte, v any) error { return yaml.UnmarshalStrict(b, v) },
			func() any { return new(api.List[api.Workload]) }, &api.List[api.Workload]{Items: []api.Workload{wls[0]}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := f.runAs(t, adminToken, tt.args...)
			if got.code != 0 {
				t.Fatalf("code %d: %s", got.code, got.stderr)
			}
			v := tt.into()
			if err := tt.decode([]byte(got.stdout), v); err != nil {
				t.Fatalf("decode: %v\n%s", err, got.stdout)
			}
			if diff := cmp.Diff(tt.want, v); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// teamsAtWork gives the teams usage and pending demand: research runs 2.5
// GPUs and waits for a quarter of an A10 (gpu2, which has one, is not
// schedulable), vision for a gang of an A10 and an L4 (gpu2 again);
// research may use the production and training classes only.
func teamsAtWork(f *testServer) {
	f.submit(
		api.Workload{Team: "research", Resources: api.Resources{GPUs: 2000}, Command: []string{"sleep"}},
		api.Workload{Team: "research", Resources: api.Resources{GPUs: 500}, Command: []string{"sleep"}},
		api.Workload{Team: "research", Resources: api.Resources{GPUs: 250, GPUModels: []string{"A10"}}, Command: []string{"sleep"}},
	)
	f.submitAs(adminToken, api.Workload{Team: "vision", Replicas: 2, Resources: api.Resources{GPUs: 1000, GPUModels: []string{"A10", "L4"}}, Command: []string{"sleep"}})
	f.step()
	if _, err := f.admin().SetPriorityClasses(context.Background(), "research", []string{"production", "training"}); err != nil {
		f.t.Fatal(err)
	}
}

func TestGetTeams(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{{
		name: "table shows quotas and shares in GPUs",
		args: []string{"get", "teams"},
		want: "" +
			"NAME      GUARANTEED  LIMIT      WEIGHT  USAGE  FAIR-SHARE  PENDING\n" +
			"research  8           16         2       2.5    2.75        0.25\n" +
			"vision    0           unlimited  1       0      1.25        2\n",
	}, {
		name: "wide adds the age and the priority classes",
		args: []string{"get", "teams", "-o", "wide"},
		want: "" +
			"NAME      GUARANTEED  LIMIT      WEIGHT  USAGE  FAIR-SHARE  PENDING  AGE  PRIORITY-CLASSES\n" +
			"research  8           16         2       2.5    2.75        0.25     3d   production,training\n" +
			"vision    0           unlimited  1       0      1.25        2        90m  preemptible\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			teamsAtWork(f)
			got := f.runAs(t, adminToken, tt.args...)
			if diff := cmp.Diff(result{stdout: tt.want}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a team created without a limit shows unlimited", func(t *testing.T) {
		f := newTestServer(t)
		if _, err := f.admin().CreateTeam(context.Background(), &api.Team{Name: "speech"}); err != nil {
			t.Fatal(err)
		}
		got := f.runAs(t, adminToken, "get", "teams")
		if !strings.Contains(got.stdout, "\nspeech    0           unlimited  1 ") {
			t.Errorf("got:\n%s", got.stdout)
		}
	})

	t.Run("json is the API's answer as it is", func(t *testing.T) {
		f := newTestServer(t)
		teamsAtWork(f)
		got := f.runAs(t, adminToken, "get", "teams", "-o", "json")
		teams, err := f.admin().Teams(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(api.List[api.Team]{Items: teams})
		if diff := cmp.Diff(decodeJSON(t, string(raw)), decodeJSON(t, got.stdout)); diff != "" {
			t.Errorf("(-API +CLI):\n%s", diff)
		}
		for _, key := range []string{"guaranteedMilliGPU", "limitMilliGPU", "weight", "usageMilliGPU", "fairShareMilliGPU", "pendingMilliGPU"} {
			if !strings.Contains(got.stdout, `"`+key+`": `) {
				t.Errorf("no %s in\n%s", key, got.stdout)
			}
		}
	})
}

func TestGetUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no kind", []string{"get"}, "error: get what? want workloads, workload ID, nodes, teams, priorityclasses, users, user NAME, members TEAM, prices, budgets, secrets --team TEAM, volumes, storage, clusters, pools, servers or evidence --node NODE\n"},
		{"unknown kind", []string{"get", "pods"}, "error: get \"pods\": want workloads, workload ID, nodes, teams, priorityclasses, users, user NAME, members TEAM, prices, budgets, secrets --team TEAM, volumes, storage, clusters, pools, servers or evidence --node NODE\n"},
		{"unknown output", []string{"get", "nodes", "-o", "xml"}, "error: -o \"xml\": want one of table, wide, json, yaml\n"},
		{"workload filters on nodes", []string{"get", "nodes", "--team", "a"}, "error: --team, --phase and --limit apply to workloads only (and --team to secrets, volumes and storage)\n"},
		{"unknown flag", []string{"get", "nodes", "--colour"}, "error: unknown flag: --colour\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			got := f.run(t, tt.args...)
			want := result{code: 2, stderr: tt.want + "Run 'gpufleet get --help' for usage.\n"}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetUnknownWorkloadIsAnError(t *testing.T) {
	f := newTestServer(t)
	got := f.run(t, "get", "workload", "wl-9")
	want := result{code: 1, stderr: "error: workload wl-9: not found\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
