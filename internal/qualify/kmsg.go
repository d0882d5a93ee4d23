package qualify

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/health"
)

// KernelLog is where a local node's Xid errors are read from.
const KernelLog = "/dev/kmsg"

// OpenKernelLog opens the kernel log at its end, so that only what comes
// next is read.
func OpenKernelLog() (*os.File, error) {
	f, err := os.Open(KernelLog)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// WatchKernelLog reads kernel log lines from r until it ends or ctx does
// (the caller closes r then), and records each Xid error of a device of
// node (matched by its PCI bus ID); an Xid of a device it cannot name is
// an event on the node.
func (q *Qualifier) WatchKernelLog(ctx context.Context, r io.Reader, node core.NodeName, gpus []core.GPU) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 8192), 8192)
	for sc.Scan() {
		if ctx.Err() != nil {
			return
		}
		x, ok := health.ParseXidLine(sc.Text())
		if !ok {
			continue
		}
		gpu := -1
		for _, g := range gpus {
			if samePCI(g.PCIBusID, x.PCI) {
				gpu = g.Index
			}
		}
		if gpu < 0 {
			now := q.opts.Now().UTC()
			if _, err := q.opts.Store.UpdateNodeStatus(ctx, node, now, func(*core.Node, *core.NodeStatus) ([]core.NodeEvent, error) {
				return []core.NodeEvent{{Time: now, Type: core.EventWarning, Reason: "Xid", Message: "Xid " + strconv.Itoa(x.Code) + " on PCI " + x.PCI + " (no GPU of this node has that bus ID): " + x.Message, GPU: -1}}, nil
			}); err != nil {
				q.log.Error("kernel log: record an Xid", "err", err)
			}
			continue
		}
		if err := q.Xid(ctx, node, gpu, x.Code, x.Message); err != nil {
			q.log.Error("kernel log: record an Xid", "gpu", gpu, "xid", x.Code, "err", err)
		}
	}
}

// samePCI compares nvidia-smi's bus ID ("00000000:C6:00.0") with the
// kernel's ("0000:c6:00"): domain without its leading zeros, bus, device.
func samePCI(smi, kernel string) bool {
	if smi == "" || kernel == "" {
		return false
	}
	norm := func(s string) string {
		s = strings.ToLower(strings.TrimSpace(s))
		if i := strings.LastIndexByte(s, '.'); i > 0 {
			s = s[:i]
		}
		parts := strings.Split(s, ":")
		if len(parts) == 3 {
			parts[0] = strings.TrimLeft(parts[0], "0")
		}
		return strings.Join(parts, ":")
	}
	return norm(smi) == norm(kernel)
}
