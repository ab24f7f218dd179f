package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func spentMeter(t *testing.T) (*meter.Meter, *tessera.ManualClock) {
	t.Helper()
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC))
	m := meter.New(clock)
	if err := m.SetAllowance(context.Background(), meter.Allowance{RowsWrittenPerDay: 1}); err != nil {
		t.Fatal(err)
	}
	m.Add(context.Background(), 1, 0)
	return m, clock
}

func isQuota(err error) bool { return tessera.ErrorCode(err) == tessera.CodeStorageQuotaExhausted }

// A store that lacks its schema cannot be created while writes are
// refused, and nothing is created trying.
func TestOpenRefusedWithoutSchema(t *testing.T) {
	m, _ := spentMeter(t)
	path := filepath.Join(t.TempDir(), "t.db")
	_, err := Open(context.Background(), path, m)
	if !isQuota(err) {
		t.Fatalf("open of a new store while refusing: %v", err)
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("the refused open created %s", path)
	}
}

// An up-to-date store opens read-only while writes are refused: reads work,
// and every write-capable statement is refused, even ones that would
// change nothing.
func TestRefusalInsideOperations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := Open(ctx, path, meter.New(tessera.SystemClock{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(tx store.Tx) error { _, err := tx.NamespaceEnsure(ctx, "main", time.Now()); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	m, _ := spentMeter(t)
	db, err = Open(ctx, path, m)
	if err != nil {
		t.Fatalf("cold start of an up-to-date store while refusing: %v", err)
	}
	defer db.Close()
	if err := db.View(ctx, func(tx store.Tx) error { _, err := tx.NamespaceList(ctx, "", 100); return err }); err != nil {
		t.Errorf("read while refusing: %v", err)
	}
	statements := map[string]func(*tx) error{
		"insert or ignore of an existing row": func(t *tx) error {
			_, err := t.c.exec(ctx, `INSERT OR IGNORE INTO namespaces (name, created_at) VALUES ('main', 0)`)
			return err
		},
		"create table if not exists of an existing table": func(t *tx) error {
			_, err := t.c.exec(ctx, `CREATE TABLE IF NOT EXISTS namespaces (name TEXT PRIMARY KEY) WITHOUT ROWID`)
			return err
		},
		"drop table if exists of a missing table": func(t *tx) error {
			_, err := t.c.exec(ctx, `DROP TABLE IF EXISTS no_such_table`)
			return err
		},
		"an ordinary insert": func(t *tx) error {
			_, err := t.NamespaceEnsure(ctx, "other", time.Now())
			return err
		},
	}
	for name, stmt := range statements {
		err := db.Update(ctx, func(st store.Tx) error { return stmt(st.(*tx)) })
		if !isQuota(err) {
			t.Errorf("%s: %v, want storage_quota_exhausted", name, err)
		}
	}
	// A read inside a write transaction still works: an empty claim needs
	// no write.
	err = db.Update(ctx, func(st store.Tx) error { _, err := st.NamespaceList(ctx, "", 100); return err })
	if err != nil {
		t.Errorf("read-only work in Update while refusing: %v", err)
	}
	var names []store.Namespace
	_ = db.View(ctx, func(st store.Tx) (err error) { names, err = st.NamespaceList(ctx, "", 100); return err })
	if len(names) != 1 {
		t.Errorf("refused writes left %d namespaces, want 1", len(names))
	}
	// A raised allowance lifts the refusal at once.
	if err := m.SetAllowance(context.Background(), meter.Allowance{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(st store.Tx) error { _, err := st.NamespaceEnsure(ctx, "other", time.Now()); return err }); err != nil {
		t.Errorf("write after the allowance was raised: %v", err)
	}
}
