package httpapi

import (
	"net/netip"
	"testing"
	"time"
)

// The keyless bucket's arithmetic at a fixed clock: the end-to-end tests
// (edge_test.go) cannot hold time still, so the exact allowance is proved
// here, on the bucket alone.

func wantTake(t *testing.T, b *addrBuckets, a netip.Addr, at time.Time, ok bool, wait time.Duration) {
	t.Helper()
	gotWait, gotOK := b.take(a, at)
	if gotOK != ok || gotWait != wait {
		t.Fatalf("take at %v: ok %v wait %v, want ok %v wait %v", at, gotOK, gotWait, ok, wait)
	}
}

func wantKeyed(t *testing.T, b *addrBuckets, a netip.Addr, at time.Time, ok bool, wait time.Duration) {
	t.Helper()
	gotWait, gotOK := b.keyed(a, at)
	if gotOK != ok || gotWait != wait {
		t.Fatalf("keyed at %v: ok %v wait %v, want ok %v wait %v", at, gotOK, gotWait, ok, wait)
	}
}

func TestKeylessBucketAllowsExactlyBurstThenRate(t *testing.T) {
	b := newAddrBuckets(20, 40) // a token every 50 ms
	a := netip.MustParseAddr("192.0.2.1")
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	for range 40 {
		wantTake(t, b, a, t0, true, 0)
	}
	// The 41st waits exactly one token's time, and spends nothing.
	wantTake(t, b, a, t0, false, 50*time.Millisecond)
	wantTake(t, b, a, t0.Add(49*time.Millisecond), false, time.Millisecond)
	wantTake(t, b, a, t0.Add(50*time.Millisecond), true, 0)
	wantTake(t, b, a, t0.Add(50*time.Millisecond), false, 50*time.Millisecond)
	// Ten seconds on, 20/s has refilled the burst and no more.
	t1 := t0.Add(10 * time.Second)
	for range 40 {
		wantTake(t, b, a, t1, true, 0)
	}
	wantTake(t, b, a, t1, false, 50*time.Millisecond)

	// Another address has its own bucket; a keyed request needs none.
	wantTake(t, b, netip.MustParseAddr("192.0.2.2"), t1, true, 0)
	wantKeyed(t, b, a, t1, true, 0)
}

// Keys refused (401) spend the address's tokens after the fact: once they
// overdraw it, its keyed requests wait too, and the debt is bounded.
func TestRefusedKeysOverdrawTheBucket(t *testing.T) {
	b := newAddrBuckets(20, 40)
	a := netip.MustParseAddr("2001:db8::1")
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	for range 40 {
		b.charge(a, t0)
	}
	// At zero tokens a keyed request still goes, a keyless one waits.
	wantKeyed(t, b, a, t0, true, 0)
	wantTake(t, b, a, t0, false, 50*time.Millisecond)
	b.charge(a, t0)
	wantKeyed(t, b, a, t0, false, 50*time.Millisecond)
	// The debt stops at −burst, whatever is charged.
	for range 1000 {
		b.charge(a, t0)
	}
	wantKeyed(t, b, a, t0, false, 2*time.Second)
	wantTake(t, b, a, t0, false, 2*time.Second+50*time.Millisecond)
	wantKeyed(t, b, a, t0.Add(2*time.Second), true, 0)
}

// The table holds at most max addresses: full, it refuses keyless
// requests from addresses it does not hold (a fresh burst each would be
// what a flood from many addresses wants), and drops the ones whose
// bucket is full again when it sweeps, at most once a second.
func TestKeylessTableIsBounded(t *testing.T) {
	b := newAddrBuckets(20, 40)
	b.max = 2
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	x, y, z := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	wantTake(t, b, x, t0, true, 0)
	wantTake(t, b, y, t0, true, 0)
	wantTake(t, b, z, t0, false, time.Second)
	b.charge(z, t0) // not recorded: no room
	wantKeyed(t, b, z, t0, true, 0)
	// x and y are full again after 50 ms, but the table swept at t0.
	wantTake(t, b, z, t0.Add(999*time.Millisecond), false, time.Second)
	wantTake(t, b, z, t0.Add(time.Second), true, 0)
	if len(b.full) != 1 {
		t.Fatalf("after the sweep the table holds %d addresses, want 1", len(b.full))
	}
	// Not full, the table still sweeps every minute.
	b.max = 100
	wantTake(t, b, x, t0.Add(time.Minute+time.Second), true, 0)
	if len(b.full) != 1 {
		t.Fatalf("a minute on the table holds %d addresses, want 1 (x, just now)", len(b.full))
	}
}

// A rate too small for a Duration is one token a day, not an overflow.
func TestKeylessRateBelowOneADay(t *testing.T) {
	b := newAddrBuckets(1e-12, 1)
	if b.interval != 24*time.Hour {
		t.Fatalf("interval %v, want 24h", b.interval)
	}
	a := netip.MustParseAddr("192.0.2.1")
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	wantTake(t, b, a, t0, true, 0)
	wantTake(t, b, a, t0, false, 24*time.Hour)
}
