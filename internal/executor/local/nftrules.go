package local

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/gpufleet/gpufleet/internal/core"
)

// apply writes the server's nftables table (inet gpufleet<slot>) anew, in
// one transaction, from v, the workloads that have a namespace:
//
//	forward:    from the bridge: jump out; to the bridge: replies only
//	out:        replies; never link-local (169.254/16: cloud metadata); to
//	            the bridge: jump between, else drop; outside, per team: its
//	            allowed ranges, then all (egress allow) or nothing (deny)
//	between:    per team, from its addresses to a team address's declared
//	            port (TCP and UDP)
//	input:      from the bridge: replies, and the API on the gateway;
//	            nothing else of the host's
//	postrouting (nat): the subnet's traffic leaving by another interface is
//	            masqueraded, where some egress is allowed
//
// Traffic between workloads is routed by the host (the bridge's ports are
// isolated; it answers ARP for the subnet), so it passes the forward hook.
// IPv6 from the bridge is dropped: workloads have none.
func (m *netManager) apply(v netView) error {
	if v.closed {
		return nil
	}
	nftMu.Lock()
	defer nftMu.Unlock()
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("network: nftables: %w", err)
	}
	defer c.CloseLasting()
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: m.bridge}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	// The hooks' policy is accept: the host's own traffic is not this
	// table's business.
	accept := nftables.ChainPolicyAccept
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	out := c.AddChain(&nftables.Chain{Name: "out", Table: t})
	between := c.AddChain(&nftables.Chain{Name: "between", Table: t})
	toHost := c.AddChain(&nftables.Chain{Name: "to_host", Table: t})

	br := ifname(m.bridge)
	rule := func(ch *nftables.Chain, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
	}
	fromBridge := cmpMeta(expr.MetaKeyIIFNAME, expr.CmpOpEq, br)
	toBridge := cmpMeta(expr.MetaKeyOIFNAME, expr.CmpOpEq, br)

	// forward
	rule(forward, append(append(fromBridge, cmpMeta(expr.MetaKeyNFPROTO, expr.CmpOpEq, []byte{unix.NFPROTO_IPV6})...), &expr.Verdict{Kind: expr.VerdictDrop})...)
	rule(forward, append(fromBridge, &expr.Verdict{Kind: expr.VerdictJump, Chain: "out"})...)
	rule(forward, append(append(toBridge, established()...), &expr.Verdict{Kind: expr.VerdictAccept})...)
	rule(forward, append(toBridge, &expr.Verdict{Kind: expr.VerdictDrop})...)

	// out
	rule(out, append(established(), &expr.Verdict{Kind: expr.VerdictAccept})...)
	rule(out, append(ipv4Net(16, netip.MustParsePrefix("169.254.0.0/16")), refuse()...)...)
	rule(out, append(toBridge, &expr.Verdict{Kind: expr.VerdictJump, Chain: "between"})...)
	rule(out, append(toBridge, refuse()...)...)

	// out, per workload whose own policy denies egress: its allowed
	// ranges, then nothing; its team's policy comes after.
	for _, w := range v.nets {
		if !w.Deny {
			continue
		}
		a := w.Addr.As4()
		from := append(isIPv4(),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
		if len(w.Allow) > 0 {
			allowed := &nftables.Set{Table: t, Name: "w" + strconv.Itoa(int(a[3])), KeyType: nftables.TypeIPAddr, Interval: true}
			if err := c.AddSet(allowed, intervals(w.Allow)); err != nil {
				return fmt.Errorf("network: nftables set: %w", err)
			}
			rule(out, append(append(slices.Clone(from), lookupAddr(16, allowed)...), &expr.Verdict{Kind: expr.VerdictAccept})...)
		}
		rule(out, append(slices.Clone(from), refuse()...)...)
	}

	teams := teamsOf(v.nets)
	for i, team := range teams {
		k := strconv.Itoa(i)
		members := &nftables.Set{Table: t, Name: "t" + k, KeyType: nftables.TypeIPAddr}
		var elems []nftables.SetElement
		var ports []nftables.SetElement
		for _, w := range v.nets {
			if w.Team != team {
				continue
			}
			a := w.Addr.As4()
			elems = append(elems, nftables.SetElement{Key: a[:]})
			for _, p := range w.Ports {
				key := append(append([]byte{}, a[:]...), binaryutil.BigEndian.PutUint16(uint16(p))...)
				ports = append(ports, nftables.SetElement{Key: append(key, 0, 0)})
			}
		}
		if err := c.AddSet(members, elems); err != nil {
			return fmt.Errorf("network: nftables set: %w", err)
		}
		declared := &nftables.Set{Table: t, Name: "p" + k, KeyType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService), Concatenation: true}
		if err := c.AddSet(declared, ports); err != nil {
			return fmt.Errorf("network: nftables set: %w", err)
		}
		// between: ip saddr @tK ip daddr . th dport @pK accept
		rule(between, append(append(append(isIPv4(), l4TCPorUDP()...), lookupAddr(12, members)...),
			&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Payload{DestRegister: 10, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: 9, SetName: declared.Name, SetID: declared.ID},
			&expr.Verdict{Kind: expr.VerdictAccept})...)

		// out, per team: its allowed ranges, then all or nothing.
		e := m.cfg.egressOf(team)
		if len(e.Allow) > 0 {
			allowed := &nftables.Set{Table: t, Name: "a" + k, KeyType: nftables.TypeIPAddr, Interval: true}
			if err := c.AddSet(allowed, intervals(e.Allow)); err != nil {
				return fmt.Errorf("network: nftables set: %w", err)
			}
			rule(out, append(append(lookupAddr(12, members), lookupAddr(16, allowed)...), &expr.Verdict{Kind: expr.VerdictAccept})...)
		}
		last := []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}
		if e.Egress == "deny" {
			last = refuse()
		}
		rule(out, append(lookupAddr(12, members), last...)...)
	}
	rule(out, &expr.Verdict{Kind: expr.VerdictDrop}) // an address no workload has

	// input: the host is out of reach but for the API on the gateway.
	rule(input, append(fromBridge, &expr.Verdict{Kind: expr.VerdictJump, Chain: "to_host"})...)
	rule(input, &expr.Verdict{Kind: expr.VerdictAccept})
	rule(toHost, append(established(), &expr.Verdict{Kind: expr.VerdictAccept})...)
	if v.apiPort > 0 {
		gw := m.gateway.As4()
		rule(toHost, append(append(isIPv4(),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: gw[:]},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(v.apiPort))}),
			&expr.Verdict{Kind: expr.VerdictAccept})...)
	}
	rule(toHost, refuse()...)

	// postrouting: NAT out.
	if m.cfg.anyEgress() {
		nat := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
		rule(nat, append(append(ipv4Net(12, m.subnet), cmpMeta(expr.MetaKeyOIFNAME, expr.CmpOpNeq, br)...), &expr.Masq{})...)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("network: nftables table %s: %w", m.bridge, err)
	}
	return nil
}

// nftMu: the nftables package numbers the sets of a transaction from a
// counter of its own, package-level and unlocked (allocSetID in AddSet),
// so this process builds one table's transaction at a time, whatever the
// executor (a server has one; tests run several at once).
var nftMu sync.Mutex

// refuse answers a packet as a closed firewall does (ICMP administratively
// prohibited), so that a connection fails at once instead of hanging.
func refuse() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}
}

// teamsOf lists the teams of the workloads, sorted.
func teamsOf(nets []*workloadNet) []core.TeamName {
	var out []core.TeamName
	for _, w := range nets {
		if !slices.Contains(out, w.Team) {
			out = append(out, w.Team)
		}
	}
	slices.Sort(out)
	return out
}

// ifname is an interface name as nftables compares it: NUL-padded to 16
// bytes.
func ifname(n string) []byte {
	b := make([]byte, 16)
	copy(b, n)
	return b
}

func cmpMeta(key expr.MetaKey, op expr.CmpOp, data []byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: data}}
}

func isIPv4() []expr.Any {
	return cmpMeta(expr.MetaKeyNFPROTO, expr.CmpOpEq, []byte{unix.NFPROTO_IPV4})
}

// l4TCPorUDP: the packet is TCP or UDP (whose ports sit at the same
// offsets).
func l4TCPorUDP() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: []byte{unix.IPPROTO_TCP}, ToData: []byte{unix.IPPROTO_UDP}},
	}
}

// established: conntrack says the packet belongs to a connection seen
// both ways, or is related to one.
func established() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// lookupAddr: the IPv4 address at offset (12 source, 16 destination) is
// in set.
func lookupAddr(offset uint32, set *nftables.Set) []expr.Any {
	return append(isIPv4(),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID})
}

// ipv4Net: the IPv4 address at offset is in p.
func ipv4Net(offset uint32, p netip.Prefix) []expr.Any {
	mask := make([]byte, 4)
	binary.BigEndian.PutUint32(mask, ^uint32(0)<<(32-p.Bits()))
	a := p.Masked().Addr().As4()
	return append(isIPv4(),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
}

// intervals are the CIDRs as the elements of an interval set: each range's
// first address, and the address after its last, flagged as an end.
func intervals(cidrs []string) []nftables.SetElement {
	var out []nftables.SetElement
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		p = p.Masked()
		lo := p.Addr().As4()
		v := binary.BigEndian.Uint32(lo[:]) + uint32(1)<<(32-p.Bits())
		hi := make([]byte, 4)
		binary.BigEndian.PutUint32(hi, v)
		out = append(out, nftables.SetElement{Key: lo[:]}, nftables.SetElement{Key: hi, IntervalEnd: true})
	}
	return out
}
