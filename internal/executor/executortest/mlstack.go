package executortest

import (
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// mlStackScript checks, in a task, what CUDA, PyTorch, its DataLoader and
// NCCL do to their own processes, and prints one line per check:
// "CHECK <name> ok" or "CHECK <name> fail <why>". Its argument is the GPU
// list the task should see.
const mlStackScript = `
import os, sys, threading, subprocess, pwd

def check(name, fn):
    try:
        detail = fn()
    except Exception as e:
        detail = "%s: %s" % (type(e).__name__, e)
    print("CHECK", name, "ok" if detail is None else "fail " + str(detail).replace("\n", " "))
    sys.stdout.flush()

def name_a_thread():
    # As CUDA's driver and glibc's pthread_setname_np do: another thread
    # of this process named through /proc/self/task/TID/comm.
    started, done = threading.Event(), threading.Event()
    t = threading.Thread(target=lambda: (started.set(), done.wait()))
    t.start(); started.wait()
    try:
        with open("/proc/self/task/%d/comm" % t.native_id, "w") as f:
            f.write("gf-worker")
        with open("/proc/self/task/%d/comm" % t.native_id) as f:
            got = f.read().strip()
        return None if got == "gf-worker" else "the thread is named %r" % got
    finally:
        done.set(); t.join()

def in_a_child():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    line = out.stdout.strip()
    return None if line == "ok" else "child: %r %r" % (line, out.stderr.strip()[-300:])

def shared_memory():
    from multiprocessing import shared_memory as shm
    st = os.statvfs("/dev/shm")
    if st.f_blocks * st.f_frsize < 1 << 30:
        return "/dev/shm holds %d MiB, want at least 1024" % (st.f_blocks * st.f_frsize >> 20)
    size = 256 << 20
    m = shm.SharedMemory(create=True, size=size)
    try:
        for off in range(0, size, 4096):
            m.buf[off] = off // 4096 % 251
        other = shm.SharedMemory(name=m.name)
        bad = sum(1 for off in range(0, size, 1 << 20) if other.buf[off] != off // 4096 % 251)
        other.close()
        return None if bad == 0 else "%d pages read back wrong" % bad
    finally:
        m.close(); m.unlink()

def user():
    pw = pwd.getpwuid(os.getuid())
    if not pw.pw_name:
        return "no name"
    if pw.pw_dir != os.environ.get("HOME"):
        return "passwd gives home %r, HOME is %r" % (pw.pw_dir, os.environ.get("HOME"))
    return None

def home_cache():
    d = os.path.join(os.environ["HOME"], ".cache", "gpufleet-check")
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "entry")
    with open(p, "w") as f:
        f.write("cached")
    with open(p) as f:
        return None if f.read() == "cached" else "read back wrong"

def gpus():
    want = sys.argv[1]
    got = (os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("NVIDIA_VISIBLE_DEVICES"))
    return None if got == (want, want) else "CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES = %r, want %r" % (got, want)
`

// mlStackChild is what the child process runs: the thread check alone.
const mlStackChild = `
import threading
started, done = threading.Event(), threading.Event()
t = threading.Thread(target=lambda: (started.set(), done.wait()))
t.start(); started.wait()
try:
    with open("/proc/self/task/%d/comm" % t.native_id, "w") as f:
        f.write("gf-child")
    with open("/proc/self/task/%d/comm" % t.native_id) as f:
        print("ok" if f.read().strip() == "gf-child" else "unnamed")
except Exception as e:
    print("%s: %s" % (type(e).__name__, e))
finally:
    done.set(); t.join()
`

const mlStackMain = `
check("thread-name", name_a_thread)
check("thread-name-in-child", in_a_child)
check("shared-memory", shared_memory)
check("user", user)
check("home-cache", home_cache)
check("gpus", gpus)
print("DONE")
`

// mlStackChecks are the names of the checks the script prints.
var mlStackChecks = []string{"thread-name", "thread-name-in-child", "shared-memory", "user", "home-cache", "gpus"}

// mlStack: a task on two GPUs (whole, then a fraction) names another of
// its threads through /proc, from its first process and from a child, uses
// 256 MiB of POSIX shared memory in a /dev/shm of at least 1 GiB, finds
// its user in the user database with HOME as its home, writes a cache
// file there, and sees its GPUs in CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES.
func mlStack(h *harness) {
	if h.opts.Python == "" {
		h.t.Skip("the executor runs no processes here (or no python3 for them)")
	}
	script := mlStackScript + "CHILD = " + pyString(mlStackChild) + "\n" + mlStackMain
	for _, c := range []struct {
		id   core.WorkloadID
		req  core.Request
		as   []core.Assignment
		want string
	}{
		{"ml-whole", core.Request{MilliGPU: 2000, MemoryMiB: 512},
			[]core.Assignment{{Node: "n", GPUIndex: 1, GPUUUID: "GPU-1", MilliGPU: 1000}, {Node: "n", GPUIndex: 3, GPUUUID: "GPU-3", MilliGPU: 1000}}, "1,3"},
		{"ml-fraction", core.Request{MilliGPU: 250},
			[]core.Assignment{{Node: "n", GPUIndex: 2, GPUUUID: "GPU-2", MilliGPU: 250, MemoryMiB: 20480}}, "2"},
	} {
		tk := h.task(c.id, h.opts.Python, "-c", script, c.want)
		tk.Team, tk.Request, tk.Assignments = "ml", c.req, c.as
		h.start(tk)
		x := h.waitExit(tk)
		out := h.readLogs(tk.WorkloadID)
		if x.ExitCode == nil || *x.ExitCode != 0 || !strings.Contains(out, "DONE") {
			h.t.Errorf("%s: got %s, want exit code 0 after every check; log:\n%s", c.id, describe(x), out)
			continue
		}
		for _, name := range mlStackChecks {
			if !strings.Contains(out, "CHECK "+name+" ok\n") {
				h.t.Errorf("%s: check %s did not pass:\n%s", c.id, name, out)
			}
		}
	}
}

// pyString quotes s as a Python string literal.
func pyString(s string) string {
	return `"""` + strings.ReplaceAll(s, `"""`, `\"\"\"`) + `"""`
}
