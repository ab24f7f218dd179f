package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The meter's index counts come from the migrations' text; they must be
// what SQLite actually built, or every row written is miscounted.
func TestIndexCountsMatchSchema(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), meter.New(tessera.SystemClock{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	actual := map[string]int64{}
	err = db.View(context.Background(), func(st store.Tx) error {
		return st.(*tx).c.query(`SELECT tbl_name, count(*) FROM sqlite_schema WHERE type = 'index' GROUP BY tbl_name`, nil,
			func(s *sqlite3.Stmt) error {
				actual[s.ColumnText(0)] = s.ColumnInt64(1)
				return nil
			})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(actual) == 0 {
		t.Fatal("no indexes found: the query is wrong")
	}
	for table, n := range actual {
		if db.indexes[table] != n {
			t.Errorf("table %s: schema has %d indexes, migrations parsed as %d", table, n, db.indexes[table])
		}
	}
	for table, n := range db.indexes {
		if actual[table] != n {
			t.Errorf("table %s: parsed %d indexes, schema has %d", table, n, actual[table])
		}
	}
}
