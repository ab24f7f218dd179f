package sqlite_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlite"
	"github.com/tessera-dev/tessera/internal/store/storetest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

var now = time.UnixMilli(1893456000000).UTC()

// openDB opens a store at path with meter m and closes it at cleanup.
func openDB(t *testing.T, path string, m *meter.Meter) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path, m)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

func newMeter() *meter.Meter { return meter.New(tessera.NewManualClock(now)) }

// The SQLite backend passes the conformance suite every backend must pass.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openDB(t, filepath.Join(t.TempDir(), "tessera.db"), newMeter())
	})
}

func task(id string) *tessera.Task {
	return &tessera.Task{Namespace: "main", ID: id, Queue: "default", Title: "t", Labels: []string{},
		MaxAttempts: 3, State: tessera.StateReady, RunAt: now, CreatedBy: "p", CreatedAt: now, UpdatedAt: now}
}

// indexCount reads from the file's own schema how many indexes table has.
func indexCount(t *testing.T, path, table string) int64 {
	t.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, _, err := c.Prepare(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?`)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.BindText(1, table); err != nil {
		t.Fatal(err)
	}
	if !s.Step() {
		t.Fatalf("count indexes: %v", s.Err())
	}
	return s.ColumnInt64(0)
}

// delta runs fn and returns the rows the meter counted while it ran.
func delta(m *meter.Meter, fn func()) (written, read int64) {
	before := m.Today()
	fn()
	after := m.Today()
	return after.RowsWritten - before.RowsWritten, after.RowsRead - before.RowsRead
}

// §14: a row written costs one entry plus one per index entry it touches,
// trigger-written rows included; rows read are the rows returned.
// (TestTaskWritesAreMeteredExactly walks every task change.)
func TestMeterCountsRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tessera.db")
	m := newMeter()
	db := openDB(t, path, m)
	ctx, usage := meter.WithUsage(context.Background())

	t.Run("insert", func(t *testing.T) {
		w, r := delta(m, func() {
			if err := db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, task("01A")) }); err != nil {
				t.Fatal(err)
			}
		})
		// The task and its claim-index entry, and its queue's count.
		if w != 3 || r != 0 {
			t.Errorf("one task inserted: written %d read %d, want written 3 read 0", w, r)
		}
		if usage.Written.Load() != w || usage.Read.Load() != r {
			t.Errorf("the request's usage is written %d read %d, the day's delta %d, %d",
				usage.Written.Load(), usage.Read.Load(), w, r)
		}
	})

	t.Run("update", func(t *testing.T) {
		w, _ := delta(m, func() {
			err := db.Update(ctx, func(tx store.Tx) error {
				before := task("01A")
				changed := before.Copy()
				changed.State, changed.Attempts = tessera.StateDead, 3
				return tx.TaskUpdate(ctx, before, changed)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		// The task and its moved claim-index entry, dead counted in its
		// queue's one counts row (ready is implied by the others).
		if w != 3 {
			t.Errorf("one task updated: written %d, want 3", w)
		}
	})

	t.Run("rolled back", func(t *testing.T) {
		boom := errors.New("boom")
		w, _ := delta(m, func() {
			err := db.Update(ctx, func(tx store.Tx) error {
				for _, id := range []string{"01X", "01Y"} {
					if err := tx.TaskInsert(ctx, task(id)); err != nil {
						return err
					}
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Fatalf("update: %v", err)
			}
		})
		if w != 0 {
			t.Errorf("a rolled-back update counted %d rows written", w)
		}
	})

	t.Run("event append", func(t *testing.T) {
		w, r := delta(m, func() {
			err := db.Update(ctx, func(tx store.Tx) error {
				return tx.TaskEventAppend(ctx, "main", "01A", &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: now})
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		// The task row's sequence (in no index) and the event; the
		// sequence number returned.
		if w != 2 || r != 1 {
			t.Errorf("one event appended: written %d read %d, want 2, 1", w, r)
		}
	})

	t.Run("reads", func(t *testing.T) {
		if err := db.Update(ctx, func(tx store.Tx) error {
			for _, id := range []string{"01B", "01C"} {
				if err := tx.TaskInsert(ctx, task(id)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			rows int64
			fn   func(store.Tx) error
		}{
			{"list of three", 3, func(tx store.Tx) error {
				_, err := tx.TaskList(ctx, "main", store.TaskFilter{Limit: 10})
				return err
			}},
			{"list limited to two", 2, func(tx store.Tx) error {
				_, err := tx.TaskList(ctx, "main", store.TaskFilter{Limit: 2})
				return err
			}},
			{"get", 1, func(tx store.Tx) error { _, err := tx.TaskGet(ctx, "main", "01B"); return err }},
			{"get of a missing task", 0, func(tx store.Tx) error {
				if _, err := tx.TaskGet(ctx, "main", "01Z"); !errors.Is(err, store.ErrNotFound) {
					return err
				}
				return nil
			}},
		}
		for _, tc := range cases {
			w, r := delta(m, func() {
				if err := db.View(ctx, tc.fn); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
			})
			if w != 0 || r != tc.rows {
				t.Errorf("%s: written %d read %d, want 0, %d", tc.name, w, r, tc.rows)
			}
		}
	})
}

// userVersion reads PRAGMA user_version from a closed database's header
// (big-endian at offset 60), without opening a connection that could write.
func userVersion(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 100 {
		t.Fatalf("%s is %d bytes, shorter than a database header", path, len(b))
	}
	return binary.BigEndian.Uint32(b[60:64])
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	return len(files)
}

// §2: opening an up-to-date store writes nothing — no metered row, no byte
// of the file, no change of the schema version.
func TestColdStartWritesNothing(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "tessera.db")
	first, err := sqlite.Open(context.Background(), path, newMeter())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Update(context.Background(), func(tx store.Tx) error { return tx.TaskInsert(ctx, task("01A")) }); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing the last connection checkpoints the WAL into the file.
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("after close the WAL still holds %d bytes", fi.Size())
	}
	sum, version := fileSum(t, path), userVersion(t, path)
	if want := migrationCount(t); version != uint32(want) {
		t.Fatalf("user_version = %d, want %d", version, want)
	}

	m := newMeter()
	second, err := sqlite.Open(context.Background(), path, m)
	if err != nil {
		t.Fatal(err)
	}
	// Before close, too: no transaction was committed, not even one that
	// rewrites a page with the bytes it already had.
	if n := walCommits(t, path+"-wal"); n != 0 {
		t.Errorf("opening an up-to-date store committed %d transactions", n)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	today := m.Today()
	if today.RowsWritten != 0 {
		t.Errorf("cold start counted %d rows written", today.RowsWritten)
	}
	if today.RowsRead == 0 {
		t.Errorf("cold start counted no rows read: the meter did not see the version check")
	}
	if v := userVersion(t, path); v != version {
		t.Errorf("user_version changed from %d to %d", version, v)
	}
	if fileSum(t, path) != sum {
		t.Errorf("the database file changed on a cold start of an up-to-date store")
	}

	// The data written before is still there.
	db := openDB(t, path, newMeter())
	if err := db.View(context.Background(), func(tx store.Tx) error { _, err := tx.TaskGet(ctx, "main", "01A"); return err }); err != nil {
		t.Errorf("task after reopen: %v", err)
	}
}

// walCommits counts the commit frames in a WAL file: frames whose header
// carries the database size after commit, and whose salt matches the WAL's.
func walCommits(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	const walHeader, frameHeader = 32, 24
	if len(b) < walHeader {
		return 0
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:12]))
	commits := 0
	for off := walHeader; off+frameHeader+pageSize <= len(b); off += frameHeader + pageSize {
		if !bytes.Equal(b[off+8:off+16], b[16:24]) {
			break // a frame left over from before the last reset
		}
		if binary.BigEndian.Uint32(b[off+4:off+8]) != 0 {
			commits++
		}
	}
	return commits
}

// §2: a new store gets its whole schema in one transaction, so a crash
// leaves either no schema or all of it.
func TestNewStoreSchemaInOneTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tessera.db")
	db, err := sqlite.Open(context.Background(), path, newMeter())
	if err != nil {
		t.Fatal(err)
	}
	// Nothing has been checkpointed yet: every commit so far is in the WAL.
	commits := walCommits(t, path+"-wal")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if commits != 1 {
		t.Errorf("opening a new store committed %d transactions, want 1", commits)
	}
	if got, want := userVersion(t, path), migrationCount(t); got != uint32(want) {
		t.Errorf("user_version = %d after creating the store, want %d (one per migration file)", got, want)
	}
	if n := indexCount(t, path, "tasks"); n < 1 {
		t.Errorf("the new store's tasks table has %d indexes", n)
	}
}

// A store migrated by a newer binary is refused, not opened blind.
func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tessera.db")
	db, err := sqlite.Open(context.Background(), path, newMeter())
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(fmt.Sprintf("PRAGMA user_version = %d", migrationCount(t)+1)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := sqlite.Open(context.Background(), path, newMeter()); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("opening a newer schema: %v", err)
	}
}
