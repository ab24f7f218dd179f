package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
)

// The live event stream and what the operator console reads and does
// (issue 29): every console action is one of these operations, or a task
// operation of tasks.go, so the server checks its scope like any call.

// ULIDFormat is an event id's shape: 26 Crockford base32 characters.
var ULIDFormat = input.NewFormat(`^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$`, 26)

// streamIn is what a stream follows.
type streamIn struct {
	Queue       string `json:"queue,omitempty" in:"query"`
	Task        string `json:"task,omitempty" in:"query"`
	LastEventID string `json:"last_event_id,omitempty" in:"header=Last-Event-ID"`
}

func (streamIn) Bounds() input.Bounds {
	return input.Bounds{
		"queue": input.Match(input.NameFormat).Doc("only events of this queue (records and blobs written under its tasks' leases too)"),
		"task":  input.Match(input.IDFormat).Doc("only events about this task, or written under its leases"),
		"last_event_id": input.Match(ULIDFormat).Doc("resume after this event id (what the stream sent as id:); " +
			"an id older than the 24 h the server keeps gets an event: gap first"),
	}
}

// queueRef names a queue, in the path.
type queueRef struct {
	Queue string `json:"queue" in:"path"`
}

func (queueRef) Bounds() input.Bounds {
	return input.Bounds{"queue": input.Match(input.NameFormat).Doc("the queue")}
}

type purgeIn struct {
	queueRef
	States []string `json:"states,omitempty"`
}

func (purgeIn) Bounds() input.Bounds {
	return input.Bounds{"states": input.List(0, len(core.FinishedStates), input.Enum(core.FinishedStates...)).
		Doc("the finished states to purge (default all: succeeded, dead and canceled)")}
}

// streamOnly says why the stream is not a tool.
const streamOnly = "a stream of Server-Sent Events; the stateless MCP transport has none (list_tasks and task_trail read the same)"

var consoleOps = []*Op{
	op(Op{Name: core.ActEvents, Summary: "The namespace's events as they happen (Server-Sent Events)", Public: true, Only: streamOnly,
		Description: "A text/event-stream of the namespace's changes as they commit: tasks enqueued, claimed, heartbeats (at most one per task per 10 s), " +
			"succeeded, failed, dead, canceled, released, retried; queues paused, resumed and purged; records written and blobs stored. " +
			"Each event's id resumes the stream after it (Last-Event-ID) without loss within 24 h; an older id is answered with an event: gap first. " +
			"Comments keep an idle stream alive every 15 s. Without a key, main's stream carries its public events, as the board shows them.",
		HTTP: &Route{Method: "GET", Path: "/v1/events", Namespaced: true, Stream: true}},
		func(ctx context.Context, c *Call, in *streamIn) (*core.Event, error) {
			if c.Events == nil {
				return nil, errors.New("ops: a stream without a sink")
			}
			return nil, c.core.Stream(ctx, c.Actor, c.NS, core.StreamParams{Queue: in.Queue, TaskID: in.Task, LastEventID: in.LastEventID}, c.Events)
		}),
	op(Op{Name: core.ActTaskTrail, Summary: "What happened to a task: its events of the last 24 h and its notes",
		Description: "Read a task's trail by task_id: the events about it of the last 24 h (enqueued, claimed, heartbeats, submitted, lapsed, canceled, retried...) " +
			"and the records and blobs written under its leases, oldest first; and its notes, cancel requests and lapses, which live as long as the task.",
		HTTP: &Route{Method: "GET", Path: "/v1/tasks/{task_id}/trail", Namespaced: true},
		Tool: &Tool{Name: "task_trail", Title: "A task's trail", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *taskRef) (*core.Trail, error) {
			return c.core.TaskTrail(ctx, c.Actor, c.NS, in.TaskID)
		}),
	op(Op{Name: core.ActTaskBulk, Summary: fmt.Sprintf("Retry or cancel every task a filter selects (at most %d), after a dry run counted them", core.MaxBulk),
		Description: fmt.Sprintf("Retry (dead and canceled tasks) or cancel (tasks not finished) every task a filter selects — queue, state, text in the title, "+
			"created_after and created_before — at most the newest %d per call. First call with dry_run: true to count them; then call again with expect set to that count: ", core.MaxBulk) +
			"the change is made only if the filter still selects as many (else version_conflict: count again). The answer lists the tasks changed; more: true says others remain.",
		HTTP: &Route{Method: "POST", Path: "/v1/tasks/bulk", Namespaced: true},
		Tool: &Tool{Name: "bulk_change_tasks", Title: "Retry or cancel tasks in bulk", Destructive: true}},
		func(ctx context.Context, c *Call, in *core.BulkParams) (*core.Bulk, error) {
			return c.core.BulkChange(ctx, c.Actor, c.NS, *in)
		}),
	op(Op{Name: core.ActQueueList, Summary: "The namespace's queues: depth by state, leases, oldest ready wait, pause, throughput",
		Description: fmt.Sprintf("List the namespace's queues: tasks by state, leases live and lapsed, how long the oldest ready task has waited, "+
			"whether the queue is paused, and the runs that ended in each of the last %d minutes (succeeded, failed with attempts left, dead).", core.ThroughputMinutes),
		HTTP: &Route{Method: "GET", Path: "/v1/queues", Namespaced: true},
		Tool: &Tool{Name: "list_queues", Title: "List queues", ReadOnly: true}},
		func(ctx context.Context, c *Call, _ *none) (*core.QueuesPage, error) {
			return c.core.ListQueues(ctx, c.Actor, c.NS)
		}),
	op(Op{Name: core.ActQueuePause, Summary: "Pause a queue: claims on it get nothing until it is resumed",
		Description: "Pause a queue: claims on it find nothing (an empty answer with queue_paused: true) until it is resumed; leases held already run on.",
		HTTP:        &Route{Method: "POST", Path: "/v1/queues/{queue}/pause", Namespaced: true},
		Tool:        &Tool{Name: "pause_queue", Title: "Pause a queue", Idempotent: true}},
		func(ctx context.Context, c *Call, in *queueRef) (*core.QueueState, error) {
			return c.core.PauseQueue(ctx, c.Actor, c.NS, in.Queue)
		}),
	op(Op{Name: core.ActQueueResume, Summary: "Resume a paused queue",
		Description: "Resume a paused queue: claims on it are granted again, and claims waiting on it wake.",
		HTTP:        &Route{Method: "POST", Path: "/v1/queues/{queue}/resume", Namespaced: true},
		Tool:        &Tool{Name: "resume_queue", Title: "Resume a queue", Idempotent: true}},
		func(ctx context.Context, c *Call, in *queueRef) (*core.QueueState, error) {
			return c.core.ResumeQueue(ctx, c.Actor, c.NS, in.Queue)
		}),
	op(Op{Name: core.ActQueuePurge, Summary: fmt.Sprintf("Delete a queue's finished tasks (at most %d a call)", core.MaxPurge),
		Description: fmt.Sprintf("Delete up to %d finished tasks of a queue — succeeded, dead and canceled, or only the states given — with their runs and notes. ", core.MaxPurge) +
			"more: true says others remain: call again. The audit trail keeps what happened to them for 24 h.",
		HTTP: &Route{Method: "POST", Path: "/v1/queues/{queue}/purge", Namespaced: true},
		Tool: &Tool{Name: "purge_queue", Title: "Purge a queue's finished tasks", Destructive: true}},
		func(ctx context.Context, c *Call, in *purgeIn) (*core.QueuePurged, error) {
			return c.core.PurgeQueue(ctx, c.Actor, c.NS, in.Queue, in.States)
		}),
}
