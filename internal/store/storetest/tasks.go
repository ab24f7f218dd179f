package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// testTasks covers tasks, runs, task events and the transaction contract.
func testTasks(t *testing.T, open Opener) {
	t.Run("TaskRoundTrip", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		full := &tessera.Task{
			Namespace: "build-farm", ID: "01FULL", Queue: "gpu.large:v2", Title: "Tïtle ✓", Brief: "line 1\nline 2",
			Payload: json.RawMessage(`{"doc":"r-17","n":[1,2,3]}`), Labels: []string{"a", "b-2"},
			Priority: -7, Public: true, MaxAttempts: 5, Attempts: 2, State: tessera.StateLeased,
			RunAt: at(-time.Second), CreatedBy: "p-producer", CreatedAt: at(-time.Hour), UpdatedAt: at(-time.Minute),
			CancelRequested: true, Result: json.RawMessage(`{"partial":true}`), Error: "last try failed",
			Progress: json.RawMessage(`{"pct":50}`),
			Lease: &tessera.Lease{TaskID: "01FULL", RunID: "01RUN", Holder: "p-worker", ExpiresAt: at(time.Minute),
				Seconds: 120, TokenHash: []byte{0xde, 0xad, 0xbe, 0xef}},
			Trace: &tessera.Trace{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "congo=t61rcWkgMzE"},
		}
		bare := &tessera.Task{
			Namespace: "main", ID: "01BARE", Queue: "default", Title: "t", Labels: []string{},
			MaxAttempts: 1, State: tessera.StateReady, RunAt: epoch, CreatedBy: "p", CreatedAt: epoch, UpdatedAt: epoch,
		}
		insertTasks(t, s, full, bare)
		readTx(t, s, func(tx store.Tx) error {
			for _, want := range []*tessera.Task{full, bare} {
				got, err := tx.TaskGet(ctx, want.Namespace, want.ID)
				if err != nil {
					t.Fatalf("get %s: %v", want.ID, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("get %s:\n got %+v\nwant %+v", want.ID, got, want)
				}
			}
			got, err := tx.TaskGet(ctx, "main", "01BARE")
			if err != nil {
				return err
			}
			// A nil payload, result and progress stay nil: not "null", not "".
			if got.Payload != nil || got.Result != nil || got.Progress != nil || got.Lease != nil {
				t.Errorf("bare task reads back payload %q result %q progress %q lease %v",
					got.Payload, got.Result, got.Progress, got.Lease)
			}
			return nil
		})
	})

	t.Run("TaskInsertTwiceConflicts", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		task := taskFixture("01A", taskOpts{})
		insertTasks(t, s, task)
		err := s.Update(t.Context(), func(tx store.Tx) error { return tx.TaskInsert(ctx, task) })
		wantErr(t, "second insert", err, store.ErrConflict)
		// The same id in another namespace is another task.
		insertTasks(t, s, taskFixture("01A", taskOpts{ns: "other"}))
	})

	t.Run("TaskUpdateWritesMutableFields", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		orig := taskFixture("01A", taskOpts{})
		insertTasks(t, s, orig)

		// Lease it: every mutable field changes.
		leased := orig.Copy()
		leased.State = tessera.StateLeased
		leased.Attempts = 1
		leased.RunAt = at(time.Second)
		leased.UpdatedAt = epoch
		leased.CancelRequested = true
		leased.Result = json.RawMessage(`{"r":1}`)
		leased.Error = "boom"
		leased.Progress = json.RawMessage(`{"pct":10}`)
		leased.Title, leased.Brief, leased.Payload = "retitled", "rebriefed", json.RawMessage(`{"rev":2}`) // a debounced enqueue's
		leased.FinishedAt = ptr(at(2 * time.Second))
		leased.Lease = &tessera.Lease{TaskID: "01A", RunID: "run1", Holder: "p-w", ExpiresAt: at(time.Minute), Seconds: 60, TokenHash: []byte("tok")}
		// Immutable fields given to an update are not written.
		sneaky := leased.Copy()
		sneaky.Queue, sneaky.Priority, sneaky.CreatedBy = "other", 99, "someone"
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, orig, sneaky) })
		if sneaky.Version != 1 {
			t.Errorf("after the first update the task's version is %d, want 1", sneaky.Version)
		}
		leased.Version = 1
		if got := getTask(t, s, "main", "01A"); !reflect.DeepEqual(got, leased) {
			t.Errorf("after leasing update:\n got %+v\nwant %+v", got, leased)
		}

		// End the lease: the lease and the JSON fields clear to nil; only
		// the lease's expiry changing is written too.
		extended := leased.Copy()
		extended.Lease.ExpiresAt = at(2 * time.Minute)
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, leased, extended) })
		if got := getTask(t, s, "main", "01A"); got.Lease == nil || !got.Lease.ExpiresAt.Equal(at(2*time.Minute)) || got.Version != 2 {
			t.Errorf("after extending the lease: %+v", got)
		}
		done := extended.Copy()
		done.State = tessera.StateSucceeded
		done.Lease = nil
		done.Result, done.Progress, done.Error = nil, nil, ""
		done.CancelRequested = false
		done.FinishedAt = nil
		done.UpdatedAt = at(time.Minute)
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, extended, done) })
		if got := getTask(t, s, "main", "01A"); !reflect.DeepEqual(got, done) {
			t.Errorf("after ending update:\n got %+v\nwant %+v", got, done)
		}
	})

	// A change is written only over the version it was read at: a writer
	// that read before someone else's change gets ErrStale and writes
	// nothing, so no change is ever silently overwritten.
	t.Run("TaskUpdateIsConditional", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, taskFixture("01A", taskOpts{}))
		read := getTask(t, s, "main", "01A")
		first, second := read.Copy(), read.Copy()
		first.CancelRequested = true
		second.Progress = json.RawMessage(`{"pct":1}`)
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, read, first) })
		err := s.Update(ctx, func(tx store.Tx) error { return tx.TaskUpdate(ctx, read, second) })
		wantErr(t, "an update over a stale version", err, store.ErrStale)
		wantErr(t, "a stale update", err, store.ErrRetry)
		got := getTask(t, s, "main", "01A")
		if !got.CancelRequested || got.Progress != nil || got.Version != 1 {
			t.Errorf("after a stale update the task is %+v; want the first change only", got)
		}
		missing := taskFixture("01B", taskOpts{})
		err = s.Update(ctx, func(tx store.Tx) error { return tx.TaskUpdate(ctx, missing, missing.Copy()) })
		wantErr(t, "an update of a missing task", err, store.ErrNotFound)
		err = s.Update(ctx, func(tx store.Tx) error {
			return tx.TaskUpdate(ctx, taskFixture("01A", taskOpts{ns: "b"}), taskFixture("01A", taskOpts{ns: "b"}))
		})
		wantErr(t, "update in another namespace", err, store.ErrNotFound)
	})

	t.Run("TaskGetManyAndUpdateMany", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, taskFixture("01A", taskOpts{}), taskFixture("01B", taskOpts{}), taskFixture("01C", taskOpts{}),
			taskFixture("01D", taskOpts{ns: "other"}))
		var read []tessera.Task
		readTx(t, s, func(tx store.Tx) (err error) {
			read, err = tx.TaskGetMany(ctx, "main", []string{"01C", "01GONE", "01A", "01D"})
			return err
		})
		slices.SortFunc(read, func(a, b tessera.Task) int { return strings.Compare(a.ID, b.ID) })
		if len(read) != 2 || read[0].ID != "01A" || read[1].ID != "01C" {
			t.Fatalf("TaskGetMany of 01C, 01GONE, 01A and another namespace's 01D read %v; want 01A and 01C", read)
		}
		for i := range read {
			if want := getTask(t, s, "main", read[i].ID); !reflect.DeepEqual(&read[i], want) {
				t.Errorf("TaskGetMany's %s:\n got %+v\nwant %+v", read[i].ID, &read[i], want)
			}
		}
		done, paused := read[0].Copy(), read[1].Copy()
		done.State, done.Result, done.FinishedAt = tessera.StateSucceeded, json.RawMessage(`{"ok":1}`), ptr(at(time.Second))
		paused.State = tessera.StatePaused
		writeTx(t, s, func(tx store.Tx) error {
			return tx.TaskUpdateMany(ctx, []store.TaskChange{{Before: &read[0], After: done}, {Before: &read[1], After: paused}})
		})
		if done.Version != 1 || paused.Version != 1 {
			t.Errorf("versions after TaskUpdateMany: %d and %d; want 1 and 1", done.Version, paused.Version)
		}
		for _, want := range []*tessera.Task{done, paused} {
			if got := getTask(t, s, "main", want.ID); !reflect.DeepEqual(got, want) {
				t.Errorf("after TaskUpdateMany %s:\n got %+v\nwant %+v", want.ID, got, want)
			}
		}
		want := map[string]map[string]int{"default": {tessera.StateReady: 1, tessera.StateSucceeded: 1, tessera.StatePaused: 1}}
		if got := stateCounts(t, s, "main", store.AllTasks); !reflect.DeepEqual(got, want) {
			t.Errorf("counts after TaskUpdateMany = %v, want %v", got, want)
		}

		// A stale change fails the whole: what came before it is undone.
		b := getTask(t, s, "main", "01B")
		canceled := b.Copy()
		canceled.State = tessera.StateCanceled
		err := s.Update(ctx, func(tx store.Tx) error {
			return tx.TaskUpdateMany(ctx, []store.TaskChange{{Before: b, After: canceled}, {Before: &read[0], After: read[0].Copy()}})
		})
		wantErr(t, "TaskUpdateMany over a stale version", err, store.ErrStale)
		if got := getTask(t, s, "main", "01B"); got.State != tessera.StateReady || got.Version != 0 {
			t.Errorf("after a failed TaskUpdateMany 01B is %s at version %d; want ready at 0", got.State, got.Version)
		}
		gone := taskFixture("01GONE", taskOpts{})
		err = s.Update(ctx, func(tx store.Tx) error {
			return tx.TaskUpdateMany(ctx, []store.TaskChange{{Before: gone, After: gone.Copy()}})
		})
		wantErr(t, "TaskUpdateMany of a missing task", err, store.ErrNotFound)
	})

	// An unfinished task holds its unique key in its queue: another task
	// cannot take it until the first finishes, and a finished task taken
	// back (a retry) needs it again.
	t.Run("TaskUniqueKey", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		keyed := func(id, queue string) *tessera.Task {
			task := taskFixture(id, taskOpts{queue: queue})
			task.UniqueKey = "order-17 ✓"
			return task
		}
		a := keyed("01A", "q")
		insertTasks(t, s, a, keyed("01B", "other"), taskFixture("01C", taskOpts{queue: "q"}))
		holder := func(queue string) string {
			t.Helper()
			var id string
			readTx(t, s, func(tx store.Tx) error {
				task, err := tx.TaskByUniqueKey(ctx, "main", queue, "order-17 ✓")
				if errors.Is(err, store.ErrNotFound) {
					return nil
				}
				if err == nil {
					id = task.ID
				}
				return err
			})
			return id
		}
		if got := holder("q"); got != "01A" {
			t.Fatalf("the key's holder in q is %q, want 01A", got)
		}
		if got := getTask(t, s, "main", "01A"); !reflect.DeepEqual(got, a) {
			t.Errorf("a keyed task reads back\n got %+v\nwant %+v", got, a)
		}
		err := s.Update(ctx, func(tx store.Tx) error { return tx.TaskInsert(ctx, keyed("01D", "q")) })
		wantErr(t, "a second task with the key", err, store.ErrConflict)
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.TaskGet(ctx, "main", "01D")
			wantErr(t, "the refused task", err, store.ErrNotFound)
			_, err = tx.TaskByUniqueKey(ctx, "elsewhere", "q", "order-17 ✓")
			wantErr(t, "the key in another namespace", err, store.ErrNotFound)
			return nil
		})

		done := a.Copy()
		done.State, done.FinishedAt = tessera.StateCanceled, ptr(at(time.Second))
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, a, done) })
		if got := holder("q"); got != "" {
			t.Fatalf("after 01A finished the key is held by %q", got)
		}
		insertTasks(t, s, keyed("01D", "q"))
		if got := holder("q"); got != "01D" {
			t.Fatalf("the key's holder in q is %q, want 01D", got)
		}
		back := done.Copy()
		back.State, back.FinishedAt = tessera.StateReady, nil
		err = s.Update(ctx, func(tx store.Tx) error { return tx.TaskUpdate(ctx, done, back) })
		wantErr(t, "01A back while 01D holds its key", err, store.ErrConflict)
		if got := getTask(t, s, "main", "01A"); got.State != tessera.StateCanceled {
			t.Errorf("01A after its refused return is %s, want canceled", got.State)
		}
		d := getTask(t, s, "main", "01D")
		dDone := d.Copy()
		dDone.State, dDone.FinishedAt = tessera.StateSucceeded, ptr(at(2*time.Second))
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.TaskUpdateMany(ctx, []store.TaskChange{{Before: d, After: dDone}}); err != nil {
				return err
			}
			return tx.TaskUpdate(ctx, done, back)
		})
		if got := holder("q"); got != "01A" {
			t.Fatalf("after 01D finished and 01A came back the key is held by %q, want 01A", got)
		}
		if got := holder("other"); got != "01B" {
			t.Fatalf("the key's holder in queue other is %q, want 01B", got)
		}
	})

	// A debounce key points at one task at a time, moved only from the
	// task it points at; the task's finish frees it; a debounced write
	// replaces the task's title, brief and payload.
	t.Run("TaskDebounceKey", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		a := taskFixture("01A", taskOpts{queue: "q"})
		a.DebounceKey = "doc-9"
		insertTasks(t, s, a)
		holder := func() string {
			t.Helper()
			var id string
			readTx(t, s, func(tx store.Tx) (err error) {
				id, err = tx.DebounceHolder(ctx, "main", "q", "doc-9")
				if errors.Is(err, store.ErrNotFound) {
					return nil
				}
				return err
			})
			return id
		}
		if got := holder(); got != "" {
			t.Fatalf("before any point the key points at %q", got)
		}
		writeTx(t, s, func(tx store.Tx) error { return tx.DebouncePoint(ctx, "main", "q", "doc-9", "", "01A") })
		err := s.Update(ctx, func(tx store.Tx) error { return tx.DebouncePoint(ctx, "main", "q", "doc-9", "", "01B") })
		wantErr(t, "taking a key that points at a task", err, store.ErrConflict)
		err = s.Update(ctx, func(tx store.Tx) error { return tx.DebouncePoint(ctx, "main", "q", "doc-9", "01X", "01B") })
		wantErr(t, "moving a key from a task it does not point at", err, store.ErrConflict)
		if got := holder(); got != "01A" {
			t.Fatalf("the key points at %q, want 01A", got)
		}

		moved := a.Copy()
		moved.Title, moved.Brief, moved.Payload = "newer", "brief 2", json.RawMessage(`{"rev":2}`)
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, a, moved) })
		if got := getTask(t, s, "main", "01A"); !reflect.DeepEqual(got, moved) {
			t.Errorf("after a debounced write\n got %+v\nwant %+v", got, moved)
		}

		insertTasks(t, s, taskFixture("01B", taskOpts{queue: "q"}))
		writeTx(t, s, func(tx store.Tx) error { return tx.DebouncePoint(ctx, "main", "q", "doc-9", "01A", "01B") })
		// 01A finishing no longer frees the key: it points at 01B.
		done := moved.Copy()
		done.State, done.FinishedAt = tessera.StateSucceeded, ptr(at(time.Second))
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, moved, done) })
		if got := holder(); got != "01B" {
			t.Fatalf("after 01A finished the key points at %q, want 01B", got)
		}
		b := getTask(t, s, "main", "01B")
		b.DebounceKey = "doc-9" // as if enqueued with it: the fixture has none
		bDone := b.Copy()
		bDone.State, bDone.FinishedAt = tessera.StateCanceled, ptr(at(2*time.Second))
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, b, bDone) })
		if got := holder(); got != "" {
			t.Fatalf("after 01B finished the key points at %q, want none", got)
		}
	})

	t.Run("TaskMissingIsNotFound", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, taskFixture("01A", taskOpts{ns: "a"}))
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.TaskGet(ctx, "a", "01B")
			wantErr(t, "get of a missing id", err, store.ErrNotFound)
			_, err = tx.TaskGet(ctx, "b", "01A")
			wantErr(t, "get from another namespace", err, store.ErrNotFound)
			return nil
		})
		err := s.Update(ctx, func(tx store.Tx) error {
			_, err := tx.TaskClaim(ctx, claimFixture("a", "empty", epoch, "r1"))
			return err
		})
		wantErr(t, "claim of an empty queue", err, store.ErrNotFound)
	})

	// TaskHold reads what TaskGet reads, in a write transaction; what it
	// holds against other nodes is the PostgreSQL package's race tests.
	t.Run("TaskHoldReadsTheTask", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		want := taskFixture("01H", taskOpts{ns: "a"})
		insertTasks(t, s, want)
		err := s.Update(ctx, func(tx store.Tx) error {
			got, err := tx.TaskHold(ctx, "a", "01H")
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("hold:\n got %+v\nwant %+v", got, want)
			}
			_, err = tx.TaskHold(ctx, "b", "01H")
			wantErr(t, "hold from another namespace", err, store.ErrNotFound)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("TaskClaimOrder", func(t *testing.T) {
		s := open(t)
		q := taskOpts{queue: "q"}
		with := func(o taskOpts, f func(*taskOpts)) taskOpts { f(&o); return o }
		insertTasks(t, s,
			taskFixture("01A", with(q, func(o *taskOpts) { o.priority = 0; o.runAt = at(-3 * time.Second) })),
			taskFixture("01B", with(q, func(o *taskOpts) { o.priority = 5; o.runAt = at(-1 * time.Second) })),
			taskFixture("01D", with(q, func(o *taskOpts) { o.priority = 5; o.runAt = at(-2 * time.Second) })),
			taskFixture("01C", with(q, func(o *taskOpts) { o.priority = 5; o.runAt = at(-2 * time.Second) })),
			taskFixture("01E", with(q, func(o *taskOpts) { o.priority = -5; o.runAt = epoch })),
			// Never claimable at epoch: a future run_at, not ready, another
			// queue, another namespace.
			taskFixture("01F", with(q, func(o *taskOpts) { o.priority = 9; o.runAt = at(time.Millisecond) })),
			taskFixture("01G", with(q, func(o *taskOpts) {
				o.priority, o.state, o.lease = 9, tessera.StateLeased, leaseFixture(at(time.Hour))
			})),
			taskFixture("01H", with(q, func(o *taskOpts) { o.priority = 9; o.state = tessera.StatePaused })),
			taskFixture("01I", with(q, func(o *taskOpts) { o.priority = 9; o.state = tessera.StateDead })),
			taskFixture("01J", taskOpts{queue: "other", priority: 9}),
			taskFixture("01K", taskOpts{ns: "elsewhere", queue: "q", priority: 9}),
		)
		var order []string
		for i := range 20 {
			task, err := claim(t, s, claimFixture("main", "q", epoch, fmt.Sprint("run", i)))
			if errors.Is(err, store.ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			order = append(order, task.ID)
		}
		// Priority first, then the oldest run_at, then id; run_at == now
		// has come.
		if want := []string{"01C", "01D", "01B", "01A", "01E"}; !slices.Equal(order, want) {
			t.Fatalf("claim order = %v, want %v", order, want)
		}
		got, err := claim(t, s, claimFixture("main", "q", at(time.Millisecond), "late"))
		if err != nil || got.ID != "01F" {
			t.Fatalf("once its run_at came, the claim got %v, %v; want 01F", got, err)
		}
	})

	// A claim is one operation: state, attempt, lease, version and the run
	// numbered by the attempt, with the task returned as leased.
	t.Run("TaskClaimWritesLeaseAndRun", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		orig := taskFixture("01A", taskOpts{queue: "q"})
		orig.Attempts = 1 // a retry: this claim is its second attempt
		insertTasks(t, s, orig)
		p := claimFixture("main", "q", at(time.Second), "01RUN")
		got, err := claim(t, s, p)
		if err != nil {
			t.Fatal(err)
		}
		want := orig.Copy()
		want.State, want.Attempts, want.Version, want.UpdatedAt = tessera.StateLeased, 2, 1, p.Now
		lease := p.Lease
		lease.TaskID = "01A"
		want.Lease = &lease
		want.Run = &tessera.Run{ID: "01RUN", TaskID: "01A", Holder: lease.Holder, Attempt: 2, StartedAt: p.Now}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("claimed task:\n got %+v\nwant %+v", got, want)
		}
		if stored := getTask(t, s, "main", "01A"); !reflect.DeepEqual(stored, want) {
			t.Errorf("stored after the claim:\n got %+v\nwant %+v", stored, want)
		}
		readTx(t, s, func(tx store.Tx) error {
			runs, err := tx.RunList(ctx, "main", "01A")
			if err != nil {
				return err
			}
			wantRuns := []tessera.Run{{ID: "01RUN", TaskID: "01A", Holder: lease.Holder, Attempt: 2, StartedAt: p.Now}}
			if !reflect.DeepEqual(runs, wantRuns) {
				t.Errorf("runs after the claim:\n got %+v\nwant %+v", runs, wantRuns)
			}
			return nil
		})
	})

	t.Run("TaskLapsed", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		leased := func(id string, o taskOpts, exp time.Time) *tessera.Task {
			o.state, o.lease = tessera.StateLeased, leaseFixture(exp)
			return taskFixture(id, o)
		}
		q := taskOpts{queue: "q"}
		insertTasks(t, s,
			leased("01A", q, at(-time.Second)),
			leased("01B", q, epoch), // a lease is live strictly before expires_at
			leased("01G", q, at(-time.Minute)),
			leased("01C", q, at(time.Millisecond)),
			leased("01D", taskOpts{queue: "other"}, at(-time.Minute)),
			leased("01E", taskOpts{ns: "elsewhere", queue: "q"}, at(-time.Minute)),
			taskFixture("01F", taskOpts{queue: "q", runAt: at(-time.Hour)}),
		)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.TaskLapsed(ctx, "main", "q", epoch, 10)
			if err != nil {
				return err
			}
			// Soonest expiry first.
			if want := []string{"01G", "01A", "01B"}; !slices.Equal(ids(got), want) {
				t.Errorf("lapsed = %v, want %v", ids(got), want)
			}
			for _, task := range got {
				if task.Lease == nil || task.Lease.TaskID != task.ID {
					t.Errorf("lapsed task %s comes without its lease: %+v", task.ID, task.Lease)
				}
			}
			one, err := tx.TaskLapsed(ctx, "main", "q", epoch, 1)
			if err != nil {
				return err
			}
			if want := []string{"01G"}; !slices.Equal(ids(one), want) {
				t.Errorf("lapsed with limit 1 = %v, want %v", ids(one), want)
			}
			none, err := tx.TaskLapsed(ctx, "main", "q", at(-2*time.Minute), 10)
			if err != nil {
				return err
			}
			if len(none) != 0 {
				t.Errorf("lapsed before any expiry = %v", ids(none))
			}
			return nil
		})
	})

	t.Run("TaskStateCountsAndScheduled", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s,
			taskFixture("01A", taskOpts{queue: "a"}),
			taskFixture("01B", taskOpts{queue: "a", runAt: epoch}),
			taskFixture("01C", taskOpts{queue: "a", runAt: at(time.Minute)}),
			taskFixture("01D", taskOpts{queue: "a", state: tessera.StateLeased, lease: leaseFixture(at(time.Hour))}),
			taskFixture("01E", taskOpts{queue: "a", state: tessera.StateSucceeded}),
			taskFixture("01F", taskOpts{queue: "b", state: tessera.StatePaused}),
			taskFixture("01G", taskOpts{queue: "b", state: tessera.StateDead}),
			taskFixture("01H", taskOpts{queue: "b", state: tessera.StateCanceled}),
			taskFixture("01I", taskOpts{queue: "b", runAt: at(time.Hour)}),
			publicTask("01K", taskOpts{queue: "b", runAt: at(time.Hour)}),
			taskFixture("01J", taskOpts{ns: "elsewhere", queue: "a"}),
		)
		want := map[string]map[string]int{
			"a": {tessera.StateReady: 3, tessera.StateLeased: 1, tessera.StateSucceeded: 1},
			"b": {tessera.StatePaused: 1, tessera.StateDead: 1, tessera.StateCanceled: 1, tessera.StateReady: 2},
		}
		if got := stateCounts(t, s, "main", store.AllTasks); !reflect.DeepEqual(got, want) {
			t.Errorf("counts = %v, want %v", got, want)
		}
		if got, want := stateCounts(t, s, "main", store.PublicOnly), map[string]map[string]int{"b": {tessera.StateReady: 1}}; !reflect.DeepEqual(got, want) {
			t.Errorf("public counts = %v, want %v", got, want)
		}
		scheduled := func(now time.Time, v store.Visibility) map[string]int {
			t.Helper()
			var out map[string]int
			readTx(t, s, func(tx store.Tx) (err error) {
				out, err = tx.TaskScheduled(ctx, "main", []string{"a", "b", "none"}, now, v)
				return err
			})
			return out
		}
		if got, want := scheduled(epoch, store.AllTasks), map[string]int{"a": 1, "b": 2}; !reflect.DeepEqual(got, want) {
			t.Errorf("scheduled at epoch = %v, want %v", got, want)
		}
		if got, want := scheduled(epoch, store.PublicOnly), map[string]int{"b": 1}; !reflect.DeepEqual(got, want) {
			t.Errorf("public scheduled at epoch = %v, want %v", got, want)
		}
		// Once run_at passes, scheduled is ready with nothing written.
		if got := scheduled(at(2*time.Hour), store.AllTasks); len(got) != 0 {
			t.Errorf("scheduled two hours later = %v, want none", got)
		}
		// Counts follow a claim, a state change and a purge.
		if _, err := claim(t, s, claimFixture("main", "a", epoch, "r1")); err != nil {
			t.Fatal(err)
		}
		paused := getTask(t, s, "main", "01F")
		resumed := paused.Copy()
		resumed.State = tessera.StateReady
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, paused, resumed) })
		want["a"] = map[string]int{tessera.StateReady: 2, tessera.StateLeased: 2, tessera.StateSucceeded: 1}
		want["b"] = map[string]int{tessera.StateDead: 1, tessera.StateCanceled: 1, tessera.StateReady: 3}
		if got := stateCounts(t, s, "main", store.AllTasks); !reflect.DeepEqual(got, want) {
			t.Errorf("counts after a claim and a resume = %v, want %v", got, want)
		}
		if got := stateCounts(t, s, "never-written", store.AllTasks); len(got) != 0 {
			t.Errorf("counts of an empty namespace = %+v", got)
		}
	})

	t.Run("TaskList", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s,
			taskFixture("01A", taskOpts{queue: "q1", labels: []string{"red"}}),
			taskFixture("01B", taskOpts{queue: "q2", labels: []string{"red", "blue"}}),
			taskFixture("01C", taskOpts{queue: "q1", runAt: at(time.Hour)}),
			taskFixture("01D", taskOpts{queue: "q1", state: tessera.StateLeased, lease: leaseFixture(at(time.Hour)), labels: []string{"blue"}}),
			taskFixture("01E", taskOpts{queue: "q2", state: tessera.StateSucceeded}),
			taskFixture("01F", taskOpts{queue: "q1", labels: []string{"reddish"}}),
			taskFixture("01G", taskOpts{ns: "elsewhere", queue: "q1", labels: []string{"red"}}),
		)
		visible := func(st string, now time.Time) tessera.StateFilter { return tessera.StoredFilter(st, now) }
		cases := []struct {
			name string
			f    store.TaskFilter
			want []string
		}{
			{"all, newest first", store.TaskFilter{}, []string{"01F", "01E", "01D", "01C", "01B", "01A"}},
			{"limit", store.TaskFilter{Limit: 2}, []string{"01F", "01E"}},
			{"before cursor", store.TaskFilter{Before: "01E", Limit: 2}, []string{"01D", "01C"}},
			{"before the oldest", store.TaskFilter{Before: "01A"}, nil},
			{"stored ready", store.TaskFilter{StateFilter: tessera.StateFilter{State: tessera.StateReady}}, []string{"01F", "01C", "01B", "01A"}},
			{"ready", store.TaskFilter{StateFilter: visible(tessera.StateReady, epoch)}, []string{"01F", "01B", "01A"}},
			{"scheduled", store.TaskFilter{StateFilter: visible(tessera.StateScheduled, epoch)}, []string{"01C"}},
			{"scheduled once run_at passed", store.TaskFilter{StateFilter: visible(tessera.StateScheduled, at(2*time.Hour))}, nil},
			{"ready once run_at passed", store.TaskFilter{StateFilter: visible(tessera.StateReady, at(2*time.Hour))}, []string{"01F", "01C", "01B", "01A"}},
			{"leased", store.TaskFilter{StateFilter: visible(tessera.StateLeased, epoch)}, []string{"01D"}},
			{"succeeded", store.TaskFilter{StateFilter: visible(tessera.StateSucceeded, epoch)}, []string{"01E"}},
			{"paused", store.TaskFilter{StateFilter: visible(tessera.StatePaused, epoch)}, nil},
			{"queue", store.TaskFilter{Queue: "q2"}, []string{"01E", "01B"}},
			{"label, whole labels only", store.TaskFilter{Label: "red"}, []string{"01B", "01A"}},
			{"label and queue", store.TaskFilter{Label: "blue", Queue: "q1"}, []string{"01D"}},
			{"state, queue, cursor and limit", store.TaskFilter{StateFilter: visible(tessera.StateReady, epoch), Queue: "q1", Before: "01F", Limit: 5}, []string{"01A"}},
		}
		for _, tc := range cases {
			f := tc.f
			if f.Limit == 0 {
				f.Limit = 100
			}
			readTx(t, s, func(tx store.Tx) error {
				got, err := tx.TaskList(ctx, "main", f)
				if err != nil {
					return err
				}
				if !slices.Equal(ids(got), tc.want) {
					t.Errorf("%s: TaskList(%+v) = %v, want %v", tc.name, f, ids(got), tc.want)
				}
				return nil
			})
		}
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.TaskList(ctx, "main", store.TaskFilter{Queue: "q2", Limit: 1})
			if err != nil {
				return err
			}
			if want := taskFixture("01E", taskOpts{queue: "q2", state: tessera.StateSucceeded}); len(got) != 1 || !reflect.DeepEqual(&got[0], want) {
				t.Errorf("listed task differs from the stored one:\n got %+v\nwant %+v", got, want)
			}
			return nil
		})
	})

	// A listing stops once its rows carry PageBytes of values, one row
	// past, so the caller sees that another page follows.
	t.Run("TaskListStopsPastPageBytes", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		big := strings.Repeat("x", store.PageBytes/3+1)
		var tasks []*tessera.Task
		for i := range 6 {
			task := taskFixture(fmt.Sprintf("01%c", 'A'+i), taskOpts{})
			task.Brief = big
			tasks = append(tasks, task)
		}
		insertTasks(t, s, tasks...)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.TaskList(ctx, "main", store.TaskFilter{Limit: 100})
			if err != nil {
				return err
			}
			// Three briefs fill the budget; a fourth row says more follow.
			if len(got) != 4 {
				t.Errorf("a listing of 6 rows of a third of PageBytes each returned %d rows, want 4", len(got))
			}
			if n, more := store.CutPage(len(got), 100, func(i int) int { return got[i].ValueBytes() }); n != 3 || !more {
				t.Errorf("CutPage of that listing = %d, %v; want 3, true", n, more)
			}
			return nil
		})
	})

	// A task's run lives on its row: the claim starts it, the write that
	// moves the task on ends it, and the next claim moves it to the
	// history as it starts another.
	t.Run("Runs", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, taskFixture("01A", taskOpts{queue: "a"}), taskFixture("01B", taskOpts{queue: "b"}))
		c1 := claimFixture("main", "a", epoch, "01R1")
		first, err := claim(t, s, c1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := claim(t, s, claimFixture("main", "b", epoch, "01R3")); err != nil {
			t.Fatal(err)
		}
		ended := tessera.Run{ID: "01R1", TaskID: "01A", Holder: c1.Lease.Holder, Attempt: 1, StartedAt: epoch,
			EndedAt: ptr(at(30 * time.Second)), Outcome: tessera.OutcomeFailed, Error: "it broke"}
		back := first.Copy()
		back.State, back.Lease, back.Run = tessera.StateReady, nil, &ended
		updateTasks(t, s, back)
		runsOf := func(ns string) []tessera.Run {
			var got []tessera.Run
			readTx(t, s, func(tx store.Tx) (err error) {
				got, err = tx.RunList(ctx, ns, "01A")
				return err
			})
			return got
		}
		if got, want := runsOf("main"), []tessera.Run{ended}; !reflect.DeepEqual(got, want) {
			t.Errorf("runs of 01A once ended:\n got %+v\nwant %+v", got, want)
		}
		if got := getTask(t, s, "main", "01A").Run; !reflect.DeepEqual(got, &ended) {
			t.Errorf("the task's run: %+v, want %+v", got, ended)
		}
		c2 := claimFixture("main", "a", at(time.Minute), "01R2")
		if _, err := claim(t, s, c2); err != nil {
			t.Fatal(err)
		}
		second := tessera.Run{ID: "01R2", TaskID: "01A", Holder: c2.Lease.Holder, Attempt: 2, StartedAt: c2.Now}
		if got, want := runsOf("main"), []tessera.Run{ended, second}; !reflect.DeepEqual(got, want) {
			t.Errorf("runs of 01A claimed again:\n got %+v\nwant %+v", got, want)
		}
		if none := runsOf("elsewhere"); len(none) != 0 {
			t.Errorf("runs listed from another namespace: %+v", none)
		}
	})

	// Retention of finished tasks deletes those that finished before the
	// cutoff with their runs and events, oldest first, and touches nothing
	// live: not a ready, leased or paused task, not one finished after.
	t.Run("TasksFinishedPurge", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		finished := func(id, state string, at time.Time, ns string) *tessera.Task {
			task := taskFixture(id, taskOpts{ns: ns, state: state})
			task.FinishedAt = &at
			return task
		}
		live := []*tessera.Task{
			taskFixture("01L1", taskOpts{}),
			taskFixture("01L2", taskOpts{state: tessera.StateLeased, lease: leaseFixture(at(-48 * time.Hour))}),
			taskFixture("01L3", taskOpts{state: tessera.StatePaused}),
			finished("01L4", tessera.StateSucceeded, at(time.Minute), "main"),
		}
		insertTasks(t, s, live...)
		insertTasks(t, s,
			finished("01F1", tessera.StateSucceeded, at(-3*time.Hour), "main"),
			finished("01F2", tessera.StateDead, at(-2*time.Hour), "other"),
			finished("01F3", tessera.StateCanceled, at(-time.Hour), "main"),
		)
		writeTx(t, s, func(tx store.Tx) error {
			return tx.TaskEventAppend(ctx, "main", "01F1", &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: epoch})
		})
		for i, want := range []int{2, 1, 0} {
			var n int
			writeTx(t, s, func(tx store.Tx) (err error) {
				n, err = tx.TasksFinishedPurge(ctx, epoch, 2)
				return err
			})
			if n != want {
				t.Fatalf("purge batch %d deleted %d, want %d", i, n, want)
			}
		}
		readTx(t, s, func(tx store.Tx) error {
			for _, id := range []string{"01F1", "01F3"} {
				if _, err := tx.TaskGet(ctx, "main", id); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("finished task %s survived retention: %v", id, err)
				}
			}
			if evs, err := tx.TaskEventList(ctx, "main", "01F1", 0, 10); err != nil || len(evs) != 0 {
				t.Errorf("events of a purged task: %+v, %v", evs, err)
			}
			for _, task := range live {
				got, err := tx.TaskGet(ctx, "main", task.ID)
				if err != nil || !reflect.DeepEqual(got, task) {
					t.Errorf("live task %s after retention: %+v, %v", task.ID, got, err)
				}
			}
			return nil
		})
		if got, want := stateCounts(t, s, "main", store.AllTasks), map[string]map[string]int{"default": {
			tessera.StateReady: 1, tessera.StateLeased: 1, tessera.StatePaused: 1, tessera.StateSucceeded: 1}}; !reflect.DeepEqual(got, want) {
			t.Errorf("counts after retention = %v, want %v", got, want)
		}
	})

	t.Run("TaskEventSequencePerTask", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		type appended struct {
			ns, task string
			seq      int64
		}
		insertTasks(t, s, taskFixture("01A", taskOpts{}), taskFixture("01B", taskOpts{}), taskFixture("01A", taskOpts{ns: "other"}))
		var got []appended
		for i, a := range []struct{ ns, task string }{
			{"main", "01A"}, {"main", "01A"}, {"main", "01B"}, {"other", "01A"}, {"main", "01A"}, {"main", "01B"},
		} {
			writeTx(t, s, func(tx store.Tx) error {
				e := &tessera.TaskEvent{Kind: tessera.EventNote, Body: "note", By: "p", Time: epoch.Add(time.Duration(i) * time.Second)}
				if err := tx.TaskEventAppend(ctx, a.ns, a.task, e); err != nil {
					return err
				}
				got = append(got, appended{a.ns, a.task, e.Seq})
				return nil
			})
		}
		want := []appended{
			{"main", "01A", 1}, {"main", "01A", 2}, {"main", "01B", 1}, {"other", "01A", 1}, {"main", "01A", 3}, {"main", "01B", 2},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sequence numbers = %v, want %v", got, want)
		}
		// Several appends in one transaction keep counting.
		writeTx(t, s, func(tx store.Tx) error {
			for want := int64(4); want <= 5; want++ {
				e := &tessera.TaskEvent{Kind: tessera.EventCancelRequested, By: "p", Time: epoch}
				if err := tx.TaskEventAppend(ctx, "main", "01A", e); err != nil {
					return err
				}
				if e.Seq != want {
					t.Errorf("append in one transaction: seq %d, want %d", e.Seq, want)
				}
			}
			return nil
		})
		readTx(t, s, func(tx store.Tx) error {
			evs, err := tx.TaskEventList(ctx, "main", "01A", 1, 2)
			if err != nil {
				return err
			}
			want := []tessera.TaskEvent{
				{Seq: 2, Kind: tessera.EventNote, Body: "note", By: "p", Time: at(time.Second)},
				{Seq: 3, Kind: tessera.EventNote, Body: "note", By: "p", Time: at(4 * time.Second)},
			}
			if !reflect.DeepEqual(evs, want) {
				t.Errorf("events after 1, limit 2:\n got %+v\nwant %+v", evs, want)
			}
			rest, err := tx.TaskEventList(ctx, "main", "01A", 3, 100)
			if err != nil {
				return err
			}
			if len(rest) != 2 || rest[0].Seq != 4 || rest[1].Seq != 5 || rest[0].Body != "" {
				t.Errorf("events after 3 = %+v", rest)
			}
			none, err := tx.TaskEventList(ctx, "main", "01A", 5, 100)
			if err != nil {
				return err
			}
			if len(none) != 0 {
				t.Errorf("events after the last = %+v", none)
			}
			return nil
		})
	})

	t.Run("UpdateErrorRollsBackEverything", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, taskFixture("01KEEP", taskOpts{}))
		boom := errors.New("boom")
		err := s.Update(t.Context(), func(tx store.Tx) error {
			steps := []func() error{
				func() error { return tx.TaskInsert(ctx, taskFixture("01NEW", taskOpts{})) },
				func() error {
					_, err := tx.TaskClaim(ctx, claimFixture("main", "default", epoch, "01R"))
					return err
				},
				func() error {
					return tx.TaskEventAppend(ctx, "main", "01KEEP", &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: epoch})
				},
				func() error {
					return tx.PrincipalCreate(ctx, &tessera.Principal{ID: "p1", Kind: tessera.KindUser, CreatedAt: epoch})
				},
				func() error { _, err := tx.NamespaceEnsure(ctx, "fresh", epoch); return err },
				func() error {
					_, err := tx.IdempotencyPut(ctx, &store.Idempotency{Namespace: "main", PrincipalID: "p1", Route: "r", Key: "k",
						RequestHash: []byte{1}, Response: []byte("{}"), CreatedAt: epoch})
					return err
				},
			}
			for i, step := range steps {
				if err := step(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update returned %v, want fn's error", err)
		}
		readTx(t, s, func(tx store.Tx) error {
			if _, err := tx.TaskGet(ctx, "main", "01NEW"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("inserted task survived the rollback: %v", err)
			}
			if keep, err := tx.TaskGet(ctx, "main", "01KEEP"); err != nil || keep.State != tessera.StateReady || keep.Version != 0 {
				t.Errorf("updated task after rollback: %+v, %v", keep, err)
			}
			if runs, err := tx.RunList(ctx, "main", "01KEEP"); err != nil || len(runs) != 0 {
				t.Errorf("runs after rollback: %+v, %v", runs, err)
			}
			if evs, err := tx.TaskEventList(ctx, "main", "01KEEP", 0, 10); err != nil || len(evs) != 0 {
				t.Errorf("events after rollback: %+v, %v", evs, err)
			}
			if any, err := tx.PrincipalAny(ctx); err != nil || any {
				t.Errorf("principal survived the rollback: %v, %v", any, err)
			}
			if nss, err := tx.NamespaceList(ctx, "", 10); err != nil || len(nss) != 0 {
				t.Errorf("namespaces after rollback: %+v, %v", nss, err)
			}
			if _, err := tx.IdempotencyGet(ctx, "main", "p1", "r", "k"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("idempotency entry survived the rollback: %v", err)
			}
			return nil
		})
		// The sequence of a rolled-back event is handed out again.
		writeTx(t, s, func(tx store.Tx) error {
			e := &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: epoch}
			if err := tx.TaskEventAppend(ctx, "main", "01KEEP", e); err != nil {
				return err
			}
			if e.Seq != 1 {
				t.Errorf("first committed event has seq %d, want 1", e.Seq)
			}
			return nil
		})
	})

	t.Run("UpdatePanicRollsBack", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("the panic did not reach the caller")
				}
			}()
			_ = s.Update(t.Context(), func(tx store.Tx) error {
				if err := tx.TaskInsert(ctx, taskFixture("01P", taskOpts{})); err != nil {
					return err
				}
				panic("in the middle of a transaction")
			})
		}()
		readTx(t, s, func(tx store.Tx) error {
			if _, err := tx.TaskGet(ctx, "main", "01P"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("task inserted before a panic survived: %v", err)
			}
			return nil
		})
		// The store is still usable.
		insertTasks(t, s, taskFixture("01Q", taskOpts{}))
	})

	t.Run("ViewIsReadOnly", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		err := s.View(t.Context(), func(tx store.Tx) error { return tx.TaskInsert(ctx, taskFixture("01V", taskOpts{})) })
		if err == nil {
			t.Errorf("an insert inside View succeeded")
		}
		readTx(t, s, func(tx store.Tx) error {
			if _, err := tx.TaskGet(ctx, "main", "01V"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a write inside View is visible: %v", err)
			}
			return nil
		})
	})

	t.Run("ViewDoesNotSeeUncommitted", func(t *testing.T) {
		s := open(t)
		inserted := make(chan struct{})
		finish := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- s.Update(context.Background(), func(tx store.Tx) error {
				if err := tx.TaskInsert(context.Background(), taskFixture("01U", taskOpts{})); err != nil {
					return err
				}
				close(inserted)
				<-finish
				return nil
			})
		}()
		select {
		case <-inserted:
		case err := <-done:
			t.Fatalf("update ended early: %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := s.View(ctx, func(tx store.Tx) error {
			_, err := tx.TaskGet(ctx, "main", "01U")
			return err
		})
		cancel()
		close(finish)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("View during an open Update: err = %v, want ErrNotFound", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.TaskGet(t.Context(), "main", "01U")
			return err
		})
	})
}
