package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Network configures the network namespace each workload gets when tasks
// run under per-team users (the server is root): its own loopback, a veth
// into a bridge of the server's with an address of the server's slot of
// CIDR, outbound traffic NAT'ed out unless egress is denied, and nothing
// else of the host's, nor of other teams' workloads, within reach.
type Network struct {
	// Off keeps tasks on the host's network.
	Off bool
	// CIDR is the private range the servers of this host draw their
	// workloads' addresses from, a /24 each (DefaultNetworkCIDR when
	// empty).
	CIDR string
	// Egress is the default for teams: "allow" (the default: NAT'ed out)
	// or "deny", with Allow the ranges still reachable.
	Egress string
	Allow  []string
	// Teams overrides Egress and Allow per team.
	Teams map[core.TeamName]Egress
}

// Egress is a team's outbound traffic: "allow" or "deny", and the ranges
// still reachable when denied.
type Egress struct {
	Egress string
	Allow  []string
}

// DefaultNetworkCIDR is the range workloads' addresses come from unless
// configured.
const DefaultNetworkCIDR = "10.233.0.0/16"

// NetnsDir is where the workloads' network namespaces are kept
// (<slot>/<workload ID>, bind mounts of the namespace, as ip netns does),
// so that they outlive a restart of the server with their tasks.
var NetnsDir = "/run/gpufleet/netns"

// validate checks the configuration, naming the field of what is wrong.
func (n Network) validate() error {
	if n.Off {
		return nil
	}
	p, err := n.prefix()
	if err != nil {
		return err
	}
	if !p.Addr().Is4() || p.Bits() > 24 || p.Bits() < 8 || !p.Addr().IsPrivate() {
		return fmt.Errorf("local.network.cidr %s: want a private IPv4 range of /8 to /24", p)
	}
	check := func(field, egress string, allow []string) error {
		switch egress {
		case "", "allow", "deny":
		default:
			return fmt.Errorf("%s.egress %q: want allow or deny", field, egress)
		}
		for i, a := range allow {
			if _, err := netip.ParsePrefix(a); err != nil {
				return fmt.Errorf("%s.allow[%d] %q: not a CIDR: %v", field, i, a, err)
			}
		}
		return nil
	}
	if err := check("local.network", n.Egress, n.Allow); err != nil {
		return err
	}
	for team, e := range n.Teams {
		if err := check("local.network.teams."+string(team), e.Egress, e.Allow); err != nil {
			return err
		}
	}
	return nil
}

func (n Network) prefix() (netip.Prefix, error) {
	c := n.CIDR
	if c == "" {
		c = DefaultNetworkCIDR
	}
	p, err := netip.ParsePrefix(c)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("local.network.cidr %q: %v", c, err)
	}
	return p.Masked(), nil
}

// slots is the number of /24s the range holds.
func (n Network) slots() int {
	p, err := n.prefix()
	if err != nil {
		return 0
	}
	return 1 << (24 - p.Bits())
}

// subnet is slot's /24.
func (n Network) subnet(slot int) netip.Prefix {
	p, _ := n.prefix()
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(slot) << 8
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), 0}), 24)
}

// egressOf is the effective egress of a team.
func (n Network) egressOf(team core.TeamName) Egress {
	if e, ok := n.Teams[team]; ok && e.Egress != "" {
		return e
	}
	return Egress{Egress: n.Egress, Allow: n.Allow}
}

// anyEgress reports whether some team's traffic is NAT'ed out: the host
// must forward then.
func (n Network) anyEgress() bool {
	if n.Egress != "deny" {
		return true
	}
	for _, e := range n.Teams {
		if e.Egress == "allow" || len(e.Allow) > 0 {
			return true
		}
	}
	return len(n.Allow) > 0
}

// hostOverlap names the host's network that sub overlaps, apart from the
// bridges of gpufleet's servers; "" when none does.
func hostOverlap(sub netip.Prefix) string {
	links, err := netlink.LinkList()
	if err != nil {
		return ""
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, bridgePrefix) {
			continue
		}
		addrs, _ := netlink.AddrList(l, netlink.FAMILY_V4)
		for _, a := range addrs {
			p, ok := netip.AddrFromSlice(a.IP.To4())
			if !ok {
				continue
			}
			ones, _ := a.Mask.Size()
			host := netip.PrefixFrom(p, ones).Masked()
			if host.Overlaps(sub) {
				return fmt.Sprintf("%s on %s", host, l.Attrs().Name)
			}
		}
	}
	return ""
}

// bridgePrefix starts the name of every gpufleet bridge, and of its
// nftables table: "gpufleet<slot>" (15 characters at most).
const bridgePrefix = "gpufleet"

// netManager is one server's workload network: its bridge, its nftables
// table, and the namespace and address of each workload that runs.
//
// It is safe for concurrent use, and the control loop attaches several
// workloads at once: mu guards the workloads and the addresses taken, and
// is held only to take or give back one, never while a namespace is made
// nor over a write. flushMu orders the writes of network.json and of the
// table, each written whole from the workloads as they are then (write):
// two at once could leave the older last.
type netManager struct {
	cfg     Network
	slot    int
	subnet  netip.Prefix
	gateway netip.Addr
	bridge  string
	dir     string // NetnsDir/<slot>
	state   string // DataDir/network.json

	mu sync.Mutex
	// apiPort is the port of the API on the gateway, which workloads may
	// reach (0: none).
	apiPort int
	nets    map[core.WorkloadID]*workloadNet
	// making: the workloads whose namespace attach is making, outside mu,
	// with the address each has taken.
	making map[core.WorkloadID]netip.Addr
	// closed: the server let its slot go, and another may hold it now: the
	// bridge and the table are no longer this one's to write.
	closed bool

	flushMu sync.Mutex
}

// netView is what network.json and the table are written from: the
// workloads (by address) and the API's port.
type netView struct {
	nets    []*workloadNet
	apiPort int
	closed  bool
}

// workloadNet is one workload's namespace: where it is, its address, its
// team and the ports other workloads of the team may reach.
type workloadNet struct {
	NS    string          `json:"ns"`
	Addr  netip.Addr      `json:"addr"`
	Team  core.TeamName   `json:"team"`
	Ports []int           `json:"ports,omitempty"`
	ID    core.WorkloadID `json:"id"`
	// Deny: the workload's own policy denies egress (an acceptance
	// stage's data boundary), but for Allow, the ranges its allowed
	// destinations resolved to; its team's policy applies after it.
	Deny  bool     `json:"deny,omitempty"`
	Allow []string `json:"allow,omitempty"`
}

// netState is DataDir/network.json.
type netState struct {
	Nets []*workloadNet `json:"nets"`
}

// newNetManager sets up the server's bridge and rules for slot, cleaning
// what a server that held the slot before left, and takes back the
// namespaces of this data directory's workloads that still run.
func newNetManager(cfg Network, slot int, root string, cleanPrior bool) (*netManager, error) {
	sub := cfg.subnet(slot)
	m := &netManager{cfg: cfg, slot: slot, subnet: sub, gateway: sub.Addr().Next(),
		bridge: bridgePrefix + strconv.Itoa(slot), dir: filepath.Join(NetnsDir, strconv.Itoa(slot)),
		state: filepath.Join(root, "network.json"), nets: map[core.WorkloadID]*workloadNet{},
		making: map[core.WorkloadID]netip.Addr{}}
	var st netState
	if err := readJSON(m.state, &st); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("network: %w", err)
	}
	if cleanPrior {
		// Another data directory's: its namespaces are stale.
		st = netState{}
		m.removeAllNamespaces()
	}
	for _, w := range st.Nets {
		if _, err := os.Stat(w.NS); err == nil && m.subnet.Contains(w.Addr) {
			m.nets[w.ID] = w
		}
	}
	if err := m.setupBridge(); err != nil {
		return nil, err
	}
	if err := m.apply(m.view()); err != nil {
		return nil, err
	}
	return m, nil
}

// removeAllNamespaces unmounts and removes every namespace file of the
// slot.
func (m *netManager) removeAllNamespaces() {
	ents, _ := os.ReadDir(m.dir)
	for _, e := range ents {
		p := filepath.Join(m.dir, e.Name())
		unix.Unmount(p, unix.MNT_DETACH)
		os.Remove(p)
	}
}

// setupBridge makes the bridge with the gateway's address, its ports
// isolated from each other (workloads' traffic to each other is routed,
// and so filtered, by the host: private-VLAN proxy ARP), forwarding on it,
// and IP forwarding on the host only where some egress is allowed.
func (m *netManager) setupBridge() error {
	l, err := netlink.LinkByName(m.bridge)
	if err != nil {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: m.bridge}}
		if err := netlink.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("network: bridge %s: %w", m.bridge, err)
		}
		if l, err = netlink.LinkByName(m.bridge); err != nil {
			return fmt.Errorf("network: bridge %s: %w", m.bridge, err)
		}
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(m.gateway.AsSlice()), Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrReplace(l, addr); err != nil {
		return fmt.Errorf("network: address of %s: %w", m.bridge, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("network: %s up: %w", m.bridge, err)
	}
	for key, v := range map[string]string{
		"net/ipv4/conf/" + m.bridge + "/proxy_arp_pvlan": "1",
		// Proxy replies go at once: queued for a random delay (the
		// default, up to 0.8 s), they were seen lost on this kind of
		// host, and a workload then never reached its team's.
		"net/ipv4/neigh/" + m.bridge + "/proxy_delay":   "0",
		"net/ipv4/conf/" + m.bridge + "/send_redirects": "0",
		"net/ipv4/conf/" + m.bridge + "/forwarding":     "1",
		"net/ipv6/conf/" + m.bridge + "/disable_ipv6":   "1",
	} {
		if err := sysctl(key, v); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	if m.cfg.anyEgress() {
		if err := sysctl("net/ipv4/ip_forward", "1"); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	return nil
}

// sysctl writes value to /proc/sys/key, as the calling thread's network
// namespace sees it.
func sysctl(key, value string) error {
	if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(key, "/", "."), value, err)
	}
	return nil
}

// Forwarding says how the host forwards for workloads, for the server's
// log at start.
func (m *netManager) Forwarding() string {
	if m.cfg.anyEgress() {
		return "IP forwarding is on: workloads' outbound traffic is NAT'ed out (local.network.egress)"
	}
	return "IP forwarding is off: no workload reaches outside this host (local.network.egress: deny)"
}

// attach gives the workload a network namespace with an address, or
// returns the one it has (a task adopted, a retry), and lets the
// workloads of its team reach its declared ports. Several attach at once:
// each takes its address under mu, makes its namespace (and veth, named
// after the address) without it, and then, under flushMu, adds it to
// network.json and the table, so that its task never starts before its
// rules are in place, and a write that fails is undone before the next.
func (m *netManager) attach(id core.WorkloadID, team core.TeamName, ports []core.Port, policy core.Network) (*workloadNet, error) {
	// 1. Under mu: the namespace the workload has, or an address for a new
	// one.
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("network: this server has let its slot go")
	}
	if w, ok := m.nets[id]; ok {
		if _, err := os.Stat(w.NS); err == nil {
			m.mu.Unlock()
			return w, nil
		}
		delete(m.nets, id)
	}
	if _, ok := m.making[id]; ok {
		m.mu.Unlock()
		return nil, fmt.Errorf("network: the namespace of %s is being made by another start", id)
	}
	addr, err := m.freeAddr()
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	m.making[id] = addr
	m.mu.Unlock()

	// 2. The namespace: the slow part, alongside other starts'.
	w := &workloadNet{ID: id, NS: filepath.Join(m.dir, string(id)), Addr: addr, Team: team}
	for _, p := range ports {
		w.Ports = append(w.Ports, p.Port)
	}
	if policy.DeniesEgress() {
		w.Deny, w.Allow = true, allowedRanges(policy.Allow)
	}
	if err := m.makeNamespace(w); err != nil {
		// Removed before the ID is given back: another attach of it
		// makes its namespace at the same path.
		m.mu.Lock()
		m.removeNamespace(w)
		delete(m.making, id)
		m.mu.Unlock()
		return nil, err
	}

	// 3. Under flushMu: the workload joins network.json and the table.
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.removeNamespace(w)
		delete(m.making, id)
		m.mu.Unlock()
		return nil, errors.New("network: this server has let its slot go")
	}
	delete(m.making, id)
	m.nets[id] = w
	m.mu.Unlock()
	if err := m.write(); err != nil {
		m.mu.Lock()
		if m.nets[id] == w {
			delete(m.nets, id)
			m.removeNamespace(w)
		}
		m.mu.Unlock()
		m.write()
		return nil, err
	}
	return w, nil
}

// detach removes the workload's namespace, once its attempt has ended.
func (m *netManager) detach(id core.WorkloadID) {
	m.mu.Lock()
	w, ok := m.nets[id]
	if !ok {
		m.mu.Unlock()
		return
	}
	delete(m.nets, id)
	// Under mu: a later attach of the same ID makes its namespace at the
	// same path.
	m.removeNamespace(w)
	m.mu.Unlock()
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.write()
}

// lookup returns the workload's namespace, if it has one.
func (m *netManager) lookup(id core.WorkloadID) (*workloadNet, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.nets[id]
	return w, ok
}

// freeAddr is the lowest address of the subnet that no workload has nor is
// being given, after the gateway's. Called with mu held.
func (m *netManager) freeAddr() (netip.Addr, error) {
	used := map[netip.Addr]bool{}
	for _, w := range m.nets {
		used[w.Addr] = true
	}
	for _, a := range m.making {
		used[a] = true
	}
	for a := m.gateway.Next(); m.subnet.Contains(a); a = a.Next() {
		if a.As4()[3] == 255 {
			break
		}
		if !used[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("network: no address left in %s: %d workloads hold them", m.subnet, len(m.nets)+len(m.making))
}

// view is what network.json and the table are to show now. Called with
// mu held (or before m is shared).
func (m *netManager) view() netView {
	v := netView{nets: make([]*workloadNet, 0, len(m.nets)), apiPort: m.apiPort, closed: m.closed}
	for _, w := range m.nets {
		v.nets = append(v.nets, w)
	}
	slices.SortFunc(v.nets, func(a, b *workloadNet) int { return a.Addr.Compare(b.Addr) })
	return v
}

// write writes network.json and the table from the workloads as they are
// now. Called with flushMu held: each write rewrites the file and the
// table whole, so two at once could leave the older last.
func (m *netManager) write() error {
	m.mu.Lock()
	v := m.view()
	m.mu.Unlock()
	if err := m.save(v); err != nil {
		return err
	}
	return m.apply(v)
}

// save writes network.json from v.
func (m *netManager) save(v netView) error {
	st := netState{Nets: slices.Clone(v.nets)}
	slices.SortFunc(st.Nets, func(a, b *workloadNet) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return writeJSON(m.state, st)
}

// vethName is the host's end of a workload's veth: "gfv" and a hash of
// the slot and address, 15 characters at most.
func (m *netManager) vethName(w *workloadNet) string {
	b := w.Addr.As4()
	return fmt.Sprintf("gfv%d-%d", m.slot, b[3])
}

// makeNamespace creates the workload's namespace, kept at w.NS, with its
// loopback up and IPv6 off, and a veth whose other end, in it, is eth0
// with the workload's address and a default route through the gateway.
func (m *netManager) makeNamespace(w *workloadNet) error {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := newNamespaceAt(w.NS); err != nil {
		return fmt.Errorf("network: namespace of %s: %w", w.ID, err)
	}
	ns, err := netns.GetFromPath(w.NS)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	defer h.Close()
	host := m.vethName(w)
	if old, err := netlink.LinkByName(host); err == nil {
		netlink.LinkDel(old) // left by a namespace removed before its task ended
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host, MTU: 1500}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("network: veth of %s: %w", w.ID, err)
	}
	hl, err := netlink.LinkByName(host)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	br, err := netlink.LinkByName(m.bridge)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := netlink.LinkSetMaster(hl, br); err != nil {
		return fmt.Errorf("network: %s into %s: %w", host, m.bridge, err)
	}
	if err := netlink.LinkSetIsolated(hl, true); err != nil {
		return fmt.Errorf("network: isolate %s: %w", host, err)
	}
	if err := netlink.LinkSetUp(hl); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("network: %s of %s: %w", name, w.ID, err)
		}
		if name == "eth0" {
			a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(w.Addr.AsSlice()), Mask: net.CIDRMask(24, 32)}}
			if err := h.AddrAdd(l, a); err != nil {
				return fmt.Errorf("network: address of %s: %w", w.ID, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("network: %s of %s up: %w", name, w.ID, err)
		}
	}
	route := &netlink.Route{Gw: net.IP(m.gateway.AsSlice())}
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("network: route of %s: %w", w.ID, err)
	}
	return nil
}

// removeNamespace unmounts and removes the workload's namespace file: the
// namespace, and its veth with it, go once its last process has. (Not by
// the veth's name: a server that has let its slot go may end its tasks
// after another has taken the slot and its names.)
func (m *netManager) removeNamespace(w *workloadNet) {
	unix.Unmount(w.NS, unix.MNT_DETACH)
	os.Remove(w.NS)
}

// newNamespaceAt creates a network namespace and keeps it at path (a bind
// mount of it, as ip netns add does), with IPv6 off inside: on a thread
// of its own, which goes with the goroutine, so no other goroutine ever
// runs in the new namespace.
func newNamespaceAt(path string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		errc <- func() error {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
			if err != nil {
				return err
			}
			f.Close()
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return err
			}
			self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
			if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
				return err
			}
			for _, key := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
				if err := sysctl(key, "1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			return nil
		}()
	}()
	return <-errc
}

// The main goroutine keeps the main thread. Goroutines here move their
// (locked) thread into a workload's network namespace and let it end with
// them (newNamespaceAt, dialIn); the runtime does not end the main thread
// but parks it, in that namespace, and the main thread's namespace is the
// one /proc/self/net shows the whole process (the listeners' check reads
// it). Locked here, at init, the main thread never runs another goroutine.
func init() { runtime.LockOSThread() }

// EnvAPIAddr names the address where a task reaches gpufleet's API (the
// server on its bridge's gateway); every request wants a token still.
const EnvAPIAddr = "GPUFLEET_ADDR"

// apiAddr is the API's address on the gateway, "" while the server does
// not serve it there.
func (m *netManager) apiAddr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.apiPort == 0 {
		return ""
	}
	return netip.AddrPortFrom(m.gateway, uint16(m.apiPort)).String()
}

// serveAPI lets workloads reach the API at the gateway's port.
func (m *netManager) serveAPI(port int) error {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	m.apiPort = port
	m.mu.Unlock()
	return m.write()
}

// close gives up the bridge and the table, once no workload has a
// namespace removes them, and from then on writes neither: a server that
// ends with tasks running leaves them, for the next server of its data
// directory, and its tasks' ends change nothing of them. Called while the
// server still holds its slot.
func (m *netManager) close() {
	// Not during a write (flushMu): every workload attach has added is in
	// the table, and no write of the table comes after.
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if len(m.nets) > 0 {
		return
	}
	if c, err := nftables.New(); err == nil {
		t := &nftables.Table{Family: nftables.TableFamilyINet, Name: m.bridge}
		c.AddTable(t)
		c.DelTable(t)
		c.Flush()
		c.CloseLasting()
	}
	if l, err := netlink.LinkByName(m.bridge); err == nil {
		netlink.LinkDel(l)
	}
}

// owner returns the namespace of the workload whose address addr
// ("10.233.4.2:8888") is.
func (m *netManager) owner(addr string) (*workloadNet, int, bool) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.nets {
		if w.Addr == ap.Addr() {
			return w, int(ap.Port()), true
		}
	}
	return nil, 0, false
}

// dialIn connects to port inside the workload's network namespace: its
// loopback first (a server that listens on localhost only, as Jupyter
// does by default, is reached, and by nothing else), then its own
// address. The socket is made by a thread in the namespace, which goes
// with its goroutine.
func dialIn(ctx context.Context, w *workloadNet, port int) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the namespace
		fd, err := unix.Open(w.NS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{err: err}
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			ch <- result{err: fmt.Errorf("enter the network namespace of %s: %w", w.ID, err)}
			return
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		var c net.Conn
		for _, host := range []string{"127.0.0.1", w.Addr.String()} {
			if c, err = d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
				break
			}
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// allowedRanges turns a policy's allowed destinations (CIDRs, addresses or
// host names, each with an optional :port) into IPv4 ranges: a name is
// resolved now, by the server, and the host's name servers are allowed
// with it, so that the workload can resolve it too. Ports are not kept:
// a destination is allowed on every port. What does not resolve is left
// out.
func allowedRanges(allow []string) []string {
	var out []string
	names := false
	for _, a := range allow {
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		if p, err := netip.ParsePrefix(host); err == nil && p.Addr().Is4() {
			out = append(out, p.Masked().String())
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			if ip.Is4() {
				out = append(out, netip.PrefixFrom(ip, 32).String())
			}
			continue
		}
		names = true
		ips, _ := net.LookupHost(host)
		for _, s := range ips {
			if ip, err := netip.ParseAddr(s); err == nil && ip.Is4() {
				out = append(out, netip.PrefixFrom(ip, 32).String())
			}
		}
	}
	if names {
		out = append(out, nameServers()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nameServers are the host's IPv4 name servers, from /etc/resolv.conf,
// as /32 ranges; loopback ones are left out (a workload cannot reach the
// host's loopback).
func nameServers() []string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if ip, err := netip.ParseAddr(f[1]); err == nil && ip.Is4() && !ip.IsLoopback() {
			out = append(out, netip.PrefixFrom(ip, 32).String())
		}
	}
	return out
}
