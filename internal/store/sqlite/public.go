package sqlite

import (
	"context"
	"errors"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// The queue statistics and public state reads. The tables they walk
// (task_counts, public_ready, public_tasks, public_events) are kept by the
// triggers of migrations 0004, 0006 and 0009, and ready and leased tasks
// are found through the claim index, so every read here costs the rows it
// returns plus a few seeks, whatever the number of tasks and events in the
// namespace.

func (t *tx) TaskStateCounts(ctx context.Context, ns string, v store.Visibility) ([]store.QueueCount, error) {
	sql, args := sqlschema.StateCounts(ns, v)
	var out []store.QueueCount
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		var counted [len(sqlschema.CountedStates)]int64
		for i := range counted {
			counted[i] = s.ColumnInt64(2 + i)
		}
		out = append(out, sqlschema.QueueCounts(s.ColumnText(0), s.ColumnInt64(1), counted)...)
		return nil
	})
	return out, err
}

func (t *tx) TaskScheduled(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]int, error) {
	out := map[string]int{}
	for _, q := range queues {
		count := func(sql string, args []any) error {
			err := t.one(ctx, sql, args, func(s *sqlite3.Stmt) error {
				if n := s.ColumnInt(0); n > 0 {
					out[q] += n
				}
				return nil
			})
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
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
			if err := count(sqlschema.SQLite.Scheduled(ns, q, lane, now)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// readyLanes returns the lanes of a queue's ready tasks.
func (t *tx) readyLanes(ctx context.Context, ns, queue string) ([]int64, error) {
	var out []int64
	sql, args := sqlschema.SQLite.ReadyLanes(ns, queue)
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		out = append(out, s.ColumnInt64(0))
		return nil
	})
	return out, err
}

func (t *tx) TaskLapsedCounts(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]int, error) {
	out := map[string]int{}
	for _, q := range queues {
		sql, args := sqlschema.LapsedCount(ns, q, now, v)
		err := t.one(ctx, sql, args, func(s *sqlite3.Stmt) error {
			if n := s.ColumnInt(0); n > 0 {
				out[q] = n
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t *tx) TaskOldestReady(ctx context.Context, ns string, queues []string, now time.Time, v store.Visibility) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	for _, q := range queues {
		oldest := func(sql string, args []any) error {
			err := t.one(ctx, sql, args, func(s *sqlite3.Stmt) error {
				// It counts only if its time came.
				if at := colTime(s, 0); s.ColumnType(0) != sqlite3.NULL && !at.After(now) {
					if was, ok := out[q]; !ok || at.Before(was) {
						out[q] = at
					}
				}
				return nil
			})
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
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
			if err := oldest(sqlschema.SQLite.OldestReady(ns, q, lane)); err != nil {
				return nil, err
			}
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
