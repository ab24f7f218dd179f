package storetest

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// claimManyFixture is a batch claim of up to n tasks of queue in ns at
// now, its runs named prefix-0, prefix-1, …, each with its own token hash.
func claimManyFixture(ns, queue string, now time.Time, prefix string, n int) store.TaskClaimMany {
	p := store.TaskClaimMany{Namespace: ns, Queue: queue, Now: now,
		Lease: tessera.Lease{Holder: "p-worker", ExpiresAt: now.Add(time.Minute), Seconds: 60}}
	for i := range n {
		run := fmt.Sprintf("%s-%d", prefix, i)
		p.Runs = append(p.Runs, store.LeaseRun{RunID: run, TokenHash: []byte("hash of " + run)})
	}
	return p
}

// claimMany runs one batch claim in its own transaction.
func claimMany(t *testing.T, s store.Store, p store.TaskClaimMany) []tessera.Task {
	t.Helper()
	var got []tessera.Task
	writeTx(t, s, func(tx store.Tx) (err error) {
		got, err = tx.TaskClaimMany(t.Context(), p)
		return err
	})
	return got
}

// A batch claim grants up to N ready tasks in claim order in one
// operation, each leased as a single claim leases it, with its own run and
// token: N granted when N are ready, the rest when fewer are, none (no
// error) when none is; concurrent batches never share a task.
func testClaimMany(t *testing.T, open Opener) {
	t.Run("GrantsUpToNInClaimOrderEachWithItsOwnLease", func(t *testing.T) {
		s := open(t)
		insertTasks(t, s,
			taskFixture("01A", taskOpts{queue: "q", runAt: at(-time.Minute)}),
			taskFixture("01B", taskOpts{queue: "q", runAt: at(-time.Hour)}),
			taskFixture("01C", taskOpts{queue: "q", priority: 5, runAt: at(-time.Second)}),
			taskFixture("01D", taskOpts{queue: "q", runAt: at(-2 * time.Hour)}),
			taskFixture("01E", taskOpts{queue: "q", runAt: at(time.Hour)}), // not yet
			taskFixture("01F", taskOpts{queue: "other"}),
		)
		p := claimManyFixture("main", "q", epoch, "batch", 3)
		got := claimMany(t, s, p)
		if ids := ids(got); !slices.Equal(ids, []string{"01C", "01D", "01B"}) {
			t.Fatalf("granted %v, want [01C 01D 01B]", ids)
		}
		for i, task := range got {
			want := p.LeaseOf(i)
			want.TaskID = task.ID
			if task.State != tessera.StateLeased || task.Attempts != 1 || !reflect.DeepEqual(task.Lease, &want) {
				t.Errorf("task %d: %s attempt %d lease %+v, want leased, attempt 1, %+v", i, task.State, task.Attempts, task.Lease, want)
			}
			run := &tessera.Run{ID: want.RunID, TaskID: task.ID, Holder: want.Holder, Attempt: 1, StartedAt: epoch}
			if !reflect.DeepEqual(task.Run, run) {
				t.Errorf("task %d's run %+v, want %+v", i, task.Run, run)
			}
			if stored := getTask(t, s, "main", task.ID); !reflect.DeepEqual(stored, &got[i]) {
				t.Errorf("task %s stored:\n got %+v\nwant %+v", task.ID, stored, got[i])
			}
		}
		rest := claimMany(t, s, claimManyFixture("main", "q", epoch, "more", 10))
		if ids := ids(rest); !slices.Equal(ids, []string{"01A"}) {
			t.Errorf("a batch of 10 with one task ready granted %v", ids)
		}
		if none := claimMany(t, s, claimManyFixture("main", "q", epoch, "none", 10)); len(none) != 0 {
			t.Errorf("a batch with none ready granted %v", ids(none))
		}
		if counts := stateCounts(t, s, "main", store.AllTasks)["q"]; counts[tessera.StateLeased] != 4 || counts[tessera.StateReady] != 1 {
			t.Errorf("counts after the batches: %v", counts)
		}
	})

	t.Run("ConcurrentBatchesLeaseEachTaskOnce", func(t *testing.T) {
		claimRace(t, open(t), 60, 8, func(s store.Store, c, i int) (leased []tessera.Task, err error) {
			err = s.Update(t.Context(), func(tx store.Tx) (err error) {
				leased, err = tx.TaskClaimMany(t.Context(), claimManyFixture("main", "q", epoch, fmt.Sprintf("run-%d-%d", c, i), 7))
				return err
			})
			return leased, err
		})
	})
}
