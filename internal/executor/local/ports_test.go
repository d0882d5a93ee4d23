package local_test

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// On the host's network (network namespaces off), a task of another team
// that listens on the port given to a workload does not get the workload's
// proxied traffic: Endpoint refuses while another user holds the port, and
// gives it once the workload's own user listens there. (In namespaces of
// their own, no other listener can take a workload's address:
// TestWorkloadNetwork.)
func TestEndpointRefusesAPortCapturedByAnotherTeam(t *testing.T) {
	e, err := local.New(local.Options{DataDir: t.TempDir(), Network: local.Network{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if !e.Isolation().Full() {
		t.Skipf("this machine cannot isolate tasks: %s", e.Isolation())
	}
	victim := task("port-victim", "sh", "-c", "sleep 30")
	victim.Team, victim.Ports = "ml", []core.Port{{Port: 8888}}
	start(t, e, victim)
	t.Cleanup(func() { e.Stop(t.Context(), victim.WorkloadID, 1, 0); waitExit(t, e, victim) })
	addr, ok := e.Endpoint(victim.WorkloadID, 1, 8888)
	if !ok {
		t.Fatal("no endpoint before anyone listens")
	}
	_, port, _ := net.SplitHostPort(addr)
	thief := task("port-thief", "/usr/bin/python3", "-c", fmt.Sprintf(
		"import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', %s)); s.listen(); print('LISTENING', flush=True); time.sleep(30)", port))
	thief.Team = "other"
	start(t, e, thief)
	t.Cleanup(func() { e.Stop(t.Context(), thief.WorkloadID, 1, 0); waitExit(t, e, thief) })
	waitOutput(t, e, thief.WorkloadID, "LISTENING")
	if _, ok := e.Endpoint(victim.WorkloadID, 1, 8888); ok {
		t.Fatalf("Endpoint still gives %s while another team's task listens there", addr)
	}
}

// The /proc/net/tcp parser finds the owners of listening sockets on a port
// and nothing else.
func TestParseListeners(t *testing.T) {
	table := strings.Join([]string{
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
		"   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000 200001        0 1 1",
		"   1: 0100007F:22B8 0100007F:D431 01 00000000:00000000 00:00000000 00000000 200002        0 2 1",
		"   2: 00000000:22B9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1",
		"",
	}, "\n")
	if got := local.ParseListeners(table, 0x22B8); len(got) != 1 || got[0] != 200001 {
		t.Errorf("owners of 8888: %v, want [200001] (the established socket is not a listener)", got)
	}
	if got := local.ParseListeners(table, 1); len(got) != 0 {
		t.Errorf("owners of 1: %v, want none", got)
	}
}
