package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// enqueueN puts one task per payload on queue, with one attempt each (so
// a failure is final and readable), and returns their ids in order.
func enqueueN(t *testing.T, c *client.Client, queue string, payloads ...any) []string {
	t.Helper()
	var ids []string
	for _, p := range payloads {
		task, err := c.Enqueue(context.Background(), client.EnqueueRequest{Queue: queue, Title: "work", Payload: p, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	return ids
}

func getTask(t *testing.T, c *client.Client, id string) *client.Task {
	t.Helper()
	task, err := c.GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// claimsAnswered calls answered after the server answered each claim on
// path.
func claimsAnswered(path string, answered func()) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			if r.URL.Path == path {
				answered()
			}
		})
	}
}

// claimArrives closes its channel when the first claim reaches the
// server, before the server answers it.
type claimArrives chan struct{}

func (c claimArrives) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/v1/claims") {
			select {
			case <-c:
			default:
				close(c)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// WaitClaim on an empty queue ends when its context does, in the middle
// of a long-poll (the server would hold it 20 s), with the context's
// error.
func TestWaitClaimEndsWithItsContext(t *testing.T) {
	arrived := make(claimArrives)
	srv := testserver.Start(t, testserver.Options{Wrap: arrived.wrap})
	c := newClient(t, srv.URL, testserver.AdminKey)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cl, err := c.WaitClaim(ctx, client.ClaimRequest{Queue: "empty"})
		if cl != nil {
			err = errors.New("granted a claim on an empty queue")
		}
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitClaim after its context ended: %v, want context.Canceled", err)
	}
}

// An empty claim says whether its queue has never had a task in the
// namespace; WaitClaim warns of such a queue once, however often it
// polls it.
func TestAnEmptyClaimSaysWhenTheQueueIsUnknown(t *testing.T) {
	polls := make(chan struct{}, 100)
	srv := testserver.Start(t, testserver.Options{Wrap: claimsAnswered("/ns/typos/v1/claims", func() { polls <- struct{}{} })})
	var logs bytes.Buffer
	c := newClient(t, srv.URL, testserver.AdminKey, client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := context.Background()

	if _, empty, err := c.Claim(ctx, client.ClaimRequest{Queue: "typo"}); err != nil || empty == nil || !empty.QueueUnknown {
		t.Fatalf("a claim on a queue that never had a task: %+v, %v", empty, err)
	}
	enqueueN(t, c, "real", nil)
	if cl, _, err := c.Claim(ctx, client.ClaimRequest{Queue: "real"}); err != nil || cl == nil {
		t.Fatalf("claim on real: %v", err)
	}
	if _, empty, err := c.Claim(ctx, client.ClaimRequest{Queue: "real"}); err != nil || empty == nil || empty.QueueUnknown {
		t.Fatalf("a claim on an emptied queue that had a task: %+v, %v", empty, err)
	}
	if _, empty, err := c.InNamespace("elsewhere").Claim(ctx, client.ClaimRequest{Queue: "real"}); err != nil || empty == nil || !empty.QueueUnknown {
		t.Fatalf("the same queue in a namespace that never had a task: %+v, %v", empty, err)
	}
	if logs.Len() != 0 {
		t.Fatalf("Claim logged: %s", logs.String())
	}

	pollThrice(t, polls, c.InNamespace("typos"), client.ClaimRequest{Queue: "typo", WaitSeconds: 1})
	wantOneLine(t, &logs, `level=WARN msg="tessera: queue \"typo\" in namespace \"typos\" has never had a task; check the queue and namespace names (waiting for one meanwhile)"`)
}

// pollThrice runs WaitClaim until it has polled three times, and ends it.
func pollThrice(t *testing.T, polls chan struct{}, c *client.Client, req client.ClaimRequest) {
	t.Helper()
	for len(polls) > 0 {
		<-polls
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.WaitClaim(ctx, req)
		done <- err
	}()
	for range 3 {
		<-polls
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// wantOneLine fails t unless logs hold one line, ending with want.
func wantOneLine(t *testing.T, logs *bytes.Buffer, want string) {
	t.Helper()
	if got := strings.TrimSpace(logs.String()); strings.Count(got, "\n") != 0 || !strings.HasSuffix(got, want) {
		t.Fatalf("three polls logged:\n%s\nwant one line ending\n%s", got, want)
	}
}

// An empty claim on a queue whose ready tasks require what the claimant
// lacks says what they require, single and batch; WaitClaim warns of it
// once however often it polls.
func TestAnEmptyClaimSaysWhatTheClaimantLacks(t *testing.T) {
	polls := make(chan struct{}, 100)
	srv := testserver.Start(t, testserver.Options{Wrap: claimsAnswered("/ns/fleet/v1/claims", func() { polls <- struct{}{} })})
	var logs bytes.Buffer
	c := newClient(t, srv.URL, testserver.AdminKey, client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))).InNamespace("fleet")
	ctx := context.Background()
	for _, req := range []client.EnqueueRequest{
		{Queue: "q", Title: "old", Requires: []string{"gpu", "linux"}},
		{Queue: "q", Title: "new", Requires: []string{"arm"}},
		{Queue: "q", Title: "plain"},
	} {
		if _, err := c.Enqueue(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	cpu := client.ClaimRequest{Queue: "q", Capabilities: []string{"linux"}}
	if cl, _, err := c.Claim(ctx, cpu); err != nil || cl == nil || cl.Task.Title != "plain" {
		t.Fatalf("the task that requires nothing: %+v, %v", cl, err)
	}
	if _, empty, err := c.Claim(ctx, cpu); err != nil || empty == nil || !slices.Equal(empty.UncoveredRequires, []string{"gpu", "linux"}) || empty.QueueUnknown {
		t.Fatalf("a claim that lacks gpu: %+v, %v; want the oldest uncovered task's requires [gpu linux]", empty, err)
	}
	if _, empty, err := c.ClaimN(ctx, cpu, 5); err != nil || empty == nil || !slices.Equal(empty.UncoveredRequires, []string{"gpu", "linux"}) {
		t.Fatalf("a batch claim that lacks gpu: %+v, %v", empty, err)
	}
	for _, caps := range [][]string{{"gpu", "linux"}, {"arm"}} {
		if cl, _, err := c.Claim(ctx, client.ClaimRequest{Queue: "q", Capabilities: caps}); err != nil || cl == nil {
			t.Fatalf("claim with %v: %+v, %v", caps, cl, err)
		}
	}
	if _, empty, err := c.Claim(ctx, cpu); err != nil || empty == nil || empty.UncoveredRequires != nil {
		t.Fatalf("nothing ready: %+v, %v; want no uncovered requires", empty, err)
	}
	if logs.Len() != 0 {
		t.Fatalf("Claim logged: %s", logs.String())
	}

	if _, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "q", Title: "gpu again", Requires: []string{"gpu"}}); err != nil {
		t.Fatal(err)
	}
	pollThrice(t, polls, c, client.ClaimRequest{Queue: "q", Capabilities: []string{"linux"}, WaitSeconds: 1})
	wantOneLine(t, &logs, `level=WARN msg="tessera: queue \"q\" in namespace \"fleet\" has ready tasks that require gpu, which this worker's capabilities [linux] do not cover (waiting for work it can take meanwhile)"`)
}

// A 429 the client retries is counted and logged once, at debug level.
func TestARetried429IsCountedAndLogged(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Core: func(c *core.Config) {
		// One claim a second: the second claim at once is refused with
		// Retry-After 1, and admitted when retried after it.
		c.ClaimRate, c.ClaimBurst, c.AdmissionWait = 1, 1, 10*time.Millisecond
	}})
	var logs bytes.Buffer
	c := newClient(t, srv.URL, testserver.AdminKey,
		client.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ctx := context.Background()
	for range 2 {
		if _, _, err := c.Claim(ctx, client.ClaimRequest{Queue: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats(); got != (client.Stats{RateLimited: 1, Retries: 1}) {
		t.Fatalf("stats %+v, want one 429 and one retry", got)
	}
	if got := c.InNamespace("other").Stats(); got != (client.Stats{RateLimited: 1, Retries: 1}) {
		t.Fatalf("a derived client's stats %+v, want its parent's", got)
	}
	want := `level=DEBUG msg="tessera: rate limited; retrying" method=POST path=/claims attempt=1 in=1s`
	if got := strings.TrimSpace(logs.String()); strings.Count(got, "\n") != 0 || !strings.HasSuffix(got, want) {
		t.Fatalf("logged:\n%s\nwant one line ending\n%s", got, want)
	}
}
