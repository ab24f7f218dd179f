package storetest

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func testAudit(t *testing.T, open Opener) {
	event := func(ns, principal, action string, when time.Time) *tessera.AuditEvent {
		// IDFloor: a deterministic id that encodes exactly the given time.
		return &tessera.AuditEvent{ID: tessera.IDFloor(when), Time: when, Namespace: ns, PrincipalID: principal,
			KeyID: "k1", Action: action, Target: "t", RunID: "r1", Status: 200, IPHash: "h", Public: true}
	}

	// Events written in a row after the transaction read something, with
	// nothing after them, commit with it: a backend that holds writes
	// back to send them with the COMMIT must not take them for nothing.
	t.Run("events written last, after a read, commit", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		insertTasks(t, s, taskFixture("01A", taskOpts{}))
		// Two transactions of one event each, and one of two events.
		written := []*tessera.AuditEvent{event("main", "p1", "task.get", at(0)), event("main", "p1", "task.get", at(time.Second))}
		many := []*tessera.AuditEvent{event("main", "p2", "task.get", at(2*time.Second)), event("main", "p2", "task.get", at(3*time.Second))}
		many[1].RunID, many[1].Public = "", false
		for _, events := range [][]*tessera.AuditEvent{written[:1], written[1:], many} {
			writeTx(t, s, func(tx store.Tx) error {
				if _, err := tx.TaskGet(ctx, "main", "01A"); err != nil {
					return err
				}
				for _, e := range events {
					if err := tx.AuditInsert(ctx, e); err != nil {
						return err
					}
				}
				return nil
			})
		}
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.AuditEvents(ctx, store.AuditFilter{Since: at(-time.Hour), Limit: 10})
			if err != nil {
				return err
			}
			want := []*tessera.AuditEvent{many[1], many[0], written[1], written[0]}
			if len(got) != len(want) {
				t.Fatalf("%d events committed, want %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(&got[i], want[i]) {
					t.Errorf("event %d:\n got %+v\nwant %+v", i, got[i], *want[i])
				}
			}
			return nil
		})
	})

	t.Run("events filter newest first within the window", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		old := event("main", "p1", "task.get", at(-48*time.Hour))
		e1 := event("main", "p1", "task.get", at(0))
		e2 := event("alpha", "p1", "task.enqueue", at(time.Second))
		e3 := event("alpha", "p2", "task.get", at(2*time.Second))
		writeTx(t, s, func(tx store.Tx) error {
			for _, e := range []*tessera.AuditEvent{old, e1, e2, e3} {
				if err := tx.AuditInsert(ctx, e); err != nil {
					return err
				}
				// What the core records with every audited action.
				if err := tx.PrincipalNamespaceAdd(ctx, e.PrincipalID, e.Namespace); err != nil {
					return err
				}
			}
			return nil
		})
		since := at(-time.Hour)
		cases := []struct {
			f    store.AuditFilter
			want []*tessera.AuditEvent
		}{
			{store.AuditFilter{Since: since, Limit: 10}, []*tessera.AuditEvent{e3, e2, e1}},
			{store.AuditFilter{Since: since, Limit: 10, Namespace: "alpha"}, []*tessera.AuditEvent{e3, e2}},
			{store.AuditFilter{Since: since, Limit: 10, PrincipalID: "p1"}, []*tessera.AuditEvent{e2, e1}},
			{store.AuditFilter{Since: since, Limit: 10, Action: "task.get"}, []*tessera.AuditEvent{e3, e1}},
			{store.AuditFilter{Since: since, Limit: 1}, []*tessera.AuditEvent{e3}},
			{store.AuditFilter{Since: since, Limit: 10, Before: e2.ID}, []*tessera.AuditEvent{e1}},
			{store.AuditFilter{Since: since, Limit: 10, Outcome: "forbidden"}, nil},
		}
		readTx(t, s, func(tx store.Tx) error {
			for i, c := range cases {
				got, err := tx.AuditEvents(ctx, c.f)
				if err != nil {
					return err
				}
				if len(got) != len(c.want) {
					t.Errorf("case %d: %d events, want %d", i, len(got), len(c.want))
					continue
				}
				for j := range got {
					if got[j] != *c.want[j] {
						t.Errorf("case %d: event %d = %+v, want %+v", i, j, got[j], *c.want[j])
					}
				}
			}
			return nil
		})
	})

	t.Run("counters add up per minute and key", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		minute := epoch.Truncate(time.Minute)
		c := tessera.AuditCounter{Minute: minute, Namespace: "main", PrincipalID: "p1", Action: "claim.grant", Outcome: "empty", Count: 2}
		other := c
		other.Outcome, other.Count = "forbidden", 1
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.PrincipalNamespaceAdd(ctx, "p1", "main"); err != nil {
				return err
			}
			return tx.AuditCountersAdd(ctx, []tessera.AuditCounter{c, other})
		})
		writeTx(t, s, func(tx store.Tx) error { return tx.AuditCountersAdd(ctx, []tessera.AuditCounter{c}) })
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.AuditCounters(ctx, store.AuditFilter{Since: minute, Limit: 10, Outcome: "empty"})
			if err != nil {
				return err
			}
			if len(got) != 1 || got[0].Count != 4 || !got[0].Minute.Equal(minute) {
				t.Errorf("empty counter: %+v, want one of count 4", got)
			}
			all, err := tx.AuditCounters(ctx, store.AuditFilter{Since: minute, Limit: 10, PrincipalID: "p1"})
			if len(all) != 2 {
				t.Errorf("%d counters for p1, want 2", len(all))
			}
			return err
		})
	})

	t.Run("a day's salt is put once", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			if _, err := tx.SaltGet(ctx, "2030-01-01"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("missing salt: %v", err)
			}
			first, err := tx.SaltPut(ctx, "2030-01-01", []byte("aaaa"))
			if err != nil {
				return err
			}
			second, err := tx.SaltPut(ctx, "2030-01-01", []byte("bbbb"))
			if !bytes.Equal(first, []byte("aaaa")) || !bytes.Equal(second, []byte("aaaa")) {
				t.Errorf("salts %q then %q, want the first kept", first, second)
			}
			return err
		})
	})

	t.Run("identity snapshot upserts", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		id := tessera.NamespaceIdentity{Namespace: "main", PrincipalID: "p1", Account: "acme", Kind: "agent", DisplayName: "w", SeenAt: epoch}
		writeTx(t, s, func(tx store.Tx) error { return tx.IdentityPut(ctx, &id) })
		id.Kind, id.SeenAt = "service", at(time.Minute)
		writeTx(t, s, func(tx store.Tx) error { return tx.IdentityPut(ctx, &id) })
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.IdentityGet(ctx, "main", "p1")
			if err == nil && *got != id {
				t.Errorf("identity %+v, want %+v", *got, id)
			}
			return err
		})
	})

	t.Run("retention deletes by age in batches", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		purgeAt := at(-48 * time.Hour)
		anon := &tessera.Principal{ID: "anon1", Kind: tessera.KindAnonymous, CreatedAt: at(-72 * time.Hour), PurgeAt: &purgeAt}
		keyed := &tessera.Principal{ID: "user1", Kind: tessera.KindUser, CreatedAt: at(-72 * time.Hour)}
		writeTx(t, s, func(tx store.Tx) error {
			for _, p := range []*tessera.Principal{anon, keyed} {
				if err := tx.PrincipalCreate(ctx, p); err != nil {
					return err
				}
				if err := tx.KeyCreate(ctx, &tessera.Key{ID: "key" + p.ID, PrincipalID: p.ID, Scopes: []string{"read"}, CreatedAt: epoch, SecretHash: []byte{1}}); err != nil {
					return err
				}
			}
			for i := range 5 {
				if err := tx.AuditInsert(ctx, event("main", "p1", "task.get", at(-48*time.Hour+time.Duration(i)*time.Second))); err != nil {
					return err
				}
			}
			return tx.AuditInsert(ctx, event("main", "p1", "task.get", epoch))
		})
		cutoff := at(-24 * time.Hour)
		writeTx(t, s, func(tx store.Tx) error {
			for _, want := range []int{3, 2, 0} {
				n, err := tx.AuditEventsPurge(ctx, cutoff, 3)
				if err != nil {
					return err
				}
				if n != want {
					t.Errorf("purge batch deleted %d, want %d", n, want)
				}
			}
			n, err := tx.PrincipalsPurge(ctx, cutoff, 10)
			if n != 1 {
				t.Errorf("principals purged %d, want the anonymous one", n)
			}
			return err
		})
		readTx(t, s, func(tx store.Tx) error {
			left, err := tx.AuditEvents(ctx, store.AuditFilter{Since: at(-72 * time.Hour), Limit: 10})
			if len(left) != 1 {
				t.Errorf("%d events left, want the recent one", len(left))
			}
			if _, _, err := tx.KeyLookup(ctx, "keyanon1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("purged principal's key: %v", err)
			}
			if _, _, err := tx.KeyLookup(ctx, "keyuser1"); err != nil {
				t.Errorf("keyed principal's key: %v", err)
			}
			return err
		})
	})
}
