package tessera

import (
	"sync"
	"time"
)

// Clock tells the time. Services take one so tests can move time instead of
// sleeping through lease expiry and backoff.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock, in UTC, at the millisecond precision the
// API speaks and the store keeps, so a value reads back as it was written.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// ManualClock is a Clock that moves only when told to.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock stopped at t.
func NewManualClock(t time.Time) *ManualClock {
	return &ManualClock{now: t.UTC().Truncate(time.Millisecond)}
}

func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d).Truncate(time.Millisecond)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.UTC().Truncate(time.Millisecond)
	c.mu.Unlock()
}
