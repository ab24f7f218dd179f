package core_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// An enqueue with a unique key answers the unfinished task of its queue
// that holds the key, deduplicated, until that task finishes; then the
// key makes a new task. Another queue's key is another key. In a batch
// each item is deduplicated on its own, against the tasks before it too.
func TestUniqueKey(t *testing.T) {
	t.Parallel()
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			svc, a, _ := service(t, backend)
			enqueue := func(queue, key string) *tessera.Task {
				t.Helper()
				task, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Queue: queue, Title: "sync", UniqueKey: key}, "")
				if err != nil {
					t.Fatal(err)
				}
				return task
			}
			first := enqueue("q", "acct-7")
			if first.Deduplicated || first.UniqueKey != "acct-7" {
				t.Fatalf("the first enqueue of the key: %+v; want a new task holding acct-7", first)
			}
			again := enqueue("q", "acct-7")
			if again.ID != first.ID || !again.Deduplicated || again.State != tessera.StateReady {
				t.Fatalf("the second enqueue answered %s (deduplicated %v, %s); want %s, deduplicated", again.ID, again.Deduplicated, again.State, first.ID)
			}
			if other := enqueue("other", "acct-7"); other.ID == first.ID || other.Deduplicated {
				t.Errorf("the key in another queue answered %s (deduplicated %v); want a new task", other.ID, other.Deduplicated)
			}
			if plain := enqueue("q", ""); plain.Deduplicated {
				t.Errorf("an enqueue without a key was deduplicated")
			}

			// A leased task still holds its key; a finished one does not.
			claims := claimN(t, svc, a, "q", 10, 2)
			if leased := enqueue("q", "acct-7"); leased.ID != first.ID || leased.State != tessera.StateLeased {
				t.Errorf("while leased the key answered %s (%s); want %s, leased", leased.ID, leased.State, first.ID)
			}
			for _, c := range claims {
				if _, err := svc.Submit(ctx, a, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}, ""); err != nil {
					t.Fatal(err)
				}
			}
			next := enqueue("q", "acct-7")
			if next.ID == first.ID || next.Deduplicated {
				t.Errorf("after the holder succeeded the key answered %s (deduplicated %v); want a new task", next.ID, next.Deduplicated)
			}

			// A retried task needs its key back: refused while another
			// holds it, granted once that one finished.
			if _, err := svc.ChangeTask(ctx, a, "main", next.ID, core.ChangeCancel, false); err != nil {
				t.Fatal(err)
			}
			holder := enqueue("q", "acct-7")
			_, err := svc.ChangeTask(ctx, a, "main", next.ID, core.ChangeRetry, false)
			if tessera.ErrorCode(err) != tessera.CodeInvalidState {
				t.Errorf("a retry while %s holds the key: %v; want invalid_state", holder.ID, err)
			}
			if _, err := svc.ChangeTask(ctx, a, "main", holder.ID, core.ChangeCancel, false); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.ChangeTask(ctx, a, "main", next.ID, core.ChangeRetry, false); err != nil {
				t.Fatalf("a retry once the key was free: %v", err)
			}
			if back := enqueue("q", "acct-7"); back.ID != next.ID || !back.Deduplicated {
				t.Errorf("after the retry the key answered %s (deduplicated %v); want the retried %s", back.ID, back.Deduplicated, next.ID)
			}

			batch, err := svc.EnqueueBatch(ctx, a, "main", []core.EnqueueParams{
				{Queue: "q", Title: "a", UniqueKey: "acct-7"},
				{Queue: "q", Title: "b", UniqueKey: "acct-8"},
				{Queue: "q", Title: "c", UniqueKey: "acct-8"},
				{Queue: "q", Title: "d"},
			}, "")
			if err != nil {
				t.Fatal(err)
			}
			tasks := batch.Tasks
			if tasks[0].ID != next.ID || !tasks[0].Deduplicated {
				t.Errorf("batch item 0: %s (deduplicated %v); want %s, deduplicated", tasks[0].ID, tasks[0].Deduplicated, next.ID)
			}
			if tasks[1].Deduplicated || tasks[2].ID != tasks[1].ID || !tasks[2].Deduplicated || tasks[3].Deduplicated {
				t.Errorf("batch items 1–3: %s %v, %s %v, %s %v; want new, item 1 deduplicated, new",
					tasks[1].ID, tasks[1].Deduplicated, tasks[2].ID, tasks[2].Deduplicated, tasks[3].ID, tasks[3].Deduplicated)
			}
			audit, err := svc.MyAudit(ctx, a, core.AuditQuery{Action: core.ActTaskEnqueue, Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			statuses := map[int]int{}
			for _, e := range audit.Events {
				statuses[e.Status]++
			}
			// 201: first, other, plain, next, holder, batch items 1 and 3;
			// 200: again, leased, back, batch items 0 and 2.
			if statuses[201] != 7 || statuses[200] != 5 || len(audit.Events) != 12 {
				t.Errorf("enqueue events by status: %v; want 7 × 201 and 5 × 200", statuses)
			}
		})
	}
}

// Forty enqueues of one unique key at once make one task, and so do forty
// of one debounce key: on SQLite's one writer, and on two PostgreSQL
// nodes, where they race for the key's row.
func TestUniqueKeyConcurrent(t *testing.T) {
	t.Parallel()
	keyed := []core.EnqueueParams{
		{Queue: "unique", Title: "once", UniqueKey: "the-one"},
		{Queue: "debounce", Title: "gathered", Debounce: &core.Debounce{Key: "the-one", Seconds: 60}},
	}
	t.Run("sqlite", func(t *testing.T) {
		svc, a, _ := service(t, "sqlite")
		for _, p := range keyed {
			raceUnique(t, []*core.Service{svc, svc}, a, p)
		}
	})
	t.Run("postgres-two-nodes", func(t *testing.T) {
		url := pgtest.Schema(t)
		clock := tessera.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
		var nodes []*core.Service
		var authn *auth.Authenticator
		var db *postgres.DB
		for range 2 {
			m := meter.New(clock)
			var err error
			db, err = postgres.Open(context.Background(), url, m)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			authn = auth.NewAuthenticator(db, clock, time.Hour)
			svc := core.New(db, authn, m, clock, core.DefaultConfig())
			t.Cleanup(svc.Close)
			nodes = append(nodes, svc)
		}
		key, err := core.CreateAdminKey(context.Background(), db, clock, "", "admin")
		if err != nil {
			t.Fatal(err)
		}
		a, err := authn.Authenticate(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range keyed {
			raceUnique(t, nodes, a, p)
		}
	})
}

// raceUnique enqueues p (with a unique or a debounce key) forty times at
// once, alternating between the nodes, and checks that every answer is one
// task and p's queue holds only it.
func raceUnique(t *testing.T, nodes []*core.Service, a *auth.Actor, p core.EnqueueParams) {
	t.Helper()
	ctx := context.Background()
	// The namespace first, whose creation would otherwise line the
	// enqueues up behind the first one's commit.
	if _, err := nodes[0].Enqueue(ctx, a, "main", core.EnqueueParams{Queue: "warm-up", Title: "first"}, ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ids := make([]string, 40)
	errs := make([]error, 40)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, err := nodes[i%len(nodes)].Enqueue(ctx, a, "main", p, "")
			if errs[i] = err; err == nil {
				ids[i] = task.ID
			}
		}()
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("enqueue %d answered %s, enqueue 0 %s: two tasks for one key", i, ids[i], ids[0])
		}
	}
	list, err := nodes[0].ListTasks(ctx, a, "main", core.ListParams{Queue: p.Queue, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 1 {
		t.Errorf("%d tasks in the queue after 40 enqueues of one key, want 1", len(list.Tasks))
	}
}

// A debounce key gathers a burst of enqueues into one task while it has
// not been claimed: each gives it its title and payload and puts it
// seconds ahead, no later than max_seconds after the first; once it has
// been claimed the key makes a new task. A batch's items gather too.
func TestDebounce(t *testing.T) {
	t.Parallel()
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			svc, a, clock := service(t, backend)
			t0 := clock.Now()
			enqueue := func(title string) *tessera.Task {
				t.Helper()
				task, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Queue: "q", Title: title, Payload: []byte(`"` + title + `"`),
					Debounce: &core.Debounce{Key: "doc-9", Seconds: 10, MaxSeconds: 25}}, "")
				if err != nil {
					t.Fatal(err)
				}
				return task
			}
			first := enqueue("v1")
			if first.Debounced || first.State != tessera.StateScheduled || !first.RunAt.Equal(t0.Add(10*time.Second)) || first.DebounceKey != "doc-9" {
				t.Fatalf("the first enqueue: %+v; want a new task scheduled 10 s ahead, holding doc-9", first)
			}
			for _, step := range []struct {
				after time.Duration
				title string
				runAt time.Duration // from t0
			}{{5 * time.Second, "v2", 15 * time.Second}, {8 * time.Second, "v3", 23 * time.Second}, {8 * time.Second, "v4", 25 * time.Second}} {
				clock.Advance(step.after)
				got := enqueue(step.title)
				if got.ID != first.ID || !got.Debounced || got.Title != step.title || string(got.Payload) != `"`+step.title+`"` || !got.RunAt.Equal(t0.Add(step.runAt)) {
					t.Fatalf("enqueue of %s: %s %q %s run_at %s (debounced %v); want %s with its title and payload, run_at t0+%s, debounced",
						step.title, got.ID, got.Title, got.Payload, got.RunAt.Sub(t0), got.Debounced, first.ID, step.runAt)
				}
			}
			clock.Advance(4 * time.Second) // t0+25: due
			if c := claimN(t, svc, a, "q", 10, 1); c[0].Task.Title != "v4" {
				t.Fatalf("the claim at t0+25 granted %q; want the one task, titled v4", c[0].Task.Title)
			}
			if next := enqueue("v5"); next.ID == first.ID || next.Debounced {
				t.Errorf("after the claim the key answered %s (debounced %v); want a new task", next.ID, next.Debounced)
			}

			batch, err := svc.EnqueueBatch(ctx, a, "main", []core.EnqueueParams{
				{Queue: "b", Title: "a", Debounce: &core.Debounce{Key: "k", Seconds: 30}},
				{Queue: "b", Title: "b", Debounce: &core.Debounce{Key: "k", Seconds: 30}},
			}, "")
			if err != nil {
				t.Fatal(err)
			}
			if tk := batch.Tasks; tk[0].Debounced || tk[1].ID != tk[0].ID || !tk[1].Debounced || tk[1].Title != "b" {
				t.Errorf("a batch of one key twice: %s %v, %s %v %q; want one task, the second item debounced with its title",
					tk[0].ID, tk[0].Debounced, tk[1].ID, tk[1].Debounced, tk[1].Title)
			}

			for _, bad := range []core.EnqueueParams{
				{Title: "x", UniqueKey: "u", Debounce: &core.Debounce{Key: "k", Seconds: 1}},
				{Title: "x", RunAt: &t0, Debounce: &core.Debounce{Key: "k", Seconds: 1}},
				{Title: "x", Debounce: &core.Debounce{Key: "k", Seconds: 10, MaxSeconds: 5}},
			} {
				if _, err := svc.Enqueue(ctx, a, "main", bad, ""); tessera.ErrorCode(err) != tessera.CodeInvalidRequest {
					t.Errorf("enqueue %+v: %v; want invalid_request", bad, err)
				}
			}
		})
	}
}

// A child enqueued with parent_results gets its parents' ends in its
// claim, in its after's order: outcomes, errors, results inline within
// their bounds (a result past 64 KiB left out, flagged); a child enqueued
// without it gets none.
func TestParentResults(t *testing.T) {
	t.Parallel()
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			svc, a, _ := service(t, backend)
			parents := enqueueN(t, svc, a, 3)
			child, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Queue: "kids", Title: "child", After: []string{parents[2], parents[0], parents[1]},
				OnParentFailure: tessera.ParentFailureRun, ParentResults: true}, "")
			if err != nil || !child.ParentResults {
				t.Fatalf("child: %+v, %v", child, err)
			}
			plain, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Queue: "plain", Title: "plain", After: parents[:1]}, "")
			if err != nil {
				t.Fatal(err)
			}
			big := []byte(`"` + strings.Repeat("x", core.MaxInlineParentResult) + `"`)
			for _, c := range claimN(t, svc, a, "q", 3, 3) {
				p := core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded", Result: []byte(`{"from":"` + c.Task.ID + `"}`)}
				switch c.Task.ID {
				case parents[1]:
					p.Result = big
				case parents[2]:
					p.Outcome, p.Result, p.Error = "failed", nil, "no luck"
				}
				if _, err := svc.Submit(ctx, a, "main", c.Task.ID, p, ""); err != nil {
					t.Fatal(err)
				}
			}
			// parents[2] failed with attempts left: it is retried; cancel
			// it, so the child (on_parent_failure run) becomes ready.
			if _, err := svc.ChangeTask(ctx, a, "main", parents[2], core.ChangeCancel, false); err != nil {
				t.Fatal(err)
			}
			claim := func(queue string) core.Claimed { return claimN(t, svc, a, queue, 1, 1)[0] }
			want := []core.ParentResult{
				{TaskID: parents[2], Outcome: tessera.StateCanceled, Error: "no luck"},
				{TaskID: parents[0], Outcome: tessera.StateSucceeded, Result: []byte(`{"from":"` + parents[0] + `"}`)},
				{TaskID: parents[1], Outcome: tessera.StateSucceeded, ResultOmitted: true},
			}
			if c := claim("kids"); !reflect.DeepEqual(c.Parents, want) {
				t.Errorf("the child's claim carries parents\n%+v\nwant\n%+v", c.Parents, want)
			}
			if c := claim("plain"); c.Task.ID != plain.ID || c.Parents != nil {
				t.Errorf("a child without parent_results was handed %+v", c.Parents)
			}
			if _, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "orphan", ParentResults: true}, ""); tessera.ErrorCode(err) != tessera.CodeInvalidRequest {
				t.Errorf("parent_results without after: %v; want invalid_request", err)
			}
		})
	}
}
