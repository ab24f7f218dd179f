package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// history is how many finished tasks the deep queue holds.
const history = 50_000

// noSync turns off synchronous_commit for the benchmark's sessions: the
// figures then show the statements' cost, not this machine's fsync
// (about 3 ms a commit), which would hide any ratio.
const noSync = "&synchronous_commit=off"

// BenchmarkClaimSubmitHistory runs a worker's claim and submit — the lapse
// check and the claim in one transaction, the submit in another, as the
// core does — on a fresh queue and on one with a deep history of finished
// tasks, alternating, and reports the ratio: the claim path's statements
// are index seeks, so it stays near 1.
func BenchmarkClaimSubmitHistory(b *testing.B) {
	fresh, _ := benchStore(b, noSync)
	deep, deepURL := benchStore(b, noSync)
	fillHistory(b, deepURL, history)
	enqueue(b, fresh, b.N)
	enqueue(b, deep, b.N)
	var freshTime, deepTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		for _, s := range []struct {
			db *postgres.DB
			d  *time.Duration
		}{{fresh, &freshTime}, {deep, &deepTime}} {
			start := time.Now()
			claimSubmit(b, s.db, fmt.Sprint("run", i))
			*s.d += time.Since(start)
		}
	}
	b.ReportMetric(float64(freshTime.Nanoseconds())/float64(b.N), "fresh-ns/op")
	b.ReportMetric(float64(deepTime.Nanoseconds())/float64(b.N), "deep-ns/op")
	b.ReportMetric(float64(deepTime)/float64(freshTime), "deep/fresh")
}

// BenchmarkClaimParallel runs claim+submit from 16 goroutines on one
// node, by pool size and plan_cache_mode: what docs/design.md's advice on
// both rests on.
func BenchmarkClaimParallel(b *testing.B) {
	for _, mode := range []string{"auto", "force_custom_plan", "force_generic_plan"} {
		for _, pool := range []int{2, 4, 8, 16} {
			b.Run(fmt.Sprintf("plan=%s/pool=%d", mode, pool), func(b *testing.B) {
				db, _ := benchStore(b, fmt.Sprintf("&pool_max_conns=%d&plan_cache_mode=%s", pool, mode))
				enqueue(b, db, b.N+64)
				var n atomic.Int64
				b.SetParallelism(8) // 16 goroutines on two cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						claimSubmit(b, db, fmt.Sprint("run", n.Add(1)))
					}
				})
			})
		}
	}
}

// benchStore opens a store on a fresh schema, with params added to its
// URL, and returns it with the URL.
func benchStore(b testing.TB, params string) (*postgres.DB, string) {
	b.Helper()
	url := pgtest.Schema(b) + params
	db, err := postgres.Open(context.Background(), url, newMeter())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db, url
}

// fillHistory inserts n succeeded tasks in the benchmark's queue, each
// with its run and an event, straight in SQL (through the triggers, as the
// store's own inserts would be).
func fillHistory(b testing.TB, url string, n int) {
	b.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	at := now.UnixMilli()
	for _, sql := range []string{
		`INSERT INTO tasks (namespace, id, queue, title, brief, payload, labels, priority, public, max_attempts, attempts,
   state, run_at, created_by, created_at, updated_at, cancel_requested, result, error, finished_at, version, event_seq)
 SELECT 'main', '00H' || lpad(i::text, 10, '0'), 'work', 't', 'a brief of some length', '{"doc":"r-17"}', '[]', 0, false, 3, 1,
   'succeeded', $2, 'p', $2, $2, false, '{"ok":true}', '', $2, 2, 1 FROM generate_series(1, $1::int) i`,
		`INSERT INTO runs (namespace, task_id, run_id, holder, attempt, started_at, ended_at, outcome)
 SELECT 'main', '00H' || lpad(i::text, 10, '0'), 'r' || i, 'p', 1, $2, $2, 'succeeded' FROM generate_series(1, $1::int) i`,
		`INSERT INTO task_events (namespace, task_id, seq, kind, body, by, created_at)
 SELECT 'main', '00H' || lpad(i::text, 10, '0'), 1, 'note', 'done', 'p', $2 FROM generate_series(1, $1::int) i`,
		`ANALYZE`, // the statistics autovacuum would have gathered by then
	} {
		args := []any{n, at}
		if sql == "ANALYZE" {
			args = nil
		}
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
}

func enqueue(b testing.TB, db *postgres.DB, n int) {
	b.Helper()
	for i := 0; i < n; i += 1000 {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			for j := i; j < min(i+1000, n); j++ {
				if err := tx.TaskInsert(context.Background(), benchTask(fmt.Sprintf("01R%010d", j))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func benchTask(id string) *tessera.Task {
	return &tessera.Task{Namespace: "main", ID: id, Queue: "work", Title: "t", Brief: "a brief of some length, as producers write them",
		Payload: []byte(`{"doc":"r-17"}`), Labels: []string{}, MaxAttempts: 3, State: tessera.StateReady, RunAt: now,
		CreatedBy: "p", CreatedAt: now, UpdatedAt: now}
}

func claimSubmit(b *testing.B, db *postgres.DB, run string) {
	ctx := context.Background()
	var claimed *tessera.Task
	err := db.Update(ctx, func(tx store.Tx) (err error) {
		if _, err := tx.TaskLapsed(ctx, "main", "work", now, 32); err != nil {
			return err
		}
		claimed, err = tx.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "work", Now: now,
			Lease: tessera.Lease{RunID: run, Holder: "p", ExpiresAt: now.Add(time.Minute), Seconds: 60, TokenHash: []byte(run)}})
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		b.Error("the queue ran dry")
		return
	}
	if err != nil {
		b.Error(err)
		return
	}
	err = db.Update(ctx, func(tx store.Tx) error {
		before, err := tx.TaskGet(ctx, "main", claimed.ID)
		if err != nil {
			return err
		}
		after := before.Copy()
		after.State, after.Lease, after.FinishedAt, after.Result = tessera.StateSucceeded, nil, &now, []byte(`{"ok":true}`)
		after.Run.EndedAt, after.Run.Outcome = &now, tessera.OutcomeSucceeded
		return tx.TaskUpdate(ctx, before, after)
	})
	if err != nil {
		b.Error(err)
	}
}
