package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// testSessions covers the anonymous sessions' shared state (SPEC §12).
func testSessions(t *testing.T, open Opener) {
	take := func(t *testing.T, s store.Store, now time.Time) (bool, time.Duration) {
		t.Helper()
		var ok bool
		var wait time.Duration
		writeTx(t, s, func(tx store.Tx) (err error) {
			ok, wait, err = tx.SessionTake(t.Context(), now, 3, 360) // a token every 10 s
			return err
		})
		return ok, wait
	}

	// The global allowance accrues evenly: a full bucket at first, then a
	// token per 1/rate, and a refusal says when the next one comes.
	t.Run("SessionTakeIsATokenBucket", func(t *testing.T) {
		s := open(t)
		for i := range 3 {
			if ok, _ := take(t, s, epoch); !ok {
				t.Fatalf("take %d of a full bucket of 3 refused", i+1)
			}
		}
		ok, wait := take(t, s, epoch)
		if ok || wait != 10*time.Second {
			t.Fatalf("take from an empty bucket: ok %v, wait %s; want refused, 10s", ok, wait)
		}
		if ok, wait := take(t, s, at(4*time.Second)); ok || wait != 6*time.Second {
			t.Errorf("4 s later: ok %v, wait %s; want refused, 6s", ok, wait)
		}
		if ok, _ := take(t, s, at(10*time.Second)); !ok {
			t.Error("a token that accrued is refused")
		}
		if ok, _ := take(t, s, at(11*time.Second)); ok {
			t.Error("a token taken twice")
		}
		// Refilling stops at the capacity.
		for i := range 3 {
			if ok, _ := take(t, s, at(time.Hour)); !ok {
				t.Fatalf("take %d an hour later refused", i+1)
			}
		}
		if ok, _ := take(t, s, at(time.Hour)); ok {
			t.Error("the bucket filled past its capacity")
		}
	})

	t.Run("ConcurrentSessionTakesTakeEachTokenOnce", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		const takers = 12
		var mu sync.Mutex
		got := 0
		var wg sync.WaitGroup
		for range takers {
			wg.Go(func() {
				var ok bool
				if err := s.Update(t.Context(), func(tx store.Tx) (err error) {
					ok, _, err = tx.SessionTake(t.Context(), epoch, 5, 1)
					return err
				}); err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					got++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if got != 5 {
			t.Errorf("%d takers got %d of a bucket of 5", takers, got)
		}
	})

	t.Run("SessionMintsWindow", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			for i, m := range []struct {
				addr string
				at   time.Duration
			}{{"a", -2 * time.Hour}, {"a", -50 * time.Minute}, {"a", -10 * time.Minute}, {"b", -5 * time.Minute}, {"c", -time.Minute}} {
				if err := tx.SessionMintAdd(ctx, m.addr, idAt(time.Duration(i), 0), at(m.at)); err != nil {
					return err
				}
			}
			return nil
		})
		readTx(t, s, func(tx store.Tx) error {
			n, oldest, err := tx.SessionMints(ctx, []string{"a", "b"}, at(-time.Hour))
			if err != nil {
				return err
			}
			if n != 3 || !oldest.Equal(at(-50*time.Minute)) {
				t.Errorf("mints of a and b in the hour: %d, oldest %s; want 3, %s", n, oldest, at(-50*time.Minute))
			}
			n, _, err = tx.SessionMints(ctx, []string{"z"}, at(-time.Hour))
			if n != 0 {
				t.Errorf("mints of an address never seen: %d", n)
			}
			return err
		})
		var purged int
		writeTx(t, s, func(tx store.Tx) (err error) {
			purged, err = tx.SessionMintsPurge(ctx, at(-time.Hour), 500)
			return err
		})
		if purged != 1 {
			t.Errorf("mints purged before the hour: %d, want 1", purged)
		}
	})

	// §12's per-address limit holds under concurrent mints: the count and
	// the mint it allows are never raced by another mint of the address.
	t.Run("ConcurrentMintsHoldTheLimit", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		if got := concurrentMints(t, s, s); got != mintLimit-seededMints {
			t.Errorf("%d concurrent mints with %d of the limit of %d used: %d minted, want %d",
				mintAttempts, seededMints, mintLimit, got, mintLimit-seededMints)
		}
	})

	t.Run("SessionQuota", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		purgeAt := at(24 * time.Hour)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.PrincipalCreate(ctx, &tessera.Principal{ID: "s1", Kind: tessera.KindAnonymous, CreatedAt: epoch, PurgeAt: &purgeAt}); err != nil {
				return err
			}
			return tx.SessionCreate(ctx, "s1", 2)
		})
		use := func() store.SessionUsage {
			t.Helper()
			var u store.SessionUsage
			writeTx(t, s, func(tx store.Tx) (err error) {
				u, err = tx.SessionUse(ctx, "s1")
				return err
			})
			return u
		}
		if u := use(); !u.Counted || u.Used != 1 || u.Quota != 2 || u.Seeded {
			t.Errorf("first request: %+v", u)
		}
		writeTx(t, s, func(tx store.Tx) error { return tx.SessionSeeded(ctx, "s1") })
		if u := use(); !u.Counted || u.Used != 2 || !u.Seeded {
			t.Errorf("second request: %+v", u)
		}
		if u := use(); u.Counted || u.Used != 2 {
			t.Errorf("a request past the quota: %+v, want not counted", u)
		}
		err := s.Update(ctx, func(tx store.Tx) error { _, err := tx.SessionUse(ctx, "nobody"); return err })
		wantErr(t, "use of no session", err, store.ErrNotFound)

		readTx(t, s, func(tx store.Tx) error {
			ids, err := tx.SessionsExpired(ctx, at(25*time.Hour), 10)
			if err != nil {
				return err
			}
			if len(ids) != 1 || ids[0] != "s1" {
				t.Errorf("expired sessions a day later: %v", ids)
			}
			if ids, _ := tx.SessionsExpired(ctx, epoch, 10); len(ids) != 0 {
				t.Errorf("expired sessions at mint: %v", ids)
			}
			return nil
		})
		writeTx(t, s, func(tx store.Tx) error {
			_, err := tx.PrincipalsPurge(ctx, at(25*time.Hour), 10)
			return err
		})
		err = s.Update(ctx, func(tx store.Tx) error { _, err := tx.SessionUse(ctx, "s1"); return err })
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the quota of a purged session: %v, want gone", err)
		}
	})
}

// The figures of concurrentMints.
const (
	mintAttempts = 40
	mintLimit    = 10
	seededMints  = 3
)

// concurrentMints makes mintAttempts concurrent attempts to mint from one
// address group under a limit of mintLimit, each the way the core mints —
// count the group's mints in the window, and add one if the count is
// under the limit, in one transaction — spread over stores a and b (two
// nodes, or one store twice), and returns how many minted. The group is
// known by two hashes, as in the first hour of a UTC day: yesterday's
// already holds seededMints of the window's mints.
func concurrentMints(t *testing.T, a, b store.Store) int {
	t.Helper()
	addrs := []string{"today", "yesterday"}
	writeTx(t, a, func(tx store.Tx) error {
		for i := range seededMints {
			if err := tx.SessionMintAdd(t.Context(), addrs[1], fmt.Sprint("seeded ", i), at(-30*time.Minute)); err != nil {
				return err
			}
		}
		return nil
	})
	errFull := errors.New("the address's mints are all used")
	var minted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range mintAttempts {
		s := []store.Store{a, b}[i%2]
		wg.Go(func() {
			<-start
			err := s.Update(t.Context(), func(tx store.Tx) error {
				n, _, err := tx.SessionMints(t.Context(), addrs, at(-time.Hour))
				if err != nil {
					return err
				}
				if n >= mintLimit {
					return errFull
				}
				return tx.SessionMintAdd(t.Context(), addrs[0], fmt.Sprint("attempt ", i), epoch)
			})
			switch {
			case err == nil:
				minted.Add(1)
			case !errors.Is(err, errFull):
				t.Errorf("mint %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	var n int
	readTx(t, a, func(tx store.Tx) (err error) {
		n, _, err = tx.SessionMints(t.Context(), addrs, at(-time.Hour))
		return err
	})
	if n != seededMints+int(minted.Load()) {
		t.Errorf("%d mints answered, %d stored besides the %d seeded", minted.Load(), n-seededMints, seededMints)
	}
	return int(minted.Load())
}
