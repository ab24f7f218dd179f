package postgres

import (
	"os"
	"testing"

	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/store/storetest"
)

// A schema written before issue 28 (version 7) keeps its tasks' counts,
// ready entries and runs through the migrations that reshaped them
// (storetest.CheckUpgraded).
func TestUpgradeKeepsCountsReadyAndRuns(t *testing.T) {
	url := pgtest.Schema(t)
	files, err := sqlschema.Migrations(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files[:7] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pgtest.SQL(t, url, string(b))
	}
	pgtest.SQL(t, url, metaTable+`; INSERT INTO tessera_meta (schema_version) VALUES (7);`+storetest.PreIssue28Rows("true", "false", `'\x01'`))
	storetest.CheckUpgraded(t, open(t, url, newMeter()))
}
