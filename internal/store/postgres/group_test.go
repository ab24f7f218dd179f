package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// batchOf runs fns as one batch of the grouper, as a committer would
// when they were all waiting at once.
func batchOf(db *DB, ctx context.Context, fns ...func(store.Tx) error) []*pending {
	batch := make([]*pending, len(fns))
	for i, fn := range fns {
		batch[i] = &pending{ctx: ctx, fn: fn, done: make(chan struct{})}
	}
	db.group.run(batch)
	return batch
}

func insert(id string) func(store.Tx) error {
	return func(tx store.Tx) error { return tx.TaskInsert(context.Background(), task(id)) }
}

// stored returns which of ids are tasks of the store, and the total the
// task counts hold.
func stored(t *testing.T, db *DB, ids ...string) (found []string, counted int) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.pool.Query(ctx, `SELECT id FROM tasks WHERE id = ANY($1) ORDER BY id`, ids)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		found = append(found, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := db.pool.QueryRow(ctx, `SELECT coalesce(sum(total), 0) FROM task_counts`).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	return found, counted
}

// An Update of a batch that fails, however it fails, is undone to its
// savepoint and answers its own error; the others commit, in one
// transaction, and are metered as they would be alone.
func TestBatchUndoesOneUpdate(t *testing.T) {
	// What the batch's three Updates that succeed write, in a batch of
	// their own on a store like it.
	control := newMeter()
	cdb := open(t, pgtest.Schema(t), control)
	ctx := context.Background()
	if err := cdb.Update(ctx, insert("00")); err != nil {
		t.Fatal(err)
	}
	before := control.Today().RowsWritten
	for i, p := range batchOf(cdb, ctx, insert("0A"), insert("0X"), insert("0C")) {
		if p.err != nil || p.alone {
			t.Fatalf("control update %d: %v, alone %v", i, p.err, p.alone)
		}
	}
	wantWritten := control.Today().RowsWritten - before
	if wantWritten == 0 {
		t.Fatal("three inserts metered no row written")
	}

	m := newMeter()
	db := open(t, pgtest.Schema(t), m)
	if err := db.Update(ctx, insert("00")); err != nil {
		t.Fatal(err)
	}
	before = m.Today().RowsWritten

	boom := errors.New("boom")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	batch := batchOf(db, ctx,
		insert("0A"),
		func(tx store.Tx) error { // fails after a round trip: rolled back to its savepoint
			if err := tx.TaskInsert(ctx, task("0B")); err != nil {
				return err
			}
			if _, err := tx.TaskGet(ctx, "main", "0B"); err != nil {
				return err
			}
			return boom
		},
		func(tx store.Tx) error { // fails with its write still queued: dropped unsent
			if err := tx.AuditInsert(ctx, &tessera.AuditEvent{Namespace: "main", ID: "ev-dropped", Time: epoch, PrincipalID: "p", Action: "a", Target: "x", Status: 200}); err != nil {
				return err
			}
			return boom
		},
		insert("0A"), // the statement itself fails: 0A is taken
		func(tx store.Tx) error { // lost a race: Update runs it again
			if err := tx.TaskInsert(ctx, task("0R")); err != nil {
				return err
			}
			return fmt.Errorf("lost: %w", store.ErrRetry)
		},
		func(tx store.Tx) error {
			if err := tx.TaskInsert(ctx, task("0P")); err != nil {
				return err
			}
			panic("a panic in an Update")
		},
		insert("0X"),
		insert("0C"),
	)

	type want struct {
		err      error
		alone    bool
		panicked any
	}
	wants := []want{{}, {err: boom}, {err: boom}, {err: store.ErrConflict}, {err: store.ErrRetry}, {panicked: "a panic in an Update"}, {}, {}}
	for i, p := range batch {
		w := wants[i]
		if (w.err == nil) != (p.err == nil) || (w.err != nil && !errors.Is(p.err, w.err)) || p.alone != w.alone || p.panicked != w.panicked {
			t.Errorf("update %d: err %v, alone %v, panicked %v; want %v, %v, %v", i, p.err, p.alone, p.panicked, w.err, w.alone, w.panicked)
		}
	}
	found, counted := stored(t, db, "0A", "0B", "0R", "0P", "0X", "0C")
	if want := []string{"0A", "0C", "0X"}; !slices.Equal(found, want) || counted != 4 {
		t.Errorf("stored %v, counted %d; want %v and 4 (with 00)", found, counted, want)
	}
	var events int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE id = 'ev-dropped'`).Scan(&events); err != nil || events != 0 {
		t.Errorf("the dropped audit event: %d rows (%v)", events, err)
	}
	if got := m.Today().RowsWritten - before; got != wantWritten {
		t.Errorf("the batch metered %d rows written, want its three inserts' %d", got, wantWritten)
	}

	batch = batchOf(db, canceled, insert("0Y"), insert("0Z"))
	for i, p := range batch {
		if !errors.Is(p.err, context.Canceled) {
			t.Errorf("update %d of a batch whose callers gave up: %v", i, p.err)
		}
	}
	if found, _ := stored(t, db, "0Y", "0Z"); len(found) != 0 {
		t.Errorf("a batch whose callers gave up stored %v", found)
	}
}

// A COMMIT the server refuses (here a queued write that collides, which
// only the COMMIT's round trip reports) leaves nothing of the batch, and
// every Update of it runs again alone.
func TestBatchRefusedAtCommitRunsAlone(t *testing.T) {
	db := open(t, pgtest.Schema(t), newMeter())
	ctx := context.Background()
	event := func(tx store.Tx) error {
		return tx.AuditInsert(ctx, &tessera.AuditEvent{Namespace: "main", ID: "ev-1", Time: epoch, PrincipalID: "p", Action: "a", Target: "x", Status: 200})
	}
	if err := db.Update(ctx, event); err != nil {
		t.Fatal(err)
	}
	batch := batchOf(db, ctx, insert("1A"), func(tx store.Tx) error { return errors.New("its own error") }, event, insert("1B"))
	for i, p := range batch {
		if !p.alone || p.err != nil {
			t.Errorf("update %d: alone %v, err %v; want alone and no error", i, p.alone, p.err)
		}
	}
	if found, counted := stored(t, db, "1A", "1B"); len(found) != 0 || counted != 0 {
		t.Errorf("a refused batch stored %v, counted %d", found, counted)
	}
}

// Updates that arrive together share transactions, and every one of them
// commits as it would alone: each task once, counted once, each caller
// told its topic.
func TestConcurrentUpdatesShareCommits(t *testing.T) {
	db := open(t, pgtest.Schema(t)+"&pool_max_conns=8", newMeter())
	var heard sync.Map
	db.Listen(func(topic string) { heard.Store(topic, true) })
	const n = 200
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		ids[i] = fmt.Sprintf("2%03d", i)
		wg.Go(func() {
			<-start
			errs <- db.Update(context.Background(), func(tx store.Tx) error {
				tx.Notify(context.Background(), "topic "+ids[i])
				return tx.TaskInsert(context.Background(), task(ids[i]))
			})
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if found, counted := stored(t, db, ids...); len(found) != n || counted != n {
		t.Errorf("stored %d tasks, counted %d; want %d", len(found), counted, n)
	}
	for _, id := range ids {
		if _, ok := heard.Load("topic " + id); !ok {
			t.Errorf("topic of %s not delivered", id)
		}
	}
	if s := db.CommitStats(); s.Writes != n || s.Commits >= n {
		t.Errorf("%d Updates at once on %d committers: %d answered in %d commits; want %d in fewer", n, committers(8), s.Writes, s.Commits, n)
	}
}
