package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/store/storetest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

var now = time.UnixMilli(1893456000000).UTC()

func newMeter() *meter.Meter { return meter.New(tessera.NewManualClock(now)) }

// openDB opens a store on url with meter m and closes it at cleanup.
func openDB(t testing.TB, url string, m *meter.Meter, opts ...postgres.Option) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url, m, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

// The PostgreSQL backend passes the conformance suite every backend must
// pass, each test on a schema of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openDB(t, pgtest.Schema(t), newMeter())
	})
}

// Two nodes on one schema hear each other's notifications and share the
// meter's ledger.
func TestNodes(t *testing.T) {
	storetest.RunNodes(t, func(t *testing.T) (store.Store, store.Store) {
		url := pgtest.Schema(t)
		return openDB(t, url, newMeter()), openDB(t, url, newMeter())
	})
}
