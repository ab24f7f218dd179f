package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// What a handler returns is what is submitted: a result as succeeded, an
// error as failed with its text, a panic as failed too, and a progress
// report reaches the task. With MaxTasks Work returns once they are done.
func TestWorkSubmitsWhatTheHandlerReturns(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL, testserver.AdminKey)
	ids := enqueueN(t, c, "w", "ok", "fail", "panic")
	err := c.Work(context.Background(), "w", func(ctx context.Context, job *client.Job) (any, error) {
		var what string
		if err := json.Unmarshal(job.Task.Payload, &what); err != nil {
			return nil, err
		}
		switch what {
		case "fail":
			return nil, errors.New("no such document")
		case "panic":
			panic("boom")
		}
		job.Progress(map[string]int{"pct": 100})
		return map[string]string{"done": job.Task.ID}, nil
	}, client.WorkOptions{MaxTasks: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, c, ids[0]); got.State != client.StateSucceeded || string(got.Result) != `{"done":"`+ids[0]+`"}` {
		t.Errorf("the task that worked: %s, result %s", got.State, got.Result)
	}
	if got := getTask(t, c, ids[1]); got.State != client.StateDead || got.Error != "no such document" {
		t.Errorf("the task that failed: %s, error %q", got.State, got.Error)
	}
	if got := getTask(t, c, ids[2]); got.State != client.StateDead || got.Error != "handler panicked: boom" {
		t.Errorf("the task whose handler panicked: %s, error %q", got.State, got.Error)
	}
}

// Concurrency handlers run at once: each of three waits until all three
// have started, which one at a time never would.
func TestWorkRunsConcurrencyHandlersAtOnce(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL, testserver.AdminKey)
	ids := enqueueN(t, c, "w", 1, 2, 3)
	var started sync.WaitGroup
	started.Add(3)
	err := c.Work(context.Background(), "w", func(ctx context.Context, job *client.Job) (any, error) {
		started.Done()
		started.Wait()
		return job.Task.Payload, nil
	}, client.WorkOptions{Concurrency: 3, MaxTasks: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if got := getTask(t, c, id); got.State != client.StateSucceeded || string(got.Result) != string(rune('1'+i)) {
			t.Errorf("task %d: %s, result %s", i+1, got.State, got.Result)
		}
	}
}

// When ctx ends, Work claims no more; a handler that finishes within the
// drain has its result submitted; one still running when the drain runs
// out has its context canceled with ErrDrained and its task released, no
// attempt used; and Work says it cut a task short.
func TestWorkDrainsWhenItsContextEnds(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL, testserver.AdminKey)
	ids := enqueueN(t, c, "w", "quick", "slow", "never claimed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan string, 2)
	finish := make(chan struct{})
	var slowCause error
	done := make(chan error, 1)
	go func() {
		done <- c.Work(ctx, "w", func(hctx context.Context, job *client.Job) (any, error) {
			var what string
			_ = json.Unmarshal(job.Task.Payload, &what)
			started <- what
			if what == "quick" {
				<-finish // outlives ctx, not the drain
				return "finished", nil
			}
			<-hctx.Done()
			slowCause = context.Cause(hctx)
			return nil, hctx.Err()
		}, client.WorkOptions{Concurrency: 2, Drain: drainForTest})
	}()
	<-started
	<-started
	cancel()
	close(finish)
	err := <-done
	if !errors.Is(err, client.ErrDrained) || !strings.Contains(err.Error(), "1 task(s) cut short") {
		t.Fatalf("Work after the drain ran out: %v", err)
	}
	if !errors.Is(slowCause, client.ErrDrained) {
		t.Errorf("the slow handler's context ended with %v, want ErrDrained", slowCause)
	}
	if got := getTask(t, c, ids[0]); got.State != client.StateSucceeded || string(got.Result) != `"finished"` {
		t.Errorf("the quick task: %s, result %s", got.State, got.Result)
	}
	if got := getTask(t, c, ids[1]); got.State != client.StateReady || got.Attempts != 0 || got.Runs[0].Outcome != "released" {
		t.Errorf("the slow task: %s, attempts %d, runs %+v", got.State, got.Attempts, got.Runs)
	}
	if got := getTask(t, c, ids[2]); got.State != client.StateReady || len(got.Runs) != 0 {
		t.Errorf("the third task was claimed after ctx ended: %s, runs %+v", got.State, got.Runs)
	}
}

// drainForTest is long enough for a handler that returns at once to beat
// it on a loaded machine, short enough to keep the test quick.
const drainForTest = 2 * time.Second

// A task canceled while its handler runs: the handler's context ends with
// ErrCancelRequested and nothing is submitted (the server already ended
// the run as canceled).
func TestWorkStopsAHandlerWhoseTaskIsCanceled(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL, testserver.AdminKey)
	ids := enqueueN(t, c, "w", nil)
	started := make(chan struct{})
	var cause error
	done := make(chan error, 1)
	go func() {
		done <- c.Work(context.Background(), "w", func(ctx context.Context, job *client.Job) (any, error) {
			close(started)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return "too late", nil
		}, client.WorkOptions{MaxTasks: 1})
	}()
	<-started
	if _, err := c.CancelTask(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(cause, client.ErrCancelRequested) {
		t.Errorf("the handler's context ended with %v, want ErrCancelRequested", cause)
	}
	if got := getTask(t, c, ids[0]); got.State != client.StateCanceled || len(got.Result) != 0 || got.Runs[0].Outcome != "canceled" {
		t.Errorf("the canceled task: %s, result %s, runs %+v", got.State, got.Result, got.Runs)
	}
}

// A key that may not claim ends Work with the server's answer.
func TestWorkEndsOnAKeyThatMayNotClaim(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	admin := newClient(t, srv.URL, testserver.AdminKey)
	ctx := context.Background()
	p := ok(admin.CreatePrincipal(ctx, client.PrincipalRequest{Kind: "agent", DisplayName: "reader"}))
	k := ok(admin.CreateKey(ctx, client.KeyRequest{PrincipalID: p.ID, Scopes: []string{"namespace:main", "read"}}))
	reader := newClient(t, srv.URL, k.Secret)
	err := reader.Work(ctx, "w", func(context.Context, *client.Job) (any, error) { return nil, nil }, client.WorkOptions{})
	if !client.IsForbidden(err) {
		t.Fatalf("Work with a read-only key: %v, want forbidden", err)
	}
}

// Work claims the slots free at once in one batch claim, and the submits
// made while one is in flight go out together in one batch submit: eight
// handlers on sixteen tasks claim eight at a time, and the seven submits
// that wait behind the first (held up 300 ms at the server) are one call.
func TestWorkBatchesClaimsAndSubmits(t *testing.T) {
	var log routeLog
	slowFirst := sync.Once{}
	srv := testserver.Start(t, testserver.Options{Wrap: func(h http.Handler) http.Handler {
		return log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/submit") && !strings.HasSuffix(r.URL.Path, "/claims/submit") {
				slowFirst.Do(func() { time.Sleep(300 * time.Millisecond) })
			}
			h.ServeHTTP(w, r)
		}))
	}})
	c := newClient(t, srv.URL, testserver.AdminKey)
	var payloads []any
	for i := range 16 {
		payloads = append(payloads, i)
	}
	ids := enqueueN(t, c, "w", payloads...)
	var started sync.WaitGroup
	started.Add(8)
	var n sync.Mutex
	handled := 0
	err := c.Work(context.Background(), "w", func(ctx context.Context, job *client.Job) (any, error) {
		n.Lock()
		handled++
		first := handled <= 8
		n.Unlock()
		if first {
			// The first eight finish together.
			started.Done()
			started.Wait()
		}
		return nil, nil
	}, client.WorkOptions{Concurrency: 8, MaxTasks: 16})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got := getTask(t, c, id); got.State != client.StateSucceeded || len(got.Runs) != 1 {
			t.Errorf("task %s: %s after %d runs", id, got.State, len(got.Runs))
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	count := func(route string) int {
		k := 0
		for _, s := range log.seen {
			if s == route {
				k++
			}
		}
		return k
	}
	// The first claim is for the eight slots free at the start; later ones
	// are for as many as were free then.
	first := slices.IndexFunc(log.seen, func(s string) bool { return strings.HasPrefix(s, "POST /v1/claims") })
	if first < 0 || log.seen[first] != "POST /v1/claims/batch" {
		t.Errorf("the first claim is not a batch claim: %v", log.seen)
	}
	if claims := count("POST /v1/claims/batch") + count("POST /v1/claims"); claims >= 16 {
		t.Errorf("%d claim requests for 16 tasks", claims)
	}
	if count("POST /v1/claims/submit") < 1 {
		t.Errorf("no batch submit: %v", log.seen)
	}
}

// A worker with a logger says it is up before any task comes, then a
// line per task claimed and submitted.
func TestWorkSaysItIsUp(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	var logs strings.Builder
	var mu sync.Mutex
	c, err := client.New(srv.URL, client.WithKey(testserver.AdminKey), client.WithLogger(slog.New(slog.NewTextHandler(
		writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) }), nil))))
	if err != nil {
		t.Fatal(err)
	}
	ids := enqueueN(t, c, "up", "x")
	err = c.Work(context.Background(), "up", func(context.Context, *client.Job) (any, error) { return nil, nil },
		client.WorkOptions{MaxTasks: 1, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{`msg="tessera: working" queue=up concurrency=2`, `msg="tessera: task claimed" task=` + ids[0],
		`msg="tessera: task submitted" task=` + ids[0]}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s\nwant it to hold %s", i+1, lines[i], w)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
