package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// The queue statistics and public state reads, over the tables the task
// statements keep (task_counts, public_ready, public_tasks: counts.go,
// task.go), the one migration 0004's trigger keeps (public_events), and
// the claim index: each
// costs the rows it returns plus a few seeks, whatever the tasks and
// events of the namespace. The statements are SQLite's (package
// sqlschema).

func (t *tx) TaskStateCounts(ctx context.Context, ns string, v store.Visibility) ([]store.QueueCount, error) {
	sql, args := sqlschema.StateCounts(ns, v)
	var out []store.QueueCount
	err := t.query(ctx, sqlschema.Numbered1(sql), args, func(r pgx.Rows) error {
		var queue string
		var total int64
		var counted [len(sqlschema.CountedStates)]int64
		dest := []any{&queue, &total}
		for i := range counted {
			dest = append(dest, &counted[i])
		}
		if err := r.Scan(dest...); err != nil {
			return err
		}
		out = append(out, sqlschema.QueueCounts(queue, total, counted)...)
		return nil
	})
	return out, err
}

func (t *tx) TaskScheduled(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]int, error) {
	out := map[string]int{}
	for _, q := range queues {
		count := func(sql string, args []any) error {
			var n int64
			if err := t.countRows(ctx, sqlschema.Numbered1(sql), bound(args), &n); err != nil {
				return err
			}
			if n > 0 {
				out[q] += int(n)
			}
			return nil
		}
		if v == store.PublicOnly {
			if err := count(sqlschema.PublicScheduled, []any{ns, q, now}); err != nil {
				return nil, err
			}
			continue
		}
		lanes, err := t.readyLanes(ctx, ns, q)
		if err != nil {
			return nil, err
		}
		for _, lane := range lanes {
			if err := count(sqlschema.PostgreSQL.Scheduled(ns, q, lane, now)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// readyLanes returns the lanes of a queue's ready tasks.
func (t *tx) readyLanes(ctx context.Context, ns, queue string) ([]int64, error) {
	var out []int64
	sql, args := sqlschema.PostgreSQL.ReadyLanes(ns, queue)
	err := t.query(ctx, sqlschema.Numbered1(sql), args, func(rows pgx.Rows) error {
		var lane int64
		if err := rows.Scan(&lane); err != nil {
			return err
		}
		out = append(out, lane)
		return nil
	})
	return out, err
}

func (t *tx) TaskLapsedCounts(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]int, error) {
	out := map[string]int{}
	for _, q := range queues {
		sql, args := sqlschema.LapsedCount(ns, q, now, v)
		var n int64
		if err := t.countRows(ctx, sqlschema.Numbered1(sql), bound(args), &n); err != nil {
			return nil, err
		}
		if n > 0 {
			out[q] = int(n)
		}
	}
	return out, nil
}

func (t *tx) TaskOldestReady(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, q := range queues {
		oldest := func(sql string, args []any) error {
			var runAt *int64
			err := t.one(ctx, sqlschema.Numbered1(sql), bound(args), &runAt)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			// It counts only if its time came.
			if at := timePtr(runAt); at != nil && !at.After(now) {
				if was, ok := out[q]; !ok || at.Before(was) {
					out[q] = *at
				}
			}
			return nil
		}
		if v == store.PublicOnly {
			if err := oldest(sqlschema.PublicOldestReady, []any{ns, q}); err != nil {
				return nil, err
			}
			continue
		}
		lanes, err := t.readyLanes(ctx, ns, q)
		if err != nil {
			return nil, err
		}
		for _, lane := range lanes {
			if err := oldest(sqlschema.PostgreSQL.OldestReady(ns, q, lane)); err != nil {
				return nil, err
			}
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
