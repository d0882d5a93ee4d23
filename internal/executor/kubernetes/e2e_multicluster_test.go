package kubernetes

// TestE2EMultiCluster: the real gpufleet binary with two clusters (issue
// 19): this machine (executor local, two simulated GPUs) as an owned pool
// in eu-west, and the test's Kubernetes cluster (KWOK GPU nodes) as a
// priced burst pool in us-east. It checks, through the CLI and the API,
// that nodes carry their cluster, pool, region and kind; that work goes to
// the owned pool first; that residency keeps work out of the burst pool;
// that work of a class that may burst goes there as a pod once it has
// waited burst.after, and not before; that a class that may not burst
// stays pending; that the cost report has a row for the burst pool; and
// that a residency no node has is refused at submit.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// burstAfter is the configuration's burst.after.
const burstAfter = 3 * time.Second

func TestE2EMultiCluster(t *testing.T) {
	x := newE2E(t, 1, 4)
	cloudNode := x.nodes[0]
	x.startMulti()
	ctx := t.Context()
	// The local cluster's processes outlive a server that stops (they
	// are adopted when it starts again): cancel what is left, and wait for
	// it to end, before the server stops.
	// (The test's context is done by then: the cleanup has its own.)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ws, err := x.srv.client.AllWorkloads(cctx, api.ListOptions{})
		if err != nil {
			t.Errorf("list the workloads left: %v", err)
			return
		}
		for _, w := range ws {
			if w.Status.Phase == api.PhasePending || w.Status.Phase == api.PhaseRunning {
				if _, err := x.srv.client.CancelWorkload(cctx, w.ID); err != nil {
					t.Errorf("cancel %s: %v", w.ID, err)
				}
			}
		}
		end, _ := cctx.Deadline()
		if _, ok := testwait.Within(time.Until(end), func() (bool, string) {
			ws, err := x.srv.client.AllWorkloads(cctx, api.ListOptions{})
			return err == nil && !slices.ContainsFunc(ws, func(w api.Workload) bool { return w.Status.Phase == api.PhaseRunning }), ""
		}); !ok {
			t.Errorf("workloads still running 30 s after their cancel")
		}
	})

	// 1. Nodes: their cluster, pool, region and kind, as `get nodes -o
	// json` prints them (decoded loosely: every field the server sends).
	var nodes struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(x.cli("get", "nodes", "-o", "json"), &nodes); err != nil {
		t.Fatalf("get nodes -o json: %v", err)
	}
	var localNode string
	for _, n := range nodes.Items {
		name, _ := n["name"].(string)
		if name == cloudNode {
			continue
		}
		if localNode != "" {
			t.Errorf("nodes %s and %s besides the KWOK node %s: want one local node", localNode, name, cloudNode)
		}
		localNode = name
	}
	if localNode == "" || len(nodes.Items) != 2 {
		t.Fatalf("get nodes: %d nodes %v, want the local node and %s", len(nodes.Items), nodes.Items, cloudNode)
	}
	want := map[string]map[string]string{
		localNode: {"pool": "onprem", "region": "eu-west", "cluster": "onprem", "poolKind": "owned"},
		cloudNode: {"pool": "cloud", "region": "us-east", "cluster": "cloud", "poolKind": "burst"},
	}
	for _, n := range nodes.Items {
		name, _ := n["name"].(string)
		for k, v := range want[name] {
			if got, _ := n[k].(string); got != v {
				t.Errorf("get nodes -o json: node %s: %s %q, want %q", name, k, got, v)
			}
		}
	}

	// 2. Work that fits runs on this machine.
	first := x.cliSubmit("--priority", "training", "--gpus", "1", "--", "sleep", "30")
	ws := x.waitPhase(30*time.Second, api.PhaseRunning, first)
	if p := ws[first].Status.Placement; len(p) != 1 || p[0].Node != localNode {
		t.Errorf("%s: placement %+v, want the local node %s", first, p, localNode)
	}
	// It ends in 30 s, which would free a GPU in the middle of what
	// follows: cancel it and fill onprem with work that lasts.
	x.cli("cancel", first)
	x.waitPhase(30*time.Second, api.PhaseCancelled, first)
	var fill []string
	for range 2 {
		fill = append(fill, x.cliSubmit("--priority", "training", "--gpus", "1", "--", "sleep", "600"))
	}
	ws = x.waitPhase(30*time.Second, api.PhaseRunning, fill...)
	for _, id := range fill {
		if p := ws[id].Status.Placement; len(p) != 1 || p[0].Node != localNode {
			t.Errorf("fill %s: placement %+v, want the local node %s", id, p, localNode)
		}
	}

	// 3. Onprem is full. Work that must stay in eu-west waits past
	// burst.after and never goes to the burst pool in us-east.
	resident := x.cliSubmit("--priority", "training", "--region", "eu-west", "--gpus", "1", "--", "sleep", "600")
	x.stayPending(2*burstAfter, resident)
	w := x.workloads()[resident]
	why := string(x.cli("why", resident))
	if msg := w.Status.Message + "\n" + why; !strings.Contains(msg, "residency") {
		t.Errorf("%s (residency eu-west, onprem full): message %q and why %q do not name residency", resident, w.Status.Message, why)
	}

	// 4. Work without residency, of a class that may burst, goes to the
	// burst pool once it has waited burst.after, not before, as a pod.
	burst := x.cliSubmit("--priority", "training", "--gpus", "1", "--", "sleep", "600")
	x.waitFor(60*time.Second, burst+" Running", func() (bool, string) {
		w := x.workloads()[burst]
		if w.Status.Phase == api.PhaseRunning {
			return true, ""
		}
		return false, fmt.Sprintf("%s (%s: %s)", w.Status.Phase, w.Status.Reason, w.Status.Message)
	})
	w = x.workloads()[burst]
	if p := w.Status.Placement; len(p) != 1 || p[0].Node != cloudNode {
		t.Errorf("%s: placement %+v, want the KWOK node %s", burst, p, cloudNode)
	}
	if w.Status.StartedAt == nil || w.Status.StartedAt.Sub(w.CreatedAt) < burstAfter {
		t.Errorf("%s: submitted %v, started %v: burst before burst.after (%v)", burst, w.CreatedAt, w.Status.StartedAt, burstAfter)
	} else {
		t.Logf("%s: burst to %s after %v", burst, cloudNode, w.Status.StartedAt.Sub(w.CreatedAt).Round(time.Millisecond))
	}
	// Running is the placement; the pod follows a moment later.
	ns := x.namespace("default")
	podName := PodName(coreID(burst), 1, 0, 1)
	x.waitFor(30*time.Second, "pod "+ns+"/"+podName+" on "+cloudNode, func() (bool, string) {
		pod, err := x.pod(ns, podName)
		if err != nil {
			return false, err.Error()
		}
		return pod.Spec.NodeName == cloudNode, fmt.Sprintf("on %q", pod.Spec.NodeName)
	})
	// The others have no pod: they run (or wait) on this machine.
	for _, id := range append(slices.Clone(fill), resident) {
		if _, err := x.pod(ns, PodName(coreID(id), 1, 0, 1)); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a pod in %s (err %v), want none", id, ns, err)
		}
	}
	if w := x.workloads()[resident]; w.Status.Phase != api.PhasePending {
		t.Errorf("%s (residency eu-west): %s on %+v, want Pending", resident, w.Status.Phase, w.Status.Placement)
	}

	// 5. A class that may not burst stays pending while onprem is full,
	// though the burst pool has room.
	batch := x.cliSubmit("--priority", "batch", "--gpus", "1", "--", "sleep", "600")
	x.stayPending(2*burstAfter, batch, resident)
	t.Logf("%s (batch): %s", batch, x.workloads()[batch].Status.Message)

	// 6. The cost report by pool has a row for the burst pool, once the
	// work there has ended.
	x.cli("cancel", burst)
	x.waitPhase(30*time.Second, api.PhaseCancelled, burst)
	var rep api.CostReport
	x.waitFor(30*time.Second, "cost report row for pool cloud", func() (bool, string) {
		rep = api.CostReport{}
		if err := json.Unmarshal(x.cli("cost", "report", "--by", "pool", "-o", "json"), &rep); err != nil {
			t.Fatalf("cost report --by pool -o json: %v", err)
		}
		i := slices.IndexFunc(rep.Items, func(r api.CostRow) bool { return r.Name == "cloud" })
		if i < 0 {
			return false, fmt.Sprintf("rows %+v", rep.Items)
		}
		if r := rep.Items[i]; r.GPUHours <= 0 {
			return false, fmt.Sprintf("row cloud %+v: no GPU hours", r)
		}
		return true, ""
	})

	// 7. A residency no node has is refused at submit, naming the field:
	// through the CLI and, for the status, the API.
	out, errOut, err := x.cliErr("submit", "--region", "mars", "--gpus", "1", "--", "sleep", "1")
	if err == nil || !strings.Contains(errOut, "residency") && !strings.Contains(errOut, "--region") {
		t.Errorf("submit --region mars: err %v, stdout %q, stderr %q: want a refusal naming residency", err, out, errOut)
	}
	_, err = x.srv.client.SubmitWorkload(ctx, &api.Workload{Priority: "training", Residency: []string{"mars"},
		Resources: api.Resources{GPUs: 1000}, Command: []string{"sleep", "1"}}, "")
	var se *api.StatusError
	if !errors.As(err, &se) || se.Status != 400 || !slices.ContainsFunc(se.Err.Fields, func(f api.FieldError) bool { return f.Field == "residency" }) {
		t.Errorf("submit residency [mars]: %v, want 400 with field residency", err)
	}
	for id, w := range x.workloads() {
		if slices.Contains(w.Residency, "mars") {
			t.Errorf("%s: submitted with residency mars", id)
		}
	}
}

// stayPending checks every 200 ms for d that each of ids is Pending and
// placed nowhere.
func (x *e2e) stayPending(d time.Duration, ids ...string) {
	x.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ws := x.workloads()
		for _, id := range ids {
			if w := ws[id]; w.Status.Phase != api.PhasePending || len(w.Status.Placement) > 0 {
				x.t.Fatalf("%s: %s on %+v (%s), want Pending", id, w.Status.Phase, w.Status.Placement, w.Status.Message)
			}
		}
		time.Sleep(200 * time.Millisecond) // a window in which nothing may place them
	}
}

// cliSubmit runs `gpufleet submit ARGS` and returns the workload's ID.
func (x *e2e) cliSubmit(args ...string) string {
	x.t.Helper()
	id := strings.TrimSpace(string(x.cli(append([]string{"submit"}, args...)...)))
	if id == "" {
		x.t.Fatalf("gpufleet submit %s: no ID", strings.Join(args, " "))
	}
	return id
}

// cliErr runs a gpufleet client command that may fail.
func (x *e2e) cliErr(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(gpufleetBinary(x.t), args...)
	cmd.Env = append(os.Environ(), "GPUFLEET_ADDR="+x.srv.addr, "GPUFLEET_TOKEN="+x.srv.token, "HOME="+x.data, "XDG_CONFIG_HOME="+x.data)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// writeMultiConfig writes a configuration of two clusters: this machine
// (two simulated H100s), an owned pool in eu-west; the test cluster, whose
// nodes the test's KWOK nodes are (kubernetes.nodeSelector applies to
// it), a burst pool in us-east at 4 a GPU-hour.
func (x *e2e) writeMultiConfig() string {
	x.t.Helper()
	sel := DefaultPoolLabel + "=" + x.id
	cfg := map[string]any{
		"addr": "127.0.0.1:0",
		"data": x.data,
		"kubernetes": map[string]any{
			"namespaceTemplate": x.nsPrefix() + "{team}",
			"nodeSelector":      sel,
			"defaultImage":      e2eImage,
		},
		"clusters": []map[string]any{
			{"name": "onprem", "executor": "local", "fakeGPUs": "2xH100-80GB"},
			{"name": "cloud", "executor": "kubernetes", "kubeconfig": x.kubeconfig},
		},
		"pools": []map[string]any{
			{"name": "onprem", "cluster": "onprem", "region": "eu-west", "kind": "owned"},
			{"name": "cloud", "cluster": "cloud", "region": "us-east", "kind": "burst", "nodeSelector": sel,
				"price": map[string]any{"onDemand": 4}},
		},
		"burst": map[string]any{"after": burstAfter.String(), "idleRelease": "10m"},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(x.data, "config-multi.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		x.t.Fatal(err)
	}
	return path
}

// startMulti runs `gpufleet server --config F` with writeMultiConfig's
// file and waits until it serves; as start, which writes the
// single-cluster file.
func (x *e2e) startMulti() *server {
	t := x.t
	t.Helper()
	bin := gpufleetBinary(t)
	cfgPath := x.writeMultiConfig()
	logPath := filepath.Join(x.data, fmt.Sprintf("server-%d.log", time.Now().UnixNano()))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "server", "--config", cfgPath)
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), "HOME="+x.data)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1), log: logPath}
	x.srv = s // stopped by cleanup whatever happens next
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "gpufleet: API on http://"); ok {
				addrc <- a
			}
		}
	}()
	go func() {
		s.done <- cmd.Wait()
		logf.Close()
	}()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("server log %s (tail):\n%s", logPath, b)
		}
	})
	select {
	case s.addr = <-addrc:
	case err := <-s.done:
		s.done <- err
		b, _ := os.ReadFile(logPath)
		t.Fatalf("gpufleet server exited before serving: %v\n%s", err, b)
	case <-time.After(60 * time.Second):
		t.Fatal("gpufleet server did not serve within 60 s")
	}
	tok, err := os.ReadFile(filepath.Join(x.data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(tok))
	s.client = api.NewClient(s.addr, s.token)
	return s
}
