package ops

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// taskRef names a task: a path segment over HTTP, task_id over MCP.
type taskRef struct {
	TaskID string `json:"task_id" in:"path"`
}

func (taskRef) Bounds() input.Bounds {
	return input.Bounds{"task_id": input.ID("task").Doc("the task's id")}
}

// idempotency is the Idempotency-Key header, or the idempotency_key
// argument (SPEC §5).
type idempotency struct {
	IdempotencyKey string `json:"idempotency_key,omitempty" in:"header=Idempotency-Key"`
}

// IdempotencyKeyFormat is 1–128 printable ASCII characters.
var IdempotencyKeyFormat = input.NewFormat(fmt.Sprintf(`^[\x21-\x7e]{1,%d}$`, core.MaxIdempotencyKeyLen), core.MaxIdempotencyKeyLen)

func (idempotency) Bounds() input.Bounds {
	return input.Bounds{"idempotency_key": input.Match(IdempotencyKeyFormat)}
}

// page is a listing's cursor and size.
type page struct {
	Cursor string `json:"cursor,omitempty" in:"query"`
	Limit  *int   `json:"limit,omitempty" in:"query"`
}

// MaxCursorLen bounds a cursor, as every query parameter is bounded.
const MaxCursorLen = 256

func (page) Bounds() input.Bounds {
	return input.Bounds{
		"cursor": input.Text(MaxCursorLen).Doc("next_cursor of the previous page"),
		"limit":  input.Range(1, core.MaxListLimit).Default(core.DefaultListSize).Doc(fmt.Sprintf("page size, 1–%d (default %d)", core.MaxListLimit, core.DefaultListSize)),
	}
}

func (p *page) limit() int { return *p.Limit }

type enqueueIn struct {
	idempotency
	core.EnqueueParams
}

type enqueueBatchIn struct {
	idempotency
	core.EnqueueBatchParams
}

type listTasksIn struct {
	State         string     `json:"state,omitempty" in:"query"`
	Queue         string     `json:"queue,omitempty" in:"query"`
	Label         string     `json:"label,omitempty" in:"query"`
	Title         string     `json:"title,omitempty" in:"query"`
	CreatedAfter  *time.Time `json:"created_after,omitempty" in:"query"`
	CreatedBefore *time.Time `json:"created_before,omitempty" in:"query"`
	page
}

func (listTasksIn) Bounds() input.Bounds {
	sel := core.Selection{}.Bounds()
	return input.Bounds{
		"state":          sel["state"],
		"queue":          sel["queue"],
		"label":          input.Match(input.NameFormat).Doc("only tasks with this label"),
		"title":          sel["title"],
		"created_after":  sel["created_after"],
		"created_before": sel["created_before"],
	}
}

type retryIn struct {
	taskRef
	Dependents bool `json:"dependents,omitempty"`
}

func (retryIn) Bounds() input.Bounds {
	return input.Bounds{"dependents": input.Bound{}.Doc("also make the tasks this one's failure canceled wait for it again, and theirs in turn")}
}

type dependentsIn struct {
	taskRef
	page
}

type noteIn struct {
	taskRef
	Body string `json:"body"`
}

func (noteIn) Bounds() input.Bounds {
	return input.Bounds{"body": input.Length(1, core.MaxNoteLen).Doc("the note, for the lease holder to read in its claim events")}
}

// counts answers the task counts: queue → state → tasks.
type counts struct {
	Queues map[string]map[string]int `json:"queues"`
}

var taskOps = []*Op{
	op(Op{Name: core.ActTaskEnqueue, Summary: "Enqueue a task",
		Description: "Put a task on a queue for a worker to claim. Give it a title, a brief (instructions for whoever works it) and a JSON payload; " +
			"optionally a queue (default \"default\"), priority (higher first), labels, max_attempts (default 3) and run_at to schedule it. " +
			"Pass an idempotency key to make a retry safe: the same key and input return the first task instead of making another. " +
			"Pass a unique_key to keep one unfinished task per key in the queue: while one holds it, the answer is that task with deduplicated true. " +
			"Pass a debounce {key, seconds} to gather a burst of enqueues into one task that runs seconds after the last: the answer is that task with debounced true.",
		HTTP: &Route{Method: "POST", Path: "/v1/tasks", Namespaced: true, Status: http.StatusCreated, Also: []int{http.StatusOK},
			StatusOf: func(out any) int {
				if t := out.(*tessera.Task); t.Deduplicated || t.Debounced {
					return http.StatusOK
				}
				return http.StatusCreated
			}},
		Tool: &Tool{Name: "enqueue_task", Title: "Enqueue a task"}},
		func(ctx context.Context, c *Call, in *enqueueIn) (*tessera.Task, error) {
			return c.core.Enqueue(ctx, c.Actor, c.NS, c.traced(ctx, in.EnqueueParams), in.IdempotencyKey)
		}),
	op(Op{Name: core.ActTaskRun, Summary: "Hand work off as an MCP task",
		Description: "Hand work off to a worker and follow it as an MCP task (the io.modelcontextprotocol/tasks extension of 2026-07-28, which the call must declare): " +
			"enqueues a task with enqueue_task's arguments and answers a task handle at once. tasks/get shows it working while it waits or runs, " +
			"then completed with the worker's submitted result as structuredContent (isError when it failed for good), or cancelled; tasks/cancel cancels it.",
		// Its tool result, when the task ends, is what the worker submitted.
		Tool: &Tool{Name: "run_task", Title: "Hand work off as a task", AnyResult: true},
		Only: "MCP's tasks extension: its answer is a task handle; over HTTP, POST /v1/tasks and GET /v1/tasks/{task_id} do the same"},
		func(ctx context.Context, c *Call, in *enqueueIn) (*tessera.Task, error) {
			return c.core.Enqueue(ctx, c.Actor, c.NS, c.traced(ctx, in.EnqueueParams), in.IdempotencyKey)
		}),
	op(Op{Name: core.ActTaskEnqueueBatch, Summary: fmt.Sprintf("Enqueue 1–%d tasks in one transaction, all or none", core.MaxBatchTasks),
		Description: fmt.Sprintf("Put 1–%d tasks on queues in one call, all or none: each task in tasks takes enqueue_task's fields. ", core.MaxBatchTasks) +
			"If any task is invalid, nothing is enqueued and the error's field names it, e.g. tasks[3].title. The answer lists the tasks in the order given. " +
			"Pass an idempotency key to make a retry safe: the same key and tasks return the first answer instead of enqueuing them again.",
		HTTP: &Route{Method: "POST", Path: "/v1/tasks/batch", Namespaced: true, Status: http.StatusCreated, Also: []int{http.StatusOK},
			StatusOf: func(out any) int {
				for _, t := range out.(*core.TaskBatch).Tasks {
					if !t.Deduplicated && !t.Debounced {
						return http.StatusCreated
					}
				}
				return http.StatusOK // every task was there already
			}},
		Tool: &Tool{Name: "enqueue_tasks", Title: "Enqueue tasks in one call"}},
		func(ctx context.Context, c *Call, in *enqueueBatchIn) (*core.TaskBatch, error) {
			for i := range in.Tasks {
				in.Tasks[i] = c.traced(ctx, in.Tasks[i])
			}
			return c.core.EnqueueBatch(ctx, c.Actor, c.NS, in.Tasks, in.IdempotencyKey)
		}),
	op(Op{Name: core.ActTaskList, Summary: "List tasks, newest first",
		Description: "List tasks newest first, optionally only one state, queue or label, with text in the title, or made within created_after and created_before. " +
			"Pass next_cursor back as cursor for the next page.",
		HTTP: &Route{Method: "GET", Path: "/v1/tasks", Namespaced: true},
		Tool: &Tool{Name: "list_tasks", Title: "List tasks", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *listTasksIn) (*core.TaskPage, error) {
			return c.core.ListTasks(ctx, c.Actor, c.NS, core.ListParams{State: in.State, Queue: in.Queue, Label: in.Label, Cursor: in.Cursor, Limit: in.limit(),
				Title: in.Title, CreatedAfter: in.CreatedAfter, CreatedBefore: in.CreatedBefore})
		}),
	op(Op{Name: core.ActTaskGet, Summary: "A task with its runs",
		Description: "Read one task by task_id, with its runs (one per claim: holder, attempt, start and end, outcome, error).",
		HTTP:        &Route{Method: "GET", Path: "/v1/tasks/{task_id}", Namespaced: true},
		Tool:        &Tool{Name: "get_task", Title: "Get a task", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *taskRef) (*tessera.Task, error) {
			return c.core.GetTask(ctx, c.Actor, c.NS, in.TaskID)
		}),
	changeOp(core.ActTaskCancel, core.ChangeCancel, "cancel_task", "Cancel a task",
		"Cancel a task that has not finished. A leased task is canceled at its holder's next heartbeat or submit, which tells the holder to stop.", true),
	changeOp(core.ActTaskPause, core.ChangePause, "pause_task", "Pause a ready or scheduled task",
		"Pause a ready or scheduled task: it is not claimed until resumed.", false),
	changeOp(core.ActTaskResume, core.ChangeResume, "resume_task", "Resume a paused task",
		"Resume a paused task: it is ready (or scheduled) again.", false),
	gateAnswerOp,
	op(Op{Name: core.ActTaskRetry, Summary: "Retry a dead or canceled task",
		Description: "Retry a dead or canceled task: it is ready again with its attempts reset (waiting, if parents it waits on have not finished). " +
			"With dependents, the tasks its failure canceled wait for it again, and theirs in turn.",
		HTTP: &Route{Method: "POST", Path: "/v1/tasks/{task_id}/retry", Namespaced: true},
		Tool: &Tool{Name: "retry_task", Title: "Retry a dead or canceled task", Idempotent: true}},
		func(ctx context.Context, c *Call, in *retryIn) (*tessera.Task, error) {
			return c.core.ChangeTask(ctx, c.Actor, c.NS, in.TaskID, core.ChangeRetry, in.Dependents)
		}),
	op(Op{Name: core.ActTaskDependents, Summary: "The tasks enqueued after a task",
		Description: "List the tasks enqueued after this one (its children), by id. Pass next_cursor back as cursor for the next page.",
		HTTP:        &Route{Method: "GET", Path: "/v1/tasks/{task_id}/dependents", Namespaced: true},
		Tool:        &Tool{Name: "list_dependents", Title: "List a task's dependents", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *dependentsIn) (*core.TaskPage, error) {
			return c.core.Dependents(ctx, c.Actor, c.NS, in.TaskID, in.Cursor, in.limit())
		}),
	op(Op{Name: core.ActTaskNote, Summary: "Leave a note for the lease holder",
		Description: "Leave a note on a task for whoever holds its lease: it arrives in their claim events. Producers (enqueue scope) and the lease holder may write notes.",
		HTTP:        &Route{Method: "POST", Path: "/v1/tasks/{task_id}/notes", Namespaced: true, Status: http.StatusCreated},
		Tool:        &Tool{Name: "add_note", Title: "Leave a note"}},
		func(ctx context.Context, c *Call, in *noteIn) (*tessera.TaskEvent, error) {
			return c.core.AddNote(ctx, c.Actor, c.NS, in.TaskID, in.Body)
		}),
	op(Op{Name: core.ActCounts, Summary: "Task counts by queue and state",
		Description: "Count the namespace's tasks by queue and state: a quick look at how much work waits, runs and is done.",
		HTTP:        &Route{Method: "GET", Path: "/v1/counts", Namespaced: true},
		Tool:        &Tool{Name: "counts", Title: "Count tasks", ReadOnly: true}},
		func(ctx context.Context, c *Call, _ *none) (*counts, error) {
			q, err := c.core.Counts(ctx, c.Actor, c.NS)
			if err != nil {
				return nil, err
			}
			return &counts{Queues: q}, nil
		}),
}

// gateAnswerOp answers a gate.
var gateAnswerOp = op(Op{Name: core.ActGateAnswer, Summary: "Answer a gated task's gate",
	Description: "Answer an open gate of a gated task: action \"accept\" (with content matching a form gate's schema), \"decline\" or \"cancel\". " +
		"When it was the task's last open gate the task is ready again, and its next claim carries the answers. An answered gate cannot be answered again.",
	HTTP: &Route{Method: "POST", Path: "/v1/tasks/{task_id}/gates/{key}", Namespaced: true},
	Tool: &Tool{Name: "answer_gate", Title: "Answer a gate"}},
	func(ctx context.Context, c *Call, in *gateAnswerIn) (*tessera.Task, error) {
		return c.core.AnswerGate(ctx, c.Actor, c.NS, in.TaskID, in.Key, in.GateAnswerParams)
	})

func changeOp(name string, change core.TaskChange, tool, summary, description string, destructive bool) *Op {
	return op(Op{Name: name, Summary: summary, Description: description,
		HTTP: &Route{Method: "POST", Path: "/v1/tasks/{task_id}/" + string(change), Namespaced: true},
		Tool: &Tool{Name: tool, Title: summary, Destructive: destructive, Idempotent: true}},
		func(ctx context.Context, c *Call, in *taskRef) (*tessera.Task, error) {
			return c.core.ChangeTask(ctx, c.Actor, c.NS, in.TaskID, change, false)
		})
}

type heartbeatIn struct {
	taskRef
	core.HeartbeatParams
}

type submitIn struct {
	taskRef
	idempotency
	core.SubmitParams
}

type submitBatchIn struct {
	idempotency
	core.SubmitBatchParams
}

type releaseIn struct {
	taskRef
	core.ReleaseParams
}

type gateIn struct {
	taskRef
	core.GateParams
}

type gateAnswerIn struct {
	taskRef
	Key string `json:"key" in:"path"`
	core.GateAnswerParams
}

func (gateAnswerIn) Bounds() input.Bounds {
	return input.Bounds{"key": input.Match(input.NameFormat).Doc("the gate's key")}
}

type eventsIn struct {
	taskRef
	Since int64 `json:"since,omitempty" in:"query"`
	Wait  int   `json:"wait,omitempty" in:"query"`
}

func (eventsIn) Bounds() input.Bounds {
	return input.Bounds{
		"since": input.AtLeast(0).Doc("next_since of the previous answer; 0 for every event"),
		"wait":  input.Range(0, core.MaxEventsWait).Doc(fmt.Sprintf("seconds to wait (0–%d) for an event to arrive", core.MaxEventsWait)),
	}
}

var claimOps = []*Op{
	op(Op{Name: core.ActClaim, Summary: "Claim the next ready task of a queue",
		Description: "Claim the next ready task of a queue (highest priority, then oldest) with a lease of lease_seconds. " +
			"The answer holds the lease (keep its token: heartbeat, write_record and submit_task need it as lease_token) and the task with its brief and payload. " +
			"When nothing is ready the answer is {\"lease\": null, \"retry_after\": N}: wait N seconds before asking again, or pass wait_seconds to wait for work to arrive. " +
			"queue_known: false says the queue never had a task (a misspelled name?); uncovered_requires lists what ready tasks require that your capabilities lack.",
		HTTP: &Route{Method: "POST", Path: "/v1/claims", Namespaced: true, Empty: emptyClaim,
			NoContent: "nothing is ready: no body; Retry-After advises when to poll again, and Tessera-Queue-Known: false says the queue has never had a task in the namespace (a misspelled queue or namespace?); Tessera-Queue-Paused: true says the queue is paused; Tessera-Uncovered-Requires (comma-separated) is what a task ready in the queue requires that the claim's capabilities lack"},
		Tool: &Tool{Name: "claim_task", Title: "Claim the next task"}},
		func(ctx context.Context, c *Call, in *core.ClaimParams) (*core.Claimed, error) {
			p := *in
			p.WaitSeconds = c.waitSeconds(p.WaitSeconds)
			return c.core.Claim(ctx, c.Actor, c.NS, p)
		}),
	op(Op{Name: core.ActClaimBatch, Summary: fmt.Sprintf("Claim up to max (1–%d) ready tasks of a queue, each with a lease of its own", core.MaxClaimBatch),
		Description: fmt.Sprintf("Claim up to max (1–%d) ready tasks of a queue in one call, in claim order, each with a lease of its own (its own token) of lease_seconds, "+
			"exactly as that many claim_task calls would. With wait_seconds it answers as soon as at least one task is ready; it never waits to fill max. "+
			"When nothing is ready the answer is {\"claims\": [], \"retry_after\": N}. End the runs one by one, or together with submit_tasks.", core.MaxClaimBatch),
		HTTP: &Route{Method: "POST", Path: "/v1/claims/batch", Namespaced: true},
		Tool: &Tool{Name: "claim_tasks", Title: "Claim several tasks"}},
		func(ctx context.Context, c *Call, in *core.ClaimBatchParams) (*core.ClaimedBatch, error) {
			p := *in
			p.WaitSeconds = c.waitSeconds(p.WaitSeconds)
			return c.core.ClaimN(ctx, c.Actor, c.NS, p)
		}),
	op(Op{Name: core.ActSubmitBatch, Summary: fmt.Sprintf("Submit the outcomes of up to %d runs in one call", core.MaxClaimBatch),
		Description: fmt.Sprintf("End up to %d runs in one transaction, each item with submit_task's fields and its task_id, each fenced by its own lease_token: "+
			"an item whose lease is lost (or whose task does not exist) is refused alone, in its result's error, and the other items stand. "+
			"The answer has one result per item, in order: the task as the submit left it, or the error. "+
			"Pass an idempotency key so that retrying after a lost answer does not submit twice.", core.MaxClaimBatch),
		HTTP: &Route{Method: "POST", Path: "/v1/claims/submit", Namespaced: true},
		Tool: &Tool{Name: "submit_tasks", Title: "Submit several results", Destructive: true, Idempotent: true}},
		func(ctx context.Context, c *Call, in *submitBatchIn) (*core.SubmitBatchResult, error) {
			res, err := c.core.SubmitBatch(ctx, c.Actor, c.NS, in.Items, in.IdempotencyKey)
			if res != nil {
				for i := range res.Results {
					if e := res.Results[i].Error; e != nil {
						e.Status = Status(e.Code)
					}
				}
			}
			return res, err
		}),
	op(Op{Name: core.ActHeartbeat, Summary: "Extend a lease",
		Description: "Keep a claimed task's lease alive before its expires_at, optionally reporting progress or a new lease_seconds. " +
			"If the answer says cancel_requested, stop working: the task was canceled and the lease is over. A lease_lost error means the lease lapsed; drop the work.",
		HTTP: &Route{Method: "POST", Path: "/v1/claims/{task_id}/heartbeat", Namespaced: true},
		Tool: &Tool{Name: "heartbeat", Title: "Extend a lease", Idempotent: true}},
		func(ctx context.Context, c *Call, in *heartbeatIn) (*core.Heartbeat, error) {
			return c.core.Heartbeat(ctx, c.Actor, c.NS, in.TaskID, in.HeartbeatParams)
		}),
	op(Op{Name: core.ActSubmit, Summary: "Submit a run's outcome",
		Description: "End your run of a claimed task: outcome \"succeeded\" with a JSON result, or \"failed\" with an error message (the task is retried with backoff until its attempts run out). " +
			"This ends the lease. Pass an idempotency key so that retrying after a lost answer does not submit twice.",
		HTTP: &Route{Method: "POST", Path: "/v1/claims/{task_id}/submit", Namespaced: true},
		Tool: &Tool{Name: "submit_task", Title: "Submit a result", Destructive: true, Idempotent: true}},
		func(ctx context.Context, c *Call, in *submitIn) (*tessera.Task, error) {
			return c.core.Submit(ctx, c.Actor, c.NS, in.TaskID, in.SubmitParams, in.IdempotencyKey)
		}),
	op(Op{Name: core.ActRelease, Summary: "Give a task back without using an attempt",
		Description: "Give a claimed task back to its queue without using an attempt, when you cannot work it. This ends the lease.",
		HTTP:        &Route{Method: "POST", Path: "/v1/claims/{task_id}/release", Namespaced: true},
		Tool:        &Tool{Name: "release_task", Title: "Give a task back", Idempotent: true}},
		func(ctx context.Context, c *Call, in *releaseIn) (*tessera.Task, error) {
			return c.core.Release(ctx, c.Actor, c.NS, in.TaskID, in.ReleaseParams)
		}),
	op(Op{Name: core.ActGateOpen, Summary: "Park a task on gates until a person answers",
		Description: "Park your claimed task on one or more gates — questions a person answers: a form (an answer matching schema), a url (the person is sent there) or an approval — " +
			"and end your run without using an attempt. The lease ends and the task is gated, claimable by nobody, until every gate is answered (or one times out); " +
			"its next claim carries gate_answers: {key: {action, content, answered_by, at}} beside previous_checkpoint (pass checkpoint to leave where you got to). " +
			"A decline is an answer, not a failure: the next run decides what it means.",
		HTTP: &Route{Method: "POST", Path: "/v1/claims/{task_id}/gate", Namespaced: true},
		Tool: &Tool{Name: "open_gate", Title: "Wait for a person's answer"}},
		func(ctx context.Context, c *Call, in *gateIn) (*tessera.Task, error) {
			return c.core.OpenGates(ctx, c.Actor, c.NS, in.TaskID, in.GateParams)
		}),
	op(Op{Name: core.ActClaimEvents, Summary: "Long-poll the events of a held task",
		Description: "Read what the holder of a task's lease should learn — notes from producers, a cancel request, a lapsed lease — after sequence number since. " +
			"wait long-polls until something arrives. Pass next_since back as since next time.",
		HTTP: &Route{Method: "GET", Path: "/v1/claims/{task_id}/events", Namespaced: true},
		Tool: &Tool{Name: "claim_events", Title: "Events of a held task", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *eventsIn) (*core.ClaimEvents, error) {
			return c.core.Events(ctx, c.Actor, c.NS, in.TaskID, in.Since, c.Wait(time.Duration(in.Wait)*time.Second, core.MaxEventsWait*time.Second))
		}),
}

// QueueKnownHeader carries an empty claim's queue_known,
// QueuePausedHeader its queue_paused and UncoveredRequiresHeader its
// uncovered_requires (capabilities hold no comma).
const (
	QueueKnownHeader        = "Tessera-Queue-Known"
	QueuePausedHeader       = "Tessera-Queue-Paused"
	UncoveredRequiresHeader = "Tessera-Uncovered-Requires"
)

// emptyClaim answers a claim that found nothing with 204 and its hints:
// Retry-After, and whether the queue ever had a task (a typo's tell).
func emptyClaim(out any) (http.Header, bool) {
	c := out.(*core.Claimed)
	if c.Lease != nil {
		return nil, false
	}
	h := http.Header{"Retry-After": {strconv.Itoa(c.RetryAfter)}}
	if c.QueueKnown != nil {
		h.Set(QueueKnownHeader, strconv.FormatBool(*c.QueueKnown))
	}
	if c.QueuePaused {
		h.Set(QueuePausedHeader, "true")
	}
	if len(c.UncoveredRequires) > 0 {
		h.Set(UncoveredRequiresHeader, strings.Join(c.UncoveredRequires, ","))
	}
	return h, true
}
