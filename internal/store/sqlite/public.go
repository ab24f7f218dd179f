package sqlite

import (
	"context"

	"encoding/json"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// The queue statistics and public state reads. The tables they walk
// (task_counts, task_ready, public_tasks, public_events) are kept by the
// triggers of migrations 0004 and 0006, and lapsed leases are found
// through the claim index by expiry, so every read here costs the rows it
// returns plus a few seeks, whatever the number of tasks and events in the
// namespace.

func (t *tx) TaskStateCounts(ctx context.Context, ns string, v store.Visibility) ([]store.QueueCount, error) {
	sql := `SELECT queue, state, sum(count) FROM task_counts WHERE namespace = ?`
	if v == store.PublicOnly {
		sql += ` AND public`
	}
	var rows []store.QueueCount
	err := t.c.query(ctx, sql+` GROUP BY queue, state ORDER BY queue, state`, []any{ns}, func(s *sqlite3.Stmt) error {
		rows = append(rows, store.QueueCount{Queue: s.ColumnText(0), State: s.ColumnText(1), Count: s.ColumnInt(2)})
		return nil
	})
	return sqlschema.ReadyFromAll(rows), err
}

// queueList passes a list of queues as one JSON parameter, so the
// statement text (and its prepared statement) is the same for any number.
func queueList(queues []string) (string, error) {
	b, err := json.Marshal(queues)
	return string(b), err
}

func (t *tx) TaskScheduled(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]int, error) {
	out := map[string]int{}
	if len(queues) == 0 {
		return out, nil
	}
	list, err := queueList(queues)
	if err != nil {
		return nil, err
	}
	for _, public := range sqlschema.Visibilities(v) {
		// Per queue a range of task_ready's key (namespace, queue, public,
		// run_at > now): the scheduled tasks and nothing else.
		err := t.c.query(ctx, `SELECT q.value, (SELECT count(*) FROM task_ready r
   WHERE r.namespace = ? AND r.queue = q.value AND r.public = ? AND r.run_at > ?)
 FROM json_each(?) q`, []any{ns, public, now, list}, func(s *sqlite3.Stmt) error {
			if n := s.ColumnInt(1); n > 0 {
				out[s.ColumnText(0)] += n
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
	list, err := queueList(queues)
	if err != nil {
		return nil, err
	}
	sql := `SELECT queue, count(*) FROM tasks INDEXED BY tasks_claim
 WHERE namespace = ? AND queue IN (SELECT value FROM json_each(?)) AND state = 'leased' AND lease_expires_at <= ?`
	if v == store.PublicOnly {
		sql += ` AND public`
	}
	err = t.c.query(ctx, sql+` GROUP BY queue`, []any{ns, list, now}, func(s *sqlite3.Stmt) error {
		out[s.ColumnText(0)] = s.ColumnInt(1)
		return nil
	})
	return out, err
}

func (t *tx) TaskOldestReady(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(queues) == 0 {
		return out, nil
	}
	list, err := queueList(queues)
	if err != nil {
		return nil, err
	}
	for _, public := range sqlschema.Visibilities(v) {
		// One seek per queue: task_ready is ordered by run_at within a
		// queue and visibility, so its first entry is the oldest; it
		// counts only if its time came.
		err := t.c.query(ctx, `SELECT q.value, (SELECT r.run_at FROM task_ready r
   WHERE r.namespace = ? AND r.queue = q.value AND r.public = ? ORDER BY r.run_at LIMIT 1)
 FROM json_each(?) q`, []any{ns, public, list}, func(s *sqlite3.Stmt) error {
			if s.ColumnType(1) == sqlite3.NULL {
				return nil
			}
			at := colTime(s, 1)
			if prev, ok := out[s.ColumnText(0)]; !at.After(now) && (!ok || at.Before(prev)) {
				out[s.ColumnText(0)] = at
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
	// result, progress or lease.
	err := t.c.query(ctx, `SELECT t.id, t.queue, t.title, t.state, t.priority, t.run_at, t.updated_at
 FROM public_tasks p JOIN tasks t ON t.namespace = p.namespace AND t.id = p.id
 WHERE p.namespace = ? ORDER BY p.id DESC LIMIT ?`, []any{ns, limit}, func(s *sqlite3.Stmt) error {
		out = append(out, store.PublicTask{ID: s.ColumnText(0), Queue: s.ColumnText(1), Title: s.ColumnText(2),
			State: s.ColumnText(3), Priority: s.ColumnInt(4), RunAt: colTime(s, 5), UpdatedAt: colTime(s, 6)})
		return nil
	})
	return out, err
}

func (t *tx) AuditPublicEvents(ctx context.Context, ns string, since time.Time, before string, limit int) ([]store.PublicEvent, error) {
	sql, args := sqlschema.PublicEventsQuery(ns, since, before, limit)
	var out []store.PublicEvent
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		out = append(out, store.PublicEvent{ID: s.ColumnText(0), Time: colTime(s, 1), Action: s.ColumnText(2),
			Target: s.ColumnText(3), RunID: s.ColumnText(4), Title: s.ColumnText(5), By: s.ColumnText(6), ByKind: s.ColumnText(7)})
		return nil
	})
	return out, err
}
