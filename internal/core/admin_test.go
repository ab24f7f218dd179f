package core_test

import (
	"context"
	"sync"
	"testing"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Three nodes started at once on a fresh database with the same
// TESSERA_ADMIN_KEY each open the store and bootstrap it: every one
// starts, and the key exists once — twenty times over (issue 42 saw one
// node exit with "insert key …: already exists" in 3 of 20).
func TestNodesBootstrapTogether(t *testing.T) {
	t.Parallel()
	const seed = "tsk_bootadmin_abcdefghijklmnopqrstuvwxyz012345"
	ctx := context.Background()
	for range 20 {
		url := pgtest.Schema(t)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		dbs := make([]*postgres.DB, 3)
		for i := range 3 {
			wg.Go(func() {
				db, err := postgres.Open(ctx, url, meter.New(tessera.SystemClock{}))
				if err != nil {
					errs[i] = err
					return
				}
				dbs[i] = db
				_, errs[i] = core.Bootstrap(ctx, db, tessera.SystemClock{}, seed)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
		}
		a, err := auth.NewAuthenticator(dbs[0], tessera.SystemClock{}, 0).Authenticate(ctx, seed)
		if err != nil || !a.Scopes().Admin() {
			t.Fatalf("the seeded key: %+v, %v", a, err)
		}
		var principals int
		err = dbs[0].View(ctx, func(tx store.Tx) error {
			list, err := tx.PrincipalList(ctx, "", 10)
			principals = len(list)
			return err
		})
		if err != nil || principals != 1 {
			t.Fatalf("%d principals after three bootstraps (%v), want 1", principals, err)
		}
		for _, db := range dbs {
			db.Close()
		}
	}
}
