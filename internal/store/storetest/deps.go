package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func testDeps(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("a dependency round-trips and is replaced whole", func(t *testing.T) {
		s := open(t)
		d := &tessera.Dependency{After: []string{"P1", "P2"}, Settled: []string{}, WaitingOn: 2, OnParentFailure: tessera.ParentFailureCancel}
		writeTx(t, s, func(tx store.Tx) error { return tx.DependencyPut(ctx, "ns", "C", d) })
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.DependencyGet(ctx, "ns", "C")
			if err != nil || !slices.Equal(got.After, d.After) || len(got.Settled) != 0 || got.WaitingOn != 2 || got.OnParentFailure != "cancel" || got.FailedParent != "" || got.CanceledBy != "" {
				t.Fatalf("got %+v, %v", got, err)
			}
			_, err = tx.DependencyGet(ctx, "other", "C")
			wantErr(t, "another namespace's", err, store.ErrNotFound)
			return nil
		})
		d2 := &tessera.Dependency{After: []string{"P1", "P2"}, Settled: []string{"P2"}, WaitingOn: 1, OnParentFailure: tessera.ParentFailureRun, FailedParent: "P2", CanceledBy: "P9"}
		writeTx(t, s, func(tx store.Tx) error { return tx.DependencyPut(ctx, "ns", "C", d2) })
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.DependencyGet(ctx, "ns", "C")
			if err != nil || !slices.Equal(got.Settled, []string{"P2"}) || got.WaitingOn != 1 || got.OnParentFailure != "run" || got.FailedParent != "P2" || got.CanceledBy != "P9" {
				t.Fatalf("replaced: %+v, %v", got, err)
			}
			return nil
		})
	})

	t.Run("a parent's children come in id order, a page after a cursor", func(t *testing.T) {
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			for _, c := range []string{"C3", "C1", "C2"} {
				if err := tx.DependencyEdgesAdd(ctx, "ns", c, []string{"P", "Q"}); err != nil {
					return err
				}
			}
			// An edge added twice is one edge.
			return tx.DependencyEdgesAdd(ctx, "ns", "C1", []string{"P"})
		})
		readTx(t, s, func(tx store.Tx) error {
			all, err := tx.DependencyChildren(ctx, "ns", "P", "", 10)
			if err != nil || !slices.Equal(all, []string{"C1", "C2", "C3"}) {
				t.Fatalf("children: %v, %v", all, err)
			}
			page, err := tx.DependencyChildren(ctx, "ns", "P", "C1", 1)
			if err != nil || !slices.Equal(page, []string{"C2"}) {
				t.Fatalf("a page after C1: %v, %v", page, err)
			}
			none, err := tx.DependencyChildren(ctx, "other", "P", "", 10)
			if err != nil || len(none) != 0 {
				t.Fatalf("another namespace's: %v, %v", none, err)
			}
			parents, err := tx.DependencyParents(ctx, "ns", []string{"C1", "Q", "X", "P"})
			slices.Sort(parents)
			if err != nil || !slices.Equal(parents, []string{"P", "Q"}) {
				t.Fatalf("the parents among C1, Q, X and P: %v, %v; want P and Q", parents, err)
			}
			if none, err := tx.DependencyParents(ctx, "other", []string{"P"}); err != nil || len(none) != 0 {
				t.Fatalf("parents in another namespace: %v, %v", none, err)
			}
			return nil
		})
	})

	t.Run("the last checkpoint wins", func(t *testing.T) {
		s := open(t)
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.CheckpointGet(ctx, "ns", "T")
			wantErr(t, "no checkpoint yet", err, store.ErrNotFound)
			return nil
		})
		for i, v := range []string{`{"step":1}`, `{"step":2,"of":"many"}`} {
			c := &tessera.Checkpoint{Value: json.RawMessage(v), Attempt: i + 1, RunID: fmt.Sprint("R", i), At: at(time.Duration(i) * time.Minute)}
			writeTx(t, s, func(tx store.Tx) error { return tx.CheckpointPut(ctx, "ns", "T", c) })
		}
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.CheckpointGet(ctx, "ns", "T")
			if err != nil || string(got.Value) != `{"step":2,"of":"many"}` || got.Attempt != 2 || got.RunID != "R1" || !got.At.Equal(at(time.Minute)) {
				t.Fatalf("got %+v, %v", got, err)
			}
			return nil
		})
	})

	t.Run("dependency work is stored once a parent, and advanced only from where it was read", func(t *testing.T) {
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.DepWorkPut(ctx, &store.DepWork{Namespace: "ns", Parent: "P", Kind: store.DepSettle, After: "C1"}); err != nil {
				return err
			}
			if err := tx.DepWorkPut(ctx, &store.DepWork{Namespace: "ns", Parent: "Q", Kind: store.DepRewait, After: ""}); err != nil {
				return err
			}
			// The same parent and kind again: its cursor moves, no second row.
			return tx.DepWorkPut(ctx, &store.DepWork{Namespace: "ns", Parent: "P", Kind: store.DepSettle, After: "C2"})
		})
		var work []store.DepWork
		readTx(t, s, func(tx store.Tx) (err error) {
			work, err = tx.DepWorkList(ctx, 10)
			return err
		})
		if len(work) != 2 || work[0].Parent != "P" || work[0].After != "C2" || work[0].Kind != store.DepSettle || work[1].Parent != "Q" || work[1].Kind != store.DepRewait || work[0].Seq >= work[1].Seq {
			t.Fatalf("work: %+v", work)
		}
		writeTx(t, s, func(tx store.Tx) error { return tx.DepWorkAdvance(ctx, &work[0], "C5", false) })
		// A second step from the cursor it read is stale: another took it.
		err := s.Update(ctx, func(tx store.Tx) error { return tx.DepWorkAdvance(ctx, &work[0], "C6", false) })
		wantErr(t, "a step from a moved cursor", err, store.ErrRetry)
		moved := work[0]
		moved.After = "C5"
		writeTx(t, s, func(tx store.Tx) error { return tx.DepWorkAdvance(ctx, &moved, "", true) })
		readTx(t, s, func(tx store.Tx) (err error) {
			work, err = tx.DepWorkList(ctx, 10)
			return err
		})
		if len(work) != 1 || work[0].Parent != "Q" {
			t.Fatalf("after the first is done: %+v", work)
		}
	})

	t.Run("a namespace purge and a finished task's purge take its dependencies along", func(t *testing.T) {
		s := open(t)
		parent := taskFixture("P", taskOpts{ns: "ns", state: tessera.StateSucceeded})
		parent.FinishedAt = ptr(at(0))
		child := taskFixture("C", taskOpts{ns: "ns", state: tessera.StateSucceeded})
		child.FinishedAt = ptr(at(0))
		insertTasks(t, s, parent, child)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.DependencyPut(ctx, "ns", "C", &tessera.Dependency{After: []string{"P"}, Settled: []string{"P"}, OnParentFailure: "cancel"}); err != nil {
				return err
			}
			if err := tx.DependencyEdgesAdd(ctx, "ns", "C", []string{"P"}); err != nil {
				return err
			}
			return tx.CheckpointPut(ctx, "ns", "C", &tessera.Checkpoint{Value: json.RawMessage(`1`), Attempt: 1, RunID: "R", At: at(0)})
		})
		writeTx(t, s, func(tx store.Tx) error {
			n, err := tx.TasksFinishedPurge(ctx, at(time.Hour), 10)
			if n != 2 {
				t.Fatalf("purged %d tasks, want 2", n)
			}
			return err
		})
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.DependencyGet(ctx, "ns", "C")
			wantErr(t, "the purged child's dependency", err, store.ErrNotFound)
			_, err = tx.CheckpointGet(ctx, "ns", "C")
			wantErr(t, "the purged child's checkpoint", err, store.ErrNotFound)
			children, err := tx.DependencyChildren(ctx, "ns", "P", "", 10)
			if err != nil || len(children) != 0 {
				t.Fatalf("the purged parent's edges: %v, %v", children, err)
			}
			return nil
		})

		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.DependencyEdgesAdd(ctx, "gone", "C", []string{"P"}); err != nil {
				return err
			}
			return tx.DepWorkPut(ctx, &store.DepWork{Namespace: "gone", Parent: "P", Kind: store.DepSettle})
		})
		writeTx(t, s, func(tx store.Tx) error {
			for {
				n, err := tx.NamespacePurge(ctx, "gone", 100)
				if err != nil || n == 0 {
					return err
				}
			}
		})
		readTx(t, s, func(tx store.Tx) error {
			work, err := tx.DepWorkList(ctx, 10)
			children, cerr := tx.DependencyChildren(ctx, "gone", "P", "", 10)
			if err != nil || cerr != nil || len(work) != 0 || len(children) != 0 {
				t.Fatalf("after the namespace purge: work %v, edges %v (%v, %v)", work, children, err, cerr)
			}
			return nil
		})
	})
}
