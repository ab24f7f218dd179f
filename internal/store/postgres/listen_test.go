package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// logLines collects a logger's output for a test to read.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// eventually waits until cond holds, failing the test after 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
	}
}

// claimLater starts a claim on n that may wait 20 s for a task of queue
// q, but gives it only 10 s: one that is not woken, or does not look
// again by itself, fails.
func claimLater(n *node, q string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := n.svc.Claim(ctx, n.actor, "main", core.ClaimParams{Queue: q, WaitSeconds: core.MaxClaimWait})
		if err == nil && c.Lease == nil {
			err = context.DeadlineExceeded
		}
		errc <- err
	}()
	return errc
}

// A listening connection that goes silent — TCP up, nothing arriving, as
// with its backend stopped — is noticed by its probe: the node logs it,
// reports the listener unhealthy (so /metrics shows it), and meanwhile
// its long-polls look again every second, so a task enqueued on another
// node is claimed without waiting out the long-poll. Once a connection
// can be made again the listener is healthy, and another node's enqueue
// wakes a long-poll as before.
func TestSilentListenerIsNoticed(t *testing.T) {
	url := pgtest.Schema(t)
	proxied, px := startProxy(t, url)
	var logs logLines
	dbA := openDB(t, proxied, newMeter(), postgres.WithListenerProbe(200*time.Millisecond, 500*time.Millisecond),
		postgres.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	dbB := openDB(t, url, newMeter())
	clock := tessera.NewManualClock(now)
	key := adminKey(t, dbA, clock)
	a, b := newNode(t, dbA, clock, key), newNode(t, dbB, clock, key)
	enqueue := func(q string) {
		t.Helper()
		if _, err := b.svc.Enqueue(context.Background(), b.actor, "main", core.EnqueueParams{Queue: q, Title: "t"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func() bool {
		l, ok := a.svc.StoreListener()
		if !ok {
			t.Fatal("the PostgreSQL store reports no listener")
		}
		return l.Healthy
	}
	if !healthy() {
		t.Fatal("the listener is unhealthy at the start")
	}

	px.hold("listener")
	eventually(t, "the silent listener reported unhealthy", func() bool { return !healthy() })
	if !strings.Contains(logs.String(), "did not hear its probe back") {
		t.Errorf("nothing logged of the missed probe:\n%s", logs.String())
	}
	silent := claimLater(a, "deaf")
	time.Sleep(300 * time.Millisecond) // the claim is asleep
	enqueue("deaf")
	if err := <-silent; err != nil {
		t.Fatalf("a long-poll on the node whose listener is silent: %v, want the task another node enqueued", err)
	}
	if healthy() {
		t.Fatal("healthy while no listening connection can be made")
	}

	px.release()
	eventually(t, "the listener healthy again", healthy)
	woken := claimLater(a, "heard")
	time.Sleep(300 * time.Millisecond)
	enqueue("heard")
	if err := <-woken; err != nil {
		t.Fatalf("a long-poll after the listener came back: %v, want woken by the other node's enqueue", err)
	}
}
