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
//
// Test support only. pgtest imports pgx (and the standard library).
package pgtest
