package sqlschema

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The task statements both backends run alike. SQLite holds tasks in one
// index, tasks_claim (finished_at, namespace, queue, state,
// lease_expires_at, priority DESC, run_at, id): live tasks share a NULL
// finished_at and ready ones a NULL lease expiry, so the claim, the lapse
// check and the ready reads are ranges of it, and retention a range of its
// first column. PostgreSQL holds ready tasks apart, in tasks_ready
// (namespace, queue, priority DESC, run_at, id) WHERE state = 'ready', and
// the others in tasks_claim (finished_at, namespace, queue, state,
// lease_expires_at) WHERE state <> 'ready' (Dialect says why). Each ORDER
// BY names the index's columns from its first on, the NULL ones too:
// PostgreSQL's planner takes "x IS NULL" as fixing nothing, and would sort
// what the index already orders.

// Dialect is how a backend's indexes hold a queue's ready tasks.
type Dialect struct {
	// readyLeading are the index columns before priority that a ready
	// task holds NULL in, each followed by ", ": named in the ORDER BY of
	// every walk of ready tasks, so it takes the index's order.
	readyLeading string
}

var (
	// SQLite keeps ready tasks in tasks_claim with the others.
	SQLite = Dialect{readyLeading: "finished_at, lease_expires_at, "}
	// PostgreSQL keeps them in an index of their own. In one index with
	// the leased ones, a claim walked the dead entries every earlier claim
	// left at the front of the ready range (each claim moves its task's
	// entry, and PostgreSQL removes the old one only at a vacuum): the
	// leases heartbeats keep moving right beside them changed those pages
	// too often for a scan to mark the entries dead, and under load the
	// n-th claim read some n rows. Apart, they are marked as walked over.
	PostgreSQL = Dialect{}
)

// ClaimOrder is the order a claim takes ready tasks in: highest priority,
// then oldest run_at, then id.
func (d Dialect) ClaimOrder() string { return d.readyLeading + "lane, priority DESC, run_at, id" }

// TaskCols are the task columns every task read selects, in the order the
// backends scan them.
const TaskCols = `namespace, id, queue, title, brief, payload, labels, priority, public, max_attempts, attempts, state, run_at,
 created_by, created_at, updated_at, cancel_requested, result, error, progress,
 lease_run_id, lease_holder, lease_token_hash, lease_expires_at, lease_seconds, finished_at, version,
 ` + RunCols + `, grp, requires, lane, traceparent, tracestate, gates, unique_key, debounce_key, parent_results`

// Labels is a task's labels as stored: a JSON array of strings.
func Labels(labels []string) (string, error) {
	if len(labels) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(labels)
	return string(b), err
}

// ParseLabels reads Labels back. Most tasks have none, and decoding "[]"
// through encoding/json on every task read was a measurable share of a
// claim's CPU.
func ParseLabels(text string) ([]string, error) {
	if text == "[]" {
		return []string{}, nil
	}
	var labels []string
	err := json.Unmarshal([]byte(text), &labels)
	return labels, err
}

// ParseRequires reads a task's requires, stored as Labels stores labels;
// none is nil.
func ParseRequires(text string) ([]string, error) {
	if text == "[]" {
		return nil, nil
	}
	return ParseLabels(text)
}

// RunCols are the columns of the run on a task's row (tessera.Task.Run),
// in RunValues' order; the runs table holds the same for earlier runs.
const RunCols = `run_id, run_holder, run_attempt, run_started_at, run_ended_at, run_outcome, run_error`

// RunValues are a run's column values (all nil for no run); an empty
// outcome or error is NULL.
func RunValues(r *tessera.Run) []any {
	if r == nil {
		return []any{nil, nil, nil, nil, nil, nil, nil}
	}
	return []any{r.ID, r.Holder, r.Attempt, r.StartedAt, r.EndedAt, Nullable(r.Outcome), Nullable(r.Error)}
}

// RunList is a task's runs, oldest first: the history, then the run on
// the task's row. Arguments: namespace, task id, twice.
// Its columns are the task id, then RunCols.
const RunList = `SELECT task_id, run_id, holder, attempt, started_at, ended_at, outcome, error FROM runs
 WHERE namespace = ? AND task_id = ?
 UNION ALL
 SELECT id, ` + RunCols + ` FROM tasks
 WHERE namespace = ? AND id = ? AND run_id IS NOT NULL
 ORDER BY 2`

// ClaimSet is what a claim writes on the task it picked: leased, one more
// attempt, the lease, and a new run on the row, numbered by that attempt;
// ClaimSetArgs its arguments.
var ClaimSet = claimSet("?", "?")

// ClaimSetArgs are ClaimSet's arguments for p.
func ClaimSetArgs(p store.TaskClaim) []any {
	l := p.Lease
	return []any{p.Now, l.RunID, l.Holder, l.TokenHash, l.ExpiresAt, l.Seconds, l.RunID, l.Holder, p.Now}
}

// ClaimSetMany is ClaimSet for a batch, whose run ids and token hashes
// are the columns lease_run and lease_hash of a relation l joined to the
// tasks picked; ClaimSetManyArgs its arguments.
var ClaimSetMany = claimSet("l.lease_run", "l.lease_hash")

// ClaimSetManyArgs are ClaimSetMany's arguments for p.
func ClaimSetManyArgs(p *store.TaskClaimMany) []any {
	l := p.Lease
	return []any{p.Now, l.Holder, l.ExpiresAt, l.Seconds, l.Holder, p.Now}
}

// SortClaimed puts tasks in claim order (Dialect.ClaimOrder, for tasks
// that were all ready): highest priority, then oldest run_at, then id.
func SortClaimed(tasks []tessera.Task) {
	slices.SortFunc(tasks, func(a, b tessera.Task) int {
		if a.Priority != b.Priority {
			return cmp.Compare(b.Priority, a.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// claimSet is a claim's SET clause with its run id and token hash spelled
// run and hash.
func claimSet(run, hash string) string {
	return `state = 'leased', attempts = attempts + 1, version = version + 1, updated_at = ?,
 lease_run_id = ` + run + `, lease_holder = ?, lease_token_hash = ` + hash + `, lease_expires_at = ?, lease_seconds = ?,
 run_id = ` + run + `, run_holder = ?, run_attempt = attempts + 1, run_started_at = ?, run_ended_at = NULL, run_outcome = NULL, run_error = NULL`
}

// readyIn is the ready tasks of one queue: arguments namespace, queue;
// readyOf those of one of its lanes: arguments namespace, queue, lane.
const (
	readyIn = `finished_at IS NULL AND namespace = ? AND queue = ? AND state = 'ready' AND lease_expires_at IS NULL`
	readyOf = readyIn + ` AND lane = ?`
)

// Claimable is the condition of a task a claim may take from a lane —
// ready, its run_at come — with arguments namespace, queue, lane, now.
const Claimable = readyOf + ` AND run_at <= ?`

// Lapsed is the condition of a leased task of a queue whose lease expired:
// arguments namespace, queue, now. LapseOrder walks them soonest expiry
// first.
const (
	Lapsed     = `finished_at IS NULL AND namespace = ? AND queue = ? AND state = 'leased' AND lease_expires_at <= ?`
	LapseOrder = `finished_at, lease_expires_at`
)

// TaskList is a listing of a namespace's tasks, newest first, at most
// f.Limit: the filters as conditions with ? arguments. labelHas is the
// dialect's test that the labels (a JSON array) hold its argument.
func TaskList(ns string, f store.TaskFilter, labelHas string) (string, []any) {
	sql, args := `SELECT `+TaskCols+` FROM tasks WHERE namespace = ?`, []any{ns}
	and := func(cond string, v any) {
		sql, args = sql+` AND `+cond, append(args, v)
	}
	if f.State != "" {
		and(`state = ?`, f.State)
	}
	if !f.RunAtUpTo.IsZero() {
		and(`run_at <= ?`, f.RunAtUpTo)
	}
	if !f.RunAtAfter.IsZero() {
		and(`run_at > ?`, f.RunAtAfter)
	}
	if f.Queue != "" {
		and(`queue = ?`, f.Queue)
	}
	if f.Label != "" {
		and(labelHas, f.Label)
	}
	if f.Before != "" {
		and(`id < ?`, f.Before)
	}
	return sql + ` ORDER BY id DESC LIMIT ?`, append(args, f.Limit)
}

// LapsedCount counts a queue's lapsed leases (of its public tasks only,
// for a read without a key), in the index's order for the reason
// Scheduled gives.
func LapsedCount(ns, queue string, now time.Time, v store.Visibility) (string, []any) {
	sql, args := `SELECT count(*) FROM (SELECT lease_expires_at FROM tasks WHERE `+Lapsed, []any{ns, queue, now}
	if v == store.PublicOnly {
		sql, args = sql+` AND public = ?`, append(args, true)
	}
	return sql + ` ORDER BY ` + LapseOrder + `) s`, args
}

// FinishedBefore picks finished tasks that finished before its argument,
// oldest first, at most its second: retention's batch. (A finished task
// is never ready; saying so lets PostgreSQL's partial index serve.)
const FinishedBefore = `SELECT namespace, id FROM tasks WHERE finished_at < ? AND state <> 'ready' ORDER BY finished_at LIMIT ?`

// ReadyLanes walks the distinct lanes of a queue's ready tasks, one seek
// each (a loose index scan): arguments namespace, queue twice.
func (d Dialect) ReadyLanes(ns, queue string) (string, []any) {
	return `WITH RECURSIVE l(lane) AS (
  SELECT (SELECT lane FROM tasks WHERE ` + readyIn + ` ORDER BY ` + d.readyLeading + `lane LIMIT 1)
  UNION ALL
  SELECT (SELECT lane FROM tasks WHERE ` + readyIn + ` AND lane > l.lane ORDER BY ` + d.readyLeading + `lane LIMIT 1)
  FROM l WHERE l.lane IS NOT NULL)
SELECT lane FROM l WHERE lane IS NOT NULL`, []any{ns, queue, ns, queue}
}

// readyPriorities walks the distinct priorities of a lane's ready tasks,
// highest first, one seek each (a loose index scan, which neither engine
// does by itself): arguments namespace, queue, lane twice.
func (d Dialect) readyPriorities() string {
	return `WITH RECURSIVE p(prio) AS (
  SELECT (SELECT priority FROM tasks WHERE ` + readyOf + ` ORDER BY ` + d.readyLeading + `lane, priority DESC LIMIT 1)
  UNION ALL
  SELECT (SELECT priority FROM tasks WHERE ` + readyOf + ` AND priority < p.prio
    ORDER BY ` + d.readyLeading + `lane, priority DESC LIMIT 1) FROM p WHERE p.prio IS NOT NULL)
`
}

// OldestReady is the oldest run_at of a lane's ready tasks, NULL for
// none: the first entry of each priority's range, a seek each. Whether
// its time came is the caller's to judge.
func (d Dialect) OldestReady(ns, queue string, lane int64) (string, []any) {
	return d.readyPriorities() + `SELECT min((SELECT run_at FROM tasks WHERE ` + readyOf + ` AND priority = p.prio
   ORDER BY ` + d.readyLeading + `lane, priority DESC, run_at LIMIT 1)) FROM p WHERE p.prio IS NOT NULL`,
		[]any{ns, queue, lane, ns, queue, lane, ns, queue, lane}
}

// Scheduled counts a lane's ready tasks whose run_at is after now: per
// priority, the range past now, so it costs the scheduled tasks and a
// seek per priority, not the tasks that are due. The range is counted in
// the index's order: a count alone leaves PostgreSQL free to pick any
// index that holds the namespace, and on a table it has no statistics of
// yet it picked the primary key, walking every task of the namespace.
func (d Dialect) Scheduled(ns, queue string, lane int64, now time.Time) (string, []any) {
	return d.readyPriorities() + `SELECT coalesce(sum((SELECT count(*) FROM (SELECT run_at FROM tasks WHERE ` + readyOf + `
     AND priority = p.prio AND run_at > ? ORDER BY ` + d.readyLeading + `lane, priority DESC, run_at) s)), 0)
 FROM p WHERE p.prio IS NOT NULL`, []any{ns, queue, lane, ns, queue, lane, ns, queue, lane, now}
}

// LaneHead is a lane's first claimable task in claim order: its
// priority, run_at and id. Arguments: namespace, queue, lane, now.
func (d Dialect) LaneHead() string {
	return `SELECT priority, run_at, id FROM tasks WHERE ` + Claimable + ` ORDER BY ` + d.ClaimOrder() + ` LIMIT 1`
}

// LaneReady counts a lane's ready tasks in the index's order (Scheduled
// says why): arguments namespace, queue, lane.
func (d Dialect) LaneReady() string {
	return `SELECT count(*) FROM (SELECT run_at FROM tasks WHERE ` + readyOf + ` ORDER BY ` + d.ClaimOrder() + `) s`
}

// PublicOldestReady and PublicScheduled are the same for a queue's public
// tasks, from public_ready (which holds only them, by run_at).
const (
	PublicOldestReady = `SELECT run_at FROM public_ready WHERE namespace = ? AND queue = ? ORDER BY run_at LIMIT 1`
	PublicScheduled   = `SELECT count(*) FROM public_ready WHERE namespace = ? AND queue = ? AND run_at > ?`
)

// StateCounts reads a namespace's task counts, a row per queue (summed
// over visibilities and shards): queue, total, then CountedStates' columns.
func StateCounts(ns string, v store.Visibility) (string, []any) {
	sql, args := `SELECT queue, sum(total), sum(leased), sum(paused), sum(succeeded), sum(dead), sum(canceled), sum(waiting), sum(gated)
 FROM task_counts WHERE namespace = ?`, []any{ns}
	if v == store.PublicOnly {
		sql, args = sql+` AND public = ?`, append(args, true)
	}
	return sql + ` GROUP BY queue ORDER BY queue`, args
}

// CountedStates are the stored states with a column of their own in
// task_counts, in StateCounts' order; ready is the total less them.
var CountedStates = [...]string{tessera.StateLeased, tessera.StatePaused, tessera.StateSucceeded, tessera.StateDead, tessera.StateCanceled,
	tessera.StateWaiting, tessera.StateGated}

// QueueCounts turns one row of StateCounts (a queue's total, then the
// counted states in order) into a count per stored state, ready included.
func QueueCounts(queue string, total int64, counted [len(CountedStates)]int64) []store.QueueCount {
	out := make([]store.QueueCount, 0, len(CountedStates)+1)
	ready := total
	for i, st := range CountedStates {
		out = append(out, store.QueueCount{Queue: queue, State: st, Count: int(counted[i])})
		ready -= counted[i]
	}
	return append(out, store.QueueCount{Queue: queue, State: tessera.StateReady, Count: int(ready)})
}

// The statements of unique keys (migration 0017 on SQLite, 0018 on
// PostgreSQL): an unfinished task holds its key in task_unique.
const (
	UniqueTake = `INSERT INTO task_unique (namespace, queue, unique_key, task_id) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`
	UniqueFree = `DELETE FROM task_unique WHERE namespace = ? AND queue = ? AND unique_key = ? AND task_id = ?`
	// TaskByUniqueKey reads the task that holds a key: one seek in
	// task_unique, one in tasks.
	TaskByUniqueKey = `SELECT ` + TaskCols + ` FROM tasks WHERE namespace = ? AND id =
 (SELECT task_id FROM task_unique WHERE namespace = ? AND queue = ? AND unique_key = ?)`
)

// The statements of debounce keys: the task a key points at, which an
// enqueue of the key moves on while it has not been claimed.
const (
	DebounceHolder = `SELECT task_id FROM task_debounce WHERE namespace = ? AND queue = ? AND debounce_key = ?`
	DebounceTake   = `INSERT INTO task_debounce (namespace, queue, debounce_key, task_id) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`
	DebounceMove   = `UPDATE task_debounce SET task_id = ? WHERE namespace = ? AND queue = ? AND debounce_key = ? AND task_id = ?`
	DebounceFree   = `DELETE FROM task_debounce WHERE namespace = ? AND queue = ? AND debounce_key = ? AND task_id = ?`
)

// DebounceFreed says a task's write finishes a task that a debounce key
// may still point at: the key is then free.
func DebounceFreed(before, after *tessera.Task) bool {
	return after.DebounceKey != "" && before.FinishedAt == nil && after.FinishedAt != nil
}

// UniqueChange says what a task's write does to its unique key: a task
// that finishes frees it, one that comes back from finished (a retry)
// takes it again.
func UniqueChange(before, after *tessera.Task) (take, free bool) {
	if after.UniqueKey == "" {
		return false, false
	}
	return before.FinishedAt != nil && after.FinishedAt == nil, before.FinishedAt == nil && after.FinishedAt != nil
}
