package local_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// reachScript tries a TCP connection to each host:port of its arguments at
// once, and prints "TRY host:port ok" or "TRY host:port fail <why>" for
// each, then DONE.
const reachScript = `import socket, sys, threading
out = {}
def try_(t):
    h, p = t.rsplit(":", 1)
    h = h.strip("[]")
    fam = socket.AF_INET6 if ":" in h else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3)
    try:
        s.connect((h, int(p))); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); data = s.recv(64)
        out[t] = "ok " + data.decode("latin1").split("\r\n")[0]
    except Exception as e:
        out[t] = "fail " + type(e).__name__ + " " + str(e)
    finally:
        s.close()
ts = [threading.Thread(target=try_, args=(t,)) for t in sys.argv[1:]]
[t.start() for t in ts]; [t.join() for t in ts]
for t in sys.argv[1:]:
    print("TRY", t, out[t])
print("DONE")
`

// serveScript serves "HTTP/1.0 200 <text>" on each port of its arguments.
const serveScript = `import socket, sys, threading
def serve(port, text):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("0.0.0.0", port)); l.listen(16)
    while True:
        c, _ = l.accept()
        try:
            c.recv(1024); c.sendall(("HTTP/1.0 200 " + text + "\r\n\r\n").encode())
        finally:
            c.close()
for a in sys.argv[1:]:
    port, text = a.split("=")
    threading.Thread(target=serve, args=(int(port), text), daemon=True).start()
print("SERVING", flush=True)
threading.Event().wait()
`

// networked returns an executor whose workloads have network namespaces,
// with net as their configuration, skipping (or failing, where isolation
// is required) where the machine gives none.
func networked(t *testing.T, cfg local.Network) *local.Executor {
	t.Helper()
	e, err := local.New(local.Options{DataDir: t.TempDir(), Network: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if st := e.Isolation(); st.Network == "" {
		if os.Getenv("GPUFLEET_REQUIRE_ISOLATION") == "1" {
			t.Fatalf("network namespaces are required (GPUFLEET_REQUIRE_ISOLATION=1) but this machine gives %s", st)
		}
		t.Skipf("no network namespaces here: %s", st)
	}
	return e
}

// tries runs reachScript as a task of team and returns what each target
// gave.
func tries(t *testing.T, e *local.Executor, id core.WorkloadID, team core.TeamName, targets ...string) map[string]string {
	t.Helper()
	return triesWith(t, e, id, team, core.Network{}, targets...)
}

// triesWith is tries for a task with a network policy of its own.
func triesWith(t *testing.T, e *local.Executor, id core.WorkloadID, team core.TeamName, policy core.Network, targets ...string) map[string]string {
	t.Helper()
	tk := task(id, append([]string{systemPython(t), "-c", reachScript}, targets...)...)
	tk.Team, tk.Network = team, policy
	if x := run(t, e, tk); x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("%s: %+v\n%s", id, x, output(t, e, id))
	}
	got := map[string]string{}
	for _, l := range strings.Split(output(t, e, id), "\n") {
		if f := strings.SplitN(l, " ", 3); len(f) == 3 && f[0] == "TRY" {
			got[f[1]] = f[2]
		}
	}
	if len(got) != len(targets) {
		t.Fatalf("%s: tried %d targets, want %d:\n%s", id, len(got), len(targets), output(t, e, id))
	}
	return got
}

// serve starts a task of team serving text on each of ports, declared
// ones and others, and waits until it serves.
func serve(t *testing.T, e *local.Executor, id core.WorkloadID, team core.TeamName, declared []int, ports map[int]string) executor.Task {
	t.Helper()
	var args []string
	for p, text := range ports {
		args = append(args, fmt.Sprintf("%d=%s", p, text))
	}
	tk := task(id, append([]string{systemPython(t), "-c", serveScript}, args...)...)
	tk.Team = team
	for _, p := range declared {
		tk.Ports = append(tk.Ports, core.Port{Port: p})
	}
	start(t, e, tk)
	waitOutput(t, e, id, "SERVING")
	t.Cleanup(func() {
		e.Stop(context.Background(), id, 1, 0)
		waitExit(t, e, tk)
	})
	return tk
}

// outside is a host of the test's own, in a network namespace of its own
// joined to this host by a veth: the stand-in for the world outside, so
// that no packet of the test leaves the machine. It serves "OUTSIDE" on
// port 80 at each of its addresses.
type outside struct {
	addr string // its address on the veth
}

func newOutside(t *testing.T, subnet string, extra ...string) outside {
	t.Helper()
	hostEnd, inEnd := "gfto"+subnet, "eth0"
	hostIP, outIP := "198.18."+subnet+".1", "198.18."+subnet+".2"
	if l, err := netlink.LinkByName(hostEnd); err == nil {
		netlink.LinkDel(l)
	}
	// errc: the namespace could not be made; served: the listeners are
	// up, or why not (a channel of its own: a nil on errc, read first,
	// would be taken for a failure).
	errc, served := make(chan error, 1), make(chan error, 1)
	ready := make(chan netns.NsHandle, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the outside namespace
		ns, err := netns.New()
		if err != nil {
			errc <- err
			return
		}
		ready <- ns
		var listeners []net.Listener
		for _, a := range append([]string{outIP}, extra...) {
			l, err := net.Listen("tcp", a+":80")
			if err != nil {
				served <- err
				return
			}
			listeners = append(listeners, l)
		}
		served <- nil
		for _, l := range listeners {
			go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OUTSIDE") }))
		}
		<-t.Context().Done()
		for _, l := range listeners {
			l.Close()
		}
	}()
	var ns netns.NsHandle
	select {
	case ns = <-ready:
	case err := <-errc:
		t.Fatalf("outside host: %v", err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostEnd}, PeerName: inEnd, PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(hostEnd); err == nil {
			netlink.LinkDel(l)
		}
	})
	hl, _ := netlink.LinkByName(hostEnd)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(netlink.AddrAdd(hl, mustAddr(hostIP+"/24")))
	must(netlink.LinkSetUp(hl))
	il, err := h.LinkByName(inEnd)
	must(err)
	must(h.AddrAdd(il, mustAddr(outIP+"/24")))
	lo, _ := h.LinkByName("lo")
	for _, a := range extra {
		must(h.AddrAdd(lo, mustAddr(a+"/32")))
		// On this host, the extra addresses lead to the outside host.
		r := &netlink.Route{Dst: mustAddr(a + "/32").IPNet, Gw: net.ParseIP(outIP)}
		must(netlink.RouteReplace(r))
		t.Cleanup(func() { netlink.RouteDel(r) })
	}
	must(h.LinkSetUp(lo))
	must(h.LinkSetUp(il))
	must(h.RouteAdd(&netlink.Route{Gw: net.ParseIP(hostIP)}))
	if err := <-served; err != nil {
		t.Fatalf("outside host: %v", err)
	}
	return outside{addr: outIP}
}

func mustAddr(s string) *netlink.Addr {
	a, err := netlink.ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// hostAddrs are this host's IPv4 addresses (loopback and gpufleet's
// bridges included).
func hostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		out = append(out, a.IP.String())
	}
	return out
}

// TestWorkloadNetwork: each workload has an address of its own, in a
// network namespace, and reaches only what it should: of another team's
// workload nothing, at its address, on any of the host's addresses or on
// the loopback; of its own team's, the declared ports only; the host's
// services no more than the API on the gateway; never the cloud metadata
// address; the outside, NAT'ed, unless its team's egress is denied (but
// for the ranges it allows). A squatter's listener in its own namespace
// takes nothing from the workload it copies.
func TestWorkloadNetwork(t *testing.T) {
	out := newOutside(t, "77", "169.254.169.254")
	e := networked(t, local.Network{Teams: map[core.TeamName]local.Egress{
		"closed": {Egress: "deny"},
		"narrow": {Egress: "deny", Allow: []string{out.addr + "/32"}},
	}})
	gw, _ := e.Gateway()
	api, err := net.Listen("tcp", gw.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	go http.Serve(api, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "API") }))
	apiPort := api.Addr().(*net.TCPAddr).Port
	if err := e.ServeAPIOn(apiPort); err != nil {
		t.Fatal(err)
	}
	// A service of the host's, on every address.
	hostSvc, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostSvc.Close()
	go http.Serve(hostSvc, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "HOST") }))
	hostPort := strconv.Itoa(hostSvc.Addr().(*net.TCPAddr).Port)

	serve(t, e, "net-victim", "tb", []int{8000}, map[int]string{8000: "VICTIM", 8001: "HIDDEN"})
	victim, ok := e.Endpoint("net-victim", 1, 8000)
	if !ok || strings.HasPrefix(victim, "127.") {
		t.Fatalf("Endpoint of the victim's declared port: %q %t, want its own address", victim, ok)
	}
	vaddr, _, _ := net.SplitHostPort(victim)
	if body := fetch(t, victim); body != "VICTIM" {
		t.Errorf("the host (the proxy's way) reaches the victim's port and gets %q", body)
	}

	t.Run("another team reaches nothing of the victim's, nor of the host's", func(t *testing.T) {
		targets := []string{vaddr + ":8000", vaddr + ":8001", "127.0.0.1:8000", "127.0.0.1:" + hostPort, "[::1]:8000",
			"169.254.169.254:80", gw.String() + ":" + hostPort}
		for _, a := range hostAddrs(t) {
			targets = append(targets, a+":8000", a+":"+hostPort)
		}
		slices.Sort(targets)
		for target, got := range tries(t, e, "net-attacker", "ta", slices.Compact(targets)...) {
			if !strings.HasPrefix(got, "fail") {
				t.Errorf("a workload of team ta reached %s: %s", target, got)
			}
		}
	})

	t.Run("the same team reaches the declared port only, and the API", func(t *testing.T) {
		got := tries(t, e, "net-friend", "tb", vaddr+":8000", vaddr+":8001", gw.String()+":"+strconv.Itoa(apiPort))
		if !strings.HasPrefix(got[vaddr+":8000"], "ok HTTP/1.0 200 VICTIM") {
			t.Errorf("a workload of team tb to its team's declared port: %s", got[vaddr+":8000"])
		}
		if !strings.HasPrefix(got[vaddr+":8001"], "fail") {
			t.Errorf("a workload of team tb reached its team's undeclared port: %s", got[vaddr+":8001"])
		}
		if !strings.HasPrefix(got[gw.String()+":"+strconv.Itoa(apiPort)], "ok") {
			t.Errorf("a workload does not reach the API on the gateway: %s", got[gw.String()+":"+strconv.Itoa(apiPort)])
		}
	})

	t.Run("egress: allowed, denied, and denied but for a range", func(t *testing.T) {
		target := out.addr + ":80"
		for team, want := range map[core.TeamName]string{"tc": "ok", "closed": "fail", "narrow": "ok"} {
			got := tries(t, e, core.WorkloadID("net-egress-"+string(team)), team, target)
			if !strings.HasPrefix(got[target], want) {
				t.Errorf("team %s to the outside host: %s, want %s", team, got[target], want)
			}
		}
	})

	t.Run("a workload's own policy denies egress, but for what it allows", func(t *testing.T) {
		target := out.addr + ":80"
		for i, tc := range []struct {
			policy core.Network
			want   string
		}{
			{core.Network{Egress: core.EgressDeny}, "fail"},
			{core.Network{Egress: core.EgressDeny, Allow: []string{out.addr + ":80"}}, "ok"},
			{core.Network{Egress: core.EgressAllow}, "ok"},
		} {
			got := triesWith(t, e, core.WorkloadID(fmt.Sprintf("net-policy-%d", i)), "tc", tc.policy, target)
			if !strings.HasPrefix(got[target], tc.want) {
				t.Errorf("policy %+v in a team that allows egress: %s, want %s", tc.policy, got[target], tc.want)
			}
		}
		if !e.EnforcesEgress() {
			t.Error("the executor with network namespaces says it does not enforce egress")
		}
	})

	t.Run("a squatter in its own namespace takes nothing", func(t *testing.T) {
		serve(t, e, "net-squatter", "ta", nil, map[int]string{8000: "SQUAT"})
		if body := fetch(t, victim); body != "VICTIM" {
			t.Errorf("the victim's port answers %q with a squatter on 8000", body)
		}
		if again, _ := e.Endpoint("net-victim", 1, 8000); again != victim {
			t.Errorf("Endpoint moved from %s to %s", victim, again)
		}
	})

	t.Run("the task knows where the API is", func(t *testing.T) {
		fields := fields(t, e, "net-env", "tb", 1, `echo "ADDR $GPUFLEET_ADDR"`, nil)
		if want := gw.String() + ":" + strconv.Itoa(apiPort); fields["ADDR"] != want {
			t.Errorf("GPUFLEET_ADDR %q, want %s", fields["ADDR"], want)
		}
	})
}

// fetch returns the status text of an HTTP/1.0 GET to addr (the serve
// scripts answer with it).
func fetch(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimPrefix(strings.TrimSpace(line), "HTTP/1.0 200 ")
}
