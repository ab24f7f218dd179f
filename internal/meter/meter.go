// Package meter counts storage rows read and written, per request and per
// UTC day (SPEC §14), and holds the daily allowances of §13: once today's
// written (or read) allowance is spent, the store refuses what would spend
// more, until the next 00:00 UTC or an operator raises the allowance.
//
// The day's totals and an operator's allowance live in the store (the
// Ledger), so every node of a deployment shares one allowance: each node
// counts its own rows in memory and adds them to the ledger every few
// seconds (Sync), learning the others' in return. A file beside the store
// caches the last totals seen, so a decision that must be made before the
// store is open (creating or migrating it while the day's allowance is
// spent) has them.
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

	"github.com/tessera-dev/tessera/internal/fsync"
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

// Ledger is the shared record of the days' totals, kept by the store. Its
// own statements are bookkeeping: they are neither metered nor refused by
// the allowance they account for.
type Ledger interface {
	// LedgerAdd adds rows to day's totals — a pure read when both are 0 —
	// and returns the day's totals after, with the allowance an operator
	// set for the day (nil: none).
	LedgerAdd(ctx context.Context, day string, written, read int64) (LedgerDay, error)
	// LedgerSetAllowance sets the allowance of day.
	LedgerSetAllowance(ctx context.Context, day string, a Allowance) error
}

// LedgerDay is a day as the ledger holds it.
type LedgerDay struct {
	RowsWritten, RowsRead int64
	Allowance             *Allowance
}

// Meter keeps the current UTC day's totals and allowance.
type Meter struct {
	clock tessera.Clock
	path  string // the cache file; "" for none
	// syncMu orders syncs: the periodic one and an allowance change may
	// race, and neither a ledger nor a file may see two of them at once.
	syncMu sync.Mutex

	mu     sync.Mutex
	ledger Ledger
	day    string
	// dayStart and dayEnd bound day once a clock reading has rolled to it
	// (rollAt), so the check of every statement formats no date.
	dayStart, dayEnd time.Time
	// synced is the day's totals as the ledger last reported them (every
	// node's rows); pending is this node's rows not yet added to it.
	synced, pending rows
	// carried holds a past day's pending rows until a sync adds them.
	carried map[string]rows
	// lifetime counts never reset: deltas across midnight stay right.
	lifetimeWritten, lifetimeRead int64
	// base is the allowance from flags; override, set by an operator,
	// replaces it for the rest of the UTC day it was set on.
	base     Allowance
	override *Allowance
	// saved is what the cache file holds, so an idle meter writes nothing.
	saved cache
}

type rows struct{ written, read int64 }

// New returns a meter that reads days off clock, with the flags'
// allowance base, keeping everything in memory until Attach gives it a
// ledger.
func New(clock tessera.Clock) *Meter { return &Meter{clock: clock, carried: map[string]rows{}} }

// SetBase sets the allowance from flags.
func (m *Meter) SetBase(a Allowance) {
	m.mu.Lock()
	m.base = a
	m.mu.Unlock()
}

// Open returns a meter with the flags' allowance whose last known totals
// are cached in the file at path, loading today's if it holds them.
func Open(path string, clock tessera.Clock, base Allowance) (*Meter, error) {
	m := New(clock)
	m.path, m.base = path, base
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meter: %w", err)
	}
	var saved cache
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf("meter %s: %w", path, err)
	}
	if saved.Day == Day(clock.Now()) {
		m.day, m.synced, m.override, m.saved = saved.Day, rows{saved.RowsWritten, saved.RowsRead}, saved.Override, saved
	}
	return m, nil
}

type cache struct {
	Day         string     `json:"day"`
	RowsWritten int64      `json:"rows_written"`
	RowsRead    int64      `json:"rows_read"`
	Override    *Allowance `json:"allowance_override,omitempty"`
}

// Attach makes l the meter's ledger and syncs with it once: from then on
// the totals are the deployment's, not this process's.
func (m *Meter) Attach(ctx context.Context, l Ledger) error {
	m.mu.Lock()
	m.ledger = l
	m.mu.Unlock()
	return m.Sync(ctx)
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
	now := m.clock.Now()
	m.mu.Lock()
	m.rollAt(now)
	m.pending.written += written
	m.pending.read += read
	m.lifetimeWritten += written
	m.lifetimeRead += read
	m.mu.Unlock()
}

// roll starts a new day's totals, back on the flags' allowance; the old
// day's unsynced rows wait for the next sync. m.mu held.
func (m *Meter) roll(day string) {
	if day == m.day {
		return
	}
	if m.day != "" && m.pending != (rows{}) {
		c := m.carried[m.day]
		m.carried[m.day] = rows{c.written + m.pending.written, c.read + m.pending.read}
	}
	m.day, m.synced, m.pending, m.override = day, rows{}, rows{}, nil
	m.dayStart, m.dayEnd = time.Time{}, time.Time{}
}

// rollAt rolls to now's day. m.mu held.
func (m *Meter) rollAt(now time.Time) {
	if !now.Before(m.dayStart) && now.Before(m.dayEnd) {
		return
	}
	m.roll(Day(now))
	m.dayEnd = NextReset(now)
	m.dayStart = m.dayEnd.AddDate(0, 0, -1)
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
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rollAt(now)
	return Totals{Day: m.day, RowsWritten: m.synced.written + m.pending.written, RowsRead: m.synced.read + m.pending.read,
		ResetAt: NextReset(now), Allowance: m.allowance()}
}

// Lifetime returns the rows written and read by this process since the
// meter was made, across days: the counters to take differences of.
func (m *Meter) Lifetime() (written, read int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lifetimeWritten, m.lifetimeRead
}

// SetAllowance is the operator-authorized change of §13: it holds until
// the day ends, for every node and across restarts.
func (m *Meter) SetAllowance(ctx context.Context, a Allowance) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	day := Day(m.clock.Now())
	m.mu.Lock()
	l := m.ledger
	m.mu.Unlock()
	if l != nil {
		if err := l.LedgerSetAllowance(ctx, day, a); err != nil {
			return fmt.Errorf("meter: set allowance: %w", err)
		}
	}
	m.mu.Lock()
	m.roll(day)
	m.override = &a
	m.mu.Unlock()
	return m.saveCache()
}

// WriteRefusal returns the storage_quota_exhausted error when today's
// written allowance is spent, else nil.
func (m *Meter) WriteRefusal() error { return m.refusal(false, true, 0) }

// ReadRefusal is WriteRefusal for the read allowance.
func (m *Meter) ReadRefusal() error { return m.refusal(true, false, 0) }

// StatementRefusal is the check of one statement: the read allowance,
// and the written one too when the statement may write. unbooked is rows
// the backend has written but not yet added (a group commit adds a
// batch's rows once it is durable); they count against the allowance
// already, so a batch cannot write past it.
func (m *Meter) StatementRefusal(mayWrite bool, unbooked int64) error {
	return m.refusal(true, mayWrite, unbooked)
}

func spent(used, allowance int64) bool { return allowance > 0 && used >= allowance }

// refusal is the quota error when the read allowance (read) or the
// written one (written, with unbooked rows besides) is spent. It runs
// before every statement, so it builds no Totals.
func (m *Meter) refusal(read, written bool, unbooked int64) error {
	now := m.clock.Now()
	m.mu.Lock()
	m.rollAt(now)
	a := m.allowance()
	isSpent := read && spent(m.synced.read+m.pending.read, a.RowsReadPerDay) ||
		written && spent(m.synced.written+m.pending.written+unbooked, a.RowsWrittenPerDay)
	m.mu.Unlock()
	if !isSpent {
		return nil
	}
	return QuotaError(now)
}

// QuotaError is the refusal of a spent allowance at now: it says when the
// allowance is expected to reset, never that capacity is back.
func QuotaError(now time.Time) *tessera.Error {
	reset := NextReset(now)
	return &tessera.Error{Code: tessera.CodeStorageQuotaExhausted,
		Message:    "today's storage allowance is spent; the operation did not happen",
		RetryAfter: reset.Sub(now), ResetAt: reset}
}

// Sync adds this node's unsynced rows to the ledger and takes the
// deployment's totals and the day's allowance from it; then it caches them
// in the meter's file. Rows the ledger did not take stay pending for the
// next sync. Without a ledger it only writes the cache.
func (m *Meter) Sync(ctx context.Context) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	day := Day(m.clock.Now())
	m.mu.Lock()
	m.roll(day)
	l, carried, pending := m.ledger, m.carried, m.pending
	m.carried, m.pending = map[string]rows{}, rows{}
	m.mu.Unlock()
	if l == nil {
		m.putBack(carried, pending)
		return m.saveCache()
	}
	for d, r := range carried {
		if _, err := l.LedgerAdd(ctx, d, r.written, r.read); err != nil {
			delete(carried, d)
			m.putBack(carried, pending)
			m.putBack(map[string]rows{d: r}, rows{})
			return fmt.Errorf("meter: sync %s (%d rows written, %d read): %w", d, r.written, r.read, err)
		}
		delete(carried, d)
	}
	got, err := l.LedgerAdd(ctx, day, pending.written, pending.read)
	if err != nil {
		m.putBack(nil, pending)
		return fmt.Errorf("meter: sync %s (%d rows written, %d read): %w", day, pending.written, pending.read, err)
	}
	m.mu.Lock()
	if m.day == day {
		m.synced, m.override = rows{got.RowsWritten, got.RowsRead}, got.Allowance
	}
	m.mu.Unlock()
	return m.saveCache()
}

// putBack returns rows a failed sync took. Rows of a day that has since
// ended wait as carried rows.
func (m *Meter) putBack(carried map[string]rows, pending rows) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d, r := range carried {
		c := m.carried[d]
		m.carried[d] = rows{c.written + r.written, c.read + r.read}
	}
	m.pending.written += pending.written
	m.pending.read += pending.read
}

// saveCache writes the day's totals to the cache file, if the meter has
// one: a synced temp file renamed over it, so a crash leaves the old file
// or the new.
func (m *Meter) saveCache() error {
	if m.path == "" {
		return nil
	}
	t := m.Today()
	m.mu.Lock()
	c := cache{Day: t.Day, RowsWritten: t.RowsWritten, RowsRead: t.RowsRead, Override: m.override}
	same := c.Day == m.saved.Day && c.RowsWritten == m.saved.RowsWritten && c.RowsRead == m.saved.RowsRead &&
		(c.Override == nil) == (m.saved.Override == nil) && (c.Override == nil || *c.Override == *m.saved.Override)
	m.mu.Unlock()
	if same {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(m.path, b); err != nil {
		return fmt.Errorf("meter: %w", err)
	}
	m.mu.Lock()
	m.saved = c
	m.mu.Unlock()
	return nil
}

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
	return fsync.Dir(filepath.Dir(path))
}

// Persist syncs every interval until ctx ends, then once more. A crash
// loses at most one interval of this node's counting, never data. A
// failed sync keeps its rows for the next; onErr hears of it, at most
// once a minute while syncs keep failing (a full disk fails every one),
// and of a failed last sync, whose rows are lost.
func (m *Meter) Persist(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	if onErr == nil {
		onErr = func(error) {}
	}
	var reported time.Time
	failed := 0
	for {
		select {
		case <-ctx.Done():
			if err := m.Sync(context.Background()); err != nil {
				onErr(fmt.Errorf("the last sync failed, its rows are lost: %w", err))
			}
			return
		case <-t.C:
			err := m.Sync(ctx)
			switch {
			case err == nil || ctx.Err() != nil:
				failed = 0
			case time.Since(reported) >= time.Minute:
				onErr(fmt.Errorf("kept for the next sync in %s (%d syncs failed since the last report): %w", every, failed+1, err))
				reported, failed = time.Now(), 0
			default:
				failed++
			}
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
