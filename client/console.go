package client

import (
	"context"
	"net/url"
	"time"
)

// What the operator console reads and does, for programs too: queues,
// their pause and purge, a task's trail, and changes in bulk.

// Trail is what happened to a task (GET /v1/tasks/{id}/trail): the events
// about it of the last 24 h, oldest first — records and blobs its runs
// wrote included — and its notes, cancel requests and lapses.
type Trail struct {
	TaskID string      `json:"task_id"`
	Events []Event     `json:"events"`
	Since  time.Time   `json:"since"`
	Notes  []TaskEvent `json:"notes"`
}

// TaskTrail returns a task's trail.
func (c *Client) TaskTrail(ctx context.Context, id string) (*Trail, error) {
	var out Trail
	_, err := c.do(ctx, &request{method: "GET", path: "/tasks/" + url.PathEscape(id) + "/trail", safe: true}, &out)
	return result(&out, err)
}

// Selection is what a bulk change (and ListTasks) selects: tasks of a
// queue, in a state, with text in the title, made within a time range.
type Selection struct {
	Queue         string     `json:"queue,omitempty"`
	State         string     `json:"state,omitempty"`
	Title         string     `json:"title,omitempty"`
	CreatedAfter  *time.Time `json:"created_after,omitempty"`
	CreatedBefore *time.Time `json:"created_before,omitempty"`
}

// BulkRequest retries or cancels what a selection selects.
type BulkRequest struct {
	Selection
	// Action is "retry" (dead and canceled tasks) or "cancel" (tasks not
	// finished).
	Action string `json:"action"`
	// DryRun counts and changes nothing; Expect is that count, without
	// which a change is refused.
	DryRun bool `json:"dry_run,omitempty"`
	Expect *int `json:"expect,omitempty"`
}

// Bulk answers a bulk change: the tasks counted (at most 1,000, the
// newest when More) and those changed.
type Bulk struct {
	Action  string   `json:"action"`
	DryRun  bool     `json:"dry_run"`
	Count   int      `json:"count"`
	More    bool     `json:"more"`
	Changed []string `json:"changed"`
}

// BulkChange retries or cancels every task a selection selects, at most
// 1,000 a call (POST /v1/tasks/bulk). Count first (DryRun), then send the
// count as Expect: a selection that counts otherwise by then is refused
// with version_conflict (IsVersionConflict), and nothing changes.
func (c *Client) BulkChange(ctx context.Context, req BulkRequest) (*Bulk, error) {
	var out Bulk
	// A dry run is a read; a change repeated after a broken connection
	// is refused by its count.
	_, err := c.do(ctx, &request{method: "POST", path: "/tasks/bulk", body: req, safe: req.DryRun}, &out)
	return result(&out, err)
}

// QueueStats is one queue as GET /v1/queues shows it.
type QueueStats struct {
	Queue string `json:"queue"`
	// Counts maps each state to its tasks.
	Counts                map[string]int `json:"counts"`
	LiveLeases            int            `json:"live_leases"`
	LapsedLeases          int            `json:"lapsed_leases"`
	OldestReadyAgeSeconds *float64       `json:"oldest_ready_age_seconds"`
	Paused                bool           `json:"paused"`
	PausedAt              *time.Time     `json:"paused_at,omitempty"`
	PausedBy              string         `json:"paused_by,omitempty"`
	// Throughput is the runs that ended each of the last 15 minutes,
	// oldest first.
	Throughput []Minute `json:"throughput"`
}

// Minute is one minute of a queue's ended runs.
type Minute struct {
	Minute    time.Time `json:"minute"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	Dead      int       `json:"dead"`
}

// QueuesPage is every queue of the namespace, by name.
type QueuesPage struct {
	Namespace string       `json:"namespace"`
	Time      time.Time    `json:"time"`
	Queues    []QueueStats `json:"queues"`
}

// ListQueues returns the namespace's queues (GET /v1/queues).
func (c *Client) ListQueues(ctx context.Context) (*QueuesPage, error) {
	var out QueuesPage
	_, err := c.do(ctx, &request{method: "GET", path: "/queues", safe: true}, &out)
	return result(&out, err)
}

// QueueState is a queue's pause.
type QueueState struct {
	Namespace string     `json:"namespace"`
	Queue     string     `json:"queue"`
	Paused    bool       `json:"paused"`
	PausedAt  *time.Time `json:"paused_at,omitempty"`
	PausedBy  string     `json:"paused_by,omitempty"`
}

// PauseQueue pauses a queue: claims on it get nothing until ResumeQueue.
func (c *Client) PauseQueue(ctx context.Context, queue string) (*QueueState, error) {
	return c.queueState(ctx, queue, "pause")
}

// ResumeQueue resumes a paused queue.
func (c *Client) ResumeQueue(ctx context.Context, queue string) (*QueueState, error) {
	return c.queueState(ctx, queue, "resume")
}

// queueState pauses or resumes: either may be repeated, so both are safe.
func (c *Client) queueState(ctx context.Context, queue, verb string) (*QueueState, error) {
	var out QueueState
	_, err := c.do(ctx, &request{method: "POST", path: "/queues/" + url.PathEscape(queue) + "/" + verb, body: struct{}{}, safe: true}, &out)
	return result(&out, err)
}

// QueuePurged answers PurgeQueue; More says another call has more to do.
type QueuePurged struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Purged    int    `json:"purged"`
	More      bool   `json:"more"`
}

// PurgeQueue deletes up to 1,000 finished tasks of a queue — in states
// (succeeded, dead, canceled), all three when none is given — with their
// runs and notes (POST /v1/queues/{queue}/purge).
func (c *Client) PurgeQueue(ctx context.Context, queue string, states ...string) (*QueuePurged, error) {
	var out QueuePurged
	body := struct {
		States []string `json:"states,omitempty"`
	}{states}
	_, err := c.do(ctx, &request{method: "POST", path: "/queues/" + url.PathEscape(queue) + "/purge", body: body, safe: true}, &out)
	return result(&out, err)
}
