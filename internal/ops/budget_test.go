package ops

import (
	"slices"
	"testing"
	"time"
)

// The long-polls of one request wait together no longer than the longest
// any one of them may (issue 42: three 12 s claims in one MCP batch took
// 29 s, where one claim may wait 20).
func TestBudgetBoundsABatchByItsLongestCall(t *testing.T) {
	const claim, events = 20 * time.Second, 30 * time.Second
	b := NewBudget(30 * time.Second)
	var waited []time.Duration
	for range 3 {
		w := b.allow(12*time.Second, claim)
		waited = append(waited, w)
		b.spend(w)
	}
	if want := []time.Duration{12 * time.Second, 8 * time.Second, 0}; !slices.Equal(waited, want) {
		t.Errorf("three 12 s claims waited %v, want %v", waited, want)
	}
	// An events call in the batch may take the rest of its own 30 s.
	if w := b.allow(30*time.Second, events); w != 10*time.Second {
		t.Errorf("an events call after them may wait %s, want 10s", w)
	}
	// One call alone waits what it asks; the cap holds over all.
	if w := NewBudget(30*time.Second).allow(20*time.Second, claim); w != 20*time.Second {
		t.Errorf("a claim alone may wait %s, want 20s", w)
	}
	if w := NewBudget(time.Second).allow(20*time.Second, claim); w != time.Second {
		t.Errorf("under a 1 s cap a claim may wait %s", w)
	}
}
