package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// NodesOpener returns two stores on one fresh database, as two nodes of a
// deployment open it; the backend's test closes them in t.Cleanup.
type NodesOpener func(t *testing.T) (a, b store.Store)

// RunNodes runs the cases of a backend that serves several nodes from one
// database: a committed transaction's topics reach every node's listener,
// its own included (Store.Listen), and the meter's ledger is one for all.
func RunNodes(t *testing.T, open NodesOpener) {
	t.Run("NotifyReachesEveryNodeOnce", func(t *testing.T) {
		a, b := open(t)
		gotA, gotB := listen(a), listen(b)
		notify(t, a, "q\x00main\x00default") // NUL bytes, as the core's topics hold
		notify(t, a, "end-a")
		// Each node hears both nodes, in commit order, once each: waiting
		// for the other's last topic makes sure an echo of its own would
		// have come first.
		if got, want := gotB.until(t, "end-a"), []string{"q\x00main\x00default"}; !sameSet(got, want) {
			t.Errorf("b heard %q from a, want %q once", got, want)
		}
		notify(t, b, "t\x00main\x0001A")
		notify(t, b, "end-b")
		if got, want := gotA.until(t, "end-b"), []string{"q\x00main\x00default", "end-a", "t\x00main\x0001A"}; !sameSet(got, want) {
			t.Errorf("a heard %q, want %q, each once", got, want)
		}
	})

	t.Run("NotifyCarriesManyTopics", func(t *testing.T) {
		a, b := open(t)
		gotB := listen(b)
		// More topics than one notification's payload holds.
		var want []string
		for i := range 400 {
			want = append(want, fmt.Sprintf("t\x00main\x00%026d", i))
		}
		writeTx(t, a, func(tx store.Tx) error {
			for _, topic := range want {
				tx.Notify(t.Context(), topic)
			}
			return nil
		})
		notify(t, a, "end")
		if got := gotB.until(t, "end"); !sameSet(got, want) {
			t.Errorf("b heard %d topics of %d, or some twice", len(got), len(want))
		}
	})

	// The per-address session limit holds across nodes: mints through
	// either node count against one limit.
	t.Run("ConcurrentMintsHoldTheLimitAcrossNodes", func(t *testing.T) {
		a, b := open(t)
		if got := concurrentMints(t, a, b); got != mintLimit-seededMints {
			t.Errorf("%d concurrent mints through two nodes with %d of the limit of %d used: %d minted, want %d",
				mintAttempts, seededMints, mintLimit, got, mintLimit-seededMints)
		}
	})

	t.Run("LedgerIsShared", func(t *testing.T) {
		a, b := open(t)
		la, okA := a.(meter.Ledger)
		lb, okB := b.(meter.Ledger)
		if !okA || !okB {
			t.Fatal("the stores do not keep the meter's ledger")
		}
		clock := tessera.NewManualClock(epoch)
		ctx := context.Background()
		ma, mb := meter.New(clock), meter.New(clock)
		if err := ma.Attach(ctx, la); err != nil {
			t.Fatal(err)
		}
		if err := mb.Attach(ctx, lb); err != nil {
			t.Fatal(err)
		}
		ma.Add(ctx, 5, 7)
		mb.Add(ctx, 1, 1)
		for _, m := range []*meter.Meter{ma, mb, ma} {
			if err := m.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for name, m := range map[string]*meter.Meter{"a": ma, "b": mb} {
			if got := m.Today(); got.RowsWritten != 6 || got.RowsRead != 8 {
				t.Errorf("node %s's day after both synced: written %d read %d, want 6, 8", name, got.RowsWritten, got.RowsRead)
			}
		}
		// An allowance set through one node holds on the other.
		if err := ma.SetAllowance(ctx, meter.Allowance{RowsWrittenPerDay: 6}); err != nil {
			t.Fatal(err)
		}
		if err := mb.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := mb.WriteRefusal(); tessera.ErrorCode(err) != tessera.CodeStorageQuotaExhausted {
			t.Errorf("b's writes after a's allowance was spent: %v, want refused", err)
		}
	})
}

// heard collects the topics a store's listener receives.
type heard chan string

func listen(s store.Store) heard {
	h := make(heard, 1024)
	s.Listen(func(topic string) { h <- topic })
	return h
}

// until returns the topics heard before end, failing the test if end does
// not come within 10 s.
func (h heard) until(t *testing.T, end string) []string {
	t.Helper()
	var out []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case topic := <-h:
			if topic == end {
				return out
			}
			out = append(out, topic)
		case <-timeout:
			t.Fatalf("%q not heard within 10 s; heard %q", end, strings.Join(out, " "))
		}
	}
}

// notify commits a transaction that notifies topic.
func notify(t *testing.T, s store.Store, topic string) {
	t.Helper()
	writeTx(t, s, func(tx store.Tx) error { tx.Notify(t.Context(), topic); return nil })
}
