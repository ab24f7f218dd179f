package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The MCP tasks extension (io.modelcontextprotocol/tasks, on the
// 2026-07-28 lane): run_task hands work off as a Tessera task and answers
// a task handle in lieu of a tool result; tasks/get, tasks/update and
// tasks/cancel follow the handle. The handle is the task itself — its
// namespace and id (a ULID: 80 random bits), good only for the principal
// that enqueued it — so it is durable before the answer (the enqueue's
// commit), any node answers for it, and it costs no row beyond its task's.
// Each tasks/* call runs as get_task or cancel_task through the operation
// table: admitted, audited and counted as those are.

const (
	tasksExtension = "io.modelcontextprotocol/tasks"
	// CodeMissingCapability is the revision's "Missing required client
	// capability".
	CodeMissingCapability = -32021
	runTaskTool           = "run_task"
	// taskPollMs is the polling interval a handle suggests: a worker's
	// task runs for seconds to hours, so a poll every two seconds tells a
	// client soon enough without keeping a node busy answering.
	taskPollMs = 2000
)

// tasksCapability is the extension as the server advertises it.
var tasksCapability = map[string]any{tasksExtension: map[string]any{}}

// declaresTasks reports whether a request's client capabilities name the
// tasks extension.
func declaresTasks(caps json.RawMessage) bool {
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	_, ok := c.Extensions[tasksExtension]
	return ok
}

func missingTasksCapability() *Error {
	e := rpcErr(CodeMissingCapability, 0, "Missing required client capability: %s hands work off as a task; declare the %s extension in _meta %s",
		runTaskTool, tasksExtension, metaClientCapabilities)
	e.Data = map[string]any{"requiredCapabilities": map[string]any{"extensions": tasksCapability}}
	return e
}

// taskHandle is a Tessera task as the extension's Task shows it, with the
// fields of its status (tasks/get's DetailedTask).
type taskHandle struct {
	resultMeta
	TaskID         string      `json:"taskId"`
	Status         string      `json:"status"`
	StatusMessage  string      `json:"statusMessage,omitempty"`
	CreatedAt      string      `json:"createdAt"`
	LastUpdatedAt  string      `json:"lastUpdatedAt"`
	TTLMs          *int64      `json:"ttlMs"`
	PollIntervalMs int         `json:"pollIntervalMs,omitempty"`
	Result         *callResult `json:"result,omitempty"`
}

// handleID names a task to its maker: namespace:task_id.
func handleID(t *tessera.Task) string { return t.Namespace + ":" + t.ID }

// taskView shows t as the extension's Task. A task that ended holds its
// tool result: what its worker submitted, or the error it died of (a
// tool-level failure, isError — "failed" is kept for JSON-RPC faults, as
// the extension says).
func (e *Endpoint) taskView(c *call, t *tessera.Task, resultType string) taskHandle {
	h := taskHandle{resultMeta: e.meta(c), TaskID: handleID(t), CreatedAt: stamp(t.CreatedAt), LastUpdatedAt: stamp(t.UpdatedAt),
		TTLMs: e.taskTTL(t), PollIntervalMs: taskPollMs}
	h.ResultType = resultType
	switch t.State {
	case tessera.StateSucceeded:
		h.Status, h.StatusMessage = "completed", "succeeded"
		var out any = map[string]any{}
		if len(t.Result) > 0 {
			out = json.RawMessage(t.Result)
			if t.Result[0] != '{' {
				out = map[string]any{"result": json.RawMessage(t.Result)} // structuredContent is an object
			}
		}
		r := e.result(c, out, false) // a 2026-07-28 CallToolResult, resultType and all
		h.Result = &r
	case tessera.StateDead:
		h.Status, h.StatusMessage = "completed", "dead: "+t.Error
		r := callResult{resultMeta: e.meta(c), Content: []content{{Type: "text", Text: t.Error}}, StructuredContent: map[string]any{"state": t.State, "error": t.Error}, IsError: true}
		h.Result = &r
	case tessera.StateCanceled:
		h.Status, h.StatusMessage = "cancelled", "canceled"
	default:
		h.Status, h.StatusMessage = "working", workingMessage(t)
	}
	return h
}

// workingMessage says where a task that has not ended is.
func workingMessage(t *tessera.Task) string {
	switch t.State {
	case tessera.StateLeased:
		msg := "leased: a worker is running it"
		if len(t.Progress) > 0 {
			msg += "; progress " + string(t.Progress)
		}
		return input.Clip(msg)
	case tessera.StateReady:
		return "ready: waiting for a worker to claim it"
	case tessera.StateScheduled:
		return "scheduled: ready at " + stamp(t.RunAt)
	case tessera.StateWaiting:
		return "waiting: for the tasks it runs after"
	case tessera.StatePaused:
		return "paused: not claimed until resumed"
	}
	return t.State
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// taskTTL is how long the handle lives from its creation: until the
// retention of finished tasks deletes the task, which counts from its
// end; unknown (null) until it ends, or when finished tasks are kept.
func (e *Endpoint) taskTTL(t *tessera.Task) *int64 {
	keep := e.exec.Core().Config().RetainFinished
	if keep <= 0 || t.FinishedAt == nil {
		return nil
	}
	ms := t.FinishedAt.Add(keep).Sub(t.CreatedAt).Milliseconds()
	return &ms
}

// runTask enqueues a task with enqueue_task's arguments and answers its
// handle.
func (e *Endpoint) runTask(ctx context.Context, c *call, args json.RawMessage) (any, *Error) {
	if !c.tasks { // a 2025 request cannot declare it
		return nil, missingTasksCapability()
	}
	res := e.do(ctx, c, runTaskOp, args)
	if res.Err != nil {
		return e.result(c, ops.ProblemOf(res.Err, res.Status), true), nil
	}
	return e.taskView(c, res.Out.(*tessera.Task), "task"), nil
}

var (
	runTaskOp = ops.ByTool(runTaskTool)
	getOp     = ops.ByTool("get_task")
	cancelOp  = ops.ByTool("cancel_task")
)

// taskMethod answers tasks/get, tasks/update and tasks/cancel.
func (e *Endpoint) taskMethod(ctx context.Context, c *call) (any, *Error) {
	var p struct {
		TaskID         string                     `json:"taskId"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if c.msg.Params == nil || json.Unmarshal(c.msg.Params, &p) != nil || p.TaskID == "" {
		return nil, rpcErr(CodeInvalidParams, 0, "%s needs params.taskId, a string", c.msg.Method)
	}
	t, err := e.ownTask(ctx, c, p.TaskID)
	if err != nil {
		return nil, err
	}
	switch c.msg.Method {
	case "tasks/cancel":
		args, _ := json.Marshal(map[string]string{"namespace": t.Namespace, "task_id": t.ID})
		res := e.do(ctx, c, cancelOp, args)
		// Cancellation is cooperative and acknowledged at once: a task
		// that ended meanwhile keeps its end.
		if res.Err != nil && res.Err.Code != tessera.CodeInvalidState {
			return nil, rpcErr(CodeInternalError, res.Status, "%s", res.Err.Message)
		}
		return e.meta(c), nil
	case "tasks/update":
		// No input request is outstanding on any task yet: the extension
		// has a server ignore answers to keys it did not ask.
		return e.meta(c), nil
	}
	return e.taskView(c, t, "complete"), nil
}

// ownTask reads the task a handle names, if the caller's principal made
// it. Any other handle — malformed, unknown, deleted by retention, in a
// namespace the key cannot read, another principal's — is the same
// invalid-params error, so a handle's existence does not leak.
func (e *Endpoint) ownTask(ctx context.Context, c *call, handle string) (*tessera.Task, *Error) {
	unknown := rpcErr(CodeInvalidParams, 0, "unknown task %q", input.Clip(handle))
	ns, id, ok := strings.Cut(handle, ":")
	if !ok || !tessera.ValidNamespace(ns) || c.actor == nil {
		return nil, unknown
	}
	args, _ := json.Marshal(map[string]string{"namespace": ns, "task_id": id})
	res := e.do(ctx, c, getOp, args)
	if res.Err != nil {
		switch res.Status {
		case http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound:
			return nil, unknown
		}
		return nil, rpcErr(CodeInternalError, res.Status, "%s", res.Err.Message)
	}
	t := res.Out.(*tessera.Task)
	if t.CreatedBy != c.actor.Principal.ID {
		return nil, unknown
	}
	return t, nil
}

// taskMethodName reports whether method is one of the extension's.
func taskMethodName(method string) bool {
	switch method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		return true
	}
	return false
}
