package local_test

import (
	"strconv"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// TestServersOnOneHostHaveSlotsOfTheirOwn: two servers on one host (two
// data directories) give their teams different user IDs and addresses; a
// server of the same data directory, after the first has closed (or been
// killed), takes the same slot back (its teams keep their user IDs), even
// when another server started meanwhile.
func TestServersOnOneHostHaveSlotsOfTheirOwn(t *testing.T) {
	attempt := 0
	uidOf := func(e *local.Executor, team string) string {
		t.Helper()
		attempt++
		got := fields(t, e, core.WorkloadID("whoami-"+team), core.TeamName("t"+team), attempt, `echo "UID $(id -u)"`, nil)
		return got["UID"]
	}
	a, dirA := fullyIsolated(t)
	b, _ := fullyIsolated(t)
	if a.Isolation().Network != "" && a.Isolation().Network == b.Isolation().Network {
		t.Errorf("two servers share the network %s", a.Isolation().Network)
	}
	ua, ub := uidOf(a, "x"), uidOf(b, "x")
	if ua == "" || ua == ub {
		t.Errorf("team x has user %q on one server and %q on the other: want two", ua, ub)
	}
	uaNum, _ := strconv.Atoi(ua)
	if uaNum < local.DefaultUIDFirst || uaNum > local.DefaultUIDLast {
		t.Errorf("user %s outside the teams' range", ua)
	}

	net := a.Isolation().Network
	a.Close() // as a server killed: its data directory stays
	// A server of another data directory, started meanwhile, takes
	// another slot.
	if c, _ := fullyIsolated(t); c.Isolation().Network == net {
		t.Errorf("a new data directory took the network %s of one whose server may start again", net)
	}
	again, err := local.New(local.Options{DataDir: dirA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	if got := uidOf(again, "x"); got != ua {
		t.Errorf("after a restart team x has user %s, want %s as before", got, ua)
	}
	if again.Isolation().Network != net {
		t.Errorf("after a restart the network is %s, want %s as before", again.Isolation().Network, net)
	}

	// The same slot is not another data directory's while its tasks run,
	// though its server has let it go.
	long := task("slot-keeper", "sleep", "30")
	long.Team = "tx"
	start(t, again, long)
	t.Cleanup(func() { again.Stop(t.Context(), long.WorkloadID, 1, 0); waitExit(t, again, long) })
	again.Close()
	other, _ := fullyIsolated(t)
	if other.Isolation().Network == net {
		t.Errorf("another data directory took the network %s of one whose task still runs", net)
	}
}
