// Package meter counts storage rows read and written, per request and per
// UTC day (SPEC §14). Backends report each committed transaction's rows;
// requests carry a Usage in their context to learn their own share.
package meter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// Usage is the rows one request has cost so far.
type Usage struct {
	Written atomic.Int64
	Read    atomic.Int64
}

type usageKey struct{}

// WithUsage returns a context that collects the rows of the work done with
// it, and the Usage that collects them.
func WithUsage(ctx context.Context) (context.Context, *Usage) {
	u := &Usage{}
	return context.WithValue(ctx, usageKey{}, u), u
}

// UsageFrom returns the Usage a context collects into, or nil.
func UsageFrom(ctx context.Context) *Usage {
	u, _ := ctx.Value(usageKey{}).(*Usage)
	return u
}

// Totals are one UTC day's counts.
type Totals struct {
	Day         string    `json:"day"`
	RowsWritten int64     `json:"rows_written"`
	RowsRead    int64     `json:"rows_read"`
	ResetAt     time.Time `json:"reset_at"`
}

// Meter keeps the current UTC day's totals.
type Meter struct {
	clock tessera.Clock

	mu      sync.Mutex
	day     string
	written int64
	read    int64
}

// New returns a meter that reads days off clock.
func New(clock tessera.Clock) *Meter { return &Meter{clock: clock} }

// Add records rows a backend read and wrote on behalf of ctx's request.
func (m *Meter) Add(ctx context.Context, written, read int64) {
	if written == 0 && read == 0 {
		return
	}
	if u := UsageFrom(ctx); u != nil {
		u.Written.Add(written)
		u.Read.Add(read)
	}
	day := Day(m.clock.Now())
	m.mu.Lock()
	if day != m.day {
		m.day, m.written, m.read = day, 0, 0
	}
	m.written += written
	m.read += read
	m.mu.Unlock()
}

// Today returns today's totals.
func (m *Meter) Today() Totals {
	now := m.clock.Now()
	day := Day(now)
	t := Totals{Day: day, ResetAt: NextReset(now)}
	m.mu.Lock()
	if m.day == day {
		t.RowsWritten, t.RowsRead = m.written, m.read
	}
	m.mu.Unlock()
	return t
}

// Day names the UTC day of t.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// NextReset is the next 00:00 UTC strictly after t.
func NextReset(t time.Time) time.Time {
	y, mo, d := t.UTC().Date()
	return time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
}
