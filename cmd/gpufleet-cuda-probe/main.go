package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// libraryDirs are where drivers install libcuda.so.1 when the dynamic
// loader's cache does not name it: the distributions' library directories,
// the NVIDIA container toolkit's and the GPU operator's, WSL's.
var libraryDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
	"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib",
}

// report is what the probe prints; internal/health's CUDAProbe reads it.
type report struct {
	Library       string   `json:"library,omitempty"`
	DriverVersion int      `json:"driverVersion,omitempty"`
	DeviceCount   int      `json:"deviceCount"`
	Devices       []string `json:"devices,omitempty"`
	// Call is the call that failed ("dlopen", "cuInit", ...), Code the
	// CUresult it returned and Error the driver's name for it (or the
	// loader's message).
	Call  string `json:"call,omitempty"`
	Code  int    `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

func main() {
	r := probe()
	json.NewEncoder(os.Stdout).Encode(r)
	if r.Call != "" {
		os.Exit(1)
	}
}

func probe() report {
	lib, err := open()
	if err != nil {
		return report{Call: "dlopen", Error: err.Error()}
	}
	var (
		cuInit             func(flags uint32) int32
		cuDriverGetVersion func(v *int32) int32
		cuDeviceGetCount   func(n *int32) int32
		cuDeviceGet        func(d *int32, ordinal int32) int32
		cuDeviceGetName    func(name *byte, n int32, d int32) int32
		cuGetErrorName     func(code int32, name **byte) int32
	)
	for name, fn := range map[string]any{"cuInit": &cuInit, "cuDriverGetVersion": &cuDriverGetVersion,
		"cuDeviceGetCount": &cuDeviceGetCount, "cuDeviceGet": &cuDeviceGet, "cuDeviceGetName": &cuDeviceGetName,
		"cuGetErrorName": &cuGetErrorName} {
		if _, err := purego.Dlsym(lib, name); err != nil {
			return report{Library: loaded(), Call: "dlsym", Error: name + ": " + err.Error()}
		}
		purego.RegisterLibFunc(fn, lib, name)
	}
	r := report{Library: loaded()}
	fail := func(call string, code int32) report {
		r.Call, r.Code = call, int(code)
		var name *byte
		if cuGetErrorName(code, &name) == 0 && name != nil {
			r.Error = cString(name)
		} else {
			r.Error = fmt.Sprintf("CUresult %d", code)
		}
		return r
	}
	if rc := cuInit(0); rc != 0 {
		return fail("cuInit", rc)
	}
	var v, n int32
	if rc := cuDriverGetVersion(&v); rc != 0 {
		return fail("cuDriverGetVersion", rc)
	}
	r.DriverVersion = int(v)
	if rc := cuDeviceGetCount(&n); rc != 0 {
		return fail("cuDeviceGetCount", rc)
	}
	r.DeviceCount = int(n)
	for i := range n {
		var d int32
		buf := make([]byte, 256)
		if cuDeviceGet(&d, i) != 0 || cuDeviceGetName(&buf[0], int32(len(buf)), d) != 0 {
			r.Devices = append(r.Devices, "")
			continue
		}
		r.Devices = append(r.Devices, cString(&buf[0]))
	}
	return r
}

// open loads libcuda.so.1 as the dynamic loader finds it (its cache,
// LD_LIBRARY_PATH, the default directories), then from the drivers' usual
// directories.
func open() (uintptr, error) {
	const mode = purego.RTLD_NOW | purego.RTLD_LOCAL
	lib, first := purego.Dlopen("libcuda.so.1", mode)
	if first == nil {
		return lib, nil
	}
	for _, d := range libraryDirs {
		if lib, err := purego.Dlopen(d+"/libcuda.so.1", mode); err == nil {
			return lib, nil
		}
	}
	return 0, fmt.Errorf("libcuda.so.1 not found by the dynamic loader (%v) nor in %s", first, strings.Join(libraryDirs, ", "))
}

// loaded is the path of the libcuda this process mapped, from its own
// /proc/self/maps.
func loaded() string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "libcuda.so.1"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if i := strings.Index(sc.Text(), "/"); i >= 0 && strings.Contains(sc.Text()[i:], "libcuda.so") {
			return sc.Text()[i:]
		}
	}
	return "libcuda.so.1"
}

// cString copies the NUL-terminated C string at p.
func cString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0 && len(b) < 4096; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}
