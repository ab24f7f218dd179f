package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

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
	c, err := openConn(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	err = c.transact("BEGIN", func() error {
		tx := &tx{c: c}
		counts, err := tx.PublicCounts(ctx, "main")
		if err != nil {
			return err
		}
		if len(counts) == 0 {
			return fmt.Errorf("no public counts")
		}
		if _, err := tx.PublicLapsedLeases(ctx, "main", queues, publicNow); err != nil {
			return err
		}
		if _, err := tx.PublicOldestReady(ctx, "main", queues, publicNow); err != nil {
			return err
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
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.stmts {
		vmSteps += int64(s.Status(sqlite3.STMTSTATUS_VM_STEP, false))
		fullScan += int64(s.Status(sqlite3.STMTSTATUS_FULLSCAN_STEP, false))
	}
	return vmSteps, fullScan
}

// §10 beyond the original: a refresh costs O(queues), not O(tasks). The
// engine's step count for the refresh reads is the same with 50 public
// tasks (550 in all) as with 500 (5,500 in all).
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

// The triggers' rows are real writes, and the meter counts them; private
// tasks pay nothing for them, and a heartbeat (no change of state) nothing.
func TestPublicTriggersAreMetered(t *testing.T) {
	ctx := context.Background()
	m := meter.New(tessera.NewManualClock(publicNow))
	path := filepath.Join(t.TempDir(), "tessera.db")
	db, err := Open(ctx, path, m)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	perTaskRow := 1 + db.indexes["tasks"]
	written := func(fn func(store.Tx) error) int64 {
		before := m.Today().RowsWritten
		if err := db.Update(ctx, fn); err != nil {
			t.Fatal(err)
		}
		return m.Today().RowsWritten - before
	}
	pub := publicFixture("01A", "default", tessera.StateReady, true)
	priv := publicFixture("01B", "default", tessera.StateReady, false)
	cases := []struct {
		name string
		want int64
		fn   func(store.Tx) error
	}{
		{"private enqueue", perTaskRow, func(tx store.Tx) error { return tx.TaskInsert(ctx, priv) }},
		// count, board list, ready entry
		{"public enqueue", perTaskRow + 3, func(tx store.Tx) error { return tx.TaskInsert(ctx, pub) }},
		// count out and in, ready entry out
		{"public claim", perTaskRow + 3, func(tx store.Tx) error {
			pub.State = tessera.StateLeased
			pub.Lease = &tessera.Lease{RunID: "r", Holder: "p", TokenHash: []byte{1}, Seconds: 60, ExpiresAt: publicNow.Add(time.Minute)}
			return tx.TaskUpdate(ctx, pub)
		}},
		{"public heartbeat", perTaskRow, func(tx store.Tx) error {
			pub.Lease.ExpiresAt = publicNow.Add(2 * time.Minute)
			return tx.TaskUpdate(ctx, pub)
		}},
		{"public submit", perTaskRow + 2, func(tx store.Tx) error {
			pub.State, pub.Lease = tessera.StateSucceeded, nil
			return tx.TaskUpdate(ctx, pub)
		}},
		{"private claim", perTaskRow, func(tx store.Tx) error {
			priv.State = tessera.StateLeased
			return tx.TaskUpdate(ctx, priv)
		}},
	}
	for _, tc := range cases {
		if got := written(tc.fn); got != tc.want {
			t.Errorf("%s: %d rows written, want %d", tc.name, got, tc.want)
		}
	}
}
