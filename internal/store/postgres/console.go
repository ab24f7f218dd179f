package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// eventLag bounds how long after its id's time an audit event commits
// here: its id is made when its transaction's work begins, which commits
// milliseconds later, or seconds under lock waits. Several writers run at
// once, so a reader of the trail in id order reads this far back again
// (store.EventOrder). A transaction slower than this may be missed by a
// live stream; it stays in the audit trail.
const eventLag = 2 * time.Second

// EventLag reports eventLag (store.EventOrder).
func (db *DB) EventLag() time.Duration { return eventLag }

func (t *tx) AuditStream(ctx context.Context, f store.StreamFilter) ([]store.StreamEvent, error) {
	sql, args := sqlschema.StreamQuery(f)
	var out []store.StreamEvent
	err := t.query(ctx, sqlschema.Numbered1(sql), args, func(rows pgx.Rows) error {
		e := store.StreamEvent{AuditEvent: tessera.AuditEvent{Namespace: f.Namespace}}
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Action, &e.Target, &e.RunID, &e.TaskID, &e.Queue, &e.State, &e.Public,
			&e.PrincipalID, &e.Title); err != nil {
			return err
		}
		e.Time = fromMS(at)
		out = append(out, e)
		return nil
	})
	return out, err
}

func (t *tx) AuditThroughput(ctx context.Context, ns string, since time.Time, actions []string, scan int) ([]store.Throughput, error) {
	sql, args := sqlschema.ThroughputQuery(ns, since, actions, scan)
	var out []store.Throughput
	err := t.query(ctx, sqlschema.Numbered1(sql), args, func(rows pgx.Rows) error {
		var minute, count int64
		var r store.Throughput
		if err := rows.Scan(&minute, &r.Queue, &r.State, &count); err != nil {
			return err
		}
		r.Minute, r.Count = time.Unix(minute*60, 0).UTC(), int(count)
		t.tally.read += count - 1 // the events it counted, not the row
		out = append(out, r)
		return nil
	})
	return out, err
}

func (t *tx) QueuePause(ctx context.Context, p store.QueuePause) (bool, error) {
	n, err := t.exec(ctx, `INSERT INTO queue_pauses (namespace, queue, paused_by, paused_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		p.Namespace, p.Queue, p.PausedBy, ms(p.PausedAt))
	return n > 0, err
}

func (t *tx) QueueResume(ctx context.Context, ns, queue string) (bool, error) {
	n, err := t.exec(ctx, `DELETE FROM queue_pauses WHERE namespace = $1 AND queue = $2`, ns, queue)
	return n > 0, err
}

func (t *tx) QueuesPaused(ctx context.Context, ns string) ([]store.QueuePause, error) {
	var out []store.QueuePause
	err := t.query(ctx, `SELECT queue, paused_by, paused_at FROM queue_pauses WHERE namespace = $1 ORDER BY queue`, []any{ns},
		func(rows pgx.Rows) error {
			p := store.QueuePause{Namespace: ns}
			var at int64
			if err := rows.Scan(&p.Queue, &p.PausedBy, &at); err != nil {
				return err
			}
			p.PausedAt = fromMS(at)
			out = append(out, p)
			return nil
		})
	return out, err
}

// searchDialect: labels are JSON text; the "C" collation makes lower()
// lower ASCII letters only, as SQLite's does.
var searchDialect = sqlschema.SearchDialect{
	Label: `labels::jsonb @> jsonb_build_array(?::text)`,
	Title: `strpos(lower(title COLLATE "C"), ?) > 0`,
}

func (t *tx) TaskSearch(ctx context.Context, ns string, f store.TaskSearch) ([]tessera.Task, error) {
	sql, args := sqlschema.TaskSearchQuery(ns, f, taskCols, searchDialect)
	return t.tasks(ctx, sqlschema.Numbered1(sql), args)
}

// TaskPurgeFinished locks the tasks it deletes first, as
// TasksFinishedPurge does: a task retried meanwhile by a transaction still
// open is skipped, not deleted live.
func (t *tx) TaskPurgeFinished(ctx context.Context, ns, queue string, states []string, limit int) (int, error) {
	if len(states) == 0 {
		return 0, nil
	}
	var ids []string
	err := t.query(ctx, `SELECT id FROM tasks WHERE namespace = $1 AND queue = $2 AND state = ANY($3) LIMIT $4 FOR UPDATE SKIP LOCKED`,
		[]any{ns, queue, states, limit}, func(rows pgx.Rows) error {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	nss := make([]string, len(ids))
	for i := range nss {
		nss[i] = ns
	}
	if err := t.tasksDelete(ctx, nss, ids); err != nil {
		return 0, err
	}
	return len(ids), nil
}
