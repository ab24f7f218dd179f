package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// testIdentity covers principals, keys, namespaces and idempotency entries.
func testIdentity(t *testing.T, open Opener) {
	t.Run("PrincipalRoundTrip", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		anon := &tessera.Principal{ID: "p-anon", Kind: tessera.KindAnonymous, Account: "acct-1",
			DisplayName: "Anon Ünïcode", CreatedAt: epoch, LastUsedAt: ptr(at(time.Second)), PurgeAt: ptr(at(time.Hour))}
		user := &tessera.Principal{ID: "p-user", Kind: tessera.KindUser, DisplayName: "u", CreatedAt: at(time.Minute)}
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.PrincipalCreate(ctx, anon); err != nil {
				return err
			}
			return tx.PrincipalCreate(ctx, user)
		})
		readTx(t, s, func(tx store.Tx) error {
			for _, want := range []*tessera.Principal{anon, user} {
				got, err := tx.PrincipalGet(ctx, want.ID)
				if err != nil {
					t.Fatalf("get %s: %v", want.ID, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("get %s:\n got %+v\nwant %+v", want.ID, got, want)
				}
			}
			return nil
		})
	})

	t.Run("PrincipalCreateTwiceConflicts", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		p := &tessera.Principal{ID: "p1", Kind: tessera.KindUser, CreatedAt: epoch}
		writeTx(t, s, func(tx store.Tx) error { return tx.PrincipalCreate(ctx, p) })
		err := s.Update(t.Context(), func(tx store.Tx) error { return tx.PrincipalCreate(ctx, p) })
		wantErr(t, "second create", err, store.ErrConflict)
	})

	t.Run("PrincipalUpdate", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		p := &tessera.Principal{ID: "p1", Kind: tessera.KindUser, Account: "a", DisplayName: "d", CreatedAt: epoch}
		writeTx(t, s, func(tx store.Tx) error { return tx.PrincipalCreate(ctx, p) })
		changed := &tessera.Principal{ID: "p1", Kind: tessera.KindService, Account: "b", DisplayName: "e",
			CreatedAt:  at(time.Hour), // created_at is not one of the fields an update changes
			LastUsedAt: ptr(at(time.Minute)), PurgeAt: ptr(at(2 * time.Minute))}
		writeTx(t, s, func(tx store.Tx) error { return tx.PrincipalUpdate(ctx, changed) })
		want := *changed
		want.CreatedAt = epoch
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.PrincipalGet(ctx, "p1")
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("after update:\n got %+v\nwant %+v", *got, want)
			}
			return nil
		})
		// Clearing the optional timestamps writes NULL back.
		want.LastUsedAt, want.PurgeAt = nil, nil
		writeTx(t, s, func(tx store.Tx) error { return tx.PrincipalUpdate(ctx, &want) })
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.PrincipalGet(ctx, "p1")
			if err != nil {
				return err
			}
			if got.LastUsedAt != nil || got.PurgeAt != nil {
				t.Errorf("cleared timestamps read back as %v, %v", got.LastUsedAt, got.PurgeAt)
			}
			return nil
		})
	})

	t.Run("PrincipalMissingIsNotFound", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.PrincipalGet(ctx, "nobody")
			wantErr(t, "get", err, store.ErrNotFound)
			return nil
		})
		err := s.Update(t.Context(), func(tx store.Tx) error {
			return tx.PrincipalUpdate(ctx, &tessera.Principal{ID: "nobody", Kind: tessera.KindUser})
		})
		wantErr(t, "update", err, store.ErrNotFound)
	})

	t.Run("PrincipalListPages", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		// Inserted out of order: the list is ordered by id, not by insertion.
		all := []string{"p3", "p1", "p5", "p2", "p4"}
		writeTx(t, s, func(tx store.Tx) error {
			for _, id := range all {
				if err := tx.PrincipalCreate(ctx, &tessera.Principal{ID: id, Kind: tessera.KindAgent, CreatedAt: epoch}); err != nil {
					return err
				}
			}
			return nil
		})
		var pages [][]string
		after := ""
		for range 10 {
			var page []tessera.Principal
			readTx(t, s, func(tx store.Tx) (err error) {
				page, err = tx.PrincipalList(ctx, after, 2)
				return err
			})
			if len(page) == 0 {
				break
			}
			var got []string
			for _, p := range page {
				got = append(got, p.ID)
			}
			pages = append(pages, got)
			after = page[len(page)-1].ID
		}
		want := [][]string{{"p1", "p2"}, {"p3", "p4"}, {"p5"}}
		if !reflect.DeepEqual(pages, want) {
			t.Fatalf("pages = %v, want %v", pages, want)
		}
	})

	t.Run("PrincipalAny", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		check := func(want bool) {
			t.Helper()
			readTx(t, s, func(tx store.Tx) error {
				got, err := tx.PrincipalAny(ctx)
				if err != nil {
					return err
				}
				if got != want {
					t.Errorf("PrincipalAny = %v, want %v", got, want)
				}
				return nil
			})
		}
		check(false)
		writeTx(t, s, func(tx store.Tx) error {
			return tx.PrincipalCreate(ctx, &tessera.Principal{ID: "p1", Kind: tessera.KindUser, CreatedAt: epoch})
		})
		check(true)
	})

	t.Run("KeyCreateLookupWithPrincipal", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		p := &tessera.Principal{ID: "p1", Kind: tessera.KindAgent, Account: "acct", DisplayName: "worker",
			CreatedAt: epoch, LastUsedAt: ptr(at(time.Second))}
		forever := &tessera.Key{ID: "key1", PrincipalID: "p1", Scopes: []string{"namespace:main", "claim"},
			CreatedAt: epoch, SecretHash: []byte("hash-one-0123456789abcdef0123456")}
		expiring := &tessera.Key{ID: "key2", PrincipalID: "p1", Scopes: []string{"admin"},
			ExpiresAt: ptr(at(24 * time.Hour)), CreatedAt: at(time.Second), SecretHash: []byte{0, 1, 2, 255}}
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.PrincipalCreate(ctx, p); err != nil {
				return err
			}
			if err := tx.KeyCreate(ctx, forever); err != nil {
				return err
			}
			return tx.KeyCreate(ctx, expiring)
		})
		readTx(t, s, func(tx store.Tx) error {
			for _, want := range []*tessera.Key{forever, expiring} {
				k, gotP, err := tx.KeyLookup(ctx, want.ID)
				if err != nil {
					t.Fatalf("lookup %s: %v", want.ID, err)
				}
				if !reflect.DeepEqual(k, want) {
					t.Errorf("key %s:\n got %+v\nwant %+v", want.ID, k, want)
				}
				if !reflect.DeepEqual(gotP, p) {
					t.Errorf("principal of %s:\n got %+v\nwant %+v", want.ID, gotP, p)
				}
			}
			_, _, err := tx.KeyLookup(ctx, "nokey")
			wantErr(t, "lookup of a missing key", err, store.ErrNotFound)
			return nil
		})
		err := s.Update(t.Context(), func(tx store.Tx) error { return tx.KeyCreate(ctx, forever) })
		wantErr(t, "second create", err, store.ErrConflict)
	})

	t.Run("KeyListPages", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.PrincipalCreate(ctx, &tessera.Principal{ID: "p1", Kind: tessera.KindUser, CreatedAt: epoch}); err != nil {
				return err
			}
			for _, id := range []string{"kc", "ka", "kd", "kb"} {
				k := &tessera.Key{ID: id, PrincipalID: "p1", Scopes: []string{"read"}, CreatedAt: epoch, SecretHash: []byte(id)}
				if err := tx.KeyCreate(ctx, k); err != nil {
					return err
				}
			}
			return nil
		})
		readTx(t, s, func(tx store.Tx) error {
			first, err := tx.KeyList(ctx, "", 3)
			if err != nil {
				return err
			}
			rest, err := tx.KeyList(ctx, "kc", 3)
			if err != nil {
				return err
			}
			var got []string
			for _, k := range append(first, rest...) {
				got = append(got, k.ID)
				if !bytes.Equal(k.SecretHash, []byte(k.ID)) || !slices.Equal(k.Scopes, []string{"read"}) {
					t.Errorf("key %s lists as %+v", k.ID, k)
				}
			}
			if want := []string{"ka", "kb", "kc", "kd"}; !slices.Equal(got, want) {
				t.Errorf("KeyList pages = %v, want %v", got, want)
			}
			return nil
		})
	})

	t.Run("KeyRevoke", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.PrincipalCreate(ctx, &tessera.Principal{ID: "p1", Kind: tessera.KindUser, CreatedAt: epoch}); err != nil {
				return err
			}
			return tx.KeyCreate(ctx, &tessera.Key{ID: "key1", PrincipalID: "p1", Scopes: []string{"admin"}, CreatedAt: epoch, SecretHash: []byte("h")})
		})
		first := at(time.Minute)
		writeTx(t, s, func(tx store.Tx) error { return tx.KeyRevoke(ctx, "key1", first) })
		// Revoking twice keeps the first revocation time.
		writeTx(t, s, func(tx store.Tx) error { return tx.KeyRevoke(ctx, "key1", at(time.Hour)) })
		readTx(t, s, func(tx store.Tx) error {
			k, _, err := tx.KeyLookup(ctx, "key1")
			if err != nil {
				return err
			}
			if k.RevokedAt == nil || !k.RevokedAt.Equal(first) {
				t.Errorf("revoked_at = %v, want %v", k.RevokedAt, first)
			}
			if k.Live(at(30 * time.Second)) {
				t.Errorf("a revoked key is live")
			}
			return nil
		})
		err := s.Update(t.Context(), func(tx store.Tx) error { return tx.KeyRevoke(ctx, "nokey", first) })
		wantErr(t, "revoke of a missing key", err, store.ErrNotFound)
	})

	t.Run("NamespaceEnsureReportsNewOnce", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		ensure := func(name string, now time.Time) bool {
			t.Helper()
			var isNew bool
			writeTx(t, s, func(tx store.Tx) (err error) {
				isNew, err = tx.NamespaceEnsure(ctx, name, now)
				return err
			})
			return isNew
		}
		if !ensure("build-farm", epoch) {
			t.Errorf("first ensure of build-farm: not new")
		}
		if ensure("build-farm", at(time.Hour)) {
			t.Errorf("second ensure of build-farm: new again")
		}
		if !ensure("main", at(time.Minute)) {
			t.Errorf("first ensure of main: not new")
		}
		ensure("zeta", epoch)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.NamespaceList(ctx, "", 10)
			if err != nil {
				return err
			}
			want := []store.Namespace{{Name: "build-farm", CreatedAt: epoch}, {Name: "main", CreatedAt: at(time.Minute)}, {Name: "zeta", CreatedAt: epoch}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("NamespaceList = %+v, want %+v (by name; the first ensure's time is kept)", got, want)
			}
			// Pages by name, after the name given.
			page, err := tx.NamespaceList(ctx, "build-farm", 1)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(page, want[1:2]) {
				t.Errorf("NamespaceList after build-farm, limit 1 = %+v, want %+v", page, want[1:2])
			}
			return nil
		})
	})

	t.Run("NamespaceListEmpty", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.NamespaceList(ctx, "", 10)
			if err != nil {
				return err
			}
			if len(got) != 0 {
				t.Errorf("a fresh store lists namespaces %+v", got)
			}
			return nil
		})
	})

	t.Run("IdempotencyPutGet", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		e := &store.Idempotency{Namespace: "main", PrincipalID: "p1", Route: "enqueue", Key: "k-1",
			RequestHash: []byte{9, 8, 7}, Response: []byte(`{"id":"T1"}`), CreatedAt: epoch}
		put := func(e *store.Idempotency) bool {
			t.Helper()
			var stored bool
			writeTx(t, s, func(tx store.Tx) (err error) {
				stored, err = tx.IdempotencyPut(ctx, e)
				return err
			})
			return stored
		}
		if !put(e) {
			t.Fatal("the first put of a key did not store it")
		}
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.IdempotencyGet(ctx, "main", "p1", "enqueue", "k-1")
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, e) {
				t.Errorf("get:\n got %+v\nwant %+v", got, e)
			}
			// Each part of the identity separates entries.
			for _, miss := range [][4]string{
				{"other", "p1", "enqueue", "k-1"},
				{"main", "p2", "enqueue", "k-1"},
				{"main", "p1", "submit:T1", "k-1"},
				{"main", "p1", "enqueue", "k-2"},
			} {
				_, err := tx.IdempotencyGet(ctx, miss[0], miss[1], miss[2], miss[3])
				wantErr(t, "get "+miss[0]+"/"+miss[1]+"/"+miss[2]+"/"+miss[3], err, store.ErrNotFound)
			}
			return nil
		})

		// The first entry of a key wins: a second put stores nothing.
		again := *e
		again.Response = []byte(`{"id":"T2"}`)
		if put(&again) {
			t.Error("a second put of the same key stored it")
		}
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.IdempotencyGet(ctx, "main", "p1", "enqueue", "k-1")
			if err != nil {
				return err
			}
			if string(got.Response) != `{"id":"T1"}` {
				t.Errorf("after a conflicting put the response is %s", got.Response)
			}
			return nil
		})

		other := *e
		other.Route = "submit:T1"
		if !put(&other) {
			t.Error("the same key on another route was not stored")
		}
	})

	// Retention deletes the entries made before its cutoff, oldest first
	// and at most limit of them, and keeps every other, including those
	// made in the same millisecond as each other.
	t.Run("IdempotencyPurgeByAge", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		ages := []time.Duration{-3 * time.Hour, -3 * time.Hour, -2 * time.Hour, -time.Hour, 0, 0}
		writeTx(t, s, func(tx store.Tx) error {
			for i, age := range ages {
				e := &store.Idempotency{Namespace: "main", PrincipalID: "p1", Route: "enqueue", Key: fmt.Sprint("k-", i),
					RequestHash: []byte{1}, Response: []byte(`{}`), CreatedAt: epoch.Add(age)}
				if stored, err := tx.IdempotencyPut(ctx, e); err != nil || !stored {
					return fmt.Errorf("put %d: stored %v, %w", i, stored, err)
				}
			}
			return nil
		})
		kept := func() (keys []string) {
			readTx(t, s, func(tx store.Tx) error {
				for i := range ages {
					_, err := tx.IdempotencyGet(ctx, "main", "p1", "enqueue", fmt.Sprint("k-", i))
					if err == nil {
						keys = append(keys, fmt.Sprint("k-", i))
					} else if !errors.Is(err, store.ErrNotFound) {
						return err
					}
				}
				return nil
			})
			return keys
		}
		purge := func(before time.Time, limit, want int) {
			t.Helper()
			writeTx(t, s, func(tx store.Tx) error {
				n, err := tx.IdempotencyPurge(ctx, before, limit)
				if n != want {
					t.Errorf("purge before %v, limit %d: %d deleted, want %d", before.Sub(epoch), limit, n, want)
				}
				return err
			})
		}
		purge(epoch.Add(-90*time.Minute), 2, 2)
		if got := kept(); !reflect.DeepEqual(got, []string{"k-2", "k-3", "k-4", "k-5"}) {
			t.Errorf("after a purge limited to 2, kept %v", got)
		}
		purge(epoch.Add(-90*time.Minute), 500, 1)
		purge(epoch.Add(-90*time.Minute), 500, 0)
		if got := kept(); !reflect.DeepEqual(got, []string{"k-3", "k-4", "k-5"}) {
			t.Errorf("after purging what was made over 90 minutes ago, kept %v", got)
		}
	})
}
