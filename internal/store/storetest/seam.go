package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// testSeam covers what the seam promises around transactions — retries,
// notifications, purges — and, racing goroutines against one store, that
// its guarantees hold under the backend's own concurrency: SQLite
// serializes them, a backend with concurrent writers must still pass.
func testSeam(t *testing.T, open Opener) {
	t.Run("UpdateRunsAgainOnErrRetry", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		runs := 0
		writeTx(t, s, func(tx store.Tx) error {
			runs++
			// Each run inserts again: a retried run must not see the
			// rolled-back one's row.
			if err := tx.TaskInsert(ctx, taskFixture("01A", taskOpts{})); err != nil {
				return err
			}
			if runs < 3 {
				return fmt.Errorf("lost a race: %w", store.ErrRetry)
			}
			return nil
		})
		if runs != 3 {
			t.Errorf("fn ran %d times, want 3", runs)
		}
		runs = 0
		err := s.Update(ctx, func(store.Tx) error { runs++; return store.ErrStale })
		wantErr(t, "a race lost every time", err, store.ErrRetry)
		if runs != store.MaxAttempts {
			t.Errorf("fn ran %d times, want %d", runs, store.MaxAttempts)
		}
		runs = 0
		boom := errors.New("boom")
		if err := s.Update(ctx, func(store.Tx) error { runs++; return boom }); !errors.Is(err, boom) || runs != 1 {
			t.Errorf("another error: %v after %d runs, want boom after 1", err, runs)
		}
	})

	t.Run("NotifyDeliversAfterCommit", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		got := make(chan string, 16)
		s.Listen(func(topic string) { got <- topic })
		writeTx(t, s, func(tx store.Tx) error {
			tx.Notify(ctx, "q\x00main\x00default")
			tx.Notify(ctx, "q\x00main\x00default") // once per transaction
			tx.Notify(ctx, "t\x00main\x0001A")
			select {
			case topic := <-got:
				t.Errorf("topic %q delivered before the commit", topic)
			default:
			}
			return nil
		})
		_ = s.Update(ctx, func(tx store.Tx) error {
			tx.Notify(ctx, "rolled back")
			return errors.New("roll back")
		})
		// A last topic marks the end: what came before it is all there is.
		writeTx(t, s, func(tx store.Tx) error { tx.Notify(ctx, "end"); return nil })
		var topics []string
		for topic := range got {
			if topic == "end" {
				break
			}
			topics = append(topics, topic)
		}
		if want := []string{"q\x00main\x00default", "t\x00main\x0001A"}; !sameSet(topics, want) {
			t.Errorf("topics delivered = %q, want %q once each", topics, want)
		}
	})

	t.Run("NamespacePurge", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			for _, ns := range []string{"doomed", "kept"} {
				if _, err := tx.NamespaceEnsure(ctx, ns, epoch); err != nil {
					return err
				}
				for i := range 5 {
					if err := tx.TaskInsert(ctx, taskFixture(fmt.Sprint("01T", i), taskOpts{ns: ns})); err != nil {
						return err
					}
				}
				if _, err := tx.TaskClaim(ctx, claimFixture(ns, "default", epoch, "run-"+ns)); err != nil {
					return err
				}
				if err := tx.TaskEventAppend(ctx, ns, "01T0", &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: epoch}); err != nil {
					return err
				}
				if err := tx.RecordPut(ctx, &tessera.Record{Namespace: ns, Bucket: "b", Key: "k", Version: 1, Value: []byte(`1`), WrittenBy: "p", CreatedAt: epoch}, 0); err != nil {
					return err
				}
				if err := tx.BucketEnsure(ctx, ns, "b", epoch); err != nil {
					return err
				}
				if err := tx.BlobPut(ctx, &tessera.Blob{Namespace: ns, SHA256: "ab", Size: 1, ContentType: "x", UploadedBy: "p", CreatedAt: epoch}); err != nil {
					return err
				}
			}
			return nil
		})
		total := 0
		for range 100 {
			var n int
			writeTx(t, s, func(tx store.Tx) (err error) {
				n, err = tx.NamespacePurge(ctx, "doomed", 4)
				return err
			})
			if n > 4 {
				t.Fatalf("a purge batch of at most 4 deleted %d rows", n)
			}
			if n == 0 {
				break
			}
			total += n
		}
		// 5 tasks (the run is on its task's row), the event, the record's
		// version, the bucket, the blob and the queue's counts row.
		if total < 10 {
			t.Errorf("the purge deleted %d rows; the namespace held at least 10", total)
		}
		readTx(t, s, func(tx store.Tx) error {
			nss, err := tx.NamespaceList(ctx, "", 10)
			if err != nil {
				return err
			}
			if len(nss) != 1 || nss[0].Name != "kept" {
				t.Errorf("namespaces after the purge: %+v, want kept only", nss)
			}
			if _, err := tx.TaskGet(ctx, "doomed", "01T1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a purged task: %v", err)
			}
			if _, err := tx.RecordGet(ctx, "doomed", "b", "k", 0); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a purged record: %v", err)
			}
			if _, err := tx.BlobGet(ctx, "doomed", "ab"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a purged blob: %v", err)
			}
			for _, id := range []string{"01T0", "01T1"} {
				if _, err := tx.TaskGet(ctx, "kept", id); err != nil {
					t.Errorf("task %s of another namespace: %v", id, err)
				}
			}
			if evs, err := tx.TaskEventList(ctx, "kept", "01T0", 0, 10); err != nil || len(evs) != 1 {
				t.Errorf("events of another namespace: %+v, %v", evs, err)
			}
			return nil
		})
		if got := stateCounts(t, s, "doomed", store.AllTasks); len(got) != 0 {
			t.Errorf("counts of a purged namespace: %v", got)
		}
		if got, want := stateCounts(t, s, "kept", store.AllTasks), map[string]map[string]int{"default": {tessera.StateReady: 4, tessera.StateLeased: 1}}; !reflect.DeepEqual(got, want) {
			t.Errorf("counts of another namespace: %v, want %v", got, want)
		}
	})

	// Audit reads by principal visit the namespaces recorded for it.
	t.Run("AuditByPrincipalVisitsItsNamespaces", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		ev := func(ns, principal string, n int) *tessera.AuditEvent {
			return &tessera.AuditEvent{ID: idAt(time.Duration(n)*time.Second, 0), Time: at(time.Duration(n) * time.Second), Namespace: ns,
				PrincipalID: principal, KeyID: "k", Action: "task.get", Target: "t", Status: 200}
		}
		writeTx(t, s, func(tx store.Tx) error {
			for i, e := range []*tessera.AuditEvent{ev("a", "p1", 1), ev("b", "p1", 2), ev("b", "p2", 3), ev("c", "p2", 4)} {
				if err := tx.AuditInsert(ctx, e); err != nil {
					return err
				}
				if err := tx.PrincipalNamespaceAdd(ctx, e.PrincipalID, e.Namespace); err != nil {
					return fmt.Errorf("pair %d: %w", i, err)
				}
			}
			// Adding a pair again changes nothing.
			return tx.PrincipalNamespaceAdd(ctx, "p1", "a")
		})
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.AuditEvents(ctx, store.AuditFilter{PrincipalID: "p1", Since: at(-time.Hour), Limit: 10})
			if err != nil {
				return err
			}
			var where []string
			for _, e := range got {
				where = append(where, e.Namespace+"/"+e.PrincipalID)
			}
			if want := []string{"b/p1", "a/p1"}; !slices.Equal(where, want) {
				t.Errorf("p1's events = %v, want %v", where, want)
			}
			return nil
		})
	})

	// Claims race: every task is claimed exactly once, however many
	// claimers run at once.
	t.Run("ConcurrentClaimsLeaseEachTaskOnce", func(t *testing.T) {
		t.Parallel()
		claimRace(t, open(t), 60, 16, func(s store.Store, c, i int) ([]tessera.Task, error) {
			task, err := claim(t, s, claimFixture("main", "q", epoch, fmt.Sprintf("run-%d-%d", c, i)))
			if errors.Is(err, store.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return []tessera.Task{*task}, nil
		})
	})

	// Two writers that read the same version race to change it: exactly
	// one wins; the other gets ErrStale and its change is not written
	// (heartbeat against cancel, submit against lapse).
	t.Run("ConcurrentChangesOfOneVersion", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := open(t)
		task := taskFixture("01A", taskOpts{state: tessera.StateLeased, lease: leaseFixture(at(time.Minute))})
		insertTasks(t, s, task)
		read := getTask(t, s, "main", "01A")
		const writers = 8
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				change := read.Copy()
				change.Progress = fmt.Appendf(nil, `{"writer":%d}`, i)
				errs[i] = s.Update(ctx, func(tx store.Tx) error {
					err := tx.TaskUpdate(ctx, read, change)
					if errors.Is(err, store.ErrStale) {
						return fmt.Errorf("%w", errLost) // lost: stop, do not retry
					}
					return err
				})
			})
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won < 0:
				won = i
			case err == nil:
				t.Errorf("writers %d and %d both changed version %d", won, i, read.Version)
			case !errors.Is(err, errLost):
				t.Errorf("writer %d: %v", i, err)
			}
		}
		if won < 0 {
			t.Fatal("no writer won")
		}
		if got := getTask(t, s, "main", "01A"); string(got.Progress) != fmt.Sprintf(`{"writer":%d}`, won) || got.Version != read.Version+1 {
			t.Errorf("stored %s at version %d, want the winner's (%d) at %d", got.Progress, got.Version, won, read.Version+1)
		}
	})

	t.Run("ConcurrentIdempotencyPutsStoreOne", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := open(t)
		const puts = 8
		stored := make([]bool, puts)
		var wg sync.WaitGroup
		for i := range puts {
			wg.Go(func() {
				e := &store.Idempotency{Namespace: "main", PrincipalID: "p", Route: "enqueue", Key: "k",
					RequestHash: []byte{1}, Response: fmt.Appendf(nil, `{"n":%d}`, i), CreatedAt: epoch}
				if err := s.Update(ctx, func(tx store.Tx) (err error) {
					stored[i], err = tx.IdempotencyPut(ctx, e)
					return err
				}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		winners := 0
		for _, ok := range stored {
			if ok {
				winners++
			}
		}
		if winners != 1 {
			t.Errorf("%d concurrent puts of one key stored it; want exactly 1", winners)
		}
	})

	t.Run("ConcurrentEventAppendsNumberEachOnce", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, taskFixture("01A", taskOpts{}))
		const appenders, each = 8, 5
		var mu sync.Mutex
		var seqs []int64
		var wg sync.WaitGroup
		for range appenders {
			wg.Go(func() {
				for range each {
					e := &tessera.TaskEvent{Kind: tessera.EventNote, Body: "n", By: "p", Time: epoch}
					if err := s.Update(ctx, func(tx store.Tx) error { return tx.TaskEventAppend(ctx, "main", "01A", e) }); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					seqs = append(seqs, e.Seq)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(seqs)
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("sequence numbers %v: want 1–%d, each once", seqs, appenders*each)
			}
		}
	})

	t.Run("ConcurrentRecordWritesOfOneVersion", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		s := open(t)
		const writers = 8
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				r := &tessera.Record{Namespace: "main", Bucket: "b", Key: "k", Version: 1, Value: fmt.Appendf(nil, "%d", i), WrittenBy: "p", CreatedAt: epoch}
				errs[i] = s.Update(ctx, func(tx store.Tx) error { return tx.RecordPut(ctx, r, 0) })
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("writer %d: %v", i, err)
			}
		}
		if won != 1 {
			t.Errorf("%d writers created version 1; want exactly 1", won)
		}
	})
}

// errLost marks a writer that lost its race and stops.
var errLost = errors.New("lost the race")

// sameSet reports whether a and b hold the same strings, each once.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// claimRace puts tasks ready tasks in queue q of s and runs claimers
// goroutines, each calling claimOnce (claimer c, its i-th call) until it
// grants nothing, and fails the test unless every task was granted
// exactly once.
func claimRace(t *testing.T, s store.Store, tasks, claimers int, claimOnce func(s store.Store, c, i int) ([]tessera.Task, error)) {
	t.Helper()
	var all []*tessera.Task
	for i := range tasks {
		all = append(all, taskFixture(fmt.Sprintf("01T%02d", i), taskOpts{queue: "q"}))
	}
	insertTasks(t, s, all...)
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Go(func() {
			for i := 0; ; i++ {
				granted, err := claimOnce(s, c, i)
				if err != nil {
					t.Error(err)
					return
				}
				if len(granted) == 0 {
					return
				}
				mu.Lock()
				for _, task := range granted {
					got[task.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != tasks {
		t.Errorf("%d of %d tasks were claimed", len(got), tasks)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("task %s was claimed %d times", id, n)
		}
	}
}
