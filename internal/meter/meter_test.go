package meter

import (
	"context"
	"path/filepath"
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
	if err := m.SetAllowance(Allowance{RowsWrittenPerDay: 10, RowsReadPerDay: 100}); err != nil {
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
	if err := m.SetAllowance(Allowance{RowsWrittenPerDay: 20}); err != nil {
		t.Fatal(err)
	}
	if m.WriteRefusal() != nil {
		t.Error("a raised allowance still refuses")
	}
	if err := m.SetAllowance(Allowance{RowsWrittenPerDay: 10}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	if m.WriteRefusal() != nil {
		t.Error("the next UTC day still refuses")
	}
}

// The day's totals and an operator's allowance survive a restart; another
// day's totals do not carry over.
func TestTotalsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meter.json")
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	m, err := Open(path, clock, Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	m.Add(context.Background(), 42, 17)
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path, clock, Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Today(); got.RowsWritten != 42 || got.RowsRead != 17 || got.Allowance.RowsWrittenPerDay != 5 {
		t.Fatalf("after restart: %+v", got)
	}
	if err := again.SetAllowance(Allowance{RowsWrittenPerDay: 1000}); err != nil {
		t.Fatal(err)
	}
	third, err := Open(path, clock, Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := third.Today().Allowance.RowsWrittenPerDay; got != 1000 {
		t.Errorf("operator's allowance after restart: %d, want 1000", got)
	}
	clock.Advance(24 * time.Hour)
	fourth, err := Open(path, clock, Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := fourth.Today(); got.RowsWritten != 0 || got.Allowance.RowsWrittenPerDay != 5 {
		t.Errorf("yesterday's totals or raise carried over: %+v", got)
	}
}

// Saves racing with allowance changes never leave a file that does not
// open, nor one older than the last save.
func TestConcurrentSavesKeepTheFileWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meter.json")
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	m, err := Open(path, clock, Allowance{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			_ = m.SetAllowance(Allowance{RowsWrittenPerDay: int64(i + 1)})
		}
	}()
	for range 200 {
		m.Add(context.Background(), 1, 1)
		if err := m.Save(); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if err := m.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path, clock, Allowance{})
	if err != nil {
		t.Fatalf("reopen after racing saves: %v", err)
	}
	if got := again.Today(); got.RowsWritten != 200 || got.Allowance.RowsWrittenPerDay != 200 {
		t.Errorf("after racing saves: %+v", got)
	}
}
