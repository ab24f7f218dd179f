package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// EventLag is how long after the time of its id an audit event may still
// commit, for a reader of the trail in id order (store.EventOrder). Here
// none: one committer runs the transactions one after another, so events
// commit in the order of their ids.
func (db *DB) EventLag() time.Duration { return 0 }

func (t *tx) AuditStream(ctx context.Context, f store.StreamFilter) ([]store.StreamEvent, error) {
	sql, args := sqlschema.StreamQuery(f)
	var out []store.StreamEvent
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		out = append(out, store.StreamEvent{AuditEvent: tessera.AuditEvent{Namespace: f.Namespace,
			ID: s.ColumnText(0), Time: colTime(s, 1), Action: s.ColumnText(2), Target: s.ColumnText(3), RunID: s.ColumnText(4),
			TaskID: s.ColumnText(5), Queue: s.ColumnText(6), State: s.ColumnText(7), Public: s.ColumnBool(8),
			PrincipalID: s.ColumnText(9)}, Title: s.ColumnText(10)})
		return nil
	})
	return out, err
}

func (t *tx) AuditThroughput(ctx context.Context, ns string, since time.Time, actions []string, scan int) ([]store.Throughput, error) {
	sql, args := sqlschema.ThroughputQuery(ns, since, actions, scan)
	var out []store.Throughput
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		out = append(out, store.Throughput{Minute: time.Unix(s.ColumnInt64(0)*60, 0).UTC(), Queue: s.ColumnText(1),
			State: s.ColumnText(2), Count: s.ColumnInt(3)})
		return nil
	})
	return out, err
}

func (t *tx) QueuePause(ctx context.Context, p store.QueuePause) (bool, error) {
	n, err := t.c.exec(ctx, `INSERT INTO queue_pauses (namespace, queue, paused_by, paused_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.Namespace, p.Queue, p.PausedBy, p.PausedAt)
	return n > 0, err
}

func (t *tx) QueueResume(ctx context.Context, ns, queue string) (bool, error) {
	n, err := t.c.exec(ctx, `DELETE FROM queue_pauses WHERE namespace = ? AND queue = ?`, ns, queue)
	return n > 0, err
}

func (t *tx) QueuesPaused(ctx context.Context, ns string) ([]store.QueuePause, error) {
	var out []store.QueuePause
	err := t.c.query(ctx, `SELECT queue, paused_by, paused_at FROM queue_pauses WHERE namespace = ? ORDER BY queue`, []any{ns},
		func(s *sqlite3.Stmt) error {
			out = append(out, store.QueuePause{Namespace: ns, Queue: s.ColumnText(0), PausedBy: s.ColumnText(1), PausedAt: colTime(s, 2)})
			return nil
		})
	return out, err
}

// searchDialect: labels are a JSON array; lower() lowers ASCII letters
// only, as the search asks.
var searchDialect = sqlschema.SearchDialect{
	Label: `EXISTS (SELECT 1 FROM json_each(labels) WHERE value = ?)`,
	Title: `instr(lower(title), ?) > 0`,
}

func (t *tx) TaskSearch(ctx context.Context, ns string, f store.TaskSearch) ([]tessera.Task, error) {
	sql, args := sqlschema.TaskSearchQuery(ns, f, taskCols, searchDialect)
	return t.tasks(ctx, sql, args)
}

func (t *tx) TaskPurgeFinished(ctx context.Context, ns, queue string, states []string, limit int) (int, error) {
	if len(states) == 0 {
		return 0, nil
	}
	args := []any{ns, queue}
	for _, st := range states {
		args = append(args, st)
	}
	var ids []string
	// The claim index leads with namespace, queue and state: the tasks to
	// purge are found without a look at any other.
	err := t.c.query(ctx, `SELECT id FROM tasks WHERE namespace = ? AND queue = ? AND state IN (?`+strings.Repeat(`, ?`, len(states)-1)+`) LIMIT ?`,
		append(args, limit), func(s *sqlite3.Stmt) error {
			ids = append(ids, s.ColumnText(0))
			return nil
		})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if err := t.taskDelete(ctx, ns, id); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// taskDelete deletes a finished task with its runs, events and
// dependency rows; its children were settled when it finished.
func (t *tx) taskDelete(ctx context.Context, ns, id string) error {
	for _, sql := range []string{
		`DELETE FROM task_events WHERE namespace = ? AND task_id = ?`,
		`DELETE FROM runs WHERE namespace = ? AND task_id = ?`,
		`DELETE FROM task_edges WHERE namespace = ? AND parent_id = ?`,
		`DELETE FROM task_dependencies WHERE namespace = ? AND task_id = ?`,
		`DELETE FROM task_checkpoints WHERE namespace = ? AND task_id = ?`,
		`DELETE FROM task_gates WHERE namespace = ? AND task_id = ?`,
		`DELETE FROM tasks WHERE namespace = ? AND id = ?`,
	} {
		if _, err := t.c.exec(ctx, sql, ns, id); err != nil {
			return err
		}
	}
	return nil
}

// nullText is s, or NULL for "": an absent optional column costs nothing.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
