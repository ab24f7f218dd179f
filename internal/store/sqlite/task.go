package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const taskCols = sqlschema.TaskCols

// insertTaskValues is a ? for each of taskCols.
var insertTaskValues = strings.Repeat("?, ", strings.Count(taskCols, ",")) + "?"

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
		FinishedAt:      colTimePtr(s, 25),
		Version:         s.ColumnInt64(26),
		Group:           s.ColumnText(34),
		Lane:            s.ColumnInt64(36),
		Trace:           parseTrace(s.ColumnText(37), s.ColumnText(38)),
		GateCount:       s.ColumnInt(39),
		UniqueKey:       s.ColumnText(40),
		DebounceKey:     s.ColumnText(41),
		ParentResults:   s.ColumnBool(42),
	}
	var err error
	if t.Labels, err = sqlschema.ParseLabels(s.ColumnText(6)); err != nil {
		return nil, fmt.Errorf("task %s labels: %w", t.ID, err)
	}
	if t.Requires, err = sqlschema.ParseRequires(s.ColumnText(35)); err != nil {
		return nil, fmt.Errorf("task %s requires: %w", t.ID, err)
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
	if s.ColumnType(27) != sqlite3.NULL {
		t.Run = scanRun(s, 27, t.ID)
	}
	return t, nil
}

// traceValues are a task's trace columns' values: empty for none.
func traceValues(t *tessera.Trace) []any {
	if t == nil {
		return []any{"", ""}
	}
	return []any{t.Traceparent, t.Tracestate}
}

// parseTrace is traceValues read back.
func parseTrace(traceparent, tracestate string) *tessera.Trace {
	if traceparent == "" {
		return nil
	}
	return &tessera.Trace{Traceparent: traceparent, Tracestate: tracestate}
}

// scanRun reads a run's columns from column i on (sqlschema.RunCols, or
// the runs table's from holder on, with its id before).
func scanRun(s *sqlite3.Stmt, i int, taskID string) *tessera.Run {
	return &tessera.Run{ID: s.ColumnText(i), TaskID: taskID, Holder: s.ColumnText(i + 1), Attempt: s.ColumnInt(i + 2),
		StartedAt: colTime(s, i+3), EndedAt: colTimePtr(s, i+4), Outcome: s.ColumnText(i + 5), Error: s.ColumnText(i + 6)}
}

func (t *tx) TaskInsert(ctx context.Context, task *tessera.Task) error {
	labels, err := sqlschema.Labels(task.Labels)
	if err != nil {
		return err
	}
	args := []any{task.Namespace, task.ID, task.Queue, task.Title, task.Brief, task.Payload, labels,
		task.Priority, task.Public, task.MaxAttempts, task.Attempts, task.State, task.RunAt,
		task.CreatedBy, task.CreatedAt, task.UpdatedAt, task.CancelRequested, task.Result, task.Error, task.Progress}
	args = append(args, sqlschema.LeaseValues(task.Lease)...)
	args = append(args, task.FinishedAt, task.Version)
	args = append(args, sqlschema.RunValues(task.Run)...)
	requires, err := sqlschema.Labels(task.Requires)
	if err != nil {
		return err
	}
	args = append(args, task.Group, requires, task.Lane)
	args = append(args, traceValues(task.Trace)...)
	args = append(args, task.GateCount, task.UniqueKey, task.DebounceKey, task.ParentResults)
	if _, err := t.c.exec(ctx, `INSERT INTO tasks (`+taskCols+`) VALUES (`+insertTaskValues+`)`, args...); err != nil {
		return fmt.Errorf("insert task %s: %w", task.ID, err)
	}
	if task.UniqueKey != "" && task.FinishedAt == nil {
		return t.uniqueTake(ctx, task)
	}
	return nil
}

// uniqueTake records that task holds its unique key; ErrConflict when
// another task holds it.
func (t *tx) uniqueTake(ctx context.Context, task *tessera.Task) error {
	n, err := t.c.exec(ctx, sqlschema.UniqueTake, task.Namespace, task.Queue, task.UniqueKey, task.ID)
	if err == nil && n == 0 {
		err = store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("task %s: unique key %q: %w", task.ID, task.UniqueKey, err)
	}
	return nil
}

func (t *tx) TaskByUniqueKey(ctx context.Context, ns, queue, key string) (*tessera.Task, error) {
	var task *tessera.Task
	err := t.one(ctx, sqlschema.TaskByUniqueKey, []any{ns, ns, queue, key}, func(s *sqlite3.Stmt) (err error) {
		task, err = scanTask(s)
		return err
	})
	return task, err
}

// TaskHold is TaskGet: the one writer holds every row until it commits.
func (t *tx) TaskHold(ctx context.Context, ns, id string) (*tessera.Task, error) {
	return t.TaskGet(ctx, ns, id)
}

func (t *tx) TaskGet(ctx context.Context, ns, id string) (*tessera.Task, error) {
	var task *tessera.Task
	err := t.one(ctx, `SELECT `+taskCols+` FROM tasks WHERE namespace = ? AND id = ?`, []any{ns, id}, func(s *sqlite3.Stmt) (err error) {
		task, err = scanTask(s)
		return err
	})
	return task, err
}

func (t *tx) TaskUpdate(ctx context.Context, before, after *tessera.Task) error {
	var cols []string
	var args []any
	for _, c := range sqlschema.TaskChanges(before, after) {
		cols, args = append(cols, c.Column+" = ?"), append(args, c.Value)
	}
	cols = append(cols, "version = version + 1")
	args = append(args, before.Namespace, before.ID, before.Version)
	n, err := t.c.exec(ctx, `UPDATE tasks SET `+strings.Join(cols, ", ")+` WHERE namespace = ? AND id = ? AND version = ?`, args...)
	if err != nil {
		return fmt.Errorf("update task %s: %w", before.ID, err)
	}
	if n == 0 {
		if _, err := t.TaskGet(ctx, before.Namespace, before.ID); err != nil {
			return err
		}
		return fmt.Errorf("task %s at version %d: %w", before.ID, before.Version, store.ErrStale)
	}
	after.Version = before.Version + 1
	if sqlschema.DebounceFreed(before, after) {
		if _, err := t.c.exec(ctx, sqlschema.DebounceFree, after.Namespace, after.Queue, after.DebounceKey, after.ID); err != nil {
			return err
		}
	}
	switch take, free := sqlschema.UniqueChange(before, after); {
	case take:
		return t.uniqueTake(ctx, after)
	case free:
		_, err := t.c.exec(ctx, sqlschema.UniqueFree, after.Namespace, after.Queue, after.UniqueKey, after.ID)
		return err
	}
	return nil
}

func (t *tx) DebounceHolder(ctx context.Context, ns, queue, key string) (string, error) {
	var id string
	err := t.one(ctx, sqlschema.DebounceHolder, []any{ns, queue, key}, func(s *sqlite3.Stmt) error {
		id = s.ColumnText(0)
		return nil
	})
	return id, err
}

func (t *tx) DebouncePoint(ctx context.Context, ns, queue, key, from, to string) error {
	sql, args := sqlschema.DebounceTake, []any{ns, queue, key, to}
	if from != "" {
		sql, args = sqlschema.DebounceMove, []any{to, ns, queue, key, from}
	}
	n, err := t.c.exec(ctx, sql, args...)
	if err == nil && n == 0 {
		err = store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("debounce key %q: %w", key, err)
	}
	return nil
}

// TaskGetMany reads the tasks one at a time: in-process, a statement
// costs no round trip, and each read is TaskGet's one seek.
func (t *tx) TaskGetMany(ctx context.Context, ns string, ids []string) ([]tessera.Task, error) {
	out := make([]tessera.Task, 0, len(ids))
	for _, id := range ids {
		task, err := t.TaskGet(ctx, ns, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, *task)
	}
	return out, nil
}

func (t *tx) TaskUpdateMany(ctx context.Context, changes []store.TaskChange) error {
	for _, c := range changes {
		if err := t.TaskUpdate(ctx, c.Before, c.After); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) TaskClaim(ctx context.Context, p store.TaskClaim) (*tessera.Task, error) {
	var task *tessera.Task
	// One statement picks and leases the task. No lock is needed: this
	// connection is the only writer, so nothing runs between the pick and
	// the write. INDEXED BY pins the plan to the claim index, where ready
	// tasks lie in claim order: the pick is one seek, whatever the history.
	err := t.one(ctx, `UPDATE tasks SET `+sqlschema.ClaimSet+`
 WHERE namespace = ? AND id = (SELECT id FROM tasks INDEXED BY tasks_claim WHERE `+sqlschema.Claimable+`
   ORDER BY `+sqlschema.SQLite.ClaimOrder()+` LIMIT 1)
 RETURNING `+taskCols, append(sqlschema.ClaimSetArgs(p), p.Namespace, p.Namespace, p.Queue, p.Lane, p.Now),
		func(s *sqlite3.Stmt) (err error) {
			task, err = scanTask(s)
			return err
		})
	if err != nil {
		return nil, err
	}
	return task, nil
}

// TaskClaimMany is TaskClaim once per lease: each a seek of the claim
// index, in the one writer's transaction, so the batch is as atomic as
// one claim, and costs what its claims would.
func (t *tx) TaskClaimMany(ctx context.Context, p store.TaskClaimMany) ([]tessera.Task, error) {
	out := make([]tessera.Task, 0, len(p.Runs))
	for i := range p.Runs {
		task, err := t.TaskClaim(ctx, store.TaskClaim{Namespace: p.Namespace, Queue: p.Queue, Lane: p.Lane, Now: p.Now, Lease: p.LeaseOf(i)})
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *task)
	}
	return out, nil
}

func (t *tx) TaskLapsed(ctx context.Context, ns, queue string, now time.Time, limit int) ([]tessera.Task, error) {
	// The claim index holds leased tasks by expiry: a range seek.
	return t.tasks(ctx, `SELECT `+taskCols+` FROM tasks INDEXED BY tasks_claim WHERE `+sqlschema.Lapsed+`
 ORDER BY `+sqlschema.LapseOrder+` LIMIT ?`, []any{ns, queue, now, limit})
}

func (t *tx) tasks(ctx context.Context, sql string, args []any) ([]tessera.Task, error) {
	var out []tessera.Task
	err := t.page(ctx, sql, args, func(s *sqlite3.Stmt) (int, error) {
		task, err := scanTask(s)
		if err != nil {
			return 0, err
		}
		out = append(out, *task)
		return task.ValueBytes(), nil
	})
	return out, err
}

func (t *tx) TaskList(ctx context.Context, ns string, f store.TaskFilter) ([]tessera.Task, error) {
	sql, args := sqlschema.TaskList(ns, f, `EXISTS (SELECT 1 FROM json_each(labels) WHERE value = ?)`)
	return t.tasks(ctx, sql, args)
}

func (t *tx) TasksFinishedPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	type key struct{ ns, id string }
	var keys []key
	err := t.c.query(ctx, sqlschema.FinishedBefore,
		[]any{before, limit}, func(s *sqlite3.Stmt) error {
			keys = append(keys, key{s.ColumnText(0), s.ColumnText(1)})
			return nil
		})
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := t.taskDelete(ctx, k.ns, k.id); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

func (t *tx) RunList(ctx context.Context, ns, taskID string) ([]tessera.Run, error) {
	var out []tessera.Run
	err := t.c.query(ctx, sqlschema.RunList, []any{ns, taskID, ns, taskID}, func(s *sqlite3.Stmt) error {
		out = append(out, *scanRun(s, 1, s.ColumnText(0)))
		return nil
	})
	return out, err
}

func (t *tx) TaskEventAppend(ctx context.Context, ns, taskID string, e *tessera.TaskEvent) error {
	err := t.one(ctx, `UPDATE tasks SET event_seq = event_seq + 1 WHERE namespace = ? AND id = ? RETURNING event_seq`,
		[]any{ns, taskID}, func(s *sqlite3.Stmt) error {
			e.Seq = s.ColumnInt64(0)
			return nil
		})
	if err != nil {
		return err
	}
	_, err = t.c.exec(ctx, `INSERT INTO task_events (namespace, task_id, seq, kind, body, by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		ns, taskID, e.Seq, e.Kind, e.Body, e.By, e.Time)
	return err
}

func (t *tx) TaskEventList(ctx context.Context, ns, taskID string, after int64, limit int) ([]tessera.TaskEvent, error) {
	var out []tessera.TaskEvent
	err := t.c.query(ctx, `SELECT seq, kind, body, by, created_at FROM task_events
 WHERE namespace = ? AND task_id = ? AND seq > ? ORDER BY seq LIMIT ?`, []any{ns, taskID, after, limit},
		func(s *sqlite3.Stmt) error {
			out = append(out, tessera.TaskEvent{Seq: s.ColumnInt64(0), Kind: s.ColumnText(1), Body: s.ColumnText(2),
				By: s.ColumnText(3), Time: colTime(s, 4)})
			return nil
		})
	return out, err
}
