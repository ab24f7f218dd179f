package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// PreIssue28Rows is the upgrade fixture, for a schema as issue 28 found
// it (counts a row per state, a ready entry per task, every run in the
// runs table): ready tasks (one public), a leased one with its open run,
// a succeeded one with two runs, a paused one. True, false and the byte 1
// are the dialect's literals. Inserting it leaves the old triggers to
// keep the old counts and ready entries; CheckUpgraded reads them back
// through a store opened on the migrated schema.
func PreIssue28Rows(sqlTrue, sqlFalse, byte1 string) string {
	ms := epoch.UnixMilli()
	return fmt.Sprintf(`INSERT INTO tasks (namespace, id, queue, title, brief, labels, priority, public, max_attempts, attempts, state, run_at,
  created_by, created_at, updated_at, cancel_requested, lease_run_id, lease_holder, lease_token_hash, lease_expires_at,
  lease_seconds, finished_at) VALUES
 ('main', '01R1', 'q', 't', '', '[]', 0, %[2]s, 3, 0, 'ready', %[4]d, 'p', 0, 0, %[2]s, NULL, NULL, NULL, NULL, NULL, NULL),
 ('main', '01R2', 'q', 't', '', '[]', 0, %[1]s, 3, 0, 'ready', %[5]d, 'p', 0, 0, %[2]s, NULL, NULL, NULL, NULL, NULL, NULL),
 ('main', '01L1', 'q', 't', '', '[]', 0, %[2]s, 3, 1, 'leased', 0, 'p', 0, 0, %[2]s, '01RUNL', 'w', %[3]s, %[6]d, 60, NULL),
 ('main', '01S1', 'q', 't', '', '[]', 0, %[2]s, 3, 2, 'succeeded', 0, 'p', 0, 0, %[2]s, NULL, NULL, NULL, NULL, NULL, 5),
 ('main', '01P1', 'q', 't', '', '[]', 0, %[2]s, 3, 0, 'paused', 0, 'p', 0, 0, %[2]s, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO runs (namespace, task_id, run_id, holder, attempt, started_at, ended_at, outcome, error) VALUES
 ('main', '01L1', '01RUNL', 'w', 1, 3, NULL, NULL, NULL),
 ('main', '01S1', '01RUNA', 'w', 1, 1, 2, 'failed', 'it broke'),
 ('main', '01S1', '01RUNB', 'w', 2, 3, 4, 'succeeded', NULL);`, sqlTrue, sqlFalse, byte1, ms-2000, ms-1000, ms+60000)
}

// CheckUpgraded holds a store opened on a schema that held PreIssue28Rows
// to what the migrations since promise: the counts of every state, the
// public ready entry, each task's runs in order with the last on its
// task's row, and a claim that starts the next run moving the last one
// to the history.
func CheckUpgraded(t *testing.T, s store.Store) {
	t.Helper()
	now := epoch
	ctx := context.Background()
	open := &tessera.Run{ID: "01RUNL", TaskID: "01L1", Holder: "w", Attempt: 1, StartedAt: time.UnixMilli(3).UTC()}
	failed := tessera.Run{ID: "01RUNA", TaskID: "01S1", Holder: "w", Attempt: 1, StartedAt: time.UnixMilli(1).UTC(),
		EndedAt: ptr(time.UnixMilli(2).UTC()), Outcome: tessera.OutcomeFailed, Error: "it broke"}
	succeeded := tessera.Run{ID: "01RUNB", TaskID: "01S1", Holder: "w", Attempt: 2, StartedAt: time.UnixMilli(3).UTC(),
		EndedAt: ptr(time.UnixMilli(4).UTC()), Outcome: tessera.OutcomeSucceeded}
	err := s.View(ctx, func(tx store.Tx) error {
		counts, err := tx.TaskStateCounts(ctx, "main", store.AllTasks)
		if err != nil {
			return err
		}
		if got, want := countsOf(counts), map[string]int{"ready": 2, "leased": 1, "succeeded": 1, "paused": 1}; !reflect.DeepEqual(got, want) {
			t.Errorf("counts after the upgrade = %v, want %v", got, want)
		}
		oldest, err := tx.TaskOldestReady(ctx, "main", []string{"q"}, now, store.PublicOnly)
		if err != nil {
			return err
		}
		if want := map[string]time.Time{"q": now.Add(-time.Second)}; !reflect.DeepEqual(oldest, want) {
			t.Errorf("oldest public ready = %v, want %v", oldest, want)
		}
		for id, want := range map[string][]tessera.Run{"01L1": {*open}, "01S1": {failed, succeeded}, "01R1": nil} {
			got, err := tx.RunList(ctx, "main", id)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("runs of %s:\n got %+v\nwant %+v", id, got, want)
			}
		}
		leased, err := tx.TaskGet(ctx, "main", "01L1")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(leased.Run, open) {
			t.Errorf("the leased task's run: %+v, want %+v", leased.Run, open)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The succeeded task retried and claimed: its last run goes to the
	// history as the claim starts the next.
	err = s.Update(ctx, func(tx store.Tx) error {
		before, err := tx.TaskGet(ctx, "main", "01S1")
		if err != nil {
			return err
		}
		after := before.Copy()
		after.State, after.FinishedAt, after.Priority = tessera.StateReady, nil, 0
		if err := tx.TaskUpdate(ctx, before, after); err != nil {
			return err
		}
		_, err = tx.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "q", Now: now, Lease: tessera.Lease{RunID: "01RUNC",
			Holder: "w", ExpiresAt: now.Add(time.Minute), Seconds: 60}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx store.Tx) error {
		got, err := tx.RunList(ctx, "main", "01S1")
		if err != nil {
			return err
		}
		third := tessera.Run{ID: "01RUNC", TaskID: "01S1", Holder: "w", Attempt: 3, StartedAt: now}
		if want := []tessera.Run{failed, succeeded, third}; !reflect.DeepEqual(got, want) {
			t.Errorf("runs of the task claimed again:\n got %+v\nwant %+v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func countsOf(rows []store.QueueCount) map[string]int {
	out := map[string]int{}
	for _, r := range rows {
		if r.Count != 0 {
			out[r.State] += r.Count
		}
	}
	return out
}
