package health

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestParseXidLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Xid
	}{
		{"NVRM: Xid (PCI:0000:c6:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
			Xid{PCI: "0000:c6:00", Code: 79, PID: 1234, Message: "GPU has fallen off the bus."}},
		{"[12345.678] NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=train.py, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1c_00000000.",
			Xid{PCI: "0000:3b:00", Code: 31, PID: 4242, Message: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1c_00000000."}},
		{"Jan 12 03:04:05 gpu-7 kernel: NVRM: Xid (PCI:0000:18:00): 94, pid='<unknown>', name=<unknown>, Contained: CE User Channel (0x9). RST: No, D-RST: No",
			Xid{PCI: "0000:18:00", Code: 94, Message: "Contained: CE User Channel (0x9). RST: No, D-RST: No"}},
		{"4,1234,5678901,-;NVRM: Xid (PCI:0000:c6:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3.",
			Xid{PCI: "0000:c6:00", Code: 48, Message: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3."}},
		{"NVRM: Xid (0000:01:00): 13, 0003 00000000 0000a197 00001b0c 1000f010 00000040",
			Xid{PCI: "0000:01:00", Code: 13, Message: "0003 00000000 0000a197 00001b0c 1000f010 00000040"}},
		{"kernel: NVRM: Xid (PCI:0000:c6:00): 119, pid=99, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP!\n",
			Xid{PCI: "0000:c6:00", Code: 119, PID: 99, Message: "Timeout after 6s of waiting for RPC response from GPU0 GSP!"}},
	} {
		t.Run(tc.line[:20], func(t *testing.T) {
			got, ok := ParseXidLine(tc.line)
			if !ok {
				t.Fatalf("ParseXidLine(%q) = false", tc.line)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseXidLineIgnores(t *testing.T) {
	for _, line := range []string{
		"",
		"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07",
		"NVRM: Xid (PCI:0000:c6:00): , pid=1",
		"NVRM: Xid (PCI:zz:00): 79, GPU has fallen off the bus.",
		"nvidia-nvlink: Unregistered Nvlink Core",
		"Xid 79 happened",
	} {
		if x, ok := ParseXidLine(line); ok {
			t.Errorf("ParseXidLine(%q) = %+v, want false", line, x)
		}
	}
}

func TestParseXidLineNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prefix := rapid.SampledFrom([]string{"", "NVRM: Xid (", "NVRM: Xid (PCI:0000:c6:00): ", "[1.0] NVRM: Xid (PCI:"}).Draw(t, "prefix")
		line := prefix + rapid.String().Draw(t, "rest")
		if x, ok := ParseXidLine(line); ok && (x.PCI == "" || x.Code < 0 || x.PID < 0) {
			t.Fatalf("ParseXidLine(%q) = %+v", line, x)
		}
	})
}

func TestClassifyXid(t *testing.T) {
	want := map[int]XidClass{
		48: XidFatal, 64: XidFatal, 74: XidFatal, 79: XidFatal, 95: XidFatal, 119: XidFatal, 120: XidFatal, 140: XidFatal,
		32: XidWarning, 63: XidWarning, 94: XidWarning,
		13: XidApplication, 31: XidApplication, 43: XidApplication, 45: XidApplication, 68: XidApplication, 109: XidApplication,
		0: XidOther, 38: XidOther, 61: XidOther, 92: XidOther, 999: XidOther,
	}
	for code, class := range want {
		if got := ClassifyXid(code); got != class {
			t.Errorf("ClassifyXid(%d) = %q, want %q", code, got, class)
		}
	}
}
