package qualify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MaxOutputBytes bounds what is kept of a command's stdout and of its
// stderr.
const MaxOutputBytes = 64 << 10

// Result is what one command did.
type Result struct {
	Stdout, Stderr []byte
	// Exit is the exit status; nil when it did not run to its end.
	Exit *int
	// Err says why it did not run or finish: ErrNotFound, a timeout.
	Err      error
	Duration time.Duration
}

// ErrNotFound: the program is not installed.
var ErrNotFound = errors.New("not found")

// Runner runs a qualification command on this machine.
type Runner interface {
	Run(ctx context.Context, argv []string, timeout time.Duration) Result
}

// Exec runs commands as processes: no shell, a minimal environment, the
// output bounded, killed at the timeout.
type Exec struct{}

// limited keeps the first MaxOutputBytes written and drops the rest.
type limited struct{ bytes.Buffer }

func (l *limited) Write(p []byte) (int, error) {
	if room := MaxOutputBytes - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// TrustedDirs are where the qualification commands are looked for: the
// system's, never the server's PATH (a directory a user may write could
// hold an nvidia-smi that says whatever it likes).
var TrustedDirs = []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin"}

// lookTrusted finds an executable named name in TrustedDirs.
func lookTrusted(name string) (string, error) {
	if strings.ContainsRune(name, '/') {
		return "", ErrNotFound
	}
	for _, d := range TrustedDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNotFound
}

// Run implements Runner.
func (Exec) Run(ctx context.Context, argv []string, timeout time.Duration) Result {
	path, err := lookTrusted(argv[0])
	if err != nil {
		return Result{Err: ErrNotFound}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL=C"}
	var out, errOut limited
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	r := Result{Stdout: out.Bytes(), Stderr: errOut.Bytes(), Duration: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.Err = errors.New("timed out after " + timeout.String())
	case errors.As(err, &ee) && ee.Exited():
		code := ee.ExitCode()
		r.Exit = &code
	case err != nil:
		r.Err = err
	default:
		code := 0
		r.Exit = &code
	}
	return r
}
