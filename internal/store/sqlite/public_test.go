package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

var publicNow = time.UnixMilli(1893456000000).UTC()

func publicFixture(id, queue, state string, public bool) *tessera.Task {
	t := &tessera.Task{Namespace: "main", ID: id, Queue: queue, Title: "t " + id, Brief: "a long brief", Labels: []string{},
		Payload: []byte(`{"big":"payload"}`), MaxAttempts: 3, State: state, RunAt: publicNow.Add(-time.Minute),
		Public: public, CreatedBy: "p", CreatedAt: publicNow, UpdatedAt: publicNow}
	if state == tessera.StateLeased {
		t.Lease = &tessera.Lease{RunID: "r" + id, Holder: "p", TokenHash: []byte{1}, Seconds: 60,
			ExpiresAt: publicNow.Add(-time.Second)}
	}
	return t
}

// refreshSteps fills a store with n public tasks (and ten times as many
// private ones in the same queues), then runs the reads of a health and
// board refresh on a fresh connection and returns the virtual machine
// steps they took and the rows they stepped through in full scans: the
// engine's own measure of work, which also counts index entries visited
// that the meter (rows returned) does not see.
func refreshSteps(t *testing.T, n int) (vmSteps, fullScan int64) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tessera.db")
	db, err := Open(ctx, path, meter.New(tessera.NewManualClock(publicNow)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	queues := []string{"default", "gpu", "cpu"}
	err = db.Update(ctx, func(stx store.Tx) error {
		for i := range n * 11 {
			state := tessera.StateReady
			switch {
			case i < 6:
				state = tessera.StateLeased // a fixed number of leases, as many workers
			case i%5 == 0:
				state = tessera.StateSucceeded
			}
			if err := stx.TaskInsert(ctx, publicFixture(fmt.Sprintf("%08d", i), queues[i%3], state, i%11 == 0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return readSteps(t, path, func(tx *tx) error {
		for _, v := range []store.Visibility{store.PublicOnly, store.AllTasks} {
			counts, err := tx.TaskStateCounts(ctx, "main", v)
			if err != nil {
				return err
			}
			if len(counts) == 0 {
				return fmt.Errorf("no counts")
			}
			if _, err := tx.TaskLapsedCounts(ctx, "main", queues, publicNow, v); err != nil {
				return err
			}
			if _, err := tx.TaskOldestReady(ctx, "main", queues, publicNow, v); err != nil {
				return err
			}
		}
		tasks, err := tx.PublicTasks(ctx, "main", 20)
		if err != nil {
			return err
		}
		if len(tasks) != 20 {
			return fmt.Errorf("board tasks: %d", len(tasks))
		}
		_, err = tx.AuditPublicEvents(ctx, "main", publicNow.Add(-24*time.Hour), "", 20)
		return err
	})
}

// §10 beyond the original: a refresh costs O(queues), not O(tasks). The
// engine's step count for the refresh reads — of the public tasks and of
// all of them, as /v1/counts and the metrics read — is the same with 50
// public tasks (550 in all) as with 500 (5,500 in all).
func TestPublicRefreshWorkDoesNotGrowWithTasks(t *testing.T) {
	small, smallScan := refreshSteps(t, 50)
	large, largeScan := refreshSteps(t, 500)
	t.Logf("refresh reads: %d VM steps at 50 public tasks, %d at 500; full-scan steps %d and %d", small, large, smallScan, largeScan)
	if smallScan != 0 || largeScan != 0 {
		t.Errorf("a refresh read scanned a table: %d and %d full-scan steps", smallScan, largeScan)
	}
	if large != small {
		t.Errorf("refresh work grew with the tasks: %d VM steps at 50 public tasks, %d at 500", small, large)
	}
}

// Every row a task change writes is metered, triggers' rows included, and
// an index costs an entry only when the change touches it: the task row,
// plus one per index whose columns changed (a partial "IS NOT NULL" index
// only for rows it holds), plus the counts and the ready entry the
// triggers keep, and the board list for a public task. Public and private
// tasks cost the same past their enqueue.
func TestTaskWritesAreMeteredExactly(t *testing.T) {
	ctx := context.Background()
	m := meter.New(tessera.NewManualClock(publicNow))
	path := filepath.Join(t.TempDir(), "tessera.db")
	db, err := Open(ctx, path, m)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	written := func(fn func(store.Tx) error) int64 {
		before := m.Today().RowsWritten
		if err := db.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
		return m.Today().RowsWritten - before
	}
	pub := publicFixture("01A", "default", tessera.StateReady, true)
	priv := publicFixture("01B", "default", tessera.StateReady, false)
	// change applies f to the task as stored and writes it over that.
	change := func(task *tessera.Task, f func(*tessera.Task)) func(store.Tx) error {
		return func(tx store.Tx) error {
			before, err := tx.TaskGet(ctx, task.Namespace, task.ID)
			if err != nil {
				return err
			}
			after := before.Copy()
			f(after)
			return tx.TaskUpdate(ctx, before, after)
		}
	}
	lease := func(task *tessera.Task) {
		task.State = tessera.StateLeased
		task.Lease = &tessera.Lease{RunID: "r", Holder: "p", TokenHash: []byte{1}, Seconds: 60, ExpiresAt: publicNow.Add(time.Minute)}
	}
	cases := []struct {
		name string
		want int64
		fn   func(store.Tx) error
	}{
		// task + claim index; the queue's count row (ready has no column
		// of its own)
		{"private enqueue", 2 + 1, func(tx store.Tx) error { return tx.TaskInsert(ctx, priv) }},
		// and the board list and the public ready entry
		{"public enqueue", 2 + 1 + 1 + 1, func(tx store.Tx) error { return tx.TaskInsert(ctx, pub) }},
		// task + its moved claim-index entry; leased counted in its
		// queue's row (ready is implied); a public task's ready entry out
		{"public claim", 2 + 1 + 1, change(pub, lease)},
		{"private claim", 2 + 1, change(priv, lease)},
		// task + its claim-index entry, moved by the expiry; nothing else
		{"public heartbeat", 2, change(pub, func(t *tessera.Task) { t.Lease.ExpiresAt = publicNow.Add(2 * time.Minute) })},
		// a note numbers on the task row, in no index; and the event
		{"event", 1 + 1, func(tx store.Tx) error {
			return tx.TaskEventAppend(ctx, "main", "01A", &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: publicNow})
		}},
		// task + its claim-index entry, moved to the finished; leased
		// out and succeeded in, one counts row
		{"public submit", 2 + 1, change(pub, func(t *tessera.Task) {
			t.State, t.Lease, t.FinishedAt = tessera.StateSucceeded, nil, &publicNow
		})},
	}
	for _, tc := range cases {
		if got := written(tc.fn); got != tc.want {
			t.Errorf("%s: %d rows written, want %d", tc.name, got, tc.want)
		}
	}
}
