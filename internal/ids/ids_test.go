package ids

import (
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// Ids sort by time, increase within a millisecond, and encode the time
// they were given even when it is earlier than the last one's.
func TestNewEncodesItsTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a, b := New(t0), New(t0)
	if len(a) != 26 || !(a < b) {
		t.Fatalf("ids within one millisecond: %s, %s", a, b)
	}
	later := New(t0.Add(time.Hour))
	earlier := New(t0.Add(-time.Hour)) // a clock stepped back
	if !(b < later) || !(earlier < a) {
		t.Errorf("ids out of time order: %s %s %s %s", earlier, a, b, later)
	}
	// The store's time bound (tessera.IDFloor) and these ids agree.
	for _, at := range []time.Time{t0, t0.Add(-time.Hour), t0.Add(time.Hour)} {
		id := New(at)
		if id < tessera.IDFloor(at) || id >= tessera.IDFloor(at.Add(time.Millisecond)) {
			t.Errorf("id %s made at %s is not within [%s, %s)", id, at, tessera.IDFloor(at), tessera.IDFloor(at.Add(time.Millisecond)))
		}
	}
}

// Many ids in one millisecond stay strictly increasing.
func TestNewIsMonotonicWithinAMillisecond(t *testing.T) {
	at := time.Now()
	prev := New(at)
	for range 10000 {
		id := New(at)
		if id <= prev {
			t.Fatalf("%s after %s", id, prev)
		}
		prev = id
	}
}
