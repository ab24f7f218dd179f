package core_test

import (
	"context"
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
			got, err := svc.ClaimN(ctx, a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: "q", LeaseSeconds: 60}, Max: 10})
			if err != nil || len(got.Claims) != 2 {
				t.Fatalf("claims: %+v, %v; want 2", got, err)
			}
			if leased := enqueue("q", "acct-7"); leased.ID != first.ID || leased.State != tessera.StateLeased {
				t.Errorf("while leased the key answered %s (%s); want %s, leased", leased.ID, leased.State, first.ID)
			}
			for _, c := range got.Claims {
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
			_, err = svc.ChangeTask(ctx, a, "main", next.ID, core.ChangeRetry, false)
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

// Forty enqueues of one key at once make one task: on SQLite's one writer,
// and on two PostgreSQL nodes, where they race for the key's row.
func TestUniqueKeyConcurrent(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		svc, a, _ := service(t, "sqlite")
		raceUnique(t, []*core.Service{svc, svc}, a)
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
		raceUnique(t, nodes, a)
	})
}

// raceUnique enqueues one key forty times at once, alternating between
// the nodes, and checks that every answer is one task and the queue holds
// only it.
func raceUnique(t *testing.T, nodes []*core.Service, a *auth.Actor) {
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
			task, err := nodes[i%len(nodes)].Enqueue(ctx, a, "main", core.EnqueueParams{Queue: "q", Title: "once", UniqueKey: "the-one"}, "")
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
	list, err := nodes[0].ListTasks(ctx, a, "main", core.ListParams{Queue: "q", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 1 {
		t.Errorf("%d tasks in the queue after 40 enqueues of one key, want 1", len(list.Tasks))
	}
}
