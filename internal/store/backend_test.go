package store

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/gpufleet/gpufleet/internal/store/pgtest"
)

// backend is the store the tests run against. TestMain runs every test on
// SQLite, then again on PostgreSQL (pgtest): one conformance suite for both
// stores. Tests about the SQLite file itself call sqliteOnly.
var backend = "sqlite"

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && os.Getenv("GPUFLEET_STORE_BACKENDS") != "sqlite" {
		if _, err := pgtest.Server(); err == nil || os.Getenv("GPUFLEET_REQUIRE_POSTGRES") != "" {
			backend = "postgres"
			fmt.Println("store conformance: the same tests again, on PostgreSQL")
			code = m.Run()
		} else {
			fmt.Println("store conformance: PostgreSQL skipped:", err)
		}
	}
	pgtest.Stop()
	os.Exit(code)
}

// pgDBs maps the SQLite paths tests give to their PostgreSQL databases, so
// that a test reopening a path reopens the same database.
var pgDBs sync.Map

// target is where a test's store at path lives on the current backend.
func target(t testing.TB, path string) string {
	t.Helper()
	if backend != "postgres" {
		return path
	}
	if u, ok := pgDBs.Load(path); ok {
		return u.(string)
	}
	u := pgtest.DB(t)
	pgDBs.Store(path, u)
	return u
}

// sqliteOnly skips t on other backends: it is about SQLite's file.
func sqliteOnly(t testing.TB) {
	t.Helper()
	if backend != "sqlite" {
		t.Skip("about the SQLite file")
	}
}
