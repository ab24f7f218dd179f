package core

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Client-chosen key and queue names cannot grow the coordinator's maps
// without bound: idle budgets and old generations are swept.
func TestCoordinatorMapsStayBounded(t *testing.T) {
	a := newAdmission(DefaultConfig())
	for i := range 3 * maxBudgets {
		release, err := a.admit(context.Background(), fmt.Sprint("key", i))
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	// Budgets refill at 20/s; a moment later every one of them is full.
	time.Sleep(2100 * time.Millisecond)
	release, _ := a.admit(context.Background(), "last")
	release()
	if n := len(a.keys); n > maxBudgets {
		t.Errorf("%d budgets kept for %d one-off keys", n, 3*maxBudgets)
	}

	h := newHints()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 1000 {
		h.enqueued(fmt.Sprint("queue", i), now)
	}
	h.empty("k", "queue0", now.Add(hintIdle+2*time.Minute))
	if len(h.gens) != 0 {
		t.Errorf("%d queue generations kept after %s idle", len(h.gens), hintIdle)
	}
}

// An enqueue resets a key's hint even within the same instant.
func TestHintResetsOnEnqueue(t *testing.T) {
	h := newHints()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if got := []int{h.empty("k", "q", now), h.empty("k", "q", now)}; got[0] != 5 || got[1] != 10 {
		t.Fatalf("hints %v", got)
	}
	h.enqueued("q", now)
	if got := h.empty("k", "q", now); got != 5 {
		t.Errorf("after an enqueue: %d, want 5", got)
	}
}

// After a gap in the notifications every waiter is woken, whatever its
// topic, and a later subscriber waits for the next fire.
func TestFireAllWakesEveryWaiter(t *testing.T) {
	s := newSignals()
	a, doneA := s.subscribe("q\x00main\x00a")
	b, doneB := s.subscribe("t\x00main\x0001T")
	defer doneA()
	defer doneB()
	s.fireAll()
	for name, ch := range map[string]<-chan struct{}{"queue": a, "task": b} {
		select {
		case <-ch:
		default:
			t.Errorf("the %s waiter was not woken", name)
		}
	}
	later, done := s.subscribe("q\x00main\x00a")
	defer done()
	select {
	case <-later:
		t.Error("a subscriber after fireAll is woken before the next fire")
	default:
	}
}
