package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
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

// Writes queued behind a running one commit together, in one transaction,
// each in a savepoint: the one that fails — by error or by panic — rolls
// back alone and hears of it; the others commit, and each is answered
// only after the shared commit.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "t.db"), meter.New(tessera.SystemClock{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

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
	before := db.Commits()

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
	// The first transaction and the queued batch: two commits, not 13.
	if got := db.Commits() - before; got != 2 {
		t.Errorf("%d commits for 1 + %d queued writes, want 2", got, n)
	}
	err = db.View(ctx, func(tx store.Tx) error {
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
