package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func commitTask(id string) *tessera.Task {
	now := time.UnixMilli(1893456000000).UTC()
	return &tessera.Task{Namespace: "main", ID: id, Queue: "q", Title: id, Labels: []string{}, MaxAttempts: 3,
		State: tessera.StateReady, RunAt: now, CreatedBy: "p", CreatedAt: now, UpdatedAt: now}
}

// Writes queued behind a running one join its transaction, each in a
// savepoint: the one that fails — by error or by panic — rolls back alone
// and hears of it; the others commit with the first, and each is answered
// only after the shared commit's fsync.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))

	// Hold the committer inside a first transaction while the others
	// queue behind it.
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- db.Update(ctx, func(tx store.Tx) error {
			close(holding)
			<-release
			return tx.TaskInsert(ctx, commitTask("01FIRST"))
		})
	}()
	<-holding
	before := db.CommitStats()

	const n = 12
	boom := errors.New("boom")
	errs := make([]error, n)
	panics := make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			defer func() { panics[i] = recover() }()
			errs[i] = db.Update(ctx, func(tx store.Tx) error {
				if err := tx.TaskInsert(ctx, commitTask(fmt.Sprintf("01T%02d", i))); err != nil {
					return err
				}
				switch i {
				case 3:
					return boom
				case 7:
					panic("request 7 panics")
				}
				return nil
			})
		})
	}
	// Let every request reach the queue before the committer frees up.
	deadline := time.Now().Add(5 * time.Second)
	for len(db.writes) < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if len(db.writes) != n {
		t.Fatalf("%d of %d requests queued", len(db.writes), n)
	}
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// All were queued before the first could commit: one commit and one
	// fsync, not 13.
	after := db.CommitStats()
	if commits, syncs := after.Commits-before.Commits, after.Syncs-before.Syncs; commits != 1 || syncs != 1 {
		t.Errorf("%d commits and %d fsyncs for 1 + %d queued writes, want 1 and 1", commits, syncs, n)
	}
	err := db.View(ctx, func(tx store.Tx) error {
		for i := range n {
			_, err := tx.TaskGet(ctx, "main", fmt.Sprintf("01T%02d", i))
			switch i {
			case 3:
				if !errors.Is(errs[i], boom) || !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the failing request: answered %v, its task %v", errs[i], err)
				}
			case 7:
				if panics[i] == nil || !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the panicking request: panic %v reached its caller? its task %v", panics[i], err)
				}
			default:
				if errs[i] != nil || err != nil {
					t.Errorf("request %d: answered %v, its task %v", i, errs[i], err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// heldSync makes db's WAL fsyncs wait for release, and reports each one
// as it starts. Once the test ends they no longer wait, so db can close.
func heldSync(t *testing.T, db *DB) (started <-chan struct{}, release chan<- struct{}) {
	s, r := make(chan struct{}, 16), make(chan struct{})
	t.Cleanup(func() { close(r) })
	db.dur.syncFile = func(f *os.File) error {
		s <- struct{}{}
		<-r
		return fdatasync(f)
	}
	return s, r
}

// A commit is visible before its fsync ends, so nothing that could reveal
// it answers until then: not its own write, not a write behind it, not a
// read that began after it. Meanwhile the committer runs the writes
// behind it, and commits them with the next fsync.
func TestAnswersWaitForTheFsync(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	started, release := heldSync(t, db)

	first := make(chan error, 1)
	go func() {
		first <- db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01FIRST")) })
	}()
	<-started // committed, not yet durable
	behind, ranBehind := make(chan error, 1), make(chan struct{}, 1)
	go func() {
		behind <- db.Update(ctx, func(tx store.Tx) error {
			_, err := tx.TaskGet(ctx, "main", "01FIRST")
			if err != nil {
				return err
			}
			err = tx.TaskInsert(ctx, commitTask("01BEHIND"))
			ranBehind <- struct{}{}
			return err
		})
	}()
	read := make(chan error, 1)
	go func() {
		read <- db.View(ctx, func(tx store.Tx) error {
			_, err := tx.TaskGet(ctx, "main", "01FIRST")
			return err
		})
	}()
	// The write behind runs while the fsync ahead of it is held.
	select {
	case <-ranBehind:
	case <-time.After(5 * time.Second):
		t.Fatal("the write behind did not run while the fsync ahead of it was held")
	}
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-first:
		t.Fatalf("the write answered (%v) before its fsync", err)
	case err := <-behind:
		t.Fatalf("the write behind answered (%v) before the fsync ahead of it", err)
	case err := <-read:
		t.Fatalf("a read of the commit answered (%v) before its fsync", err)
	default:
	}
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	<-started // the batch behind, committed while the first was synced
	select {
	case err := <-behind:
		t.Fatalf("the write behind answered (%v) before its own fsync", err)
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{}
	if err := <-behind; err != nil {
		t.Fatal(err)
	}
	s := db.CommitStats()
	if s.Commits != 2 || s.Syncs != 2 {
		t.Errorf("%+v, want 2 commits and 2 fsyncs", s)
	}
	// Where the two writes waited: each for its held fsync (50 ms at
	// least), the one behind also for the fsync ahead before its batch
	// could commit: 50 ms at least from before it said it ran (its end
	// may come a moment after).
	phases := map[string]time.Duration{}
	for phase, d := range s.Phases() {
		phases[phase] = d
	}
	if s.Writes != 2 || len(phases) != 6 || phases["syncing"] < 100*time.Millisecond ||
		phases["running"]+phases["batched"] < 50*time.Millisecond || phases["batched"] <= 0 {
		t.Errorf("%d writes timed, phases %v; want 2, syncing ≥ 100ms, running and batched ≥ 50ms", s.Writes, phases)
	}
}

// After a failed fsync the commits it covered may not be on disk, and
// the store serves nothing more until a restart: 503 for the writes it
// covered, and for every read and write after.
func TestFailedFsyncStopsTheStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	db := storeAt(t, path, meter.New(tessera.SystemClock{}))
	if err := db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01OK")) }); err != nil {
		t.Fatal(err)
	}
	db.dur.syncFile = func(*os.File) error { return syscall.EIO }
	unavailable := func(what string, err error) {
		t.Helper()
		var u *store.UnavailableError
		if !errors.As(err, &u) || !strings.Contains(u.Message, "restart the server") {
			t.Errorf("%s: %v, want unavailable until a restart", what, err)
		}
	}
	unavailable("the write the fsync covered", db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01LOST")) }))
	db.dur.syncFile = fdatasync
	unavailable("a write after", db.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, commitTask("01AFTER")) }))
	unavailable("a read after", db.View(ctx, func(tx store.Tx) error {
		_, err := tx.TaskGet(ctx, "main", "01OK")
		return err
	}))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = storeAt(t, path, meter.New(tessera.SystemClock{}))
	if err := db.View(ctx, func(tx store.Tx) error {
		_, err := tx.TaskGet(ctx, "main", "01OK")
		return err
	}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}
