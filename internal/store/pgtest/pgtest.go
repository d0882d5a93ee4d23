// Package pgtest gives tests a real PostgreSQL database of their own.
//
// The server is, in this order: the one GPUFLEET_TEST_POSTGRES names (a
// connection URL to a database from which databases may be created, as
// .ci/run starts); or one started by this package from the PostgreSQL
// binaries it finds (PATH, /usr/lib/postgresql/*/bin, /usr/local/bin), in a
// temporary directory, on a free port of 127.0.0.1, as the unprivileged user
// nobody when the tests run as root (PostgreSQL refuses to run as root),
// stopped by Stop (call it from TestMain) or, at the latest, when the test
// binary exits. Each DB call makes a fresh database, dropped at the test's
// end, so that tests never see each other's rows.
//
// Without a server and without binaries the tests skip, unless
// GPUFLEET_REQUIRE_POSTGRES is set (CI), where they fail: CI requires
// PostgreSQL as it requires the browser and the API server.
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
	server   *exec.Cmd
	dataDir  string
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
	if server == nil {
		return
	}
	server.Process.Signal(syscall.SIGINT) // fast shutdown
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		server.Process.Kill()
		<-done
	}
	os.RemoveAll(dataDir)
	server = nil
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
	bin, err := Binaries()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "gpufleet-pgtest-")
	if err != nil {
		return "", err
	}
	dataDir = dir
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return "", fmt.Errorf("running as root and no user nobody to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	pg := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=300", "-c", "shared_buffers=64MB")
	pg.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	pg.Dir = dir
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return "", err
	}
	pg.Stdout, pg.Stderr = logf, logf
	if err := pg.Start(); err != nil {
		return "", fmt.Errorf("start postgres: %w", err)
	}
	server = pg
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, u)
		cancel()
		if err == nil {
			c.Close(context.Background())
			return u, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			Stop()
			return "", fmt.Errorf("postgres did not accept connections in 30 s: %v\n%s", err, strings.TrimSpace(string(log)))
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
