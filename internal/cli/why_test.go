package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
)

// Scenes of the real server for why and describe. Each fills the fleet,
// steps the control loop and returns the ID of the workload to look at.
// Workloads that must stay stopping run ["sleep", "ignore-sigterm"]: the
// fake executor kills them only once their grace has passed on the
// server's clock, which the tests do not move.

var stubborn = []string{"sleep", fake.IgnoreSIGTERM}

// oneGPUEach returns n workloads of team asking for one GPU each.
func oneGPUEach(team, priority string, n int) []api.Workload {
	var ws []api.Workload
	for range n {
		ws = append(ws, api.Workload{Team: team, Priority: priority, Resources: api.Resources{GPUs: 1000}, Command: stubborn})
	}
	return ws
}

// sceneQuotaLimit: vision may use one GPU, runs wl-1 on it, and wl-2 asks
// for two more.
func sceneQuotaLimit(f *testServer) string {
	if _, err := f.admin().SetQuota(context.Background(), "vision", &api.TeamQuota{LimitMilliGPU: ptr(int64(1000))}); err != nil {
		f.t.Fatal(err)
	}
	f.submitAs(adminToken, oneGPUEach("vision", "", 1)...)
	f.step()
	f.submitAs(adminToken, api.Workload{Team: "vision", Resources: api.Resources{GPUs: 2000}, Command: stubborn})
	f.step()
	return "wl-2"
}

// scenePreempting: research fills gpu1 with four training workloads, wl-1
// to wl-4, then submits wl-5, a production one of two GPUs, which preempts
// two of them.
// It returns the preemptor's ID; preemptedBy(f, "wl-5") finds the victim.
func scenePreempting(f *testServer) string {
	if _, err := f.admin().SetPriorityClasses(context.Background(), "research", []string{"production", "training"}); err != nil {
		f.t.Fatal(err)
	}
	f.submit(oneGPUEach("research", "training", 4)...)
	f.step()
	f.submit(api.Workload{Team: "research", Priority: "production", Resources: api.Resources{GPUs: 2000}, Command: stubborn})
	f.step()
	return "wl-5"
}

// sceneReclaiming: vision borrows the whole of gpu1, wl-1 to wl-4, and
// research, under its guarantee, submits wl-5, which reclaims one GPU.
func sceneReclaiming(f *testServer) string {
	f.submitAs(adminToken, oneGPUEach("vision", "", 4)...)
	f.step()
	f.submit(oneGPUEach("research", "", 1)...)
	f.step()
	return "wl-5"
}

// preemptedBy returns the ID of the running workload being stopped for id.
func preemptedBy(f *testServer, id string) string {
	f.t.Helper()
	wls, err := f.admin().AllWorkloads(context.Background(), api.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, w := range wls {
		if w.Status.PreemptedBy == id {
			return w.ID
		}
	}
	f.t.Fatalf("no workload is being stopped for %s: %+v", id, wls)
	return ""
}

func TestWhy(t *testing.T) {
	tests := []struct {
		name  string
		scene func(f *testServer) string
		want  string
	}{{
		name:  "pending prints the reason and its sentence",
		scene: sceneQuotaLimit,
		want:  "QuotaLimit: team vision at its limit (1/1 GPUs; this workload needs 2)\n",
	}, {
		name:  "pending behind preempted workloads names the nominated node",
		scene: scenePreempting,
		want:  "Preempting: waiting for 2 preempted workloads to stop on gpu1\nnominated node: gpu1\n",
	}, {
		name: "pending with a reason alone prints the reason",
		scene: func(f *testServer) string {
			return f.submit(oneGPUEach("research", "", 1)...)[0] // not yet seen by the loop
		},
		want: "Submitted\n",
	}, {
		name: "running names the node and its GPUs",
		scene: func(f *testServer) string {
			// gpu2 takes work; three GPUs of gpu1 are busy, so a gang of
			// three spans both nodes.
			gpu2 := core.Node{Name: "gpu2", Schedulable: true, UpdatedAt: testNow, GPUs: []core.GPU{
				{Index: 0, UUID: "GPU-4", Model: "A10", MemoryMiB: 24576}, {Index: 1, UUID: "GPU-5", Model: "L4", MemoryMiB: 24576}}}
			if err := f.st.PutNode(context.Background(), gpu2); err != nil {
				f.t.Fatal(err)
			}
			f.submit(api.Workload{Team: "research", Resources: api.Resources{GPUs: 3000}, Command: stubborn})
			f.step()
			id := f.submit(api.Workload{Team: "research", Replicas: 3, Resources: api.Resources{GPUs: 1000}, Command: stubborn})[0]
			f.step()
			return id
		},
		want: "Running on gpu1 (gpu 3), gpu2 (gpus 0,1)\n",
	}, {
		name: "running on a fraction names its share",
		scene: func(f *testServer) string {
			id := f.submit(api.Workload{Team: "research", Resources: api.Resources{GPUs: 250}, Command: stubborn})[0]
			f.step()
			return id
		},
		want: "Running on gpu1 (0.25 of gpu 0)\n",
	}, {
		name:  "running while being reclaimed says it is stopping, why and for whom",
		scene: func(f *testServer) string { return preemptedBy(f, sceneReclaiming(f)) },
		want:  "Running on gpu1 (gpu 0)\nstopping (Reclaimed): reclaimed by wl-5 (team research, training): team vision runs over its quota, and the preempting team reclaims its guarantee\n",
	}, {
		name:  "a message that names the preemptor is not repeated",
		scene: func(f *testServer) string { return preemptedBy(f, scenePreempting(f)) },
		want:  "Running on gpu1 (gpu 0)\nstopping (Preempted): preempted by wl-5 (team research, production): a production workload of its own team needs the capacity\n",
	}, {
		name: "running while being cancelled says it is stopping",
		scene: func(f *testServer) string {
			id := f.submit(oneGPUEach("research", "", 1)...)[0]
			f.step()
			if _, err := api.NewClient(f.URL, aliceToken).CancelWorkload(context.Background(), id); err != nil {
				f.t.Fatal(err)
			}
			f.step()
			return id
		},
		want: "Running on gpu1 (gpu 0)\nstopping (Cancelled): cancelled by alice\n",
	}, {
		name: "finished prints phase, reason and message",
		scene: func(f *testServer) string {
			id := f.submit(oneGPUEach("research", "", 1)...)[0]
			if _, err := api.NewClient(f.URL, aliceToken).CancelWorkload(context.Background(), id); err != nil {
				f.t.Fatal(err)
			}
			return id
		},
		want: "Cancelled (Cancelled): cancelled by alice\n",
	}, {
		name: "failed without a message prints phase and reason",
		scene: func(f *testServer) string {
			id := f.submit(api.Workload{Team: "research", Resources: api.Resources{GPUs: 1000}, Command: []string{"exit", "3"}})[0]
			f.step()
			return id
		},
		want: "Failed (Error)\n",
	}, {
		name: "succeeded without a message prints phase and reason",
		scene: func(f *testServer) string {
			id := f.submit(api.Workload{Team: "research", Resources: api.Resources{GPUs: 1000}, Command: []string{"true"}})[0]
			f.step()
			return id
		},
		want: "Succeeded (Completed)\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			id := tt.scene(f)
			got := f.runAs(t, adminToken, "why", id)
			if diff := cmp.Diff(result{stdout: tt.want}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWhyJSON(t *testing.T) {
	tests := []struct {
		name  string
		scene func(f *testServer) string
		want  string
	}{{
		name:  "every key is present",
		scene: sceneQuotaLimit,
		want:  `{"id":"wl-2","phase":"Pending","reason":"QuotaLimit","message":"team vision at its limit (1/1 GPUs; this workload needs 2)","nominatedNode":""}`,
	}, {
		name:  "the nominated node is carried",
		scene: scenePreempting,
		want:  `{"id":"wl-5","phase":"Pending","reason":"Preempting","message":"waiting for 2 preempted workloads to stop on gpu1","nominatedNode":"gpu1"}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			id := tt.scene(f)
			got := f.runAs(t, adminToken, "why", id, "-o", "json")
			if got.code != 0 {
				t.Fatalf("code %d: %s", got.code, got.stderr)
			}
			if diff := cmp.Diff(decodeJSON(t, tt.want), decodeJSON(t, got.stdout)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWhyUnknownWorkload(t *testing.T) {
	f := newTestServer(t)
	got := f.run(t, "why", "wl-9")
	want := result{code: 1, stderr: "error: workload wl-9: not found\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDescribeShowsPreemption(t *testing.T) {
	tests := []struct {
		name      string
		scene     func(f *testServer) string
		wantLines []string // regular expressions, each matching a whole line
		notLines  []string
	}{{
		name:      "a workload being preempted shows the stop and its preemptor",
		scene:     func(f *testServer) string { return preemptedBy(f, scenePreempting(f)) },
		wantLines: []string{`  Stop requested:\s+Preempted`, `  Preempted by:\s+wl-5`},
		notLines:  []string{`  Nominated node:.*`},
	}, {
		name:      "a pending preemptor shows its nominated node",
		scene:     scenePreempting,
		wantLines: []string{`  Nominated node:\s+gpu1`, `  Reason:\s+Preempting`},
		notLines:  []string{`  Stop requested:.*`, `  Preempted by:.*`},
	}, {
		name:     "a plain workload shows none of them",
		scene:    func(f *testServer) string { return f.submit(oneGPUEach("research", "", 1)...)[0] },
		notLines: []string{`  Stop requested:.*`, `  Preempted by:.*`, `  Nominated node:.*`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestServer(t)
			id := tt.scene(f)
			got := f.runAs(t, adminToken, "describe", "workload", id)
			if got.code != 0 {
				t.Fatalf("code %d: %s", got.code, got.stderr)
			}
			for _, re := range tt.wantLines {
				if !regexp.MustCompile(`(?m)^` + re + `$`).MatchString(got.stdout) {
					t.Errorf("no line matching %q in:\n%s", re, got.stdout)
				}
			}
			for _, re := range tt.notLines {
				if regexp.MustCompile(`(?m)^` + re + `$`).MatchString(got.stdout) {
					t.Errorf("a line matches %q in:\n%s", re, got.stdout)
				}
			}
		})
	}
}

func TestDescribeJSONEventsCarryTimeReasonAndMessage(t *testing.T) {
	f := newTestServer(t)
	f.submit(api.Workload{Team: "research", Resources: api.Resources{GPUs: 1000}, Command: []string{"sleep"}})
	f.step() // started
	// A warning without a message, as the store records it.
	if ok, err := f.st.Warn(context.Background(), "wl-1", 1, "Reclaimed", "", testNow); !ok || err != nil {
		t.Fatalf("warn: %v, %v", ok, err)
	}

	got := f.run(t, "describe", "workload", "wl-1", "-o", "json")
	var d struct {
		Workload map[string]any   `json:"workload"`
		Events   []map[string]any `json:"events"`
	}
	if err := json.Unmarshal([]byte(got.stdout), &d); err != nil {
		t.Fatalf("%v\n%s", err, got.stdout)
	}
	if d.Workload["id"] != "wl-1" || len(d.Events) != 3 {
		t.Fatalf("workload %v with %d events, want wl-1 with 3", d.Workload["id"], len(d.Events))
	}
	for i, ev := range d.Events {
		for _, key := range []string{"time", "reason", "message"} {
			if _, ok := ev[key]; !ok {
				t.Errorf("event %d lacks %q: %v", i, key, ev)
			}
		}
	}
	if last := d.Events[2]; last["reason"] != "Reclaimed" || last["message"] != "" {
		t.Errorf("last event is %v, want Reclaimed with an empty message", last)
	}
}
