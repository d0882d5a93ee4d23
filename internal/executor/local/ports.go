package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The environment a task that declares ports gets: PORT is where it
// serves its first declared port, GPUFLEET_PORT_<NAME> (and
// GPUFLEET_PORT_<number>) where it serves each, and GPUFLEET_BASE_URL the
// path the proxy serves its first port under (/w/{id}/{port}/, or / where
// it serves each port on a host of its own: Options.PortHosts), for
// servers that must know it (Jupyter's base_url).
const (
	EnvPort    = "PORT"
	EnvBaseURL = "GPUFLEET_BASE_URL"
)

// A task listens on the host's network, shared by every task: two
// notebooks that both declare 8888 must not collide. So each declared port
// gets a free port of the host, which the task is told and the proxy
// reaches; the map is kept in the attempt's directory (ports.json), where
// an adopted task's ports are found after a restart.

func portsFile(adir string) string { return filepath.Join(adir, "ports.json") }

// allocatePorts gives each declared port a free port of the host.
func allocatePorts(ports []core.Port) (map[int]int, error) {
	out := make(map[int]int, len(ports))
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("allocate a port for %d: %w", p.Port, err)
		}
		held = append(held, l) // held until all are chosen: no port twice
		out[p.Port] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

// portEnv adds the ports' variables to env; the base URL is "/" when the
// proxy serves each port on a host of its own (portHosts).
func portEnv(env []string, id core.WorkloadID, ports []core.Port, host map[int]int, portHosts bool) []string {
	for i, p := range ports {
		h := strconv.Itoa(host[p.Port])
		if i == 0 {
			env = withVar(env, EnvPort, h)
			base := fmt.Sprintf("/w/%s/%d/", id, p.Port)
			if portHosts {
				base = "/"
			}
			env = withVar(env, EnvBaseURL, base)
		}
		env = withVar(env, "GPUFLEET_PORT_"+strconv.Itoa(p.Port), h)
		if p.Name != "" {
			env = withVar(env, "GPUFLEET_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), h)
		}
	}
	return env
}

// portsRecord is ports.json: where each declared port is served: at Host
// (the workload's own address, in its network namespace) on the declared
// port itself, or on the host's loopback at the port given to it, whose
// listener must belong to UID (-1: not checked).
type portsRecord struct {
	Ports map[string]int `json:"ports"`
	UID   int            `json:"uid"`
	Host  string         `json:"host,omitempty"`
}

// declaredPorts maps each declared port to itself: in its own network
// namespace a workload listens where it declared.
func declaredPorts(ports []core.Port) map[int]int {
	out := make(map[int]int, len(ports))
	for _, p := range ports {
		out[p.Port] = p.Port
	}
	return out
}

// Endpoint returns the address where the attempt of a workload serves a
// declared port ("127.0.0.1:41234"), or false when it declared no such
// port, never started, or another user listens there.
//
// Tasks share the host's network, so a task of another team could bind
// the port given to this one before it does (or after it closes it) and
// take its proxied traffic. Where teams have users of their own, the
// listening socket on the port must belong to the attempt's user
// (/proc/net/tcp and tcp6); a port nobody listens on yet passes (the
// proxy's dial is refused, and it answers 503).
func (e *Executor) Endpoint(id core.WorkloadID, attempt, port int) (string, bool) {
	adir, err := e.attemptDir(id, attempt)
	if err != nil {
		return "", false
	}
	b, err := os.ReadFile(portsFile(adir))
	if err != nil {
		return "", false
	}
	rec := portsRecord{UID: -1}
	if json.Unmarshal(b, &rec) != nil {
		return "", false
	}
	h, ok := rec.Ports[strconv.Itoa(port)]
	if !ok || h <= 0 || h > 65535 {
		return "", false
	}
	if rec.Host != "" {
		// Its own address: no other listener can take it.
		return net.JoinHostPort(rec.Host, strconv.Itoa(h)), true
	}
	if rec.UID >= 0 {
		owners := listeners(h)
		for _, o := range owners {
			if o != rec.UID {
				e.log.Warn("a port given to a workload is held by another user: not proxied", "workload", id, "attempt", attempt, "port", port, "hostPort", h, "uid", o)
				return "", false
			}
		}
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(h)), true
}

// listeners returns the users of the TCP sockets listening on port (IPv4
// and IPv6), from /proc/net.
func listeners(port int) []int {
	var out []int
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		out = append(out, parseListeners(string(b), port)...)
	}
	return out
}

// parseListeners reads a /proc/net/tcp table: "sl local_address
// rem_address st ... uid ...", addresses as HEX_IP:HEX_PORT, state 0A for
// LISTEN.
func parseListeners(table string, port int) []int {
	var out []int
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil || int(p) != port {
			continue
		}
		if uid, err := strconv.Atoi(f[7]); err == nil {
			out = append(out, uid)
		}
	}
	return out
}

// writePorts keeps the map of an attempt's ports, with where they are
// served (rec's Host and UID).
func writePorts(adir string, host map[int]int, rec portsRecord) error {
	rec.Ports = make(map[string]int, len(host))
	for d, h := range host {
		rec.Ports[strconv.Itoa(d)] = h
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(portsFile(adir), b, 0o600)
}

// Address is the address of the workload's network namespace while its
// attempt runs there; false where it has none.
func (e *Executor) Address(id core.WorkloadID, attempt int) (string, bool) {
	if e.net == nil {
		return "", false
	}
	e.mu.Lock()
	_, running := e.tasks[key{id, attempt}]
	e.mu.Unlock()
	w, ok := e.net.lookup(id)
	if !running || !ok {
		return "", false
	}
	return w.Addr.String(), true
}

// DialContext connects to an address Endpoint gave. A workload's own
// address is reached from inside its network namespace (dialIn), so that
// a server it runs on localhost is reached too; any other address, as
// net.Dialer does.
func (e *Executor) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if e.net != nil {
		if w, port, ok := e.net.owner(addr); ok {
			return dialIn(ctx, w, port)
		}
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	return d.DialContext(ctx, network, addr)
}

// Serves reports whether addr is a workload's own address of this
// executor, which DialContext reaches from inside its namespace.
func (e *Executor) Serves(addr string) bool {
	if e.net == nil {
		return false
	}
	_, _, ok := e.net.owner(addr)
	return ok
}

// EnforcesEgress reports whether this executor enforces a task's own
// network policy (executor.EgressEnforcer): where workloads have network
// namespaces.
func (e *Executor) EnforcesEgress() bool { return e.net != nil }
