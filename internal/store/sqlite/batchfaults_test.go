package sqlite

// Group commit's and durability's edges: a transaction SQLite rolls back
// whole, Close with writes under way, reads that fail, a failed fsync, and
// the storage allowance inside a batch.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// holdCommitter runs a first write that parks the committer inside its
// transaction until the returned release is closed. fn is the first
// write's own work, run after release.
func holdCommitter(t *testing.T, db *DB, fn func(store.Tx) error) (release chan struct{}, first chan error) {
	t.Helper()
	holding := make(chan struct{})
	release, first = make(chan struct{}), make(chan error, 1)
	go func() {
		first <- db.Update(context.Background(), func(tx store.Tx) error {
			close(holding)
			<-release
			return fn(tx)
		})
	}()
	<-holding
	return release, first
}

// queue starts an Update of fn and waits until it sits in the committer's
// queue (n writes queued in all).
func queue(t *testing.T, db *DB, n int, fn func(store.Tx) error) chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- db.Update(context.Background(), fn) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(db.writes) < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(db.writes) != n {
		t.Fatalf("%d writes queued, want %d", len(db.writes), n)
	}
	return done
}

func taskExists(t *testing.T, db *DB, id string) bool {
	t.Helper()
	ctx := context.Background()
	var found bool
	err := db.View(ctx, func(tx store.Tx) error {
		_, err := tx.TaskGet(ctx, "main", id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// SQLite answers some errors by rolling back the whole transaction, not
// the statement: SQLITE_FULL or SQLITE_IOERR from a statement without a
// statement journal (here SQLITE_FULL from max_page_count, as a full disk
// gives it). In a batch's savepoint that undoes every request before it
// too: they are answered 503, and the request behind runs in a new
// transaction and stands.
func TestWholeRollbackFailsTheBatch(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	release, first := holdCommitter(t, db, func(tx store.Tx) error {
		return tx.TaskInsert(ctx, commitTask("01A"))
	})
	full := queue(t, db, 1, func(st store.Tx) error { return fullRecord(ctx, st) })
	behind := queue(t, db, 2, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01C")) })
	close(release)
	errA, errB, errC := <-first, <-full, <-behind
	t.Logf("A: %v\nB: %v\nC: %v", errA, errB, errC)
	if errB == nil {
		t.Fatal("B did not fail")
	}
	if !store.IsUnavailable(errA) || !store.IsUnavailable(errB) {
		t.Errorf("A and B answered %v and %v, want unavailable", errA, errB)
	}
	if taskExists(t, db, "01A") {
		t.Error("A's task is stored, though A was answered an error")
	}
	if errC != nil || !taskExists(t, db, "01C") {
		t.Errorf("C answered %v, stored %v; want it to stand", errC, taskExists(t, db, "01C"))
	}
}

// A write submitted while Close waits for the last fsync, after the
// committer drained its queue, is refused, not queued where nobody reads.
func TestWriteDuringCloseIsAnswered(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	started, release := heldSync(t, db)
	first := make(chan error, 1)
	go func() {
		first <- db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01A")) })
	}()
	<-started // A committed; its fsync is held
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	time.Sleep(100 * time.Millisecond) // the committer has stopped and drained; stopped is not closed yet
	late := make(chan error, 1)
	go func() {
		late <- db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01LATE")) })
	}()
	time.Sleep(100 * time.Millisecond)
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-late:
		t.Logf("late write: %v", err)
		if err == nil {
			t.Error("a write submitted during Close was answered success after the committer stopped")
		}
	case <-time.After(2 * time.Second):
		t.Error("a write submitted during Close was never answered (its goroutine is stuck in submit)")
	}
}

// Every write after Close is refused at once.
func TestWritesAfterCloseAreRefused(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	db.Close()
	const n = 20
	done := make(chan error, n)
	for range n {
		go func() { done <- db.Update(ctx, func(tx store.Tx) error { return nil }) }()
	}
	answered := 0
	timeout := time.After(2 * time.Second)
loop:
	for answered < n {
		select {
		case err := <-done:
			if err == nil {
				t.Error("a write after Close succeeded")
			}
			answered++
		case <-timeout:
			break loop
		}
	}
	if answered != n {
		t.Errorf("%d of %d writes after Close were answered; the rest wait for ever", answered, n)
	}
}

// A read after Close is refused at once, not left waiting for a reader
// connection that will never come back.
func TestViewAfterCloseIsRefused(t *testing.T) {
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := db.View(ctx, func(tx store.Tx) error { return nil })
	t.Logf("View after Close: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if errors.Is(err, context.DeadlineExceeded) {
		t.Error("View after Close waited for its context instead of answering that the store is closed")
	}
}

// A read that fails with an error it drew from what it saw (403 for
// another worker's lease, 404 or 401 after a purge) reveals the snapshot
// as much as an answer does: it too waits for the fsync of what it saw.
func TestFailedReadWaitsForTheFsync(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	started, release := heldSync(t, db)
	first := make(chan error, 1)
	go func() {
		first <- db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01X")) })
	}()
	<-started // committed, visible, not durable
	errSaw := errors.New("forbidden: the task is someone else's")
	read := make(chan error, 1)
	go func() {
		read <- db.View(ctx, func(tx store.Tx) error {
			if _, err := tx.TaskGet(ctx, "main", "01X"); err == nil {
				return errSaw // a decision made on the undurable commit
			}
			return nil
		})
	}()
	select {
	case err := <-read:
		if errors.Is(err, errSaw) {
			t.Errorf("the read answered %q, made on a commit whose fsync has not ended", err)
		}
	case <-time.After(300 * time.Millisecond):
	}
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// After a failed fsync, the batch the committer kept open meanwhile is
// rolled back, not committed on top of writes that may be gone: answered
// 503, it is not there after a restart either.
func TestNoCommitAfterFailedFsync(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	db := storeAt(t, path, meter.New(tessera.SystemClock{}))
	started, fail := make(chan struct{}, 4), make(chan struct{})
	db.dur.syncFile = func(*os.File) error {
		started <- struct{}{}
		<-fail
		return syscall.EIO
	}
	first := make(chan error, 1)
	go func() {
		first <- db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01A")) })
	}()
	<-started
	ran := make(chan struct{})
	behind := make(chan error, 1)
	go func() {
		behind <- db.Update(ctx, func(tx store.Tx) error {
			defer close(ran)
			return tx.TaskInsert(ctx, commitTask("01B"))
		})
	}()
	<-ran // B runs in the next batch while A's fsync is held
	close(fail)
	errA, errB := <-first, <-behind
	t.Logf("A: %v\nB: %v", errA, errB)
	commits := db.CommitStats().Commits
	db.Close()
	db2 := storeAt(t, path, meter.New(tessera.SystemClock{}))
	b := taskExists(t, db2, "01B")
	t.Logf("commits counted: %d; after restart 01B stored: %v", commits, b)
	if errB != nil && b {
		t.Error("B was committed after the store had failed (answered 503, yet stored after the restart)")
	}
}

// Rows a batch has written count against the allowance at once, though
// the meter books them only once the batch is durable: a write behind one
// that spent the allowance is refused.
func TestAllowanceCountsTheBatch(t *testing.T) {
	ctx := context.Background()
	m := meter.New(tessera.SystemClock{})
	if err := m.SetAllowance(ctx, meter.Allowance{RowsWrittenPerDay: 1}); err != nil {
		t.Fatal(err)
	}
	db := tempStore(t, m)
	release, first := holdCommitter(t, db, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01A")) })
	behind := queue(t, db, 1, func(tx store.Tx) error {
		if err := m.WriteRefusal(); err == nil {
			t.Log("B runs after A's rows were written, and the meter does not know of them yet")
		}
		return tx.TaskInsert(ctx, commitTask("01B"))
	})
	close(release)
	errA, errB := <-first, <-behind
	t.Logf("A: %v\nB: %v; meter now refuses: %v", errA, errB, m.WriteRefusal() != nil)
	if errA != nil {
		t.Fatal(errA)
	}
	if errB == nil {
		t.Error("B's writes ran after A's rows had spent the allowance, and were not refused")
	}
}

// A batch begun while the allowance refused writes runs under
// query_only. A write that arrives after the refusal ended (00:00 UTC)
// runs in a new batch that may write, rather than failing on query_only.
func TestRefusalEndsInsideBatch(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	db := storeAt(t, path, meter.New(tessera.SystemClock{}))
	db.Close()
	m, clock := spentMeter(t)
	db = storeAt(t, path, m)
	release, first := holdCommitter(t, db, func(tx store.Tx) error {
		_, err := tx.TaskGet(ctx, "main", "01NONE")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	behind := queue(t, db, 1, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01B")) })
	clock.Advance(5 * time.Hour) // past 00:00 UTC: the allowance resets
	if err := m.WriteRefusal(); err != nil {
		t.Fatalf("still refusing after the reset: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	errB := <-behind
	t.Logf("B after the reset: %v (code %s)", errB, tessera.ErrorCode(errB))
	if errB != nil || !taskExists(t, db, "01B") {
		t.Errorf("a write after the allowance reset got %v", errB)
	}
}

// fullRecord is a write that SQLite fails with SQLITE_FULL and answers by
// rolling back the whole transaction (a single-row INSERT has no
// statement journal), as a full disk does when the page cache spills.
func fullRecord(ctx context.Context, st store.Tx) error {
	c := st.(*tx).c
	if err := c.c.Exec("PRAGMA max_page_count = 1"); err != nil { // clamps to the current size
		return err
	}
	err := st.RecordPut(ctx, &tessera.Record{Namespace: "main", Bucket: "b", Key: "k", Version: 1,
		Value: []byte(`"` + strings.Repeat("x", 256<<10) + `"`), WrittenBy: "p", CreatedAt: time.Now()}, 0)
	if e := c.c.Exec("PRAGMA max_page_count = 1073741823"); e != nil {
		return e
	}
	if err == nil {
		return errors.New("the record fitted: no SQLITE_FULL")
	}
	return err
}

// After SQLite rolled back a batch's whole transaction, nothing commits
// on its own outside a batch (a savepoint's RELEASE would): a read does
// not see the next request's write before an fsync covers it.
func TestWholeRollbackCommitsNothingAlone(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	started, syncRelease := heldSync(t, db)
	release, first := holdCommitter(t, db, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01A")) })
	full := queue(t, db, 1, func(st store.Tx) error { return fullRecord(ctx, st) })
	behind := queue(t, db, 2, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01C")) })
	holdD, releaseD := make(chan struct{}), make(chan struct{})
	last := queue(t, db, 3, func(tx store.Tx) error {
		close(holdD)
		<-releaseD
		return nil
	})
	close(release)
	<-holdD // A, B and C have run; the committer is inside D
	select {
	case <-started:
		t.Fatal("an fsync started before the batch committed")
	default:
	}
	read := make(chan bool, 1)
	go func() { read <- taskExists(t, db, "01C") }()
	select {
	case saw := <-read:
		if saw {
			t.Error("a read saw C's write and answered, and no fsync has covered it (none has even started)")
		}
	case <-time.After(300 * time.Millisecond):
		t.Log("the read waited")
	}
	close(releaseD)
	<-started
	syncRelease <- struct{}{}
	t.Logf("A: %v\nB: %v\nC: %v\nD: %v", <-first, <-full, <-behind, <-last)
}

// A write whose context ends while it is queued does not run, and is
// answered with the context's error.
func TestCanceledQueuedWriteDoesNotRun(t *testing.T) {
	bg := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	release, first := holdCommitter(t, db, func(tx store.Tx) error { return nil })
	ctx, cancel := context.WithCancel(bg)
	ran := false
	done := make(chan error, 1)
	go func() {
		done <- db.Update(ctx, func(tx store.Tx) error { ran = true; return tx.TaskInsert(bg, commitTask("01Z")) })
	}()
	for len(db.writes) < 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, context.Canceled) || ran || taskExists(t, db, "01Z") {
		t.Errorf("canceled queued write: answered %v, ran %v", err, ran)
	}
}
