// Package meter counts storage rows read and written, per request and per
// UTC day (SPEC §14), and holds the daily allowances of §13: once today's
// written (or read) allowance is spent, the store refuses what would spend
// more, until the next 00:00 UTC or an operator raises the allowance.
package meter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Allowance is a daily row allowance; 0 means unlimited.
type Allowance struct {
	RowsWrittenPerDay int64 `json:"rows_written_per_day"`
	RowsReadPerDay    int64 `json:"rows_read_per_day"`
}

// Totals are one UTC day's counts.
type Totals struct {
	Day         string    `json:"day"`
	RowsWritten int64     `json:"rows_written"`
	RowsRead    int64     `json:"rows_read"`
	ResetAt     time.Time `json:"reset_at"`
	Allowance   Allowance `json:"allowance"`
}

// Meter keeps the current UTC day's totals and allowance.
type Meter struct {
	clock tessera.Clock
	path  string // where the day's totals persist; "" for none
	// saveMu orders saves: the periodic one and an allowance change may
	// race, and a file must never hold two writers' bytes or go back in time.
	saveMu sync.Mutex

	mu      sync.Mutex
	day     string
	written int64
	read    int64
	// lifetime counts never reset: deltas across midnight stay right.
	lifetimeWritten, lifetimeRead int64
	// base is the allowance from flags; override, set through the API,
	// replaces it for the rest of the UTC day it was set on.
	base     Allowance
	override *Allowance
	dirty    bool
}

// New returns a meter that reads days off clock and keeps nothing on disk.
func New(clock tessera.Clock) *Meter { return &Meter{clock: clock} }

// Open returns a meter whose totals persist in the file at path, loading
// today's totals (and the allowance an operator last set) if it exists.
// Reading the totals never writes: they live outside the store.
func Open(path string, clock tessera.Clock, allowance Allowance) (*Meter, error) {
	m := &Meter{clock: clock, path: path, base: allowance}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	var saved persisted
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf("meter %s: %w", path, err)
	}
	if saved.Day == Day(clock.Now()) {
		m.day, m.written, m.read, m.override = saved.Day, saved.RowsWritten, saved.RowsRead, saved.Override
	}
	return m, nil
}

type persisted struct {
	Day         string `json:"day"`
	RowsWritten int64  `json:"rows_written"`
	RowsRead    int64  `json:"rows_read"`
	// Override is an allowance set through the API for this day; it
	// outlives a restart, so the old flags do not take an operator's raise
	// back before the day ends.
	Override *Allowance `json:"allowance_override,omitempty"`
}

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
	m.roll(day)
	m.written += written
	m.read += read
	m.lifetimeWritten += written
	m.lifetimeRead += read
	m.dirty = true
	m.mu.Unlock()
}

// roll starts a new day's totals, back on the flags' allowance. m.mu held.
func (m *Meter) roll(day string) {
	if day != m.day {
		m.day, m.written, m.read, m.override = day, 0, 0, nil
	}
}

// allowance is the day's allowance. m.mu held.
func (m *Meter) allowance() Allowance {
	if m.override != nil {
		return *m.override
	}
	return m.base
}

// Today returns today's totals and allowance.
func (m *Meter) Today() Totals {
	now := m.clock.Now()
	day := Day(now)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roll(day)
	return Totals{Day: day, RowsWritten: m.written, RowsRead: m.read, ResetAt: NextReset(now), Allowance: m.allowance()}
}

// Lifetime returns the rows written and read since the meter was made,
// across days: the counters to take differences of.
func (m *Meter) Lifetime() (written, read int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lifetimeWritten, m.lifetimeRead
}

// SetAllowance is the operator-authorized change of §13: it holds until
// the day ends, across restarts.
func (m *Meter) SetAllowance(a Allowance) error {
	m.mu.Lock()
	m.roll(Day(m.clock.Now()))
	m.override = &a
	m.dirty = true
	m.mu.Unlock()
	return m.Save()
}

// WriteRefusal returns the storage_quota_exhausted error when today's
// written allowance is spent, else nil.
func (m *Meter) WriteRefusal() error {
	return m.refusal(func(t Totals) bool { return spent(t.RowsWritten, t.Allowance.RowsWrittenPerDay) })
}

// ReadRefusal is WriteRefusal for the read allowance.
func (m *Meter) ReadRefusal() error {
	return m.refusal(func(t Totals) bool { return spent(t.RowsRead, t.Allowance.RowsReadPerDay) })
}

func spent(used, allowance int64) bool { return allowance > 0 && used >= allowance }

func (m *Meter) refusal(isSpent func(Totals) bool) error {
	t := m.Today()
	if !isSpent(t) {
		return nil
	}
	return QuotaError(m.clock.Now())
}

// QuotaError is the refusal of a spent allowance at now: it says when the
// allowance is expected to reset, never that capacity is back.
func QuotaError(now time.Time) *tessera.Error {
	reset := NextReset(now)
	return &tessera.Error{Code: tessera.CodeStorageQuotaExhausted,
		Message:    "today's storage allowance is spent; the operation did not happen",
		RetryAfter: reset.Sub(now), ResetAt: reset}
}

// Save writes the totals to the meter's file if they changed.
func (m *Meter) Save() error {
	if m.path == "" {
		return nil
	}
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	m.mu.Lock()
	if !m.dirty {
		m.mu.Unlock()
		return nil
	}
	p := persisted{Day: m.day, RowsWritten: m.written, RowsRead: m.read, Override: m.override}
	m.dirty = false
	m.mu.Unlock()
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(m.path, b); err != nil {
		m.mu.Lock()
		m.dirty = true
		m.mu.Unlock()
		return fmt.Errorf("meter: %w", err)
	}
	return nil
}

// writeFileAtomic replaces path with b: a synced temp file renamed over it,
// then the directory synced, so a crash leaves the old file or the new.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Persist saves the totals every interval until ctx ends, then once more.
// A crash loses at most one interval of counting, never data.
func (m *Meter) Persist(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = m.Save()
			return
		case <-t.C:
			_ = m.Save()
		}
	}
}

// Day names the UTC day of t.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// NextReset is the next 00:00 UTC strictly after t.
func NextReset(t time.Time) time.Time {
	y, mo, d := t.UTC().Date()
	return time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
}
