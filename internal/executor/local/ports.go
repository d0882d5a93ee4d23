package local

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The environment a task that declares ports gets: PORT is where it
// serves its first declared port, GPUFLEET_PORT_<NAME> (and
// GPUFLEET_PORT_<number>) where it serves each, and GPUFLEET_BASE_URL the
// path the proxy serves its first port under (/w/{id}/{port}/), for
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

// portEnv adds the ports' variables to env.
func portEnv(env []string, id core.WorkloadID, ports []core.Port, host map[int]int) []string {
	for i, p := range ports {
		h := strconv.Itoa(host[p.Port])
		if i == 0 {
			env = withVar(env, EnvPort, h)
			env = withVar(env, EnvBaseURL, fmt.Sprintf("/w/%s/%d/", id, p.Port))
		}
		env = withVar(env, "GPUFLEET_PORT_"+strconv.Itoa(p.Port), h)
		if p.Name != "" {
			env = withVar(env, "GPUFLEET_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")), h)
		}
	}
	return env
}

// Endpoint returns the address where the attempt of a workload serves a
// declared port ("127.0.0.1:41234"), or false when it declared no such
// port or never started.
func (e *Executor) Endpoint(id core.WorkloadID, attempt, port int) (string, bool) {
	adir, err := e.attemptDir(id, attempt)
	if err != nil {
		return "", false
	}
	b, err := os.ReadFile(portsFile(adir))
	if err != nil {
		return "", false
	}
	var m map[string]int
	if json.Unmarshal(b, &m) != nil {
		return "", false
	}
	h, ok := m[strconv.Itoa(port)]
	if !ok || h <= 0 || h > 65535 {
		return "", false
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(h)), true
}

// writePorts keeps the map of an attempt's ports.
func writePorts(adir string, host map[int]int) error {
	m := make(map[string]int, len(host))
	for d, h := range host {
		m[strconv.Itoa(d)] = h
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(portsFile(adir), b, 0o600)
}
