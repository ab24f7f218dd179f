package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The statement meter beside PostgreSQL's own counters, transaction by
// transaction, over the writes of a task's life and the tables beside it:
// rows written agree exactly (its rules are PostgreSQL's: a row and its
// index entries, a HOT update one); rows read are never more than the
// rows PostgreSQL's scans returned, and differ only by index entries no
// statement returned (meter.go).
func TestStatementMeterAgrees(t *testing.T) {
	ctx := context.Background()
	m := newMeter()
	// One connection: the counters read are the transaction's own.
	db := open(t, pgtest.Schema(t)+"&pool_max_conns=1", m)
	counters, err := countersSQL(ctx, db.pool)
	if err != nil {
		t.Fatal(err)
	}
	read := func() (written, read int64) {
		t.Helper()
		// The connection's pending counters reach the shared ones as it
		// goes idle after this.
		if _, err := db.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := db.pool.QueryRow(ctx, counters).Scan(&written, &read); err != nil {
			t.Fatal(err)
		}
		return written, read
	}
	claim := func(run string) func(store.Tx) error {
		return func(tx store.Tx) error {
			_, err := tx.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "default", Now: epoch,
				Lease: tessera.Lease{RunID: run, Holder: "p", ExpiresAt: epoch.Add(time.Minute), Seconds: 60}})
			return err
		}
	}
	finish := func(id string, state string) func(store.Tx) error {
		return func(tx store.Tx) error {
			before, err := tx.TaskGet(ctx, "main", id)
			if err != nil {
				return err
			}
			after := before.Copy()
			after.State, after.Lease, after.FinishedAt, after.UpdatedAt = state, nil, &epoch, epoch.Add(time.Second)
			if after.Run != nil {
				ended := epoch.Add(time.Second)
				after.Run.EndedAt, after.Run.Outcome = &ended, tessera.OutcomeSucceeded
			}
			return tx.TaskUpdate(ctx, before, after)
		}
	}
	public := task("01P")
	public.Public = true
	steps := []struct {
		name string
		fn   func(store.Tx) error
	}{
		{"insert", func(tx store.Tx) error { return tx.TaskInsert(ctx, task("01A")) }},
		{"insert again", func(tx store.Tx) error { return tx.TaskInsert(ctx, task("01B")) }},
		{"insert public", func(tx store.Tx) error { return tx.TaskInsert(ctx, public) }},
		{"claim", claim("r1")},
		{"claim again", claim("r2")},
		{"claim the public", claim("r3")},
		{"event", func(tx store.Tx) error {
			return tx.TaskEventAppend(ctx, "main", "01A", &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: epoch})
		}},
		{"submit", finish("01A", tessera.StateSucceeded)},
		{"submit the public", finish("01P", tessera.StateSucceeded)},
		{"release to ready", func(tx store.Tx) error {
			before, err := tx.TaskGet(ctx, "main", "01B")
			if err != nil {
				return err
			}
			after := before.Copy()
			after.State, after.Lease, after.Attempts, after.RunAt = tessera.StateReady, nil, 0, epoch.Add(time.Minute)
			return tx.TaskUpdate(ctx, before, after)
		}},
		{"claim, its run moved to the history", func(tx store.Tx) error {
			_, err := tx.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "default", Now: epoch.Add(time.Hour),
				Lease: tessera.Lease{RunID: "r4", Holder: "p", ExpiresAt: epoch.Add(2 * time.Hour), Seconds: 60}})
			return err
		}},
		{"audit events", func(tx store.Tx) error {
			for i, pub := range []bool{false, true} {
				err := tx.AuditInsert(ctx, &tessera.AuditEvent{ID: fmt.Sprint("01E", i), Time: epoch, Namespace: "main",
					PrincipalID: "p", KeyID: "k", Action: "task.enqueue", Target: "01A", Status: 200, Public: pub})
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"idempotency", func(tx store.Tx) error {
			e := &store.Idempotency{Namespace: "main", PrincipalID: "p", Route: "enqueue", Key: "k", RequestHash: []byte{1},
				Response: []byte(`{}`), CreatedAt: epoch}
			if _, err := tx.IdempotencyPut(ctx, e); err != nil {
				return err
			}
			_, err := tx.IdempotencyPut(ctx, e) // its key is taken now: a row read
			return err
		}},
		{"checkpoint put twice", func(tx store.Tx) error {
			for i := range 2 {
				if err := tx.CheckpointPut(ctx, "main", "01B", &tessera.Checkpoint{RunID: "r4", Attempt: i, At: epoch, Value: []byte(`1`)}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"audit purge", func(tx store.Tx) error { _, err := tx.AuditEventsPurge(ctx, epoch.Add(time.Hour), 10); return err }},
		{"finished purge", func(tx store.Tx) error { _, err := tx.TasksFinishedPurge(ctx, epoch.Add(time.Hour), 10); return err }},
		{"namespace purge", func(tx store.Tx) error {
			for {
				n, err := tx.NamespacePurge(ctx, "main", 100)
				if err != nil || n == 0 {
					return err
				}
			}
		}},
	}
	for _, s := range steps {
		w0, r0 := read()
		before := m.Today()
		if err := db.Update(ctx, s.fn); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		w1, r1 := read()
		after := m.Today()
		metered := [2]int64{after.RowsWritten - before.RowsWritten, after.RowsRead - before.RowsRead}
		counted := [2]int64{w1 - w0, r1 - r0}
		t.Logf("%-36s metered written %3d read %3d; PostgreSQL's counters %3d, %3d", s.name, metered[0], metered[1], counted[0], counted[1])
		if metered[0] != counted[0] || metered[1] > counted[1] {
			t.Errorf("%s: metered written %d read %d; PostgreSQL counted %d, %d", s.name, metered[0], metered[1], counted[0], counted[1])
		}
	}
}

// countersSQL reads the schema's cumulative counters as the meter counts
// rows: written, per table, (inserted + deleted + updated other than HOT)
// × (1 + its indexes) + HOT updates; read, the rows sequential scans of
// its tables and scans of its indexes returned.
func countersSQL(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	rows, err := pool.Query(ctx, `SELECT c.oid::int8, array(SELECT i.indexrelid::int8 FROM pg_index i WHERE i.indrelid = c.oid ORDER BY 1)
 FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		return "", err
	}
	var tables, every []string
	for rows.Next() {
		var rel int64
		var indexes []int64
		if err := rows.Scan(&rel, &indexes); err != nil {
			return "", err
		}
		tables = append(tables, fmt.Sprintf("(%d::oid, %d)", rel, len(indexes)))
		every = append(every, strconv.FormatInt(rel, 10))
		for _, ix := range indexes {
			every = append(every, strconv.FormatInt(ix, 10))
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(tables) == 0 {
		return "", errors.New("the schema has no tables")
	}
	return `SELECT coalesce(sum((pg_stat_get_tuples_inserted(t.rel) + pg_stat_get_tuples_deleted(t.rel)
    + pg_stat_get_tuples_updated(t.rel) - pg_stat_get_tuples_hot_updated(t.rel)) * (1 + t.indexes)
    + pg_stat_get_tuples_hot_updated(t.rel)), 0)::int8,
  (SELECT coalesce(sum(pg_stat_get_tuples_returned(r)), 0)::int8 FROM unnest('{` + strings.Join(every, ",") + `}'::oid[]) r)
 FROM (VALUES ` + strings.Join(tables, ", ") + `) t(rel, indexes)`, nil
}
