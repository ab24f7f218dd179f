package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/store/sqlite"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// backends opens a fresh store of each kind for a test.
var backends = map[string]func(t *testing.T, m *meter.Meter) store.Store{
	"sqlite": func(t *testing.T, m *meter.Meter) store.Store {
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	},
	"postgres": func(t *testing.T, m *meter.Meter) store.Store {
		db, err := postgres.Open(context.Background(), pgtest.Schema(t), m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	},
}

// service is a core service over a fresh store of the backend, on a manual
// clock, with the actor of a fresh admin key.
func service(t *testing.T, backend string) (*core.Service, *auth.Actor, *tessera.ManualClock) {
	t.Helper()
	ctx := context.Background()
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	m := meter.New(clock)
	st := backends[backend](t, m)
	authn := auth.NewAuthenticator(st, clock, time.Hour)
	cfg := core.DefaultConfig()
	cfg.ClaimRate, cfg.ClaimBurst = 1e6, 1e6
	svc := core.New(st, authn, m, clock, cfg)
	t.Cleanup(svc.Close)
	key, err := core.CreateAdminKey(ctx, st, clock, "", "admin")
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.Authenticate(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return svc, a, clock
}

func enqueueN(t *testing.T, svc *core.Service, a *auth.Actor, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		task, err := svc.Enqueue(context.Background(), a, "main", core.EnqueueParams{Queue: "q", Title: fmt.Sprint("t", i), Priority: i % 2}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	return ids
}

// claimN claims up to max tasks of queue with 60 s leases, failing the
// test unless it is granted exactly want.
func claimN(t *testing.T, svc *core.Service, a *auth.Actor, queue string, max, want int) []core.Claimed {
	t.Helper()
	got, err := svc.ClaimN(context.Background(), a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: queue, LeaseSeconds: 60}, Max: max})
	if err != nil || len(got.Claims) != want {
		t.Fatalf("claim of up to %d in %s: %+v, %v; want %d leases", max, queue, got, err, want)
	}
	return got.Claims
}

// A batch claim grants up to max ready tasks in claim order, each with a
// lease of its own, audited as a claim each; a batch submit ends each run
// fenced by its own token: a stale token refuses only its item, and the
// others stand.
func TestClaimNAndSubmitBatch(t *testing.T) {
	t.Parallel()
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			svc, a, clock := service(t, backend)
			enqueueN(t, svc, a, 5)

			got, err := svc.ClaimN(ctx, a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: "q", LeaseSeconds: 60}, Max: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Claims) != 3 {
				t.Fatalf("granted %d leases, want 3", len(got.Claims))
			}
			// Claim order: priority 1 first (tasks 1 and 3), then the
			// oldest of priority 0.
			var prios []int
			tokens := map[string]bool{}
			for _, c := range got.Claims {
				prios = append(prios, c.Task.Priority)
				if c.Lease.TaskID != c.Task.ID || c.Task.State != tessera.StateLeased || tokens[c.Lease.Token] {
					t.Errorf("claim %+v of task %s (%s)", c.Lease, c.Task.ID, c.Task.State)
				}
				tokens[c.Lease.Token] = true
			}
			if !slices.Equal(prios, []int{1, 1, 0}) {
				t.Errorf("priorities granted %v, want [1 1 0]", prios)
			}
			rest, err := svc.ClaimN(ctx, a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: "q"}, Max: 10})
			if err != nil || len(rest.Claims) != 2 {
				t.Fatalf("the rest: %+v, %v; want 2 leases", rest, err)
			}
			empty, err := svc.ClaimN(ctx, a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: "q"}, Max: 10})
			if err != nil || len(empty.Claims) != 0 || empty.RetryAfter <= 0 {
				t.Fatalf("an empty queue: %+v, %v; want no lease and a Retry-After", empty, err)
			}
			audit, err := svc.MyAudit(ctx, a, core.AuditQuery{Action: core.ActClaim, Limit: 50})
			if err != nil || len(audit.Events) != 5 {
				t.Fatalf("claim events: %d, %v; want one per lease", len(audit.Events), err)
			}

			// Items: the first two with their tokens, the third with the
			// second's token (stale for it), the fourth lapsed, the fifth
			// a task that does not exist.
			all := append(got.Claims, rest.Claims...)
			lapsed := all[3]
			clock.Advance(30 * time.Second)
			if _, err := svc.Heartbeat(ctx, a, "main", all[0].Task.ID, core.HeartbeatParams{LeaseToken: all[0].Lease.Token, LeaseSeconds: 600}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Heartbeat(ctx, a, "main", all[1].Task.ID, core.HeartbeatParams{LeaseToken: all[1].Lease.Token, LeaseSeconds: 600}); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.Heartbeat(ctx, a, "main", all[2].Task.ID, core.HeartbeatParams{LeaseToken: all[2].Lease.Token, LeaseSeconds: 600}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(5 * time.Minute) // lapsed's 300 s lease ran out; the others were renewed for 600
			items := []core.SubmitItem{
				{TaskID: all[0].Task.ID, SubmitParams: core.SubmitParams{LeaseToken: all[0].Lease.Token, Outcome: "succeeded"}},
				{TaskID: all[1].Task.ID, SubmitParams: core.SubmitParams{LeaseToken: all[1].Lease.Token, Outcome: "failed", Error: "broke"}},
				{TaskID: all[2].Task.ID, SubmitParams: core.SubmitParams{LeaseToken: all[1].Lease.Token, Outcome: "succeeded"}},
				{TaskID: lapsed.Task.ID, SubmitParams: core.SubmitParams{LeaseToken: lapsed.Lease.Token, Outcome: "succeeded"}},
				{TaskID: "01NOSUCHTASK", SubmitParams: core.SubmitParams{LeaseToken: "01NOSUCHTASK.x", Outcome: "succeeded"}},
			}
			res, err := svc.SubmitBatch(ctx, a, "main", items, "batch-1")
			if err != nil {
				t.Fatal(err)
			}
			var outcomes []string
			for i, r := range res.Results {
				switch {
				case r.TaskID != items[i].TaskID:
					t.Errorf("result %d is for %s, the item for %s", i, r.TaskID, items[i].TaskID)
				case r.Error != nil:
					outcomes = append(outcomes, string(r.Error.Code))
				default:
					outcomes = append(outcomes, r.Task.State)
				}
			}
			// A failed run backs its task off: scheduled.
			if want := []string{"succeeded", "scheduled", "lease_lost", "lease_lost", "not_found"}; !slices.Equal(outcomes, want) {
				t.Errorf("outcomes %v, want %v", outcomes, want)
			}
			// The stale item's task is untouched; the lapse was recorded.
			for id, want := range map[string]string{all[2].Task.ID: tessera.StateLeased, lapsed.Task.ID: tessera.StateScheduled} {
				task, err := svc.GetTask(ctx, a, "main", id)
				if err != nil || task.State != want {
					t.Errorf("task %s: %v, %v; want %s", id, task, err, want)
				}
			}
			if task, err := svc.GetTask(ctx, a, "main", lapsed.Task.ID); err == nil && task.Runs[len(task.Runs)-1].Outcome != tessera.OutcomeLapsed {
				t.Errorf("the lapsed item's run ended %+v", task.Runs)
			}
			again, err := svc.SubmitBatch(ctx, a, "main", items, "batch-1")
			first, _ := json.Marshal(res)
			second, _ := json.Marshal(again)
			if err != nil || string(first) != string(second) {
				t.Errorf("the repeat answered %s, %v; want the first answer %s", second, err, first)
			}
			audit, err = svc.MyAudit(ctx, a, core.AuditQuery{Action: core.ActSubmit, Limit: 50})
			if err != nil || len(audit.Events) != 2 {
				t.Errorf("submit events: %d, %v; want one per run ended", len(audit.Events), err)
			}
			dup := []core.SubmitItem{items[2], items[2]}
			if _, err := svc.SubmitBatch(ctx, a, "main", dup, ""); tessera.ErrorCode(err) != tessera.CodeInvalidRequest {
				t.Errorf("a task named twice: %v, want invalid_request", err)
			}
		})
	}
}

// A batch claim that waits answers as soon as one task is ready, without
// waiting to fill max.
func TestClaimNWaitsForTheFirst(t *testing.T) {
	ctx := context.Background()
	svc, a, _ := service(t, "sqlite")
	done := make(chan *core.ClaimedBatch, 1)
	go func() {
		got, err := svc.ClaimN(ctx, a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: "q", WaitSeconds: 20}, Max: 50})
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	time.Sleep(50 * time.Millisecond) // the claim is waiting
	enqueueN(t, svc, a, 1)
	select {
	case got := <-done:
		if len(got.Claims) != 1 {
			t.Errorf("granted %d, want the one ready", len(got.Claims))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting batch claim did not answer when a task arrived")
	}
}

// A batch submit settles the children of the tasks it finishes, and only
// theirs; an item it refuses before writing (a cooldown for a task with no
// group) leaves its run alone, while the batch's other items stand.
func TestSubmitBatchSettlesChildren(t *testing.T) {
	t.Parallel()
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			svc, a, _ := service(t, backend)
			parents := enqueueN(t, svc, a, 3)
			child, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Queue: "kids", Title: "child", After: parents[:2]}, "")
			if err != nil {
				t.Fatal(err)
			}
			var items []core.SubmitItem
			for _, c := range claimN(t, svc, a, "q", 3, 3) {
				it := core.SubmitItem{TaskID: c.Task.ID, SubmitParams: core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}}
				if c.Task.ID == parents[2] {
					it.CooldownSeconds = 5
				}
				items = append(items, it)
			}
			res, err := svc.SubmitBatch(ctx, a, "main", items, "")
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res.Results {
				want := tessera.StateSucceeded
				if items[i].TaskID == parents[2] {
					want = string(tessera.CodeInvalidRequest)
				}
				got := ""
				if r.Error != nil {
					got = string(r.Error.Code)
				} else {
					got = r.Task.State
				}
				if got != want {
					t.Errorf("item %s: %s, want %s", items[i].TaskID, got, want)
				}
			}
			if task, err := svc.GetTask(ctx, a, "main", parents[2]); err != nil || task.State != tessera.StateLeased {
				t.Errorf("the refused item's task: %v, %v; want still leased", task, err)
			}
			task, err := svc.GetTask(ctx, a, "main", child.ID)
			if err != nil || task.State != tessera.StateReady || task.Dependency == nil || task.Dependency.WaitingOn != 0 {
				t.Errorf("the child of the two parents the batch finished: %+v, %v; want ready, waiting on none", task, err)
			}
		})
	}
}
