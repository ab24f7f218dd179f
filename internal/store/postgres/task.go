package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const taskCols = sqlschema.TaskCols

// taskRow scans the task columns.
type taskRow struct {
	t                         tessera.Task
	payload, result, progress *string
	labels                    string
	errText                   *string
	runAt, created, updated   int64
	leaseRun, leaseHolder     *string
	leaseToken                []byte
	leaseExpires, finished    *int64
	leaseSeconds              *int32
	run                       runRow
	requires                  string
	traceparent, tracestate   *string
	uniqueKey, debounceKey    *string
}

// runRow scans a run's columns (sqlschema.RunCols); a task's run is all
// NULL when it has none.
type runRow struct {
	id, holder, outcome, errText *string
	attempt                      *int32
	started, ended               *int64
}

func (r *runRow) dest() []any {
	return []any{&r.id, &r.holder, &r.attempt, &r.started, &r.ended, &r.outcome, &r.errText}
}

// get is the run scanned, nil for none.
func (r *runRow) get(taskID string) *tessera.Run {
	if r.id == nil {
		return nil
	}
	run := &tessera.Run{ID: *r.id, TaskID: taskID, EndedAt: timePtr(r.ended)}
	if r.holder != nil {
		run.Holder = *r.holder
	}
	if r.attempt != nil {
		run.Attempt = int(*r.attempt)
	}
	if r.started != nil {
		run.StartedAt = fromMS(*r.started)
	}
	if r.outcome != nil {
		run.Outcome = *r.outcome
	}
	if r.errText != nil {
		run.Error = *r.errText
	}
	return run
}

func (r *taskRow) dest() []any {
	t := &r.t
	return append([]any{&t.Namespace, &t.ID, &t.Queue, &t.Title, &t.Brief, &r.payload, &r.labels, &t.Priority, &t.Public,
		&t.MaxAttempts, &t.Attempts, &t.State, &r.runAt, &t.CreatedBy, &r.created, &r.updated, &t.CancelRequested,
		&r.result, &r.errText, &r.progress, &r.leaseRun, &r.leaseHolder, &r.leaseToken, &r.leaseExpires, &r.leaseSeconds,
		&r.finished, &t.Version}, append(r.run.dest(), &t.Group, &r.requires, &t.Lane, &r.traceparent, &r.tracestate, &t.GateCount, &r.uniqueKey, &r.debounceKey, &t.ParentResults)...)
}

func (r *taskRow) task() (*tessera.Task, error) {
	t := r.t
	t.Payload, t.Result, t.Progress = raw(r.payload), raw(r.result), raw(r.progress)
	t.RunAt, t.CreatedAt, t.UpdatedAt, t.FinishedAt = fromMS(r.runAt), fromMS(r.created), fromMS(r.updated), timePtr(r.finished)
	if r.errText != nil {
		t.Error = *r.errText
	}
	var err error
	if t.Labels, err = sqlschema.ParseLabels(r.labels); err != nil {
		return nil, fmt.Errorf("task %s labels: %w", t.ID, err)
	}
	if t.Requires, err = sqlschema.ParseRequires(r.requires); err != nil {
		return nil, fmt.Errorf("task %s requires: %w", t.ID, err)
	}
	if r.leaseRun != nil {
		t.Lease = &tessera.Lease{TaskID: t.ID, RunID: *r.leaseRun, TokenHash: r.leaseToken}
		if r.leaseHolder != nil {
			t.Lease.Holder = *r.leaseHolder
		}
		if r.leaseExpires != nil {
			t.Lease.ExpiresAt = fromMS(*r.leaseExpires)
		}
		if r.leaseSeconds != nil {
			t.Lease.Seconds = int(*r.leaseSeconds)
		}
	}
	t.Run = r.run.get(t.ID)
	if r.uniqueKey != nil {
		t.UniqueKey = *r.uniqueKey
	}
	if r.debounceKey != nil {
		t.DebounceKey = *r.debounceKey
	}
	if r.traceparent != nil {
		t.Trace = &tessera.Trace{Traceparent: *r.traceparent}
		if r.tracestate != nil {
			t.Trace.Tracestate = *r.tracestate
		}
	}
	return &t, nil
}

func scanTask(rows pgx.Row) (*tessera.Task, error) {
	var r taskRow
	if err := rows.Scan(r.dest()...); err != nil {
		return nil, err
	}
	return r.task()
}

// traceArgs are a task's trace columns' values: NULL for none.
func traceArgs(t *tessera.Trace) []any {
	if t == nil {
		return []any{nil, nil}
	}
	return []any{t.Traceparent, t.Tracestate}
}

// placeholders returns "$from, …, $(from+n-1)".
func placeholders(from, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(from+i))
	}
	return b.String()
}

func (t *tx) TaskInsert(ctx context.Context, task *tessera.Task) error {
	labels, err := sqlschema.Labels(task.Labels)
	if err != nil {
		return err
	}
	args := []any{task.Namespace, task.ID, task.Queue, task.Title, task.Brief, rawArg(task.Payload), labels,
		task.Priority, task.Public, task.MaxAttempts, task.Attempts, task.State, ms(task.RunAt),
		task.CreatedBy, ms(task.CreatedAt), ms(task.UpdatedAt), task.CancelRequested, rawArg(task.Result), task.Error, rawArg(task.Progress)}
	args = append(args, leaseArgs(task.Lease)...)
	args = append(args, msPtr(task.FinishedAt), task.Version)
	args = append(args, bound(sqlschema.RunValues(task.Run))...)
	requires, err := sqlschema.Labels(task.Requires)
	if err != nil {
		return err
	}
	args = append(args, task.Group, requires, task.Lane)
	args = append(args, traceArgs(task.Trace)...)
	args = append(args, task.GateCount, nullable(task.UniqueKey), nullable(task.DebounceKey), task.ParentResults)
	if err := t.insert(ctx, "insert task "+task.ID, `INSERT INTO tasks (`+taskCols+`) VALUES (`+placeholders(1, len(args))+`) ON CONFLICT DO NOTHING`, args...); err != nil {
		return err
	}
	if task.UniqueKey != "" && task.FinishedAt == nil {
		if err := t.uniqueTake(ctx, task); err != nil {
			return err
		}
	}
	t.counts.add(task, 1)
	if task.Public {
		t.queue(`INSERT INTO public_tasks (namespace, id) VALUES ($1, $2)`, task.Namespace, task.ID)
		if task.State == tessera.StateReady {
			t.publicReady(task.Namespace, task.Queue, task.RunAt, task.ID, true)
		}
	}
	return nil
}

// publicReady adds a public task to public_ready (in) or takes it out,
// with the next round trip: the board's health reads of ready public
// tasks walk that table, which holds only them.
func (t *tx) publicReady(ns, queue string, runAt time.Time, id string, in bool) {
	if in {
		t.queue(`INSERT INTO public_ready (namespace, queue, run_at, id) VALUES ($1, $2, $3, $4)`, ns, queue, ms(runAt), id)
		return
	}
	t.queue(`DELETE FROM public_ready WHERE namespace = $1 AND queue = $2 AND run_at = $3 AND id = $4`, ns, queue, ms(runAt), id)
}

// leaseArgs are a lease's column values as statement arguments.
func leaseArgs(l *tessera.Lease) []any {
	vs := sqlschema.LeaseValues(l)
	for i, v := range vs {
		vs[i] = arg(v)
	}
	return vs
}

// arg is a Go value as this backend binds it: times as Unix milliseconds,
// JSON values as text, nil as NULL.
func arg(v any) any {
	switch v := v.(type) {
	case time.Time:
		return ms(v)
	case *time.Time:
		return msPtr(v)
	case json.RawMessage:
		return rawArg(v)
	}
	return v
}

func (t *tx) TaskGet(ctx context.Context, ns, id string) (*tessera.Task, error) {
	return t.task(ctx, `SELECT `+taskCols+` FROM tasks WHERE namespace = $1 AND id = $2`, ns, id)
}

// TaskHold takes a share lock: writes of the task wait for this
// transaction, while other holders of it do not wait for each other.
func (t *tx) TaskHold(ctx context.Context, ns, id string) (*tessera.Task, error) {
	return t.task(ctx, taskHoldSQL, ns, id)
}

const taskHoldSQL = `SELECT ` + taskCols + ` FROM tasks WHERE namespace = $1 AND id = $2 FOR SHARE`

func (t *tx) task(ctx context.Context, sql string, args ...any) (*tessera.Task, error) {
	var r taskRow
	if err := t.one(ctx, sql, args, r.dest()...); err != nil {
		return nil, err
	}
	return r.task()
}

// TaskUpdate is conditional on the version: at READ COMMITTED an UPDATE
// that finds the row locked waits for the other writer, then re-checks its
// WHERE against the row that writer committed — a changed version matches
// nothing, and the caller hears ErrStale.
func (t *tx) TaskUpdate(ctx context.Context, before, after *tessera.Task) error {
	st := taskUpdate(before, after)
	changed, err := t.exec(ctx, st.sql, st.args...)
	if err != nil {
		return fmt.Errorf("update task %s: %w", before.ID, err)
	}
	return t.taskUpdated(ctx, before, after, changed)
}

// TaskUpdateMany sends every change's UPDATE in one round trip.
func (t *tx) TaskUpdateMany(ctx context.Context, changes []store.TaskChange) error {
	if len(changes) == 0 {
		return nil
	}
	stmts := make([]statement, len(changes))
	for i, c := range changes {
		stmts[i] = taskUpdate(c.Before, c.After)
	}
	changed, err := t.roundTripAll(ctx, stmts)
	if err != nil {
		return fmt.Errorf("update %d tasks: %w", len(changes), err)
	}
	for i, c := range changes {
		if err := t.taskUpdated(ctx, c.Before, c.After, changed[i]); err != nil {
			return err
		}
	}
	return nil
}

// taskUpdate is the UPDATE that writes after over before: the columns
// that differ, if the row is still at before's version.
func taskUpdate(before, after *tessera.Task) statement {
	var cols []string
	var args []any
	for _, c := range sqlschema.TaskChanges(before, after) {
		args = append(args, arg(c.Value))
		cols = append(cols, c.Column+" = $"+strconv.Itoa(len(args)))
	}
	cols = append(cols, "version = version + 1")
	n := len(args)
	args = append(args, before.Namespace, before.ID, before.Version)
	return statement{`UPDATE tasks SET ` + strings.Join(cols, ", ") +
		fmt.Sprintf(` WHERE namespace = $%d AND id = $%d AND version = $%d`, n+1, n+2, n+3), args}
}

// taskUpdated follows a task's UPDATE that changed rows: none is ErrStale
// (or ErrNotFound, the task gone); one moves its counts and public board.
func (t *tx) taskUpdated(ctx context.Context, before, after *tessera.Task, changed int64) error {
	if changed == 0 {
		var one int
		if err := t.one(ctx, `SELECT 1 FROM tasks WHERE namespace = $1 AND id = $2`, []any{before.Namespace, before.ID}, &one); err != nil {
			return fmt.Errorf("update task %s: %w", before.ID, err)
		}
		return fmt.Errorf("task %s at version %d: %w", before.ID, before.Version, store.ErrStale)
	}
	after.Version = before.Version + 1
	if sqlschema.DebounceFreed(before, after) {
		t.queue(debounceFree, after.Namespace, after.Queue, after.DebounceKey, after.ID)
	}
	switch take, free := sqlschema.UniqueChange(before, after); {
	case take:
		if err := t.uniqueTake(ctx, after); err != nil {
			return err
		}
	case free:
		t.queue(uniqueFree, after.Namespace, after.Queue, after.UniqueKey, after.ID)
	}
	if before.State != after.State {
		t.counts.move(before.Namespace, before.Queue, before.Public, before.State, after.State, 1)
	}
	if before.Public {
		wasReady, isReady, moved := before.State == tessera.StateReady, after.State == tessera.StateReady, !before.RunAt.Equal(after.RunAt)
		if wasReady && (!isReady || moved) {
			t.publicReady(before.Namespace, before.Queue, before.RunAt, before.ID, false)
		}
		if isReady && (!wasReady || moved) {
			t.publicReady(after.Namespace, after.Queue, after.RunAt, after.ID, true)
		}
	}
	return nil
}

var (
	debounceHolder  = sqlschema.Numbered1(sqlschema.DebounceHolder)
	debounceTake    = sqlschema.Numbered1(sqlschema.DebounceTake)
	debounceMove    = sqlschema.Numbered1(sqlschema.DebounceMove)
	debounceFree    = sqlschema.Numbered1(sqlschema.DebounceFree)
	uniqueTake      = sqlschema.Numbered1(sqlschema.UniqueTake)
	uniqueFree      = sqlschema.Numbered1(sqlschema.UniqueFree)
	taskByUniqueKey = sqlschema.Numbered1(sqlschema.TaskByUniqueKey)
)

// uniqueTake records that task holds its unique key; ErrConflict when
// another task holds it. Two transactions taking one key meet on
// task_unique's primary key: the second waits for the first to end.
func (t *tx) uniqueTake(ctx context.Context, task *tessera.Task) error {
	return t.insert(ctx, fmt.Sprintf("task %s: unique key %q", task.ID, task.UniqueKey), uniqueTake,
		task.Namespace, task.Queue, task.UniqueKey, task.ID)
}

func (t *tx) TaskByUniqueKey(ctx context.Context, ns, queue, key string) (*tessera.Task, error) {
	return t.task(ctx, taskByUniqueKey, ns, ns, queue, key)
}

func (t *tx) DebounceHolder(ctx context.Context, ns, queue, key string) (string, error) {
	var id string
	err := t.one(ctx, debounceHolder, []any{ns, queue, key}, &id)
	return id, err
}

// DebouncePoint's conditional writes meet on the key's row: of two
// transactions moving it from one task, the second waits for the first
// and then finds it moved (or, both taking a new key, finds it taken).
func (t *tx) DebouncePoint(ctx context.Context, ns, queue, key, from, to string) error {
	what := fmt.Sprintf("debounce key %q", key)
	if from == "" {
		return t.insert(ctx, what, debounceTake, ns, queue, key, to)
	}
	n, err := t.exec(ctx, debounceMove, to, ns, queue, key, from)
	if err == nil && n == 0 {
		err = store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// TaskGetMany reads the tasks in one statement, one seek per id.
func (t *tx) TaskGetMany(ctx context.Context, ns string, ids []string) ([]tessera.Task, error) {
	return t.tasks(ctx, taskGetManySQL, []any{ns, ids})
}

const taskGetManySQL = `SELECT ` + taskCols + ` FROM tasks WHERE namespace = $1 AND id = ANY($2)`

// claimSQL picks and leases the next ready task and starts its run, in one
// statement. The pick walks the claim index in claim order and takes the
// first row it can lock at once (SKIP LOCKED): concurrent claims each get
// another task and never wait for each other. A row another transaction
// changed after this statement began is re-checked when it is locked, and
// skipped if it is no longer ready.
var claimSQL = sqlschema.Numbered1(`WITH picked(pns, pid, replaced) AS (
  SELECT namespace, id, run_id IS NOT NULL FROM tasks WHERE ` + sqlschema.Claimable + `
  ORDER BY ` + sqlschema.PostgreSQL.ClaimOrder() + ` LIMIT 1
  FOR UPDATE SKIP LOCKED
)
UPDATE tasks SET ` + sqlschema.ClaimSet + `
FROM picked WHERE namespace = pns AND id = pid
RETURNING ` + taskCols + `, replaced`)

func (t *tx) TaskClaim(ctx context.Context, p store.TaskClaim) (*tessera.Task, error) {
	var r taskRow
	var replaced bool
	err := t.one(ctx, claimSQL, bound(append([]any{p.Namespace, p.Queue, p.Lane, p.Now}, sqlschema.ClaimSetArgs(p)...)), append(r.dest(), &replaced)...)
	if err != nil {
		return nil, err
	}
	task, err := r.task()
	if err == nil {
		t.claimed(task, replaced)
	}
	return task, err
}

// claimed counts a task a claim took from ready, and the run it moved to
// the history (migration 0011's trigger, which the meter does not see).
func (t *tx) claimed(task *tessera.Task, replaced bool) {
	t.counts.move(task.Namespace, task.Queue, task.Public, tessera.StateReady, tessera.StateLeased, 1)
	if task.Public {
		t.publicReady(task.Namespace, task.Queue, task.RunAt, task.ID, false)
	}
	if replaced {
		t.tally.unreported(t.db.costs.shapes, "runs", 1)
	}
}

// TaskLapsed locks what it returns, skipping rows another transaction
// holds: concurrent claims on one queue share out its lapse work instead of
// queueing behind each other for the same tasks. (A read-only transaction
// cannot lock; it only reads.)
// claimManySQL is claimSQL for a batch, in one statement: the tasks are
// picked in claim order, numbered, and joined to the batch's runs and
// token hashes by number.
var claimManySQL = sqlschema.Numbered1(`WITH picked AS (
  SELECT namespace AS pns, id AS pid, run_id IS NOT NULL AS replaced FROM tasks WHERE ` + sqlschema.Claimable + `
  ORDER BY ` + sqlschema.PostgreSQL.ClaimOrder() + ` LIMIT ?
  FOR UPDATE SKIP LOCKED
), numbered AS (
  SELECT pns, pid, replaced, row_number() OVER () AS i FROM picked
), l AS (
  SELECT * FROM unnest(?::text[], ?::bytea[]) WITH ORDINALITY AS l(lease_run, lease_hash, i)
)
UPDATE tasks SET ` + sqlschema.ClaimSetMany + `
FROM numbered JOIN l ON l.i = numbered.i WHERE namespace = pns AND id = pid
RETURNING ` + taskCols + `, replaced`)

// TaskClaimMany returns the tasks in claim order: the statement returns
// them in the order its join met them.
func (t *tx) TaskClaimMany(ctx context.Context, p store.TaskClaimMany) ([]tessera.Task, error) {
	runs, hashes := make([]string, len(p.Runs)), make([][]byte, len(p.Runs))
	for i, r := range p.Runs {
		runs[i], hashes[i] = r.RunID, r.TokenHash
	}
	args := bound(append([]any{p.Namespace, p.Queue, p.Lane, p.Now, len(p.Runs), runs, hashes}, sqlschema.ClaimSetManyArgs(&p)...))
	var out []tessera.Task
	err := t.query(ctx, claimManySQL, args, func(rows pgx.Rows) error {
		var r taskRow
		var replaced bool
		if err := rows.Scan(append(r.dest(), &replaced)...); err != nil {
			return err
		}
		task, err := r.task()
		if err == nil {
			t.claimed(task, replaced)
			out = append(out, *task)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	sqlschema.SortClaimed(out)
	return out, nil
}

var lapsedSQL = sqlschema.Numbered1(`SELECT ` + taskCols + ` FROM tasks WHERE ` + sqlschema.Lapsed +
	` ORDER BY ` + sqlschema.LapseOrder + ` LIMIT ?`)

func (t *tx) TaskLapsed(ctx context.Context, ns, queue string, now time.Time, limit int) ([]tessera.Task, error) {
	sql := lapsedSQL
	if !t.readOnly {
		sql += ` FOR UPDATE SKIP LOCKED`
	}
	return t.tasks(ctx, sql, []any{ns, queue, ms(now), limit})
}

func (t *tx) tasks(ctx context.Context, sql string, args []any) ([]tessera.Task, error) {
	var out []tessera.Task
	err := t.page(ctx, sql, args, func(rows pgx.Rows) (int, error) {
		task, err := scanTask(rows)
		if err != nil {
			return 0, err
		}
		out = append(out, *task)
		return task.ValueBytes(), nil
	})
	return out, err
}

func (t *tx) TaskList(ctx context.Context, ns string, f store.TaskFilter) ([]tessera.Task, error) {
	sql, args := sqlschema.TaskList(ns, f, `labels::jsonb @> jsonb_build_array(?::text)`)
	return t.tasks(ctx, sqlschema.Numbered1(sql), bound(args))
}

var purgeBatchSQL = sqlschema.Numbered1(sqlschema.FinishedBefore + ` FOR UPDATE SKIP LOCKED`)

// TasksFinishedPurge locks the tasks it deletes first. Unlocked, a task
// retried (live again) or given an event by a transaction still open
// would be deleted all the same: a DELETE that waits for a row's lock
// rechecks only its own WHERE, and the events and runs have none that
// says finished. Locked ones are skipped, for a later pass.
func (t *tx) TasksFinishedPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	var nss, ids []string
	err := t.query(ctx, purgeBatchSQL, []any{ms(before), limit}, func(rows pgx.Rows) error {
		var ns, id string
		if err := rows.Scan(&ns, &id); err != nil {
			return err
		}
		nss, ids = append(nss, ns), append(ids, id)
		return nil
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if err := t.tasksDelete(ctx, nss, ids); err != nil {
		return 0, err
	}
	return len(ids), nil
}

// tasksDelete deletes the tasks (nss[i], ids[i]) with their runs, events
// and dependency rows; they are finished, so their children were settled
// when they finished.
func (t *tx) tasksDelete(ctx context.Context, nss, ids []string) error {
	for _, sql := range []string{
		`DELETE FROM task_events WHERE (namespace, task_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
		`DELETE FROM runs WHERE (namespace, task_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
		`DELETE FROM task_edges WHERE (namespace, parent_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
		`DELETE FROM task_dependencies WHERE (namespace, task_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
		`DELETE FROM task_checkpoints WHERE (namespace, task_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
		`DELETE FROM task_gates WHERE (namespace, task_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
	} {
		if _, err := t.exec(ctx, sql, nss, ids); err != nil {
			return err
		}
	}
	_, err := t.deleteTasks(ctx, `DELETE FROM tasks WHERE (namespace, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, nss, ids)
	return err
}

// deleteTasks runs a DELETE of tasks, and takes what it deleted out of
// the counts and the public tables.
func (t *tx) deleteTasks(ctx context.Context, sql string, args ...any) (int64, error) {
	var gone []tessera.Task
	n, err := t.roundTrip(ctx, sql+` RETURNING namespace, queue, public, state, run_at, id`, args, func(rows pgx.Rows) error {
		var task tessera.Task
		var runAt int64
		if err := rows.Scan(&task.Namespace, &task.Queue, &task.Public, &task.State, &runAt, &task.ID); err != nil {
			return err
		}
		task.RunAt = fromMS(runAt)
		gone = append(gone, task)
		return nil
	})
	if err != nil {
		return 0, err
	}
	var nss, ids []string
	for i := range gone {
		task := &gone[i]
		t.counts.add(task, -1)
		if task.Public {
			nss, ids = append(nss, task.Namespace), append(ids, task.ID)
			if task.State == tessera.StateReady {
				t.publicReady(task.Namespace, task.Queue, task.RunAt, task.ID, false)
			}
		}
	}
	if len(ids) > 0 {
		t.queue(`DELETE FROM public_tasks WHERE (namespace, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, nss, ids)
	}
	return n, nil
}

var runListSQL = sqlschema.Numbered1(sqlschema.RunList)

func (t *tx) RunList(ctx context.Context, ns, taskID string) ([]tessera.Run, error) {
	var out []tessera.Run
	err := t.query(ctx, runListSQL, []any{ns, taskID, ns, taskID}, func(rows pgx.Rows) error {
		var id string
		var r runRow
		if err := rows.Scan(append([]any{&id}, r.dest()...)...); err != nil {
			return err
		}
		out = append(out, *r.get(id))
		return nil
	})
	return out, err
}

// TaskEventAppend numbers the event from the task row: concurrent appends
// to one task serialize on its row lock, each after the previous commit.
func (t *tx) TaskEventAppend(ctx context.Context, ns, taskID string, e *tessera.TaskEvent) error {
	if err := t.one(ctx, `UPDATE tasks SET event_seq = event_seq + 1 WHERE namespace = $1 AND id = $2 RETURNING event_seq`,
		[]any{ns, taskID}, &e.Seq); err != nil {
		return err
	}
	_, err := t.exec(ctx, `INSERT INTO task_events (namespace, task_id, seq, kind, body, by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		ns, taskID, e.Seq, e.Kind, e.Body, e.By, ms(e.Time))
	return err
}

func (t *tx) TaskEventList(ctx context.Context, ns, taskID string, after int64, limit int) ([]tessera.TaskEvent, error) {
	var out []tessera.TaskEvent
	err := t.query(ctx, `SELECT seq, kind, body, by, created_at FROM task_events
 WHERE namespace = $1 AND task_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`, []any{ns, taskID, after, limit},
		func(rows pgx.Rows) error {
			var e tessera.TaskEvent
			var created int64
			if err := rows.Scan(&e.Seq, &e.Kind, &e.Body, &e.By, &created); err != nil {
				return err
			}
			e.Time = fromMS(created)
			out = append(out, e)
			return nil
		})
	return out, err
}
