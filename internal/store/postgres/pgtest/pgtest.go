// Package pgtest gives tests a PostgreSQL schema of their own: any
// package's tests that run against the PostgreSQL store (the store's own,
// the HTTP suite, several nodes) get a fresh, empty schema per test, so
// they run in parallel on one server without seeing each other.
//
// The server is TESSERA_TEST_POSTGRES (a postgres:// URL), by default the
// local one `make test` starts: postgres://postgres@127.0.0.1:5432/test.
// When it cannot be reached the test fails, saying how to start it: a
// backend's tests are not optional.
package pgtest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store/postgres/pgschema"
	"github.com/tessera-dev/tessera/internal/testbin"
)

// DefaultURL is the server the tests use unless TESSERA_TEST_POSTGRES names
// another.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test server's URL.
func URL() string {
	if u := os.Getenv("TESSERA_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultURL
}

// reach remembers the first attempt to reach the server, so a missing
// server costs one connect timeout per test binary, not one per test.
var reach struct {
	once sync.Once
	err  error
}

// Schema creates a schema t_<random> on the test server, drops it (with
// everything in it) when the test ends, and returns the server's URL with
// search_path set to it: a store opened on that URL lives in the schema.
// Close stores on it before the test's end (t.Cleanup does: cleanups run
// last-registered first, so a store opened after Schema closes before the
// schema is dropped).
func Schema(t testing.TB) string {
	t.Helper()
	testbin.Needs(t, "PostgreSQL")
	base := URL()
	reach.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
		}
		reach.err = err
	})
	if reach.err != nil {
		t.Fatalf("PostgreSQL at %s is unreachable (%v): `make test` starts the local one (scripts/test-setup), or point TESSERA_TEST_POSTGRES at another", base, reach.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, drop, err := pgschema.New(ctx, base, "t_")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return u
}

// SQL runs one statement on a connection of its own to url (a schema's
// URL, from Schema) and scans its row into dest; with no dest it only
// executes it. Tests use it to look at or set up what the store under
// test does not show.
func SQL(t testing.TB, url, query string, dest ...any) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if len(dest) == 0 {
		_, err = c.Exec(ctx, query)
	} else {
		err = c.QueryRow(ctx, query).Scan(dest...)
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
