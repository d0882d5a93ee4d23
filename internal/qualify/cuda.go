package qualify

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// Sandbox runs a program exactly as a workload's task runs on this node
// (the local executor's RunProbe): in the same sandbox, as a user of the
// teams' range, with the given GPUs visible. name tells one probe's files
// from another's.
type Sandbox interface {
	RunAsTask(ctx context.Context, name string, argv []string, gpus []int, timeout time.Duration) Result
}

// CUDAProbeName is the CUDA probe's program (cmd/gpufleet-cuda-probe),
// looked for beside the server's binary.
const CUDAProbeName = "gpufleet-cuda-probe"

// cudaProbePython is the probe's stand-in where the helper is not
// installed: the same calls through ctypes, the same report.
const cudaProbePython = `import ctypes, json, sys
dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib"]
lib, errs = None, []
for name in ["libcuda.so.1"] + [d + "/libcuda.so.1" for d in dirs]:
    try:
        lib = ctypes.CDLL(name); break
    except OSError as e:
        errs.append(str(e))
def out(r):
    print(json.dumps(r)); sys.exit(0 if "call" not in r else 1)
if lib is None:
    out({"deviceCount": 0, "call": "dlopen", "error": "libcuda.so.1 not found: " + errs[0]})
r = {"library": "libcuda.so.1", "deviceCount": 0}
def fail(call, code):
    name = ctypes.c_char_p()
    r.update(call=call, code=code, error=name.value.decode() if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value else "CUresult %d" % code)
    out(r)
rc = lib.cuInit(0)
if rc: fail("cuInit", rc)
v, n = ctypes.c_int(), ctypes.c_int()
rc = lib.cuDriverGetVersion(ctypes.byref(v))
if rc: fail("cuDriverGetVersion", rc)
r["driverVersion"] = v.value
rc = lib.cuDeviceGetCount(ctypes.byref(n))
if rc: fail("cuDeviceGetCount", rc)
r["deviceCount"] = n.value
names = []
for i in range(n.value):
    d, buf = ctypes.c_int(), ctypes.create_string_buffer(256)
    names.append(buf.value.decode() if lib.cuDeviceGet(ctypes.byref(d), i) == 0 and lib.cuDeviceGetName(buf, 256, d) == 0 else "")
r["devices"] = names
out(r)
`

// cudaProbeArgv is the CUDA probe's command: the helper configured, else
// the one beside the server's binary, else python3 running the stand-in,
// which the sandbox finds in the task's PATH. It returns nil, with why,
// when there is none of them.
func cudaProbeArgv(helper string) ([]string, string) {
	if helper != "" {
		return []string{helper}, ""
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), CUDAProbeName)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return []string{p}, ""
		}
	}
	for _, d := range TrustedDirs {
		if fi, err := os.Stat(filepath.Join(d, "python3")); err == nil && fi.Mode()&0o111 != 0 {
			return []string{"python3", "-c", cudaProbePython}, ""
		}
	}
	return nil, "not run: " + CUDAProbeName + " is not installed beside the server's binary and there is no python3 to stand in for it"
}
