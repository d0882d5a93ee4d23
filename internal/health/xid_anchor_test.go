package health

import "testing"

// An Xid is NVRM's own message, not text another message quotes: an
// unprivileged user can make the kernel echo a string (a mount option).
func TestXidLineIsAnchored(t *testing.T) {
	for _, line := range []string{
		"4,1002,5001,-;NVRM: Xid (PCI:0000:c6:00): 79, pid=1, GPU has fallen off the bus.",
		"[ 1234.567890] NVRM: Xid (PCI:0000:c6:00): 79, pid=1, GPU has fallen off the bus.",
		"Dec  1 10:00:00 host kernel: NVRM: Xid (PCI:0000:c6:00): 79, pid=1, x",
		"kernel: [ 12.5] NVRM: Xid (PCI:0000:c6:00): 79, x",
		"<4>NVRM: Xid (PCI:0000:c6:00): 79, x",
	} {
		if x, ok := ParseXidLine(line); !ok || x.Code != 79 {
			t.Errorf("%q: %+v %t, want Xid 79", line, x, ok)
		}
	}
	for _, line := range []string{
		"3,350,1,-;tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:c6:00): 79'",
		"audit: comm=\"NVRM: Xid (PCI:0000:c6:00): 48\"",
		"some text NVRM: Xid (PCI:0000:c6:00): 79, x",
	} {
		if x, ok := ParseXidLine(line); ok {
			t.Errorf("%q read as Xid %d", line, x.Code)
		}
	}
}
