package storetest

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func testGates(t *testing.T, open Opener) {
	ctx := context.Background()
	form := tessera.Gate{Key: "deploy", Kind: tessera.GateForm, Message: "which region?", Schema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string"}}}`),
		TimeoutAt: ptr(at(time.Hour)), OnTimeout: tessera.OnTimeoutContinue, OpenedAt: at(0), RunID: "run-1"}
	link := tessera.Gate{Key: "login", Kind: tessera.GateURL, Message: "sign in", URL: "https://example.com/auth", OnTimeout: tessera.OnTimeoutFail, OpenedAt: at(0)}

	t.Run("gates round-trip in opening order, and a key is unique for the task", func(t *testing.T) {
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error { return tx.GatesInsert(ctx, "ns", "T", []tessera.Gate{link, form}) })
		later := tessera.Gate{Key: "again", Kind: tessera.GateApproval, Message: "sure?", OnTimeout: tessera.OnTimeoutFail, OpenedAt: at(time.Minute)}
		writeTx(t, s, func(tx store.Tx) error { return tx.GatesInsert(ctx, "ns", "T", []tessera.Gate{later}) })
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.GatesOf(ctx, "ns", "T")
			if err != nil || len(got) != 3 {
				t.Fatalf("gates: %+v, %v", got, err)
			}
			want := []tessera.Gate{form, link, later} // opened at 0 by key, then later
			for i := range want {
				want[i].Namespace, want[i].TaskID = "ns", "T"
				if !sameGate(got[i], want[i]) {
					t.Errorf("gate %d: got %+v, want %+v", i, got[i], want[i])
				}
			}
			none, err := tx.GatesOf(ctx, "other", "T")
			if err != nil || len(none) != 0 {
				t.Errorf("another namespace's gates: %+v, %v", none, err)
			}
			return nil
		})
		err := s.Update(ctx, func(tx store.Tx) error {
			return tx.GatesInsert(ctx, "ns", "T", []tessera.Gate{{Key: "login", Kind: tessera.GateApproval, Message: "again", OnTimeout: tessera.OnTimeoutFail, OpenedAt: at(time.Hour)}})
		})
		wantErr(t, "a key used before", err, store.ErrConflict)
	})

	t.Run("an answer is recorded once", func(t *testing.T) {
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error { return tx.GatesInsert(ctx, "ns", "T", []tessera.Gate{form}) })
		answer := &tessera.GateAnswer{Action: tessera.GateAccept, Content: json.RawMessage(`{"region":"eu"}`), AnsweredBy: "p-boss", At: at(time.Minute)}
		writeTx(t, s, func(tx store.Tx) error { return tx.GateAnswer(ctx, "ns", "T", "deploy", answer) })
		err := s.Update(ctx, func(tx store.Tx) error {
			return tx.GateAnswer(ctx, "ns", "T", "deploy", &tessera.GateAnswer{Action: tessera.GateDecline, At: at(2 * time.Minute)})
		})
		wantErr(t, "a second answer", err, store.ErrStale)
		err = s.Update(ctx, func(tx store.Tx) error {
			return tx.GateAnswer(ctx, "ns", "T", "nope", &tessera.GateAnswer{Action: tessera.GateDecline, At: at(2 * time.Minute)})
		})
		wantErr(t, "an unknown key's answer", err, store.ErrStale)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.GatesOf(ctx, "ns", "T")
			if err != nil || len(got) != 1 || got[0].Answer == nil {
				t.Fatalf("answered: %+v, %v", got, err)
			}
			if a := got[0].Answer; a.Action != "accept" || a.AnsweredBy != "p-boss" || !a.At.Equal(at(time.Minute)) || string(a.Content) != `{"region":"eu"}` {
				t.Fatalf("answered: %+v, %v", got, err)
			}
			return nil
		})
	})

	t.Run("open gates that time out come soonest first, answered ones never", func(t *testing.T) {
		s := open(t)
		gate := func(key string, timeout *time.Time) tessera.Gate {
			return tessera.Gate{Key: key, Kind: tessera.GateApproval, Message: "ok?", TimeoutAt: timeout, OnTimeout: tessera.OnTimeoutFail, OpenedAt: at(0)}
		}
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.GatesInsert(ctx, "a", "T1", []tessera.Gate{gate("late", ptr(at(3*time.Hour))), gate("never", nil)}); err != nil {
				return err
			}
			if err := tx.GatesInsert(ctx, "b", "T2", []tessera.Gate{gate("soon", ptr(at(time.Hour))), gate("done", ptr(at(time.Minute)))}); err != nil {
				return err
			}
			return tx.GateAnswer(ctx, "b", "T2", "done", &tessera.GateAnswer{Action: tessera.GateAccept, At: at(time.Second)})
		})
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.GatesTimingOut(ctx, 10)
			if err != nil {
				return err
			}
			want := []tessera.Gate{{Namespace: "b", TaskID: "T2", Key: "soon", TimeoutAt: ptr(at(time.Hour))},
				{Namespace: "a", TaskID: "T1", Key: "late", TimeoutAt: ptr(at(3 * time.Hour))}}
			if len(got) != len(want) {
				t.Fatalf("timing out: %+v", got)
			}
			for i := range want {
				if !sameGate(got[i], want[i]) {
					t.Errorf("timing out %d: %+v, want %+v", i, got[i], want[i])
				}
			}
			one, err := tx.GatesTimingOut(ctx, 1)
			if err != nil || len(one) != 1 || one[0].Key != "soon" {
				t.Errorf("limit 1: %+v, %v", one, err)
			}
			return err
		})
	})

	t.Run("a gated task is counted apart and keeps its gate count", func(t *testing.T) {
		s := open(t)
		task := taskFixture("G", taskOpts{state: tessera.StateGated})
		task.GateCount = 2
		insertTasks(t, s, task)
		if got := stateCounts(t, s, "main", store.AllTasks); !maps.Equal(got["default"], map[string]int{tessera.StateGated: 1}) {
			t.Fatalf("counts: %v", got)
		}
		got := getTask(t, s, "main", "G")
		if got.GateCount != 2 || got.State != tessera.StateGated {
			t.Fatalf("read back: %+v", got)
		}
		after := got.Copy()
		after.State, after.GateCount = tessera.StateReady, 3
		writeTx(t, s, func(tx store.Tx) error { return tx.TaskUpdate(ctx, got, after) })
		if got := getTask(t, s, "main", "G"); got.GateCount != 3 || got.State != tessera.StateReady {
			t.Fatalf("updated: %+v", got)
		}
		if got := stateCounts(t, s, "main", store.AllTasks); !maps.Equal(got["default"], map[string]int{tessera.StateReady: 1}) {
			t.Fatalf("counts after: %v", got)
		}
		// A gated task is never claimed.
		gated := taskFixture("H", taskOpts{state: tessera.StateGated})
		insertTasks(t, s, gated)
		if _, err := claim(t, s, claimFixture("main", "default", at(0), "r1")); err != nil {
			t.Fatal(err)
		}
		_, err := claim(t, s, claimFixture("main", "default", at(0), "r2"))
		wantErr(t, "claiming a gated task", err, store.ErrNotFound)
	})
}

func sameGate(a, b tessera.Gate) bool {
	sameTime := func(x, y *time.Time) bool { return x == nil && y == nil || x != nil && y != nil && x.Equal(*y) }
	return a.Namespace == b.Namespace && a.TaskID == b.TaskID && a.Key == b.Key && a.Kind == b.Kind && a.Message == b.Message &&
		string(a.Schema) == string(b.Schema) && a.URL == b.URL && sameTime(a.TimeoutAt, b.TimeoutAt) && a.OnTimeout == b.OnTimeout &&
		a.OpenedAt.Equal(b.OpenedAt) && a.RunID == b.RunID && (a.Answer == nil) == (b.Answer == nil)
}
