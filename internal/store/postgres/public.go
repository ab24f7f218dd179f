package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// The queue statistics and public state reads, over the tables the
// triggers of migrations 0004 and 0006 keep (task_counts, task_ready,
// public_tasks, public_events) and the lease index: each costs the rows it
// returns plus a few seeks, whatever the tasks and events of the namespace.

func (t *tx) TaskStateCounts(ctx context.Context, ns string, v store.Visibility) ([]store.QueueCount, error) {
	var rows []store.QueueCount
	err := t.query(ctx, `SELECT queue, state, sum(count) FROM task_counts WHERE namespace = $1 AND public = ANY($2)
 GROUP BY queue, state ORDER BY queue, state`, []any{ns, sqlschema.Visibilities(v)}, func(r pgx.Rows) error {
		var c store.QueueCount
		var n int64
		if err := r.Scan(&c.Queue, &c.State, &n); err != nil {
			return err
		}
		c.Count = int(n)
		rows = append(rows, c)
		return nil
	})
	return sqlschema.ReadyFromAll(rows), err
}

func (t *tx) TaskScheduled(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]int, error) {
	out := map[string]int{}
	if len(queues) == 0 {
		return out, nil
	}
	for _, public := range sqlschema.Visibilities(v) {
		// Per queue a range of task_ready's key (namespace, queue, public,
		// run_at > now): the scheduled tasks and nothing else.
		err := t.query(ctx, `SELECT q, (SELECT count(*) FROM task_ready r
   WHERE r.namespace = $1 AND r.queue = q AND r.public = $2 AND r.run_at > $3)
 FROM unnest($4::text[]) q`, []any{ns, public, ms(now), queues}, func(r pgx.Rows) error {
			var q string
			var n int64
			if err := r.Scan(&q, &n); err != nil {
				return err
			}
			if n > 0 {
				out[q] += int(n)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *tx) TaskLapsedCounts(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]int, error) {
	out := map[string]int{}
	if len(queues) == 0 {
		return out, nil
	}
	// Through tasks_lease: only leased tasks, by queue and expiry.
	err := t.query(ctx, `SELECT queue, count(*) FROM tasks
 WHERE namespace = $1 AND queue = ANY($2) AND state = 'leased' AND lease_expires_at <= $3 AND public = ANY($4)
 GROUP BY queue`, []any{ns, queues, ms(now), sqlschema.Visibilities(v)}, func(r pgx.Rows) error {
		var q string
		var n int64
		if err := r.Scan(&q, &n); err != nil {
			return err
		}
		out[q] = int(n)
		return nil
	})
	return out, err
}

func (t *tx) TaskOldestReady(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(queues) == 0 {
		return out, nil
	}
	for _, public := range sqlschema.Visibilities(v) {
		// One seek per queue: task_ready is ordered by run_at within a
		// queue and visibility, so its first entry is the oldest; it
		// counts only if its time came.
		err := t.query(ctx, `SELECT q, (SELECT r.run_at FROM task_ready r
   WHERE r.namespace = $1 AND r.queue = q AND r.public = $2 ORDER BY r.run_at LIMIT 1)
 FROM unnest($3::text[]) q`, []any{ns, public, queues}, func(r pgx.Rows) error {
			var q string
			var runAt *int64
			if err := r.Scan(&q, &runAt); err != nil || runAt == nil {
				return err
			}
			at := fromMS(*runAt)
			if prev, ok := out[q]; !at.After(now) && (!ok || at.Before(prev)) {
				out[q] = at
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *tx) PublicTasks(ctx context.Context, ns string, limit int) ([]store.PublicTask, error) {
	var out []store.PublicTask
	// The columns the board shows and nothing else: no brief, payload,
	// result, progress or lease. The page of ids is taken first, so the
	// join visits that page of tasks: joined whole, the planner merged all
	// of the namespace's public tasks to return a hundred.
	err := t.query(ctx, `SELECT t.id, t.queue, t.title, t.state, t.priority, t.run_at, t.updated_at
 FROM (SELECT namespace, id FROM public_tasks WHERE namespace = $1 ORDER BY id DESC LIMIT $2) p
 JOIN LATERAL (SELECT * FROM tasks t WHERE t.namespace = p.namespace AND t.id = p.id) t ON true
 ORDER BY p.id DESC`, []any{ns, limit}, func(r pgx.Rows) error {
		var p store.PublicTask
		var runAt, updated int64
		if err := r.Scan(&p.ID, &p.Queue, &p.Title, &p.State, &p.Priority, &runAt, &updated); err != nil {
			return err
		}
		p.RunAt, p.UpdatedAt = fromMS(runAt), fromMS(updated)
		out = append(out, p)
		return nil
	})
	return out, err
}

func (t *tx) AuditPublicEvents(ctx context.Context, ns string, since time.Time, before string, limit int) ([]store.PublicEvent, error) {
	sql, args := sqlschema.PublicEventsQuery(ns, since, before, limit)
	var out []store.PublicEvent
	err := t.query(ctx, sqlschema.Numbered1(sql), args, func(r pgx.Rows) error {
		var e store.PublicEvent
		var at int64
		if err := r.Scan(&e.ID, &at, &e.Action, &e.Target, &e.RunID, &e.Title, &e.By, &e.ByKind); err != nil {
			return err
		}
		e.Time = fromMS(at)
		out = append(out, e)
		return nil
	})
	return out, err
}
