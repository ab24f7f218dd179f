package sqlite

import (
	"context"
	"maps"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The meter learns each table's indexes from the schema: every secondary
// index is there, and each partial "WHERE c IS NOT NULL" index knows its
// column, so rows it does not hold cost nothing.
func TestMeterIndexModel(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), meter.New(tessera.SystemClock{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	actual := map[string]int{}
	err = db.View(context.Background(), func(st store.Tx) error {
		return st.(*tx).c.query(context.Background(), `SELECT tbl_name, count(*) FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL GROUP BY tbl_name`, nil,
			func(s *sqlite3.Stmt) error {
				actual[s.ColumnText(0)] = s.ColumnInt(1)
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
		if len(db.indexes[table]) != n {
			t.Errorf("table %s: schema has %d indexes, the meter knows %d", table, n, len(db.indexes[table]))
		}
	}
	partial := map[string]int{}
	for table, ixs := range db.indexes {
		for _, ix := range ixs {
			if ix.notNull >= 0 {
				partial[table]++
			}
		}
	}
	// principals_purge, task_gates_due.
	if want := map[string]int{"principals": 1, "task_gates": 1}; !maps.Equal(partial, want) {
		t.Errorf("partial indexes the meter knows: %v, want %v", partial, want)
	}
}
