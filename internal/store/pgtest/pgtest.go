package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	once     sync.Once
	baseURL  string // a database of the server, to create others from
	startErr error
	shared   *Instance // the server started for DB, if any
)

// DB returns the URL of a new, empty database, dropped when t ends; or skips
// t (fails it under GPUFLEET_REQUIRE_POSTGRES) when no PostgreSQL can be
// found.
func DB(t testing.TB) string {
	t.Helper()
	base, err := Server()
	if err != nil {
		if os.Getenv("GPUFLEET_REQUIRE_POSTGRES") != "" {
			t.Fatalf("PostgreSQL required (GPUFLEET_REQUIRE_POSTGRES): %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	return newDatabase(t, base)
}

// DB returns the URL of a new, empty database on the server, dropped when t
// ends.
func (in *Instance) DB(t testing.TB) string {
	t.Helper()
	return newDatabase(t, in.URL)
}

// newDatabase makes a new, empty database on the server of base (a URL),
// dropped when t ends, and returns its URL.
func newDatabase(t testing.TB, base string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "gpufleet_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to the test PostgreSQL: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Server returns the URL of the server's first database, starting the
// server the first time when GPUFLEET_TEST_POSTGRES does not name one.
func Server() (string, error) {
	once.Do(func() {
		if u := os.Getenv("GPUFLEET_TEST_POSTGRES"); u != "" {
			baseURL = u
			return
		}
		baseURL, startErr = start()
	})
	return baseURL, startErr
}

// Stop stops the server this package started, if any, and removes its
// files. TestMain calls it after m.Run.
func Stop() {
	if shared == nil {
		return
	}
	shared.stop()
	os.RemoveAll(shared.dir)
	shared = nil
}

// Main runs m and stops the server afterwards; a test package's TestMain.
func Main(m interface{ Run() int }) int {
	code := m.Run()
	Stop()
	return code
}

// Binaries finds a directory holding initdb and postgres.
func Binaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	dirs = append(dirs, "/usr/local/bin", "/usr/local/pgsql/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // the newest version first
		d := dirs[i]
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb and postgres in PATH, /usr/lib/postgresql/*/bin or /usr/local/bin (Debian: apt-get install postgresql)")
}

func start() (string, error) {
	in, err := launch()
	if err != nil {
		return "", err
	}
	shared = in
	return in.URL, nil
}

// Instance is a PostgreSQL server of one test's own, which it may restart.
type Instance struct {
	URL  string // its postgres database
	dir  string
	bin  string
	port int
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan struct{}
	// durable: the server makes each commit durable (fsync and
	// synchronous_commit on), as a deployment does; the tests' servers
	// run with fsync off, for speed.
	durable bool
}

// Private starts a server for t alone (stopped at its end): for tests that
// restart the database under load. It skips or fails as DB does when no
// binaries are found.
func Private(t testing.TB) *Instance {
	t.Helper()
	in, err := launch()
	if err != nil {
		if os.Getenv("GPUFLEET_REQUIRE_POSTGRES") != "" {
			t.Fatalf("PostgreSQL required (GPUFLEET_REQUIRE_POSTGRES): %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	t.Cleanup(func() { in.stop(); os.RemoveAll(in.dir) })
	return in
}

// Durable starts a server for t alone (stopped at its end) that makes each
// commit durable before it answers, as a deployment does: fsync and
// synchronous_commit on, the other settings PostgreSQL's defaults. It is
// for benchmarks, which must measure what a deployment gets, and it skips
// or fails as DB does when no binaries are found. Its URL names its
// postgres database; CPU reports what its processes used.
func Durable(t testing.TB) *Instance {
	t.Helper()
	in, err := launchWith(true)
	if err != nil {
		if os.Getenv("GPUFLEET_REQUIRE_POSTGRES") != "" {
			t.Fatalf("PostgreSQL required (GPUFLEET_REQUIRE_POSTGRES): %v", err)
		}
		t.Skipf("no PostgreSQL: %v", err)
	}
	t.Cleanup(func() { in.stop(); os.RemoveAll(in.dir) })
	return in
}

// CPU is the CPU time, user and system, the server's processes have used
// so far: the postmaster and its children running (every backend and
// helper is its child, each in a session of its own), and the children
// that have ended, which the postmaster reaped. It reads /proc, so it works on Linux only, and
// counts in the kernel's clock ticks (10 ms on most systems): measure
// spans of seconds.
func (in *Instance) CPU() (time.Duration, error) {
	if in.cmd == nil || in.cmd.Process == nil {
		return 0, errors.New("the server is not running")
	}
	pg := in.cmd.Process.Pid
	st, err := procStat(pg)
	if err != nil {
		return 0, err
	}
	ticks := st.utime + st.stime + st.cutime + st.cstime
	for _, pid := range children(pg) {
		if st, err := procStat(pid); err == nil { // else gone since the listing
			ticks += st.utime + st.stime
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is the unit of /proc's CPU times (USER_HZ), 100 on Linux.
const clockTicks = 100

type stat struct {
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads the parent and the CPU times of process pid from
// /proc/pid/stat (proc(5): fields 4 and 14 to 17).
func procStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:])) // from field 3, the state
	if len(f) < 15 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	num := func(field int) int64 { n, _ := strconv.ParseInt(f[field-3], 10, 64); return n }
	return stat{ppid: int(num(4)), utime: num(14), stime: num(15), cutime: num(16), cstime: num(17)}, nil
}

// Restart stops the server (fast shutdown: connections are cut) and starts
// it again on the same files and port, waiting until it answers.
func (in *Instance) Restart() error {
	in.stop()
	return in.run()
}

// Kill stops the server at once (SIGKILL of the postmaster and its
// children); Start starts it again.
//
// Every backend and helper runs in a session of its own (PostgreSQL's
// children call setsid), so the postmaster's process group is the
// postmaster alone: its children are found by their parent and killed with
// it, as a crash of the machine would stop them. (A backend left running
// holds the shared memory, and the next start waits for it to notice its
// postmaster gone.)
func (in *Instance) Kill() {
	if in.cmd != nil && in.cmd.Process != nil {
		pg := in.cmd.Process.Pid
		kids := children(pg)
		syscall.Kill(-pg, syscall.SIGKILL)
		for _, pid := range kids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-in.done
	}
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range procs {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procStat(p); err == nil && st.ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// Start starts a stopped server again.
func (in *Instance) Start() error { return in.run() }

func (in *Instance) stop() {
	if in.cmd == nil || in.cmd.Process == nil {
		return
	}
	select {
	case <-in.done:
		return
	default:
	}
	in.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-in.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
		<-in.done
	}
}

func launch() (*Instance, error) { return launchWith(false) }

func launchWith(durable bool) (*Instance, error) {
	bin, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gpufleet-pgtest-")
	if err != nil {
		return nil, err
	}
	in := &Instance{dir: dir, bin: bin, durable: durable}
	if os.Getuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("running as root and no user nobody to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		in.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if in.port, err = freePort(); err != nil {
		return nil, err
	}
	in.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", in.port)
	return in, in.run()
}

func (in *Instance) run() error {
	args := []string{"-D", filepath.Join(in.dir, "data"), "-p", strconv.Itoa(in.port), "-k", in.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300"}
	if in.durable {
		args = append(args, "-c", "fsync=on", "-c", "synchronous_commit=on")
	} else {
		args = append(args, "-c", "fsync=off", "-c", "shared_buffers=64MB")
	}
	pg := exec.Command(filepath.Join(in.bin, "postgres"), args...)
	pg.SysProcAttr = &syscall.SysProcAttr{Credential: in.cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	pg.Dir = in.dir
	logf, err := os.OpenFile(filepath.Join(in.dir, "postgres.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	pg.Stdout, pg.Stderr = logf, logf
	if err := pg.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	in.cmd, in.done = pg, make(chan struct{})
	go func() { pg.Wait(); logf.Close(); close(in.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, in.URL)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(in.dir, "postgres.log"))
			in.stop()
			return fmt.Errorf("postgres did not accept connections in 30 s: %v\n%s", err, strings.TrimSpace(string(log)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
