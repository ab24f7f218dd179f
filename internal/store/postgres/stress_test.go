package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// lose no claim, and leave the sharded counts equal to the tasks' states.
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
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() {
			for r := range rounds {
				at := now.Add(time.Duration(clock.Add(1)) * time.Millisecond)
				run := fmt.Sprintf("run-%d-%02d", c, r)
				err := db.Update(ctx, func(tx store.Tx) error {
					expired, err := tx.TaskLapsed(ctx, "main", "q", at, 32)
					if err != nil {
						return err
					}
					for i := range expired {
						before := &expired[i]
						after := before.Copy()
						after.State, after.Lease, after.UpdatedAt = tessera.StateReady, nil, at
						after.Run.EndedAt, after.Run.Outcome = &at, tessera.OutcomeLapsed
						if err := tx.TaskUpdate(ctx, before, after); err != nil {
							return err // no one else holds a row this transaction locked
						}
					}
					_, err = tx.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "q", Now: at,
						Lease: tessera.Lease{RunID: run, Holder: "p", ExpiresAt: at, Seconds: 0}})
					if errors.Is(err, store.ErrNotFound) {
						return nil
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	// A task's runs are numbered by its attempts, one claim each, and
	// every run but its last was ended (lapsed) before the next claim
	// could take the task: no two live leases, no lost claim.
	err = db.View(ctx, func(tx store.Tx) error {
		for i := range tasks {
			id := fmt.Sprintf("01T%02d", i)
			runs, err := tx.RunList(ctx, "main", id)
			if err != nil {
				return err
			}
			task, err := tx.TaskGet(ctx, "main", id)
			if err != nil {
				return err
			}
			slices.SortFunc(runs, func(a, b tessera.Run) int { return a.Attempt - b.Attempt })
			for k, r := range runs {
				last := k == len(runs)-1
				if r.Attempt != k+1 {
					t.Errorf("task %s: run %s is attempt %d, want %d", id, r.ID, r.Attempt, k+1)
				}
				if !last && r.EndedAt == nil {
					t.Errorf("task %s: run %s (attempt %d) was never ended, yet attempt %d was granted", id, r.ID, r.Attempt, r.Attempt+1)
				}
				if last && (r.EndedAt == nil) != (task.State == tessera.StateLeased) {
					t.Errorf("task %s is %s, its last run %s ended at %v", id, task.State, r.ID, r.EndedAt)
				}
			}
			if task.Attempts != len(runs) {
				t.Errorf("task %s: %d attempts, %d runs", id, task.Attempts, len(runs))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

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
