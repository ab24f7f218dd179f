package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// finishedTask is the i-th succeeded task of main's queue q: the history
// a claim must not have to walk.
func finishedTask(i int, now time.Time) *tessera.Task {
	return &tessera.Task{Namespace: "main", ID: fmt.Sprintf("00H%08d", i), Queue: "q", Title: "old", Labels: []string{},
		MaxAttempts: 3, Attempts: 1, State: tessera.StateSucceeded, RunAt: now, CreatedBy: "p", CreatedAt: now, UpdatedAt: now, FinishedAt: &now}
}

// tempStore opens a store on a fresh file of the test's, metered by m,
// and closes it when the test ends.
func tempStore(tb testing.TB, m *meter.Meter) *DB {
	tb.Helper()
	return storeAt(tb, filepath.Join(tb.TempDir(), "t.db"), m)
}

// storeAt opens the store at path, metered by m, and closes it when the
// test ends (a test may close it sooner, to open it again).
func storeAt(tb testing.TB, path string, m *meter.Meter) *DB {
	tb.Helper()
	db, err := Open(context.Background(), path, m)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// adminService is a core service over db and the actor of a fresh admin
// key. The caller closes the service before db.
func adminService(tb testing.TB, db *DB, m *meter.Meter, clock tessera.Clock, cfg core.Config) (*core.Service, *auth.Actor) {
	tb.Helper()
	ctx := context.Background()
	authn := auth.NewAuthenticator(db, clock, time.Hour)
	svc := core.New(db, authn, m, clock, cfg)
	key, err := core.CreateAdminKey(ctx, db, clock, "", "admin")
	if err != nil {
		tb.Fatal(err)
	}
	a, err := authn.Authenticate(ctx, key)
	if err != nil {
		tb.Fatal(err)
	}
	return svc, a
}

// readSteps runs fn in a read transaction on a connection of its own to
// the database at path and says how many VM steps, and how many of those
// full-scan steps, its statements took.
func readSteps(tb testing.TB, path string, fn func(*tx) error) (vm, fullScan int64) {
	tb.Helper()
	c, err := openConn(path, true)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.close()
	if err := c.transact("BEGIN", func() error { return fn(&tx{c: c}) }); err != nil {
		tb.Fatal(err)
	}
	for _, s := range c.stmts {
		vm += int64(s.Status(sqlite3.STMTSTATUS_VM_STEP, false))
		fullScan += int64(s.Status(sqlite3.STMTSTATUS_FULLSCAN_STEP, false))
	}
	return vm, fullScan
}
