package storetest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// publicTask is taskFixture with the public flag set.
func publicTask(id string, o taskOpts) *tessera.Task {
	task := taskFixture(id, o)
	task.Public = true
	return task
}

// idAt returns the n-th (n < 10) id of the millisecond epoch+d: a ULID
// that sorts by time whatever ids the process made before (NewID never
// goes back in time).
func idAt(d time.Duration, n int) string {
	return tessera.IDFloor(at(d))[:25] + string(rune('0'+n))
}

// updateTasks writes each task's mutable fields over the stored task, in
// one transaction.
func updateTasks(t *testing.T, s store.Store, tasks ...*tessera.Task) {
	ctx := t.Context()
	t.Helper()
	writeTx(t, s, func(tx store.Tx) error {
		for _, task := range tasks {
			before, err := tx.TaskGet(ctx, task.Namespace, task.ID)
			if err != nil {
				return err
			}
			task.Version = before.Version
			if err := tx.TaskUpdate(ctx, before, task); err != nil {
				return err
			}
		}
		return nil
	})
}

// publicCounts reads the public tasks' counts.
func publicCounts(t *testing.T, s store.Store, ns string) map[string]map[string]int {
	t.Helper()
	return stateCounts(t, s, ns, store.PublicOnly)
}

// testPublic covers the public state reads of SPEC §3.2 and §10: counts
// kept incrementally through every change, lapsed leases, the oldest ready
// task, the board's task list and the activity feed.
func testPublic(t *testing.T, open Opener) {
	t.Run("PublicCountsFollowEveryChange", func(t *testing.T) {
		s := open(t)
		a := publicTask("01A", taskOpts{})
		b := publicTask("01B", taskOpts{queue: "gpu"})
		c := publicTask("01C", taskOpts{state: tessera.StatePaused})
		scheduled := publicTask("01D", taskOpts{runAt: at(time.Hour)})
		private := taskFixture("01E", taskOpts{})
		other := publicTask("01F", taskOpts{ns: "other"})
		insertTasks(t, s, a, b, c, scheduled, private, other)

		want := map[string]map[string]int{
			"default": {tessera.StateReady: 2, tessera.StatePaused: 1}, // a scheduled task counts as ready
			"gpu":     {tessera.StateReady: 1},
		}
		if got := publicCounts(t, s, "main"); !reflect.DeepEqual(got, want) {
			t.Fatalf("after insert: %v, want %v", got, want)
		}

		// Claim, pause and finish: each change moves one count; a change of
		// anything but the state (a heartbeat) moves none; private tasks
		// never count.
		a.State, a.Lease = tessera.StateLeased, leaseFixture(at(time.Minute))
		b.State = tessera.StatePaused
		private.State = tessera.StateLeased
		updateTasks(t, s, a, b, private)
		a.Lease = leaseFixture(at(2 * time.Minute))
		a.Progress = []byte(`{"pct":50}`)
		updateTasks(t, s, a)
		a.State, a.Lease = tessera.StateSucceeded, nil
		c.State = tessera.StateCanceled
		updateTasks(t, s, a, c)

		want = map[string]map[string]int{
			"default": {tessera.StateReady: 1, tessera.StateSucceeded: 1, tessera.StateCanceled: 1},
			"gpu":     {tessera.StatePaused: 1},
		}
		if got := publicCounts(t, s, "main"); !reflect.DeepEqual(got, want) {
			t.Errorf("after changes: %v, want %v", got, want)
		}
		if got := publicCounts(t, s, "other"); !reflect.DeepEqual(got, map[string]map[string]int{"default": {tessera.StateReady: 1}}) {
			t.Errorf("other namespace: %v", got)
		}
		if got := publicCounts(t, s, "never-written"); len(got) != 0 {
			t.Errorf("a namespace never written has counts %v", got)
		}
	})

	t.Run("PublicCountsRolledBackWithTheirTransaction", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, publicTask("01A", taskOpts{}))
		err := s.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.TaskInsert(ctx, publicTask("01B", taskOpts{})); err != nil {
				return err
			}
			return store.ErrConflict // any error rolls back
		})
		wantErr(t, "rolled-back insert", err, store.ErrConflict)
		if got := publicCounts(t, s, "main"); got["default"][tessera.StateReady] != 1 {
			t.Errorf("after a rolled-back insert: %v, want 1 ready", got)
		}
	})

	t.Run("PublicCountsMatchTaskCounts", func(t *testing.T) {
		// With every task public, the incremental counts equal a counting
		// query, scheduled folded into ready.
		s := open(t)
		var tasks []*tessera.Task
		states := []string{tessera.StateReady, tessera.StateLeased, tessera.StatePaused, tessera.StateSucceeded, tessera.StateDead}
		for i := range 40 {
			o := taskOpts{queue: []string{"a", "b", "c"}[i%3], state: states[i%len(states)]}
			if i%7 == 0 {
				o.runAt = at(time.Hour)
			}
			tasks = append(tasks, publicTask(idAt(time.Duration(i)*time.Millisecond, 0), o))
		}
		insertTasks(t, s, tasks...)
		for i, task := range tasks {
			if i%4 == 0 {
				task.State = tessera.StateCanceled
			}
		}
		updateTasks(t, s, tasks...)
		want := stateCounts(t, s, "main", store.AllTasks)
		if got := publicCounts(t, s, "main"); !reflect.DeepEqual(got, want) {
			t.Errorf("public counts %v, task counts %v", got, want)
		}
	})

	t.Run("PublicLapsedLeases", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		leased := func(id, queue string, exp time.Time, public bool) *tessera.Task {
			task := taskFixture(id, taskOpts{queue: queue, state: tessera.StateLeased, lease: leaseFixture(exp)})
			task.Public = public
			return task
		}
		insertTasks(t, s,
			leased("01A", "default", at(-time.Second), true),
			leased("01B", "default", epoch, true), // a lease is live strictly before expires_at
			leased("01C", "default", at(time.Second), true),
			leased("01D", "default", at(-time.Second), false), // private
			leased("01E", "gpu", at(-time.Minute), true),
			leased("01F", "cpu", at(-time.Minute), true), // not asked for
			publicTask("01G", taskOpts{}),                // ready
		)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.TaskLapsedCounts(ctx, "main", []string{"default", "gpu", "empty"}, epoch, store.PublicOnly)
			if err != nil {
				return err
			}
			if want := map[string]int{"default": 2, "gpu": 1}; !reflect.DeepEqual(got, want) {
				t.Errorf("lapsed = %v, want %v", got, want)
			}
			all, err := tx.TaskLapsedCounts(ctx, "main", []string{"default", "gpu", "empty"}, epoch, store.AllTasks)
			if err != nil {
				return err
			}
			if want := map[string]int{"default": 3, "gpu": 1}; !reflect.DeepEqual(all, want) {
				t.Errorf("lapsed of all tasks = %v, want %v", all, want)
			}
			got, err = tx.TaskLapsedCounts(ctx, "main", nil, epoch, store.PublicOnly)
			if err != nil {
				return err
			}
			if len(got) != 0 {
				t.Errorf("no queues asked: %v", got)
			}
			got, err = tx.TaskLapsedCounts(ctx, "other", []string{"default"}, epoch, store.PublicOnly)
			if len(got) != 0 {
				t.Errorf("another namespace: %v", got)
			}
			return err
		})
	})

	t.Run("PublicOldestReady", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		high := publicTask("01A", taskOpts{priority: 9, runAt: at(-time.Minute)})
		oldest := publicTask("01B", taskOpts{runAt: at(-time.Hour)})
		insertTasks(t, s, high, oldest,
			taskFixture("01C", taskOpts{runAt: at(-2 * time.Hour)}),             // private
			publicTask("01D", taskOpts{queue: "later", runAt: at(time.Minute)}), // scheduled only
			publicTask("01E", taskOpts{queue: "gpu", state: tessera.StatePaused, runAt: at(-time.Hour)}),
		)
		oldestReadyOf := func(v store.Visibility) map[string]time.Time {
			var got map[string]time.Time
			readTx(t, s, func(tx store.Tx) (err error) {
				got, err = tx.TaskOldestReady(ctx, "main", []string{"default", "later", "gpu", "empty"}, epoch, v)
				return err
			})
			return got
		}
		oldestReady := func() map[string]time.Time { return oldestReadyOf(store.PublicOnly) }
		if got, want := oldestReady(), map[string]time.Time{"default": at(-time.Hour)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("oldest ready = %v, want %v", got, want)
		}
		if got, want := oldestReadyOf(store.AllTasks), map[string]time.Time{"default": at(-2 * time.Hour)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("oldest ready of all tasks = %v, want %v", got, want)
		}
		// Claimed, it is no longer ready; released with a new run_at, it is
		// ready again from then.
		oldest.State, oldest.Lease = tessera.StateLeased, leaseFixture(at(time.Minute))
		updateTasks(t, s, oldest)
		if got, want := oldestReady(), map[string]time.Time{"default": at(-time.Minute)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("after the claim: %v, want %v", got, want)
		}
		oldest.State, oldest.Lease, oldest.RunAt = tessera.StateReady, nil, at(-30*time.Second)
		updateTasks(t, s, oldest)
		if got, want := oldestReady(), map[string]time.Time{"default": at(-time.Minute)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("after the release: %v, want %v", got, want)
		}
		// A run_at moved while ready (backoff) moves its entry.
		high.RunAt = at(time.Hour)
		updateTasks(t, s, high)
		if got, want := oldestReady(), map[string]time.Time{"default": at(-30 * time.Second)}; !reflect.DeepEqual(got, want) {
			t.Errorf("after moving run_at: %v, want %v", got, want)
		}
	})

	// Every task's oldest ready and scheduled come from the claim index:
	// a seek per priority the queue's ready tasks hold, and the scheduled
	// tasks themselves, never the due ones behind them.
	t.Run("ReadyReadsCostPrioritiesAndScheduled", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		var tasks []*tessera.Task
		for i := range 300 {
			tasks = append(tasks, taskFixture(fmt.Sprintf("01D%04d", i), taskOpts{runAt: at(-time.Duration(i+1) * time.Second)}))
		}
		for i := range 4 {
			tasks = append(tasks, taskFixture(fmt.Sprintf("01S%04d", i), taskOpts{runAt: at(time.Duration(i+1) * time.Hour)}))
		}
		tasks = append(tasks,
			taskFixture("01H1", taskOpts{priority: 5, runAt: at(-10 * time.Hour)}),
			taskFixture("01H2", taskOpts{priority: 5, runAt: at(time.Minute)}),
			taskFixture("01L1", taskOpts{priority: -5, runAt: at(-time.Minute)}),
			taskFixture("01F1", taskOpts{state: tessera.StateSucceeded, runAt: at(-20 * time.Hour)}))
		insertTasks(t, s, tasks...)
		ctxU, usage := meter.WithUsage(ctx)
		var oldest map[string]time.Time
		var scheduled map[string]int
		if err := s.View(ctxU, func(tx store.Tx) (err error) {
			if oldest, err = tx.TaskOldestReady(ctxU, "main", []string{"default"}, epoch, store.AllTasks); err != nil {
				return err
			}
			scheduled, err = tx.TaskScheduled(ctxU, "main", []string{"default"}, epoch, store.AllTasks)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if want := (map[string]time.Time{"default": at(-10 * time.Hour)}); !reflect.DeepEqual(oldest, want) {
			t.Errorf("oldest ready = %v, want %v", oldest, want)
		}
		if want := (map[string]int{"default": 5}); !reflect.DeepEqual(scheduled, want) {
			t.Errorf("scheduled = %v, want %v", scheduled, want)
		}
		// Three priorities: a seek to find each and one to read its
		// oldest, twice; the five scheduled tasks. Not the 300 due.
		if read := usage.Read.Load(); read > 3*4+5+8 {
			t.Errorf("the ready reads of a queue with 3 priorities, 5 scheduled and 301 due tasks read %d rows", read)
		}
	})

	t.Run("PublicTasksNewestFirstWithoutBriefs", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		var want []store.PublicTask
		for i := range 5 {
			task := publicTask(idAt(time.Duration(i)*time.Second, 0), taskOpts{queue: "q", priority: i, state: tessera.StateReady})
			insertTasks(t, s, task, taskFixture(idAt(time.Duration(i)*time.Second, 1), taskOpts{}))
			want = append(want, store.PublicTask{ID: task.ID, Queue: "q", Title: task.Title, State: tessera.StateReady,
				Priority: i, RunAt: task.RunAt, UpdatedAt: task.UpdatedAt})
		}
		insertTasks(t, s, publicTask("01OTHER", taskOpts{ns: "other"}))
		slices.Reverse(want)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.PublicTasks(ctx, "main", 3)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want[:3]) {
				t.Errorf("newest three:\n got %+v\nwant %+v", got, want[:3])
			}
			got, err = tx.PublicTasks(ctx, "main", 100)
			if len(got) != 5 {
				t.Errorf("all public tasks: %d, want 5 (private and other namespaces excluded)", len(got))
			}
			return err
		})
		// The board sees state changes.
		task := publicTask(want[0].ID, taskOpts{queue: "q", priority: 4})
		task.State = tessera.StateDead
		updateTasks(t, s, task)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.PublicTasks(ctx, "main", 1)
			if err == nil && (len(got) != 1 || got[0].State != tessera.StateDead) {
				t.Errorf("after a change: %+v", got)
			}
			return err
		})
	})

	t.Run("AuditPublicEvents", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		task := publicTask("01TASK", taskOpts{})
		insertTasks(t, s, task)
		n := 0
		ev := func(d time.Duration, ns, principal, action, target string, public bool) *tessera.AuditEvent {
			n++
			return &tessera.AuditEvent{ID: idAt(d, n), Time: at(d), Namespace: ns, PrincipalID: principal,
				KeyID: "k-" + principal, Action: action, Target: target, RunID: "", Status: 200, IPHash: "feedface", Public: public}
		}
		events := []*tessera.AuditEvent{
			ev(-25*time.Hour, "main", "p-ada", "task.enqueue", task.ID, true), // before since
			ev(-3*time.Second, "main", "p-ada", "task.enqueue", task.ID, true),
			ev(-2*time.Second, "main", "p-bot", "task.get", task.ID, false), // private
			ev(-time.Second, "main", "p-bot", "claim.grant", task.ID, true),
			ev(0, "main", "p-gone", "record.write", "results/r1", true),
			ev(0, "other", "p-ada", "task.enqueue", "01X", true),
		}
		events[3].RunID = "01RUN"
		writeTx(t, s, func(tx store.Tx) error {
			for _, p := range []*tessera.Principal{
				{ID: "p-ada", Kind: tessera.KindUser, DisplayName: "Ada (now)", CreatedAt: epoch},
				{ID: "p-bot", Kind: tessera.KindAgent, DisplayName: "bot-7", CreatedAt: epoch},
			} {
				if err := tx.PrincipalCreate(ctx, p); err != nil {
					return err
				}
			}
			// Ada as last seen in main: the name the feed shows there.
			if err := tx.IdentityPut(ctx, &tessera.NamespaceIdentity{Namespace: "main", PrincipalID: "p-ada", Account: "acct",
				Kind: tessera.KindUser, DisplayName: "Ada", SeenAt: epoch}); err != nil {
				return err
			}
			for _, e := range events {
				if err := tx.AuditInsert(ctx, e); err != nil {
					return err
				}
			}
			return nil
		})
		since := at(-24 * time.Hour)
		var page1, page2 []store.PublicEvent
		readTx(t, s, func(tx store.Tx) (err error) {
			if page1, err = tx.AuditPublicEvents(ctx, "main", since, "", 2); err != nil {
				return err
			}
			page2, err = tx.AuditPublicEvents(ctx, "main", since, page1[len(page1)-1].ID, 10)
			return err
		})
		want := []store.PublicEvent{
			{ID: events[4].ID, Time: events[4].Time, Action: "record.write", Target: "results/r1"},
			{ID: events[3].ID, Time: events[3].Time, Action: "claim.grant", Target: task.ID, RunID: "01RUN",
				Title: task.Title, By: "bot-7", ByKind: tessera.KindAgent},
		}
		if !reflect.DeepEqual(page1, want) {
			t.Errorf("first page:\n got %+v\nwant %+v", page1, want)
		}
		want = []store.PublicEvent{{ID: events[1].ID, Time: events[1].Time, Action: "task.enqueue", Target: task.ID,
			Title: task.Title, By: "Ada", ByKind: tessera.KindUser}}
		if !reflect.DeepEqual(page2, want) {
			t.Errorf("second page:\n got %+v\nwant %+v", page2, want)
		}

		// Retention takes public events out of the feed with their rows.
		writeTx(t, s, func(tx store.Tx) error {
			_, err := tx.AuditEventsPurge(ctx, at(-time.Hour), 100)
			return err
		})
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.AuditPublicEvents(ctx, "main", at(-48*time.Hour), "", 10)
			ids := map[string]bool{}
			for _, e := range got {
				ids[e.ID] = true
			}
			if ids[events[0].ID] || len(got) != 3 {
				t.Errorf("after retention: %v", slices.Collect(maps.Keys(ids)))
			}
			return err
		})
	})
}
