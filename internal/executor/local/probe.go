package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// probeTeam is the team under whose user RunProbe runs programs: no team
// can have that name (names are DNS labels), so no team's tasks share its
// user.
const probeTeam core.TeamName = "@probe"

// probeOutputBytes bounds what RunProbe keeps of a program's stdout and of
// its stderr.
const probeOutputBytes = 64 << 10

// ProbeResult is what a program run by RunProbe did.
type ProbeResult struct {
	Stdout, Stderr []byte
	// Exit is the exit status; nil when it did not run to its end.
	Exit *int
	// Err says why it did not run or finish: a program the sandbox could
	// not execute (wrapping exec.ErrNotFound or fs.ErrPermission), a
	// timeout, a signal.
	Err      error
	Duration time.Duration
}

// RunProbe runs a program exactly as a task of this executor runs, without
// a workload: in the same sandbox (its namespaces, Landlock, a user of the
// range with its passwd entry, HOME, /dev/shm, the device files of the
// GPUs given), exec'd after the sandbox is entered, with CUDA_VISIBLE_DEVICES
// and NVIDIA_VISIBLE_DEVICES listing gpus. Qualification runs its CUDA
// check so, to learn whether workloads can use the node's GPUs. A program
// given by an absolute path outside the paths tasks may execute (a helper
// beside the server's binary) is first installed, read-only and root's, in
// DataDir/bin, which the probe's sandbox shows. The program is killed after
// timeout.
func (e *Executor) RunProbe(ctx context.Context, name string, argv []string, gpus []int, timeout time.Duration) ProbeResult {
	start := time.Now()
	res, err := e.runProbe(ctx, name, argv, gpus, timeout)
	res.Duration = time.Since(start)
	if err != nil && res.Err == nil {
		res.Err = err
	}
	return res
}

func (e *Executor) runProbe(ctx context.Context, name string, argv []string, gpus []int, timeout time.Duration) (ProbeResult, error) {
	if len(argv) == 0 || argv[0] == "" {
		return ProbeResult{}, errors.New("empty command")
	}
	if !idPattern.MatchString(name) {
		return ProbeResult{}, fmt.Errorf("invalid probe name %q", name)
	}
	pdir := filepath.Join(e.root, "probes", name)
	if err := os.MkdirAll(pdir, 0o700); err != nil {
		return ProbeResult{}, err
	}
	uid, gid := -1, -1
	if e.status.Users {
		var err error
		if uid, err = e.uids.uid(probeTeam); err != nil {
			return ProbeResult{}, err
		}
		gid = uid
	}
	own := taskDirs(pdir)
	for _, d := range own.list() {
		if err := ownDir(d, uid, gid); err != nil {
			return ProbeResult{}, err
		}
	}
	prog := argv[0]
	var mounts []taskMount
	if filepath.IsAbs(prog) && !e.executable(prog) {
		installed, err := e.install(prog)
		if err != nil {
			return ProbeResult{}, err
		}
		prog = installed
		bin := filepath.Dir(installed)
		mounts = append(mounts, taskMount{src: bin, dst: bin, ro: true})
	}
	var idx []string
	for _, g := range gpus {
		idx = append(idx, strconv.Itoa(g))
	}
	env := []string{"PATH=" + e.path, "HOME=" + own.home, "LANG=C.UTF-8", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
		"CUDA_VISIBLE_DEVICES=" + strings.Join(idx, ","), "NVIDIA_VISIBLE_DEVICES=" + strings.Join(idx, ",")}
	var files []bindMount
	if e.status.Users {
		user := "gpufleet-probe"
		env = append(env, "USER="+user, "LOGNAME="+user)
		var err error
		if files, err = userDB(pdir, user, uid, gid, own.home); err != nil {
			return ProbeResult{}, err
		}
	} else {
		env = append(env, "TMPDIR="+own.tmp)
	}
	sb, err := e.sandbox(view{own: own, uid: uid, gid: gid, dir: own.work, gpus: gpus, mounts: mounts,
		inNS: e.status.Users, shmBytes: shmBytes(core.Request{}), files: files})
	if err != nil {
		return ProbeResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bounded
	var cmd *exec.Cmd
	var run *sandboxCmd
	if sb == nil {
		if prog, err = lookPath(prog, e.path, own.work); err != nil {
			return ProbeResult{}, err
		}
		cmd = &exec.Cmd{Path: prog, Args: argv, Env: env, Dir: own.work, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	} else {
		spec, err := json.Marshal(sb)
		if err != nil {
			return ProbeResult{}, err
		}
		if run, err = newSandboxCmd(e.self, string(spec), prog, argv, envPayload{Env: env}); err != nil {
			return ProbeResult{}, err
		}
		cmd = run.cmd
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if run != nil {
		err = run.start()
		if err != nil {
			return ProbeResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, decodeStartError(err.Error())
		}
	} else if err = cmd.Start(); err != nil {
		return ProbeResult{}, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	cmd.Wait()
	close(done)
	rec := recordOf(cmd.ProcessState)
	if run != nil {
		rec = run.record()
	}
	res := ProbeResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Exit: rec.ExitCode}
	switch {
	case ctx.Err() != nil:
		res.Exit, res.Err = nil, fmt.Errorf("timed out after %s", timeout)
	case rec.Signal != "":
		res.Err = errors.New("killed by " + rec.Signal)
	}
	return res, nil
}

// executable reports whether tasks may execute the file at p where it is:
// under one of the read-only system paths.
func (e *Executor) executable(p string) bool {
	for _, ro := range e.iso.readOnly() {
		if rel, err := filepath.Rel(ro, p); err == nil && filepath.IsLocal(rel) {
			return true
		}
	}
	return false
}

// install copies the program at p to DataDir/bin (root's, 0755, written
// to a temporary file and renamed, so a probe never runs half a copy) and
// returns where it is.
func (e *Executor) install(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("install %s for the sandbox: %w", p, err)
	}
	bin := filepath.Join(e.root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(bin, filepath.Base(p))
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, b) {
		return dst, nil
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// bounded keeps the first probeOutputBytes written to it.
type bounded struct{ bytes.Buffer }

func (b *bounded) Write(p []byte) (int, error) {
	if room := probeOutputBytes - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
