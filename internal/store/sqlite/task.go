package sqlite

import (
	"context"

	"encoding/json"
	"fmt"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const taskCols = `namespace, id, queue, title, brief, payload, labels, priority, public, max_attempts, attempts, state, run_at,
 created_by, created_at, updated_at, cancel_requested, result, error, progress,
 lease_run_id, lease_holder, lease_token_hash, lease_expires_at, lease_seconds`

func scanTask(s *sqlite3.Stmt) (*tessera.Task, error) {
	t := &tessera.Task{
		Namespace:       s.ColumnText(0),
		ID:              s.ColumnText(1),
		Queue:           s.ColumnText(2),
		Title:           s.ColumnText(3),
		Brief:           s.ColumnText(4),
		Payload:         colRaw(s, 5),
		Priority:        s.ColumnInt(7),
		Public:          s.ColumnBool(8),
		MaxAttempts:     s.ColumnInt(9),
		Attempts:        s.ColumnInt(10),
		State:           s.ColumnText(11),
		RunAt:           colTime(s, 12),
		CreatedBy:       s.ColumnText(13),
		CreatedAt:       colTime(s, 14),
		UpdatedAt:       colTime(s, 15),
		CancelRequested: s.ColumnBool(16),
		Result:          colRaw(s, 17),
		Error:           s.ColumnText(18),
		Progress:        colRaw(s, 19),
	}
	if err := json.Unmarshal([]byte(s.ColumnText(6)), &t.Labels); err != nil {
		return nil, fmt.Errorf("task %s labels: %w", t.ID, err)
	}
	if s.ColumnType(20) != sqlite3.NULL {
		t.Lease = &tessera.Lease{
			TaskID:    t.ID,
			RunID:     s.ColumnText(20),
			Holder:    s.ColumnText(21),
			TokenHash: colBlob(s, 22),
			ExpiresAt: colTime(s, 23),
			Seconds:   s.ColumnInt(24),
		}
	}
	return t, nil
}

func leaseArgs(t *tessera.Task) []any {
	if t.Lease == nil {
		return []any{nil, nil, nil, nil, nil}
	}
	return []any{t.Lease.RunID, t.Lease.Holder, t.Lease.TokenHash, t.Lease.ExpiresAt, t.Lease.Seconds}
}

func (t *tx) TaskInsert(ctx context.Context, task *tessera.Task) error {
	labels, err := json.Marshal(task.Labels)
	if err != nil {
		return err
	}
	args := []any{task.Namespace, task.ID, task.Queue, task.Title, task.Brief, task.Payload, string(labels),
		task.Priority, task.Public, task.MaxAttempts, task.Attempts, task.State, task.RunAt,
		task.CreatedBy, task.CreatedAt, task.UpdatedAt, task.CancelRequested, task.Result, task.Error, task.Progress}
	args = append(args, leaseArgs(task)...)
	if _, err := t.c.exec(`INSERT INTO tasks (`+taskCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...); err != nil {
		return fmt.Errorf("insert task %s: %w", task.ID, err)
	}
	return nil
}

func (t *tx) TaskGet(ctx context.Context, ns, id string) (*tessera.Task, error) {
	var task *tessera.Task
	err := t.one(`SELECT `+taskCols+` FROM tasks WHERE namespace = ? AND id = ?`, []any{ns, id}, func(s *sqlite3.Stmt) (err error) {
		task, err = scanTask(s)
		return err
	})
	return task, err
}

func (t *tx) TaskUpdate(ctx context.Context, task *tessera.Task) error {
	args := []any{task.State, task.Attempts, task.RunAt, task.UpdatedAt, task.CancelRequested, task.Result, task.Error, task.Progress}
	args = append(args, leaseArgs(task)...)
	args = append(args, task.Namespace, task.ID)
	return mustChange(t.c.exec(`UPDATE tasks SET state = ?, attempts = ?, run_at = ?, updated_at = ?, cancel_requested = ?,
 result = ?, error = ?, progress = ?, lease_run_id = ?, lease_holder = ?, lease_token_hash = ?, lease_expires_at = ?, lease_seconds = ?
 WHERE namespace = ? AND id = ?`, args...))
}

func (t *tx) tasks(sql string, args []any) ([]tessera.Task, error) {
	var out []tessera.Task
	var page pageBudget
	err := t.c.query(sql, args, func(s *sqlite3.Stmt) error {
		task, err := scanTask(s)
		if err != nil {
			return err
		}
		out = append(out, *task)
		return page.take(len(task.Brief) + len(task.Payload) + len(task.Result) + len(task.Progress))
	})
	return out, page.done(err)
}

func (t *tx) TaskList(ctx context.Context, ns string, f store.TaskFilter) ([]tessera.Task, error) {
	sql := `SELECT ` + taskCols + ` FROM tasks WHERE namespace = ?`
	args := []any{ns}
	switch f.State {
	case "":
	case tessera.StateScheduled:
		sql += ` AND state = 'ready' AND run_at > ?`
		args = append(args, f.Now)
	case tessera.StateReady:
		sql += ` AND state = 'ready' AND run_at <= ?`
		args = append(args, f.Now)
	default:
		sql += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.Queue != "" {
		sql += ` AND queue = ?`
		args = append(args, f.Queue)
	}
	if f.Label != "" {
		sql += ` AND EXISTS (SELECT 1 FROM json_each(labels) WHERE value = ?)`
		args = append(args, f.Label)
	}
	if f.Before != "" {
		sql += ` AND id < ?`
		args = append(args, f.Before)
	}
	sql += ` ORDER BY id DESC LIMIT ?`
	args = append(args, f.Limit)
	return t.tasks(sql, args)
}

func (t *tx) TaskNextReady(ctx context.Context, ns, queue string, now time.Time) (*tessera.Task, error) {
	var task *tessera.Task
	err := t.one(`SELECT `+taskCols+` FROM tasks
 WHERE namespace = ? AND queue = ? AND state = 'ready' AND run_at <= ?
 ORDER BY priority DESC, run_at, id LIMIT 1`, []any{ns, queue, now}, func(s *sqlite3.Stmt) (err error) {
		task, err = scanTask(s)
		return err
	})
	return task, err
}

func (t *tx) TaskLapsed(ctx context.Context, ns, queue string, now time.Time, limit int) ([]tessera.Task, error) {
	return t.tasks(`SELECT `+taskCols+` FROM tasks
 WHERE namespace = ? AND queue = ? AND state = 'leased' AND lease_expires_at <= ? LIMIT ?`, []any{ns, queue, now, limit})
}

func (t *tx) TaskCounts(ctx context.Context, ns string, now time.Time) ([]store.QueueCount, error) {
	var out []store.QueueCount
	err := t.c.query(`SELECT queue, CASE WHEN state = 'ready' AND run_at > ? THEN 'scheduled' ELSE state END AS st, count(*)
 FROM tasks WHERE namespace = ? GROUP BY queue, st ORDER BY queue, st`, []any{now, ns}, func(s *sqlite3.Stmt) error {
		out = append(out, store.QueueCount{Queue: s.ColumnText(0), State: s.ColumnText(1), Count: s.ColumnInt(2)})
		return nil
	})
	return out, err
}

const runCols = `run_id, task_id, holder, attempt, started_at, ended_at, outcome, error`

func (t *tx) RunInsert(ctx context.Context, ns string, r *tessera.Run) error {
	_, err := t.c.exec(`INSERT INTO runs (namespace, `+runCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ns, r.ID, r.TaskID, r.Holder, r.Attempt, r.StartedAt, r.EndedAt, r.Outcome, r.Error)
	if err != nil {
		return fmt.Errorf("insert run %s: %w", r.ID, err)
	}
	return nil
}

func (t *tx) RunEnd(ctx context.Context, ns string, r *tessera.Run) error {
	return mustChange(t.c.exec(`UPDATE runs SET ended_at = ?, outcome = ?, error = ? WHERE namespace = ? AND task_id = ? AND run_id = ?`,
		r.EndedAt, r.Outcome, r.Error, ns, r.TaskID, r.ID))
}

func (t *tx) RunList(ctx context.Context, ns, taskID string) ([]tessera.Run, error) {
	var out []tessera.Run
	err := t.c.query(`SELECT `+runCols+` FROM runs WHERE namespace = ? AND task_id = ? ORDER BY run_id`, []any{ns, taskID},
		func(s *sqlite3.Stmt) error {
			out = append(out, tessera.Run{
				ID: s.ColumnText(0), TaskID: s.ColumnText(1), Holder: s.ColumnText(2), Attempt: s.ColumnInt(3),
				StartedAt: colTime(s, 4), EndedAt: colTimePtr(s, 5), Outcome: s.ColumnText(6), Error: s.ColumnText(7),
			})
			return nil
		})
	return out, err
}

func (t *tx) TaskEventAppend(ctx context.Context, ns, taskID string, e *tessera.TaskEvent) error {
	return t.one(`INSERT INTO task_events (namespace, task_id, seq, kind, body, by, created_at)
 SELECT ?, ?, coalesce(max(seq), 0) + 1, ?, ?, ?, ? FROM task_events WHERE namespace = ? AND task_id = ?
 RETURNING seq`, []any{ns, taskID, e.Kind, e.Body, e.By, e.Time, ns, taskID}, func(s *sqlite3.Stmt) error {
		e.Seq = s.ColumnInt64(0)
		return nil
	})
}

func (t *tx) TaskEventList(ctx context.Context, ns, taskID string, after int64, limit int) ([]tessera.TaskEvent, error) {
	var out []tessera.TaskEvent
	err := t.c.query(`SELECT seq, kind, body, by, created_at FROM task_events
 WHERE namespace = ? AND task_id = ? AND seq > ? ORDER BY seq LIMIT ?`, []any{ns, taskID, after, limit},
		func(s *sqlite3.Stmt) error {
			out = append(out, tessera.TaskEvent{Seq: s.ColumnInt64(0), Kind: s.ColumnText(1), Body: s.ColumnText(2),
				By: s.ColumnText(3), Time: colTime(s, 4)})
			return nil
		})
	return out, err
}
