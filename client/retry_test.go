package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// dropAfterCommit lets the real server act on the first request matching
// route, then drops the connection before the answer leaves, as a network
// failure after the server committed would. It remembers the
// Idempotency-Key of every try.
type dropAfterCommit struct {
	route string
	mu    sync.Mutex
	keys  []string
	first []byte // the answer the dropped try would have had
}

func (d *dropAfterCommit) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method+" "+r.URL.Path != d.route {
			h.ServeHTTP(w, r)
			return
		}
		d.mu.Lock()
		d.keys = append(d.keys, r.Header.Get("Idempotency-Key"))
		tries := len(d.keys)
		d.mu.Unlock()
		if tries > 1 {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		d.first = rec.Body.Bytes()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	})
}

// A write whose answer was lost after the server committed it is retried
// with the same Idempotency-Key, and acts once: one task (or one batch of
// them), and the retry answers what the first try made.
func TestRetryAfterACommittedWriteKeepsOneAction(t *testing.T) {
	for _, tc := range []struct {
		route   string
		enqueue func(ctx context.Context, c *client.Client) ([]client.Task, error)
	}{
		{"POST /v1/tasks", func(ctx context.Context, c *client.Client) ([]client.Task, error) {
			task, err := c.Enqueue(ctx, client.EnqueueRequest{Title: "exactly once"})
			if err != nil {
				return nil, err
			}
			return []client.Task{*task}, nil
		}},
		{"POST /v1/tasks/batch", func(ctx context.Context, c *client.Client) ([]client.Task, error) {
			return c.EnqueueBatch(ctx, client.EnqueueBatchRequest{Tasks: []client.EnqueueRequest{{Title: "once"}, {Title: "and once"}}})
		}},
	} {
		t.Run(tc.route, func(t *testing.T) {
			drop := &dropAfterCommit{route: tc.route}
			srv := testserver.Start(t, testserver.Options{Wrap: drop.wrap})
			ctx := context.Background()
			c := newClient(t, srv.URL, testserver.AdminKey, client.WithRetry(client.RetryPolicy{Attempts: 3, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))

			tasks, err := tc.enqueue(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(drop.keys) != 2 || drop.keys[0] == "" || drop.keys[0] != drop.keys[1] {
				t.Fatalf("Idempotency-Key of the two tries: %q", drop.keys)
			}
			for _, task := range tasks {
				if !strings.Contains(string(drop.first), task.ID) {
					t.Fatalf("the retry answered %s, the dropped try had made %s", task.ID, drop.first)
				}
			}
			page, err := c.ListTasks(ctx, client.TaskFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Tasks) != len(tasks) || len(tasks) == 0 {
				t.Fatalf("%d tasks after a retried write answered %d", len(page.Tasks), len(tasks))
			}
		})
	}
}

// A claim whose answer was lost is not repeated: the lease it may have
// granted lapses back, rather than a second task being leased too.
func TestAClaimIsNotRepeatedAfterABrokenConnection(t *testing.T) {
	drop := &dropAfterCommit{route: "POST /v1/claims"}
	srv := testserver.Start(t, testserver.Options{Wrap: drop.wrap})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey, client.WithRetry(client.RetryPolicy{Attempts: 3, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	for range 2 {
		if _, err := c.Enqueue(ctx, client.EnqueueRequest{Title: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Claim(ctx, client.ClaimRequest{}); err == nil || client.ErrorCode(err) != "" {
		t.Fatalf("claim with its answer dropped: %v, want a transport error", err)
	}
	if len(drop.keys) != 1 {
		t.Fatalf("the claim was sent %d times", len(drop.keys))
	}
	counts, err := c.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts["default"]["leased"] != 1 || counts["default"]["ready"] != 1 {
		t.Fatalf("counts: %v", counts["default"])
	}
}

// refuseFirst answers the first n requests 503 with a Retry-After, as a
// draining or overloaded server does, without reaching the server.
func refuseFirst(n int, retryAfter string) func(http.Handler) http.Handler {
	var mu sync.Mutex
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			refuse := n > 0
			n--
			mu.Unlock()
			if !refuse {
				h.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Retry-After", retryAfter)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"draining"}}`))
		})
	}
}

// A 503 is retried after its Retry-After; one longer than the policy
// allows is returned at once, with the advice in the error.
func TestUnavailableIsRetriedAfterItsRetryAfter(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Wrap: refuseFirst(1, "1")})
	c := newClient(t, srv.URL, testserver.AdminKey)
	start := time.Now()
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %v, before the server's Retry-After of 1 s", waited)
	}

	srv = testserver.Start(t, testserver.Options{Wrap: refuseFirst(1, "3600")})
	c = newClient(t, srv.URL, testserver.AdminKey)
	_, err := c.Me(context.Background())
	var e *client.Error
	if !client.IsUnavailable(err) || !asError(err, &e) || e.RetryAfter != time.Hour {
		t.Fatalf("a 503 with Retry-After 3600: %v", err)
	}
}

// A connection that could not be made carried nothing, so any request is
// tried again, even a claim.
func TestARefusedConnectionIsRetried(t *testing.T) {
	var dials atomic.Int32
	var d net.Dialer
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
	c := newClient(t, "http://127.0.0.1:1", testserver.AdminKey, client.WithHTTPClient(hc),
		client.WithRetry(client.RetryPolicy{Attempts: 3, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	if _, _, err := c.Claim(context.Background(), client.ClaimRequest{}); err == nil || client.ErrorCode(err) != "" {
		t.Fatalf("nobody listening: %v", err)
	}
	if n := dials.Load(); n != 3 {
		t.Fatalf("%d dials, want 3 (every attempt)", n)
	}
}
