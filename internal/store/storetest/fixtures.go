package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// epoch is the suite's "now": a fixed UTC instant at the millisecond
// precision every backend keeps, so values read back equal what was written.
var epoch = time.UnixMilli(1893456000123).UTC() // 2030-01-01T00:00:00.123Z

// at returns epoch moved by d.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// writeTx runs fn in an Update and fails the test if it returns an error.
func writeTx(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// readTx runs fn in a View and fails the test if it returns an error.
func readTx(t *testing.T, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// wantErr fails the test unless err is (or wraps) want.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// taskOpts are the fields a test cares about; the rest get plain values.
type taskOpts struct {
	ns, queue string
	state     string
	priority  int
	runAt     time.Time
	labels    []string
	lease     *tessera.Lease
}

// taskFixture returns a task with every column filled with a non-zero value
// except those opts leave zero.
func taskFixture(id string, o taskOpts) *tessera.Task {
	if o.ns == "" {
		o.ns = "main"
	}
	if o.queue == "" {
		o.queue = "default"
	}
	if o.state == "" {
		o.state = tessera.StateReady
	}
	if o.runAt.IsZero() {
		o.runAt = at(-time.Minute)
	}
	if o.labels == nil {
		o.labels = []string{}
	}
	if o.lease != nil {
		o.lease.TaskID = id
	}
	return &tessera.Task{
		Namespace:   o.ns,
		ID:          id,
		Queue:       o.queue,
		Title:       "task " + id,
		Brief:       "do " + id,
		Payload:     json.RawMessage(`{"n":1}`),
		Labels:      o.labels,
		Priority:    o.priority,
		MaxAttempts: 3,
		State:       o.state,
		RunAt:       o.runAt,
		CreatedBy:   "p-producer",
		CreatedAt:   at(-time.Hour),
		UpdatedAt:   at(-time.Hour),
		Lease:       o.lease,
	}
}

// leaseFixture returns a lease expiring at exp.
func leaseFixture(exp time.Time) *tessera.Lease {
	return &tessera.Lease{RunID: "run-" + fmt.Sprint(exp.UnixMilli()), Holder: "p-worker",
		ExpiresAt: exp, Seconds: 60, TokenHash: []byte{1, 2, 3, 4}}
}

// insertTasks inserts tasks in one transaction.
func insertTasks(t *testing.T, s store.Store, tasks ...*tessera.Task) {
	ctx := t.Context()
	t.Helper()
	writeTx(t, s, func(tx store.Tx) error {
		for _, task := range tasks {
			if err := tx.TaskInsert(ctx, task); err != nil {
				return err
			}
		}
		return nil
	})
}

// ids returns the ids of tasks, in order.
func ids(tasks []tessera.Task) []string {
	out := make([]string, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}

// claimFixture is a claim of queue in ns at now, with run id run.
func claimFixture(ns, queue string, now time.Time, run string) store.TaskClaim {
	return store.TaskClaim{Namespace: ns, Queue: queue, Now: now, Lease: tessera.Lease{
		RunID: run, Holder: "p-worker", ExpiresAt: now.Add(time.Minute), Seconds: 60, TokenHash: []byte(run)}}
}

// claim runs one claim in its own transaction.
func claim(t *testing.T, s store.Store, p store.TaskClaim) (*tessera.Task, error) {
	t.Helper()
	var task *tessera.Task
	err := s.Update(t.Context(), func(tx store.Tx) (err error) {
		task, err = tx.TaskClaim(t.Context(), p)
		return err
	})
	return task, err
}

// getTask reads one task, failing the test if it cannot.
func getTask(t *testing.T, s store.Store, ns, id string) *tessera.Task {
	t.Helper()
	var task *tessera.Task
	readTx(t, s, func(tx store.Tx) (err error) {
		task, err = tx.TaskGet(t.Context(), ns, id)
		return err
	})
	return task
}

// stateCounts reads TaskStateCounts as queue → state → count, zeros
// dropped.
func stateCounts(t *testing.T, s store.Store, ns string, v store.Visibility) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	readTx(t, s, func(tx store.Tx) error {
		rows, err := tx.TaskStateCounts(t.Context(), ns, v)
		for _, r := range rows {
			if r.Count < 0 {
				t.Errorf("%s/%s counted %d", r.Queue, r.State, r.Count)
			}
			if r.Count == 0 {
				continue
			}
			if out[r.Queue] == nil {
				out[r.Queue] = map[string]int{}
			}
			if _, dup := out[r.Queue][r.State]; dup {
				t.Errorf("counts row %+v is repeated", r)
			}
			out[r.Queue][r.State] = r.Count
		}
		return err
	})
	return out
}
