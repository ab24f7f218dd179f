package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/elicit"
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
	// InputRequests are a gated task's open gates, by key, as the
	// elicitations a client puts to its user.
	InputRequests map[string]inputRequest `json:"inputRequests,omitempty"`
}

// inputRequest is an open gate as an elicitation/create request.
type inputRequest struct {
	Method string      `json:"method"`
	Params elicitation `json:"params"`
}

type elicitation struct {
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
	ElicitationID   string          `json:"elicitationId,omitempty"`
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
	case tessera.StateGated:
		h.Status, h.InputRequests = "input_required", e.inputRequests(t)
		h.StatusMessage = fmt.Sprintf("gated: waiting for %d answer(s)", len(h.InputRequests))
	default:
		h.Status, h.StatusMessage = "working", workingMessage(t)
	}
	return h
}

// inputRequests are t's open gates as elicitations: a form (an approval is
// a form with no fields), or for a url gate — anything sensitive, which
// must not pass through the client — the console's page of the task,
// which shows the gate's link and takes its answer.
func (e *Endpoint) inputRequests(t *tessera.Task) map[string]inputRequest {
	out := map[string]inputRequest{}
	for _, g := range t.Gates {
		if !g.Open() {
			continue
		}
		el := elicitation{Mode: "form", Message: g.Message, RequestedSchema: g.Schema}
		switch g.Kind {
		case tessera.GateURL:
			el = elicitation{Mode: "url", Message: g.Message, ElicitationID: handleID(t) + ":" + g.Key,
				URL: e.cfg.PublicURL + "/console#/ns/" + url.PathEscape(t.Namespace) + "/task/" + url.PathEscape(t.ID)}
		case tessera.GateApproval:
			el.RequestedSchema = elicit.Empty
		}
		out[g.Key] = inputRequest{Method: "elicitation/create", Params: el}
	}
	return out
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
	answerOp  = ops.ByTool("answer_gate")
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
		if err := e.answerGates(ctx, c, t, p.InputResponses); err != nil {
			return nil, err
		}
		return e.meta(c), nil
	}
	return e.taskView(c, t, "complete"), nil
}

// answerGates answers t's open gates from a tasks/update's input
// responses (elicitation results), each as answer_gate would. The
// extension has a server ignore answers to keys it did not ask, and a
// gate answered meanwhile (another client, the console) keeps its first
// answer; an answer its gate refuses (content off its schema) is invalid
// params, naming the field.
func (e *Endpoint) answerGates(ctx context.Context, c *call, t *tessera.Task, responses map[string]json.RawMessage) *Error {
	for _, g := range t.Gates {
		raw, asked := responses[g.Key]
		if !asked || !g.Open() {
			continue
		}
		var r struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content,omitempty"`
		}
		if json.Unmarshal(raw, &r) != nil {
			return rpcErr(CodeInvalidParams, 0, "inputResponses.%s must be an elicitation result {action, content}", g.Key)
		}
		args, _ := json.Marshal(map[string]any{"namespace": t.Namespace, "task_id": t.ID, "key": g.Key, "action": r.Action, "content": r.Content})
		res := e.do(ctx, c, answerOp, args)
		switch {
		case res.Err == nil, res.Err.Code == tessera.CodeInvalidState:
		case res.Status == http.StatusBadRequest:
			return rpcErr(CodeInvalidParams, 0, "inputResponses.%s: %s", g.Key, res.Err.Message)
		default:
			return rpcErr(CodeInternalError, res.Status, "%s", res.Err.Message)
		}
	}
	return nil
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
