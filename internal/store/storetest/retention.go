package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// testRetention holds every retention purge to what SPEC §9 promises: it
// deletes through an index, never scanning a whole table. The meter is the
// witness: a pass over a table of 600 rows, 10 of them past the cutoff,
// reads what it deletes and a few seeks per namespace, and a pass with
// nothing to delete reads the seeks alone. (PostgreSQL once planned these
// deletes as a hash join over a sequential scan, and an idle worker's day
// read 216,000 rows of its own counters.)
func testRetention(t *testing.T, open Opener) {
	const (
		perNamespace = 200
		old          = 5 // past the cutoff, in each of the first two namespaces
	)
	namespaces := []string{"alpha", "beta", "gamma"}
	cutoff := at(-24 * time.Hour)
	// when is the time of row i of ns: the first old of alpha and beta lie
	// before the cutoff, every other row after it.
	when := func(ns string, i int) time.Time {
		if ns != "gamma" && i < old {
			return cutoff.Add(-time.Duration(old-i) * time.Minute)
		}
		return cutoff.Add(time.Duration(i+1) * time.Minute)
	}
	purges := []struct {
		name  string
		fill  func(ctx context.Context, tx store.Tx, ns string, i int) error
		purge func(ctx context.Context, tx store.Tx) (int, error)
	}{
		{"audit events", func(ctx context.Context, tx store.Tx, ns string, i int) error {
			w := when(ns, i)
			return tx.AuditInsert(ctx, &tessera.AuditEvent{ID: tessera.IDFloor(w), Time: w, Namespace: ns, PrincipalID: "p1",
				KeyID: "k1", Action: "task.get", Target: "t", Status: 200, IPHash: "h"})
		}, func(ctx context.Context, tx store.Tx) (int, error) { return tx.AuditEventsPurge(ctx, cutoff, 500) }},
		{"audit counters", func(ctx context.Context, tx store.Tx, ns string, i int) error {
			return tx.AuditCountersAdd(ctx, []tessera.AuditCounter{{Minute: when(ns, i).Truncate(time.Minute), Namespace: ns,
				PrincipalID: "p1", Action: "claim.grant", Outcome: "empty", Count: 1}})
		}, func(ctx context.Context, tx store.Tx) (int, error) { return tx.AuditCountersPurge(ctx, cutoff, 500) }},
		{"idempotency entries", func(ctx context.Context, tx store.Tx, ns string, i int) error {
			_, err := tx.IdempotencyPut(ctx, &store.Idempotency{Namespace: ns, PrincipalID: "p1", Route: "enqueue",
				Key: fmt.Sprint("k-", i), RequestHash: []byte{1}, Response: []byte(`{}`), CreatedAt: when(ns, i)})
			return err
		}, func(ctx context.Context, tx store.Tx) (int, error) { return tx.IdempotencyPurge(ctx, cutoff, 500) }},
		{"finished tasks", func(ctx context.Context, tx store.Tx, ns string, i int) error {
			task := taskFixture(fmt.Sprintf("t%04d", i), taskOpts{ns: ns, state: tessera.StateSucceeded})
			task.FinishedAt = ptr(when(ns, i))
			return tx.TaskInsert(ctx, task)
		}, func(ctx context.Context, tx store.Tx) (int, error) { return tx.TasksFinishedPurge(ctx, cutoff, 500) }},
	}
	t.Run("a namespace purge reads what it deletes", func(t *testing.T) { testNamespacePurgeReads(t, open) })
	for _, p := range purges {
		t.Run(p.name+" read what they delete", func(t *testing.T) {
			s := open(t)
			// Rows are made oldest first, as time makes them (a backend
			// may number them in that order).
			type row struct {
				ns string
				i  int
			}
			var rows []row
			for _, ns := range namespaces {
				for i := range perNamespace {
					rows = append(rows, row{ns, i})
				}
			}
			slices.SortStableFunc(rows, func(a, b row) int { return when(a.ns, a.i).Compare(when(b.ns, b.i)) })
			writeTx(t, s, func(tx store.Tx) error {
				for _, r := range rows {
					if err := p.fill(t.Context(), tx, r.ns, r.i); err != nil {
						return err
					}
				}
				return nil
			})
			// A namespace costs a seek or two to find and one to walk;
			// a deleted row its entry and a lookup by key, and on a
			// backend that leaves deleted rows' index entries to a vacuum
			// the next pass steps over them again.
			seeks := int64(4*len(namespaces) + 4)
			deleted := 0
			for pass, want := range []int{2 * old, 0} {
				ctx, usage := meter.WithUsage(context.Background())
				var n int
				if err := s.Update(ctx, func(tx store.Tx) (err error) {
					n, err = p.purge(ctx, tx)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if n != want {
					t.Errorf("pass %d deleted %d, want %d", pass, n, want)
				}
				deleted += n
				if read, bound := usage.Read.Load(), seeks+3*int64(deleted); read > bound {
					t.Errorf("pass %d deleted %d of %d rows and read %d rows, more than %d: it walked the table",
						pass, n, perNamespace*len(namespaces), read, bound)
				}
			}
		})
	}
}

// testNamespacePurgeReads holds a namespace purge to the same: each batch
// reads what it deletes and a few seeks, whatever the other namespaces
// hold.
func testNamespacePurgeReads(t *testing.T, open Opener) {
	s := open(t)
	const perNamespace, batch = 300, 50
	var tasks []*tessera.Task
	for _, ns := range []string{"alpha", "beta"} {
		for i := range perNamespace {
			tasks = append(tasks, taskFixture(fmt.Sprintf("t%04d", i), taskOpts{ns: ns}))
		}
	}
	insertTasks(t, s, tasks...)
	ctx, usage := meter.WithUsage(context.Background())
	var n int
	if err := s.Update(ctx, func(tx store.Tx) (err error) {
		n, err = tx.NamespacePurge(ctx, "alpha", batch)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != batch {
		t.Errorf("deleted %d rows, want %d", n, batch)
	}
	if read, bound := usage.Read.Load(), int64(3*batch+16); read > bound {
		t.Errorf("deleted %d rows and read %d, more than %d: it walked the table", n, read, bound)
	}
}
