package cli

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

// TestPoolGuaranteeReadsBack: set quota --guaranteed-pool stores the pool
// guarantee on the real server, get teams -o json shows it, apply -f sets it
// from guaranteedByPool, and POOL= removes it.
func TestPoolGuaranteeReadsBack(t *testing.T) {
	f := newTestServer(t)
	vars := f.vars(t, adminToken)
	got := runCLI(t, invocation{args: []string{"set", "quota", "research", "--guaranteed", "8", "--guaranteed-pool", "onprem=6", "--guaranteed-pool", "cloud=1.5"}, vars: vars})
	if got.code != 0 {
		t.Fatalf("set quota: %d %s", got.code, got.stderr)
	}
	want := map[string]int64{"onprem": 6000, "cloud": 1500}
	if diff := cmp.Diff(want, storedTeam(f, "research").GuaranteedByPoolMilliGPU); diff != "" {
		t.Errorf("stored pool guarantees (-want +got):\n%s", diff)
	}
	got = runCLI(t, invocation{args: []string{"get", "teams", "-o", "json"}, vars: vars})
	var l api.List[api.Team]
	if err := json.Unmarshal([]byte(got.stdout), &l); err != nil {
		t.Fatalf("get teams -o json: %v\n%s", err, got.stdout)
	}
	found := false
	for _, tm := range l.Items {
		if tm.Name == "research" {
			found = true
			if diff := cmp.Diff(want, tm.GuaranteedByPoolMilliGPU); diff != "" {
				t.Errorf("get teams (-want +got):\n%s", diff)
			}
		}
	}
	if !found {
		t.Errorf("get teams lists no research:\n%s", got.stdout)
	}

	got = runCLI(t, invocation{args: []string{"apply", "-f", "-"}, vars: vars,
		stdin: "teams:\n  - name: research\n    guaranteed: 4\n    guaranteedByPool: {onprem: 4}\n"})
	if got.code != 0 {
		t.Fatalf("apply: %d %s", got.code, got.stderr)
	}
	if diff := cmp.Diff(map[string]int64{"onprem": 4000}, storedTeam(f, "research").GuaranteedByPoolMilliGPU); diff != "" {
		t.Errorf("after apply (-want +got):\n%s", diff)
	}

	got = runCLI(t, invocation{args: []string{"set", "quota", "research", "--guaranteed-pool", "onprem="}, vars: vars})
	if got.code != 0 {
		t.Fatalf("set quota POOL=: %d %s", got.code, got.stderr)
	}
	if g := storedTeam(f, "research").GuaranteedByPoolMilliGPU; g != nil {
		t.Errorf("after POOL=: %v, want none", g)
	}
}
