package health

import (
	"regexp"
	"strconv"
	"strings"
)

// Xid is one Xid event the NVIDIA driver logged.
type Xid struct {
	// PCI is the device's address as the driver prints it ("0000:c6:00").
	PCI  string
	Code int
	// PID is the process the event names, 0 if none (or "<unknown>").
	PID int
	// Message is the rest of the line after the code, the pid= and
	// name= fields.
	Message string
}

// xidRE is anchored: NVRM must begin the message, after at most a syslog
// priority (<4>), a /dev/kmsg header (4,1234,5678,-;), a dmesg time
// ([12345.678]) or a journal's "host kernel: ". A message that only quotes
// the text (a mount option an unprivileged user passed, echoed by the
// kernel) is not an Xid.
var xidRE = regexp.MustCompile(`^(?:<\d{1,3}>)?(?:\d{1,3},\d+,\d+,[^;]*;)?(?:\[\s*\d+\.\d+\]\s*)?(?:[A-Za-z]{3} [ \d]\d \d\d:\d\d:\d\d \S+ )?(?:kernel: )?(?:\[\s*\d+\.\d+\]\s*)?NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\): (\d{1,6})\b,?\s*(.*)$`)

// ParseXidLine reads one kernel log line "NVRM: Xid (PCI:0000:c6:00): 79,
// pid=1234, name=python, GPU has fallen off the bus." after what may begin
// it (a dmesg "[12345.678] ", a journal "host kernel: ", a /dev/kmsg
// "4,1234,5678,-;", see xidRE). Older drivers print the address without
// "PCI:". It reports false for any other line.
func ParseXidLine(line string) (Xid, bool) {
	m := xidRE.FindStringSubmatch(strings.TrimRight(line, "\r\n"))
	if m == nil {
		return Xid{}, false
	}
	code, err := strconv.Atoi(m[2])
	if err != nil {
		return Xid{}, false
	}
	x := Xid{PCI: m[1], Code: code}
	rest := strings.TrimSpace(m[3])
	for {
		var field string
		switch {
		case strings.HasPrefix(rest, "pid="):
			field = "pid="
		case strings.HasPrefix(rest, "name="):
			field = "name="
		}
		if field == "" {
			break
		}
		val, after, _ := strings.Cut(rest[len(field):], ",")
		if field == "pid=" {
			if pid, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `'"`)); err == nil && pid > 0 {
				x.PID = pid
			}
		}
		rest = strings.TrimSpace(after)
	}
	x.Message = rest
	return x, true
}

// XidClass says what an Xid means for the GPU that logged it.
type XidClass string

// Xid classes.
const (
	// XidFatal: the GPU is Failed, its workloads are lost and requeued,
	// and it must pass qualification again.
	XidFatal XidClass = "fatal"
	// XidWarning: the GPU is Suspect.
	XidWarning XidClass = "warning"
	// XidApplication: an error of the workload's own making; an event on
	// the workload, not a fault of the node.
	XidApplication XidClass = "application"
	// XidOther: an event on the node; the GPU's health is unchanged.
	XidOther XidClass = "other"
)

// ClassifyXid classifies an Xid code:
//   - fatal: 48 (double-bit ECC), 74 (NVLink), 79 (fallen off the bus),
//     95 (uncontained error), 119 and 120 (GSP), 140 (unrecovered ECC),
//     which DCGM's health watch fails always, and 64 (row-remap failure),
//     which its memory watch fails;
//   - warning: 94 (contained error), 63 (row remapping pending) and 32
//     (invalid or corrupted push buffer), which DCGM warns of;
//   - application: 13, 31, 43, 45, 68, 109, which the device plugin
//     leaves to the application (DCGM's memory watch warns of 31 and 43;
//     the workload, not the GPU, is at fault);
//   - other: every other code.
func ClassifyXid(code int) XidClass {
	switch code {
	case 48, 64, 74, 79, 95, 119, 120, 140:
		return XidFatal
	case 32, 63, 94:
		return XidWarning
	case 13, 31, 43, 45, 68, 109:
		return XidApplication
	}
	return XidOther
}
