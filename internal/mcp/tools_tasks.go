package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// toolTable is every tool, in the order tools/list shows them (a fixed
// order, so clients and prompt caches see the same list each time).
func (e *Endpoint) toolTable() []*tool {
	return slices.Concat(e.accessTools(), e.taskTools(), e.recordTools())
}

func (e *Endpoint) taskTools() []*tool {
	return []*tool{
		toolFunc(tool{name: "enqueue_task", title: "Enqueue a task", op: core.ActTaskEnqueue,
			description: "Put a task on a queue for a worker to claim. Give it a title, a brief (instructions for whoever works it) and a JSON payload; " +
				"optionally a queue (default \"default\"), priority (higher first), labels, max_attempts (default 3) and run_at to schedule it. " +
				"Pass an idempotency_key to make a retry safe: the same key and arguments return the first task instead of making another.",
			out: tessera.Task{}}, e.enqueue),
		toolFunc(tool{name: "enqueue_tasks", title: "Enqueue tasks in one call", op: core.ActTaskEnqueueBatch, args: enqueueTasksShape{},
			description: "Put 1–500 tasks on queues in one call, all or none: each task in tasks takes enqueue_task's fields (title, brief, payload, queue, priority, labels, public, max_attempts, run_at). " +
				"If any task is invalid, nothing is enqueued and the error's field names it, e.g. tasks[3].title. The answer lists the tasks in the order given. " +
				"Pass an idempotency_key to make a retry safe: the same key and tasks return the first answer instead of enqueuing them again.",
			out: core.TaskBatch{}}, e.enqueueTasks),
		toolFunc(tool{name: "list_tasks", title: "List tasks", op: core.ActTaskList, readOnly: true,
			description: "List tasks newest first, optionally only one state (scheduled, ready, leased, paused, succeeded, dead, canceled), queue or label. " +
				"Pages hold up to limit tasks (default 50, at most 200); pass next_cursor back as cursor for the next page.",
			out: core.TaskPage{}}, e.listTasks),
		toolFunc(tool{name: "get_task", title: "Get a task", op: core.ActTaskGet, readOnly: true,
			description: "Read one task by task_id, with its runs (one per claim: holder, attempt, outcome).",
			out:         tessera.Task{}}, e.getTask),
		toolFunc(tool{name: "counts", title: "Count tasks", op: core.ActCounts, readOnly: true,
			description: "Count the namespace's tasks by queue and state: a quick look at how much work waits, runs and is done.",
			out:         countsResult{}}, e.counts),
		toolFunc(tool{name: "claim_task", title: "Claim the next task", op: core.ActClaim,
			description: "Claim the next ready task of a queue (highest priority, then oldest) with a lease of lease_seconds (10–3600, default 300). " +
				"The answer holds the lease (keep its token: heartbeat, write_record and submit_task need it as lease_token) and the task with its brief and payload. " +
				"When nothing is ready the answer is {\"lease\": null, \"retry_after\": N}: wait N seconds before asking again, or pass wait_seconds (up to 20) to wait for work to arrive.",
			out: core.Claimed{}}, e.claim),
		toolFunc(tool{name: "heartbeat", title: "Extend a lease", op: core.ActHeartbeat, idempotent: true,
			description: "Keep a claimed task's lease alive before its expires_at, optionally reporting progress (JSON, at most 4 KiB) or a new lease_seconds. " +
				"If the answer says cancel_requested, stop working: the task was canceled and the lease is over. A lease_lost error means the lease lapsed; drop the work.",
			out: core.Heartbeat{}}, e.heartbeat),
		toolFunc(tool{name: "submit_task", title: "Submit a result", op: core.ActSubmit, destructive: true, idempotent: true,
			description: "End your run of a claimed task: outcome \"succeeded\" with a JSON result, or \"failed\" with an error message (the task is retried with backoff until its attempts run out). " +
				"This ends the lease. Pass an idempotency_key so that retrying after a lost answer does not submit twice.",
			out: tessera.Task{}}, e.submit),
		toolFunc(tool{name: "release_task", title: "Give a task back", op: core.ActRelease, idempotent: true,
			description: "Give a claimed task back to its queue without using an attempt, when you cannot work it. This ends the lease.",
			out:         tessera.Task{}}, e.release),
		toolFunc(tool{name: "claim_events", title: "Events of a held task", op: core.ActClaimEvents, readOnly: true,
			description: "Read what the holder of a task's lease should learn — notes from producers, a cancel request, a lapsed lease — after sequence number since (0 for all). " +
				"wait (0–30 seconds) long-polls until something arrives. Pass next_since back as since next time.",
			out: core.ClaimEvents{}}, e.claimEvents),
	}
}

// The argument structs: the HTTP API's body fields, and its path and
// query parameters under their own names.
type enqueueArgs struct {
	nsArg
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	core.EnqueueParams
}

// enqueueTasksArgs are enqueue_tasks's arguments as decoded: each task is
// then decoded on its own (core.DecodeBatch), as the HTTP route does, so a
// fault is named tasks[i].field alike.
type enqueueTasksArgs struct {
	nsArg
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Tasks          []json.RawMessage `json:"tasks"`
}

// enqueueTasksShape is enqueue_tasks's arguments as described.
type enqueueTasksShape struct {
	nsArg
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	core.EnqueueBatchParams
}

type listTasksArgs struct {
	nsArg
	State  string `json:"state,omitempty"`
	Queue  string `json:"queue,omitempty"`
	Label  string `json:"label,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

type taskArg struct {
	nsArg
	TaskID string `json:"task_id"`
}

// check holds task_id to the shape ids have, as the HTTP adapter holds a
// task id in a path: anything else cannot exist, so it is not found.
func (a *taskArg) check() error { return checkID("task", a.TaskID) }

type claimArgs struct {
	nsArg
	core.ClaimParams
}

type heartbeatArgs struct {
	taskArg
	core.HeartbeatParams
}

type submitArgs struct {
	taskArg
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	core.SubmitParams
}

type releaseArgs struct {
	taskArg
	core.ReleaseParams
}

type claimEventsArgs struct {
	taskArg
	Since int64 `json:"since,omitempty"`
	Wait  int   `json:"wait,omitempty"`
}

// countsResult is the answer of counts: queue → state → tasks.
type countsResult struct {
	Queues map[string]map[string]int `json:"queues"`
}

// idempotencyKey checks an idempotency_key argument as the HTTP adapter
// checks the Idempotency-Key header.
func idempotencyKey(k string) (string, error) {
	if k != "" && !core.ValidIdempotencyKey(k) {
		return "", tessera.Invalid("idempotency_key", "idempotency_key must be 1–%d printable ASCII characters", core.MaxIdempotencyKeyLen)
	}
	return k, nil
}

func (e *Endpoint) enqueue(ctx context.Context, c *toolCall, a *enqueueArgs) (any, error) {
	key, err := idempotencyKey(a.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return e.core.Enqueue(ctx, c.actor, c.ns, a.EnqueueParams, key)
}

func (e *Endpoint) enqueueTasks(ctx context.Context, c *toolCall, a *enqueueTasksArgs) (any, error) {
	key, err := idempotencyKey(a.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	tasks, err := core.DecodeBatch(a.Tasks, c.edge.Decode)
	if err != nil {
		return nil, err
	}
	return e.core.EnqueueBatch(ctx, c.actor, c.ns, tasks, key)
}

func (e *Endpoint) listTasks(ctx context.Context, c *toolCall, a *listTasksArgs) (any, error) {
	if err := checkQuery(map[string]string{"state": a.State, "queue": a.Queue, "label": a.Label, "cursor": a.Cursor}); err != nil {
		return nil, err
	}
	return e.core.ListTasks(ctx, c.actor, c.ns, core.ListParams{State: a.State, Queue: a.Queue, Label: a.Label, Cursor: a.Cursor, Limit: a.Limit})
}

func (e *Endpoint) getTask(ctx context.Context, c *toolCall, a *taskArg) (any, error) {
	return e.core.GetTask(ctx, c.actor, c.ns, a.TaskID)
}

func (e *Endpoint) counts(ctx context.Context, c *toolCall, _ *nsArg) (any, error) {
	counts, err := e.core.Counts(ctx, c.actor, c.ns)
	if err != nil {
		return nil, err
	}
	return countsResult{Queues: counts}, nil
}

func (e *Endpoint) claim(ctx context.Context, c *toolCall, a *claimArgs) (any, error) {
	return e.core.Claim(ctx, c.actor, c.ns, a.ClaimParams)
}

func (e *Endpoint) heartbeat(ctx context.Context, c *toolCall, a *heartbeatArgs) (any, error) {
	return e.core.Heartbeat(ctx, c.actor, c.ns, a.TaskID, a.HeartbeatParams)
}

func (e *Endpoint) submit(ctx context.Context, c *toolCall, a *submitArgs) (any, error) {
	key, err := idempotencyKey(a.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return e.core.Submit(ctx, c.actor, c.ns, a.TaskID, a.SubmitParams, key)
}

func (e *Endpoint) release(ctx context.Context, c *toolCall, a *releaseArgs) (any, error) {
	return e.core.Release(ctx, c.actor, c.ns, a.TaskID, a.ReleaseParams)
}

func (e *Endpoint) claimEvents(ctx context.Context, c *toolCall, a *claimEventsArgs) (any, error) {
	if a.Wait < 0 || a.Wait > core.MaxEventsWait {
		return nil, tessera.Invalid("wait", "wait must be 0–%d seconds", core.MaxEventsWait)
	}
	return e.core.Events(ctx, c.actor, c.ns, a.TaskID, a.Since, time.Duration(a.Wait)*time.Second)
}
