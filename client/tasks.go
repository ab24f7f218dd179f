package client

import (
	"context"
	"net/url"
	"strconv"
	"time"
)

// Me returns the caller's principal and key (GET /v1/me).
func (c *Client) Me(ctx context.Context) (*Me, error) {
	var out Me
	_, err := c.do(ctx, &request{method: "GET", path: "/me", safe: true}, &out)
	return result(&out, err)
}

// Enqueue creates a task (POST /v1/tasks). It always sends an
// Idempotency-Key, so a retried enqueue creates one task.
func (c *Client) Enqueue(ctx context.Context, req EnqueueRequest) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "POST", path: "/tasks", body: req,
		idempotencyKey: keyed(req.IdempotencyKey), safe: true}, &out)
	return result(&out, err)
}

// EnqueueBatch creates 1–500 tasks in one transaction, all or none (POST
// /v1/tasks/batch), and returns them in the order given. A bad task fails
// the whole batch with an invalid_request *Error whose Details.Field
// names it ("tasks[3].title"). Like Enqueue it always sends an
// Idempotency-Key, one for the whole batch, so a retried batch creates its
// tasks once; the tasks' own IdempotencyKey fields are not used.
func (c *Client) EnqueueBatch(ctx context.Context, req EnqueueBatchRequest) ([]Task, error) {
	var out struct {
		Tasks []Task `json:"tasks"`
	}
	_, err := c.do(ctx, &request{method: "POST", path: "/tasks/batch", body: req,
		idempotencyKey: keyed(req.IdempotencyKey), safe: true}, &out)
	return out.Tasks, err
}

// ListTasks lists tasks, newest first (GET /v1/tasks).
func (c *Client) ListTasks(ctx context.Context, f TaskFilter) (*TaskPage, error) {
	q := url.Values{}
	set(q, "state", f.State)
	set(q, "queue", f.Queue)
	set(q, "label", f.Label)
	set(q, "title", f.Title)
	setTime(q, "created_after", f.CreatedAfter)
	setTime(q, "created_before", f.CreatedBefore)
	set(q, "cursor", f.Cursor)
	setInt(q, "limit", f.Limit)
	var out TaskPage
	_, err := c.do(ctx, &request{method: "GET", path: "/tasks", query: q, safe: true}, &out)
	return result(&out, err)
}

// GetTask returns a task with its runs (GET /v1/tasks/{id}).
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "GET", path: "/tasks/" + url.PathEscape(id), safe: true}, &out)
	return result(&out, err)
}

// CancelTask cancels a task; a leased one is canceled at its holder's next
// heartbeat or submit (POST /v1/tasks/{id}/cancel).
func (c *Client) CancelTask(ctx context.Context, id string) (*Task, error) {
	return c.changeTask(ctx, id, "cancel")
}

// PauseTask pauses a ready or scheduled task.
func (c *Client) PauseTask(ctx context.Context, id string) (*Task, error) {
	return c.changeTask(ctx, id, "pause")
}

// ResumeTask resumes a paused task.
func (c *Client) ResumeTask(ctx context.Context, id string) (*Task, error) {
	return c.changeTask(ctx, id, "resume")
}

// AnswerGate answers an open gate of a gated task
// (POST /v1/tasks/{id}/gates/{key}) and returns the task with its gates:
// ready again once that was its last open gate. It is not repeated after a
// broken connection: a gate is answered once, and a repeat would be
// refused as invalid_state.
func (c *Client) AnswerGate(ctx context.Context, id, key string, req GateAnswerRequest) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "POST", path: "/tasks/" + url.PathEscape(id) + "/gates/" + url.PathEscape(key), body: req}, &out)
	return result(&out, err)
}

// RetryTask gives a dead or canceled task its attempts back.
func (c *Client) RetryTask(ctx context.Context, id string) (*Task, error) {
	return c.changeTask(ctx, id, "retry")
}

// RetryWithDependents retries a dead or canceled task, and makes the tasks
// its failure canceled wait for it again, and theirs in turn.
func (c *Client) RetryWithDependents(ctx context.Context, id string) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "POST", path: "/tasks/" + url.PathEscape(id) + "/retry", body: map[string]bool{"dependents": true}}, &out)
	return result(&out, err)
}

// Dependents lists the tasks enqueued after a task (its children), by id
// (GET /v1/tasks/{id}/dependents).
func (c *Client) Dependents(ctx context.Context, id string, p Page) (*TaskPage, error) {
	var out TaskPage
	_, err := c.do(ctx, &request{method: "GET", path: "/tasks/" + url.PathEscape(id) + "/dependents", query: pageQuery(p)}, &out)
	return result(&out, err)
}

// changeTask is not safe to repeat after a broken connection: the second
// try of a change that happened answers invalid_state.
func (c *Client) changeTask(ctx context.Context, id, change string) (*Task, error) {
	var out Task
	_, err := c.do(ctx, &request{method: "POST", path: "/tasks/" + url.PathEscape(id) + "/" + change, body: struct{}{}}, &out)
	return result(&out, err)
}

// AddNote leaves a note for the task's lease holder (POST /v1/tasks/{id}/notes).
func (c *Client) AddNote(ctx context.Context, id, body string) (*TaskEvent, error) {
	var out TaskEvent
	_, err := c.do(ctx, &request{method: "POST", path: "/tasks/" + url.PathEscape(id) + "/notes",
		body: map[string]string{"body": body}}, &out)
	return result(&out, err)
}

// Counts returns task counts by queue and state (GET /v1/counts).
func (c *Client) Counts(ctx context.Context) (Counts, error) {
	var out struct {
		Queues Counts `json:"queues"`
	}
	_, err := c.do(ctx, &request{method: "GET", path: "/counts", safe: true}, &out)
	return out.Queues, err
}

// result returns out, or nil and err.
func result[T any](out *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return out, nil
}

func set(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

func setTime(q url.Values, name string, v time.Time) {
	if !v.IsZero() {
		q.Set(name, v.UTC().Format(time.RFC3339Nano))
	}
}

func setInt(q url.Values, name string, v int) {
	if v != 0 {
		q.Set(name, strconv.Itoa(v))
	}
}

func pageQuery(p Page) url.Values {
	q := url.Values{}
	set(q, "cursor", p.Cursor)
	setInt(q, "limit", p.Limit)
	return q
}
