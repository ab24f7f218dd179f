package tessera

import (
	"testing"
	"time"
)

// Ids sort by time, increase within a millisecond, and encode the time they
// were given even when it is earlier than the last one's.
func TestNewIDEncodesItsTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	a, b := NewID(t0), NewID(t0)
	if len(a) != 26 || !(a < b) {
		t.Fatalf("ids within one millisecond: %s, %s", a, b)
	}
	later := NewID(t0.Add(time.Hour))
	earlier := NewID(t0.Add(-time.Hour)) // a clock stepped back
	if !(b < later) || !(earlier < a) {
		t.Errorf("ids out of time order: %s %s %s %s", earlier, a, b, later)
	}
	if floor := IDFloor(t0.Add(-time.Hour)); earlier < floor || earlier >= IDFloor(t0) {
		t.Errorf("id made at t0-1h (%s) is not within [%s, %s)", earlier, floor, IDFloor(t0))
	}
}
