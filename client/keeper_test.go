package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// failHeartbeats answers the first n heartbeats 500 without reaching the
// server.
func failHeartbeats(n int) func(http.Handler) http.Handler {
	var mu sync.Mutex
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			fail := strings.HasSuffix(r.URL.Path, "/heartbeat") && n > 0
			if fail {
				n--
			}
			mu.Unlock()
			if !fail {
				h.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"code":"internal","message":"internal error"}}`))
		})
	}
}

// waitFor polls cond until it holds or the test's patience (10 s) ends.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func claimOne(t *testing.T, c *client.Client, lease int) *client.Claim {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, client.EnqueueRequest{Title: "kept"}); err != nil {
		t.Fatal(err)
	}
	cl, _, err := c.Claim(ctx, client.ClaimRequest{LeaseSeconds: lease})
	if err != nil || cl == nil {
		t.Fatalf("claim: %v", err)
	}
	return cl
}

// The keeper outlives a failed heartbeat (it tries again before the lease
// runs out), sends progress, and reports a requested cancel through its
// context: by then the server has ended the run as canceled.
func TestKeeperSurvivesAHeartbeatFailureAndReportsACancel(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Wrap: failHeartbeats(1)})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey, client.WithRetry(client.RetryPolicy{Attempts: 1}))
	cl := claimOne(t, c, 60)

	k := c.Keep(ctx, cl, client.KeepOptions{Interval: 50 * time.Millisecond})
	defer k.Stop()
	waitFor(t, "a failed heartbeat", func() bool { return k.Failures() == 1 })
	srv.Clock.Advance(10 * time.Second)
	want := srv.Clock.Now().Add(60 * time.Second)
	waitFor(t, "a heartbeat after the failure", func() bool { return !k.ExpiresAt().Before(want) })
	if k.Context().Err() != nil {
		t.Fatalf("the keeper gave up after one failed heartbeat: %v", context.Cause(k.Context()))
	}

	k.Progress(map[string]int{"pct": 40})
	waitFor(t, "progress on the task", func() bool {
		task, err := c.GetTask(ctx, cl.Task.ID)
		return err == nil && string(task.Progress) == `{"pct":40}`
	})

	if _, err := c.CancelTask(ctx, cl.Task.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-k.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not report the cancel")
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, client.ErrCancelRequested) {
		t.Fatalf("cause %v, want ErrCancelRequested", cause)
	}
	task, err := c.GetTask(ctx, cl.Task.ID)
	if err != nil || task.State != client.StateCanceled || task.Runs[0].Outcome != "canceled" {
		t.Fatalf("task after the cancel: %+v, %v", task, err)
	}
}

// A lease that lapsed is reported as lost: the work is no longer ours.
func TestKeeperReportsALostLease(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL, testserver.AdminKey)
	cl := claimOne(t, c, 10)
	srv.Clock.Advance(11 * time.Second)
	k := c.Keep(context.Background(), cl, client.KeepOptions{Interval: 20 * time.Millisecond, NoEvents: true})
	select {
	case <-k.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not notice the lapse")
	}
	if cause := context.Cause(k.Context()); !client.IsLeaseLost(cause) {
		t.Fatalf("cause %v, want lease_lost", cause)
	}
}

// Submit stops the heartbeats first, then submits with the lease's token.
func TestKeeperStopsOnSubmitAndRelease(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)

	k := c.Keep(ctx, claimOne(t, c, 60), client.KeepOptions{Interval: 20 * time.Millisecond})
	task, err := k.Submit(ctx, client.SubmitRequest{Outcome: client.OutcomeSucceeded, Result: "done"})
	if err != nil || task.State != client.StateSucceeded {
		t.Fatalf("submit: %+v, %v", task, err)
	}
	if cause := context.Cause(k.Context()); !errors.Is(cause, client.ErrKeeperStopped) {
		t.Fatalf("cause after submit: %v", cause)
	}

	k = c.Keep(ctx, claimOne(t, c, 60), client.KeepOptions{Interval: 20 * time.Millisecond})
	task, err = k.Release(ctx)
	if err != nil || task.State != client.StateReady {
		t.Fatalf("release: %+v, %v", task, err)
	}
}
