package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// parallelScript says who and where the task is (its user, its address,
// its attempt's cgroup, as "KEY value" lines), then READY, and runs until
// its SIGTERM, when it exits with $CODE (or for a minute at most, should
// the test be killed before it stops the task).
const parallelScript = `trap 'exit $CODE' TERM
echo "UID $(id -u)"
echo "ADDR $(hostname -I | tr -d ' ')"
echo "CGROUP $(cut -d: -f3 /proc/self/cgroup | grep -m1 -- "/$GPUFLEET_WORKLOAD_ID-attempt-$GPUFLEET_ATTEMPT\$")"
echo READY
sleep 60 & wait $!
exit 99
`

// TestConcurrentStarts: eight tasks of four teams started through Start
// at once (as the control loop does, StartParallelism at a time) each run
// under their team's one user, with an address and a cgroup of their own;
// the workloads' record (network.json) and nftables table hold every one
// of them while they run and none once they have ended, and each exit
// reaches its own attempt.
func TestConcurrentStarts(t *testing.T) {
	const n = 8
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	st := e.Isolation()
	if !st.Full() || st.Network == "" || st.Cgroups == "" {
		requireOrSkip(t, "per-team users, network namespaces and cgroups", st)
	}
	var tasks []executor.Task
	for i := range n {
		tk := task(core.WorkloadID(fmt.Sprintf("par-%d", i)), "/bin/sh", "-c", parallelScript)
		tk.Team = core.TeamName(fmt.Sprintf("team-%d", i%4))
		tk.Env = map[string]string{"CODE": strconv.Itoa(10 + i)}
		tk.Ports = []core.Port{{Port: 8000}}
		tasks = append(tasks, tk)
	}

	// 1. Start all at once: each goroutine waits at the gate.
	gate := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, tk := range tasks {
		wg.Go(func() {
			<-gate
			errs[i] = e.Start(t.Context(), tk)
		})
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			// A test that fails before step 4 leaves no task behind.
			t.Cleanup(func() { e.Stop(context.Background(), tasks[i].WorkloadID, 1, 0) })
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Start %s: %v", tasks[i].WorkloadID, err)
		}
	}

	// 2. Each runs as its team's user, at its own address and in its own
	// cgroup.
	uidOf := map[core.TeamName]string{}
	addrOf := map[string]core.WorkloadID{}
	cgOf := map[string]core.WorkloadID{}
	byTeam := map[core.TeamName][]string{}
	for _, tk := range tasks {
		id := tk.WorkloadID
		got := map[string]string{}
		for _, l := range strings.Split(waitOutput(t, e, id, "READY"), "\n") {
			if k, v, ok := strings.Cut(l, " "); ok {
				got[k] = v
			}
		}
		if u, ok := uidOf[tk.Team]; ok && u != got["UID"] {
			t.Errorf("%s of team %s runs as %s, its team-mate as %s", id, tk.Team, got["UID"], u)
		}
		uidOf[tk.Team] = got["UID"]
		if other, ok := addrOf[got["ADDR"]]; ok || got["ADDR"] == "" {
			t.Errorf("%s has address %q, as %s has", id, got["ADDR"], other)
		}
		addrOf[got["ADDR"]] = id
		if a, ok := e.Address(id, 1); !ok || a != got["ADDR"] {
			t.Errorf("Address of %s: %q %t, want %q as the task sees", id, a, ok, got["ADDR"])
		}
		if filepath.Base(got["CGROUP"]) != string(id)+"-attempt-1" {
			t.Errorf("%s runs in cgroup %q, want one named %s-attempt-1", id, got["CGROUP"], id)
		}
		if other, ok := cgOf[got["CGROUP"]]; ok {
			t.Errorf("%s runs in cgroup %s, as %s does", id, got["CGROUP"], other)
		}
		cgOf[got["CGROUP"]] = id
		byTeam[tk.Team] = append(byTeam[tk.Team], got["ADDR"])
	}
	users := map[string]core.TeamName{}
	for team, u := range uidOf {
		if other, ok := users[u]; ok {
			t.Errorf("teams %s and %s both run as %s", team, other, u)
		}
		users[u] = team
	}

	// 3. The record and the table hold every workload.
	var wantIDs []core.WorkloadID
	var wantTeams [][]string
	for _, tk := range tasks {
		wantIDs = append(wantIDs, tk.WorkloadID)
	}
	for _, addrs := range byTeam {
		wantTeams = append(wantTeams, sortedCopy(addrs))
	}
	slices.SortFunc(wantTeams, slices.Compare)
	if diff := cmp.Diff(wantIDs, recordedNets(t, dir)); diff != "" {
		t.Errorf("network.json while the tasks run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTeams, teamSets(t, st.Network)); diff != "" {
		t.Errorf("the team sets of the nftables table while the tasks run (-want +got):\n%s", diff)
	}

	// 4. Each ends with its own code, once stopped.
	for _, tk := range tasks {
		if err := e.Stop(context.Background(), tk.WorkloadID, 1, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	want, got := map[core.WorkloadID]string{}, map[core.WorkloadID]string{}
	for i, tk := range tasks {
		want[tk.WorkloadID] = "attempt 1 code " + strconv.Itoa(10+i)
	}
	for range tasks {
		select {
		case x := <-e.Exits():
			code := "none"
			if x.ExitCode != nil {
				code = strconv.Itoa(*x.ExitCode)
			}
			got[x.WorkloadID] = fmt.Sprintf("attempt %d code %s", x.Attempt, code)
		case <-time.After(timeout):
			t.Fatalf("exits within %s: %v, want %d", timeout, got, n)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
	if got := recordedNets(t, dir); len(got) != 0 {
		t.Errorf("network.json once the tasks have ended: %v, want none", got)
	}
	if got := teamSets(t, st.Network); len(got) != 0 {
		t.Errorf("the team sets of the nftables table once the tasks have ended: %v, want none", got)
	}
}

// recordedNets lists the workloads that DataDir/network.json holds.
func recordedNets(t *testing.T, dir string) []core.WorkloadID {
	t.Helper()
	var st struct {
		Nets []struct {
			ID core.WorkloadID `json:"id"`
		} `json:"nets"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "network.json"))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		t.Fatalf("network.json: %v", err)
	}
	var out []core.WorkloadID
	for _, w := range st.Nets {
		out = append(out, w.ID)
	}
	slices.Sort(out)
	return out
}

// teamSets reads the server's nftables table (inet gpufleet<slot>, the
// slot's /24 being subnet) and returns its teams' sets of addresses
// (t0, t1, ...), each sorted, in order.
func teamSets(t *testing.T, subnet string) [][]string {
	t.Helper()
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		t.Fatal(err)
	}
	// The default range is a /16: the slot is the third byte.
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: "gpufleet" + strconv.Itoa(int(p.Addr().As4()[2]))}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	sets, err := c.GetSets(table)
	if err != nil {
		t.Fatalf("sets of table %s: %v", table.Name, err)
	}
	var out [][]string
	for _, s := range sets {
		if !strings.HasPrefix(s.Name, "t") {
			continue
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			t.Fatalf("set %s: %v", s.Name, err)
		}
		var addrs []string
		for _, el := range elems {
			a, _ := netip.AddrFromSlice(el.Key)
			addrs = append(addrs, a.String())
		}
		out = append(out, sortedCopy(addrs))
	}
	slices.SortFunc(out, slices.Compare)
	return out
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
