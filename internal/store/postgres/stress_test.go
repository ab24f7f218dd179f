package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Claimers that lapse each other's leases as they go — every lease expires
// at once, so each claim first ends up to 32 lapsed ones, through several
// connections and count shards at once — lease no task twice at a time,
// lose none to a deadlock (Update retries), and leave the sharded counts
// equal to the tasks' states.
func TestClaimsAndLapsesKeepCounts(t *testing.T) {
	db := openDB(t, pgtest.Schema(t)+"&pool_max_conns=8", newMeter())
	ctx := context.Background()
	const tasks, claimers, rounds = 40, 8, 25
	err := db.Update(ctx, func(tx store.Tx) error {
		for i := range tasks {
			task := &tessera.Task{Namespace: "main", ID: fmt.Sprintf("01T%02d", i), Queue: "q", Title: "t", Labels: []string{},
				Public: i%2 == 0, MaxAttempts: 1000, State: tessera.StateReady, RunAt: now, CreatedBy: "p", CreatedAt: now, UpdatedAt: now}
			if err := tx.TaskInsert(ctx, task); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64 // each claim a millisecond later than the last
	var mu sync.Mutex
	holder := map[string]string{} // task → run holding it now
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() {
			for r := range rounds {
				at := now.Add(time.Duration(clock.Add(1)) * time.Millisecond)
				run := fmt.Sprintf("run-%d-%d", c, r)
				var lapsed []string
				var claimed *tessera.Task
				err := db.Update(ctx, func(tx store.Tx) error {
					lapsed, claimed = nil, nil
					expired, err := tx.TaskLapsed(ctx, "main", "q", at, 32)
					if err != nil {
						return err
					}
					for i := range expired {
						before := &expired[i]
						after := before.Copy()
						after.State, after.Lease, after.UpdatedAt = tessera.StateReady, nil, at
						if err := tx.TaskUpdate(ctx, before, after); err != nil {
							return err // no one else holds a row this transaction locked
						}
						lapsed = append(lapsed, before.ID)
					}
					claimed, err = tx.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "q", Now: at,
						Lease: tessera.Lease{RunID: run, Holder: "p", ExpiresAt: at, Seconds: 0}})
					if errors.Is(err, store.ErrNotFound) {
						return nil
					}
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range lapsed {
					delete(holder, id)
				}
				if claimed != nil {
					if prev, ok := holder[claimed.ID]; ok {
						t.Errorf("task %s leased to %s while %s held it", claimed.ID, run, prev)
					}
					holder[claimed.ID] = run
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	for _, v := range []store.Visibility{store.AllTasks, store.PublicOnly} {
		counted := map[string]int{}
		listed := map[string]int{}
		err := db.View(ctx, func(tx store.Tx) error {
			rows, err := tx.TaskStateCounts(ctx, "main", v)
			for _, r := range rows {
				if r.Count != 0 {
					counted[r.State] += r.Count
				}
			}
			if err != nil {
				return err
			}
			all, err := tx.TaskList(ctx, "main", store.TaskFilter{Limit: 100})
			for _, task := range all {
				if v == store.AllTasks || task.Public {
					listed[task.State]++
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(counted, listed) {
			t.Errorf("visibility %v: counts %v, the tasks' states %v", v, counted, listed)
		}
	}
}
