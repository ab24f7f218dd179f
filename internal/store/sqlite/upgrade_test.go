package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/store/storetest"
)

// A store written before issue 28 (schema version 8) keeps its tasks'
// counts, ready entries and runs through the migrations that reshaped
// them (storetest.CheckUpgraded).
func TestUpgradeKeepsCountsReadyAndRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tessera.db")
	c, err := sqlite3.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	files, err := sqlschema.Migrations(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files[:8] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if err := c.Exec("PRAGMA user_version = 8;" + storetest.PreIssue28Rows("1", "0", "x'01'")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.CheckUpgraded(t, openDB(t, path, newMeter()))
}
