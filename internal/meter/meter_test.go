package meter

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

func TestNextResetAroundMidnight(t *testing.T) {
	cases := []struct{ now, want string }{
		{"2026-12-01T23:59:59.999Z", "2026-12-02T00:00:00Z"},
		{"2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z"}, // at midnight the next reset is a day away
		{"2026-12-31T12:00:00Z", "2027-01-01T00:00:00Z"},
		{"2028-02-28T08:00:00Z", "2028-02-29T00:00:00Z"},      // leap day
		{"2026-12-01T23:30:00-02:00", "2026-12-03T00:00:00Z"}, // 01:30 UTC on the 2nd
	}
	for _, c := range cases {
		now, _ := time.Parse(time.RFC3339Nano, c.now)
		want, _ := time.Parse(time.RFC3339, c.want)
		if got := NextReset(now); !got.Equal(want) {
			t.Errorf("NextReset(%s) = %s, want %s", c.now, got, want)
		}
	}
}

func TestDayRollsAtUTCMidnight(t *testing.T) {
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC))
	m := New(clock)
	m.Add(context.Background(), 7, 3)
	if got := m.Today(); got.Day != "2026-12-01" || got.RowsWritten != 7 || got.RowsRead != 3 {
		t.Fatalf("before midnight: %+v", got)
	}
	clock.Advance(time.Second)
	if got := m.Today(); got.Day != "2026-12-02" || got.RowsWritten != 0 || got.RowsRead != 0 {
		t.Fatalf("after midnight: %+v", got)
	}
}

// A spent allowance refuses with the reset instant and the seconds to it,
// until midnight UTC or a raised allowance.
func TestAllowanceRefusal(t *testing.T) {
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC))
	m := New(clock)
	if err := m.SetAllowance(context.Background(), Allowance{RowsWrittenPerDay: 10, RowsReadPerDay: 100}); err != nil {
		t.Fatal(err)
	}
	m.Add(context.Background(), 9, 0)
	if err := m.WriteRefusal(); err != nil {
		t.Fatalf("9 of 10 refused: %v", err)
	}
	m.Add(context.Background(), 1, 0)
	err := m.WriteRefusal()
	e, ok := err.(*tessera.Error)
	if !ok || e.Code != tessera.CodeStorageQuotaExhausted {
		t.Fatalf("10 of 10: %v", err)
	}
	if e.RetryAfter != 2*time.Hour || !e.ResetAt.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("refusal: retry after %s, reset at %s", e.RetryAfter, e.ResetAt)
	}
	if m.ReadRefusal() != nil {
		t.Error("the read allowance is not spent")
	}
	if err := m.SetAllowance(context.Background(), Allowance{RowsWrittenPerDay: 20}); err != nil {
		t.Fatal(err)
	}
	if m.WriteRefusal() != nil {
		t.Error("a raised allowance still refuses")
	}
	if err := m.SetAllowance(context.Background(), Allowance{RowsWrittenPerDay: 10}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	if m.WriteRefusal() != nil {
		t.Error("the next UTC day still refuses")
	}
}

// memLedger is a ledger held in memory, standing in for the store's
// meter_days (the sqlite package tests the real one).
type memLedger struct {
	mu   sync.Mutex
	days map[string]LedgerDay
}

func (l *memLedger) LedgerAdd(_ context.Context, day string, w, r int64) (LedgerDay, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.days[day]
	d.RowsWritten += w
	d.RowsRead += r
	l.days[day] = d
	return d, nil
}

func (l *memLedger) LedgerSetAllowance(_ context.Context, day string, a Allowance) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.days[day]
	d.Allowance = &a
	l.days[day] = d
	return nil
}

// Two meters on one ledger are two nodes: each sees the other's rows after
// a sync, an allowance set through one holds for both, and a spent
// allowance refuses on both.
func TestNodesShareOneLedger(t *testing.T) {
	ctx := context.Background()
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	l := &memLedger{days: map[string]LedgerDay{}}
	a, b := New(clock), New(clock)
	for _, m := range []*Meter{a, b} {
		m.SetBase(Allowance{RowsWrittenPerDay: 100})
		if err := m.Attach(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	a.Add(ctx, 42, 17)
	b.Add(ctx, 8, 3)
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Today(); got.RowsWritten != 50 || got.RowsRead != 20 {
		t.Errorf("node b after both synced: %+v, want 50 written, 20 read", got)
	}
	if err := a.SetAllowance(ctx, Allowance{RowsWrittenPerDay: 50}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Today().Allowance.RowsWrittenPerDay != 50 || b.WriteRefusal() == nil {
		t.Errorf("node b after a's allowance change: %+v, refusal %v", b.Today(), b.WriteRefusal())
	}
	// The next day starts over on the flags, for every node.
	clock.Advance(24 * time.Hour)
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := b.Today(); got.RowsWritten != 0 || got.Allowance.RowsWrittenPerDay != 100 {
		t.Errorf("next day: %+v", got)
	}
}

// Rows counted before midnight and synced after it go to their own day.
func TestRowsBeforeMidnightSyncToTheirDay(t *testing.T) {
	ctx := context.Background()
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC))
	l := &memLedger{days: map[string]LedgerDay{}}
	m := New(clock)
	if err := m.Attach(ctx, l); err != nil {
		t.Fatal(err)
	}
	m.Add(ctx, 5, 1)
	clock.Advance(2 * time.Second)
	m.Add(ctx, 7, 2)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.days["2026-12-01"]; got.RowsWritten != 5 || got.RowsRead != 1 {
		t.Errorf("Dec 1 in the ledger: %+v, want 5 and 1", got)
	}
	if got := l.days["2026-12-02"]; got.RowsWritten != 7 || got.RowsRead != 2 {
		t.Errorf("Dec 2 in the ledger: %+v, want 7 and 2", got)
	}
}

// The cache file keeps the last totals seen, so a restart knows them before
// the store is open; another day's do not carry over.
func TestTotalsCached(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meter.json")
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	m, err := Open(path, clock, Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	m.Add(ctx, 42, 17)
	if err := m.SetAllowance(ctx, Allowance{RowsWrittenPerDay: 1000}); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path, clock, Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Today(); got.RowsWritten != 42 || got.RowsRead != 17 || got.Allowance.RowsWrittenPerDay != 1000 {
		t.Fatalf("after restart: %+v", got)
	}
	clock.Advance(24 * time.Hour)
	next, err := Open(path, clock, Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := next.Today(); got.RowsWritten != 0 || got.Allowance.RowsWrittenPerDay != 5 {
		t.Errorf("yesterday's totals or raise carried over: %+v", got)
	}
}

// Syncs racing with allowance changes never leave a cache that does not
// open, nor lose a row.
func TestConcurrentSyncsKeepEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "meter.json")
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	l := &memLedger{days: map[string]LedgerDay{}}
	m, err := Open(path, clock, Allowance{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Attach(ctx, l); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			_ = m.SetAllowance(ctx, Allowance{RowsWrittenPerDay: int64(i + 1)})
		}
	}()
	for range 200 {
		m.Add(ctx, 1, 1)
		if err := m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.days["2026-12-01"]; got.RowsWritten != 200 || got.Allowance == nil || got.Allowance.RowsWrittenPerDay != 200 {
		t.Errorf("ledger after racing syncs: %+v", got)
	}
	again, err := Open(path, clock, Allowance{})
	if err != nil {
		t.Fatalf("reopen after racing syncs: %v", err)
	}
	if got := again.Today(); got.RowsWritten != 200 || got.Allowance.RowsWrittenPerDay != 200 {
		t.Errorf("cache after racing syncs: %+v", got)
	}
}
