package store

import (
	"context"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// ConsoleTx is the part of Tx that serves the live event stream and the
// operator console: the audit trail read forward as a stream of events,
// per-minute throughput from the same trail, queue pauses, task search,
// and purges of one queue's finished tasks.
//
// The stream is the audit trail itself, not a table of its own: every
// successful action already writes its event in the transaction that acts,
// so streaming it costs no row per state change (the audit row carries the
// task, queue and resulting state in columns of its own).
type ConsoleTx interface {
	// AuditStream returns f.Namespace's audit events with an id above
	// f.After, oldest first, at most f.Limit, whose action is one of
	// f.Actions, each with the title of the task it names (task_id). With
	// f.Public only public events are read, through the public event
	// index, and a title only while its task is public.
	AuditStream(ctx context.Context, f StreamFilter) ([]StreamEvent, error)
	// AuditThroughput counts, per minute, queue and resulting state, the
	// events of the given actions among the namespace's newest scan audit
	// events made at or after since: a bounded look, whatever the
	// namespace's rate.
	AuditThroughput(ctx context.Context, ns string, since time.Time, actions []string, scan int) ([]Throughput, error)

	// QueuePause marks a queue paused, and reports whether it was not
	// paused before; QueueResume unmarks it, and reports whether it was.
	QueuePause(ctx context.Context, p QueuePause) (bool, error)
	QueueResume(ctx context.Context, ns, queue string) (bool, error)
	// QueuesPaused returns the namespace's paused queues, by name.
	QueuesPaused(ctx context.Context, ns string) ([]QueuePause, error)

	// TaskSearch returns at most f.Limit tasks of the namespace matching
	// f, newest first (by id, which is by creation time), and stops early
	// past PageBytes, like TaskList.
	TaskSearch(ctx context.Context, ns string, f TaskSearch) ([]tessera.Task, error)
	// TaskPurgeFinished deletes at most limit tasks of a queue that are in
	// one of states (finished states: succeeded, dead, canceled), with
	// their runs and events, and reports how many.
	TaskPurgeFinished(ctx context.Context, ns, queue string, states []string, limit int) (int, error)
}

// StreamFilter selects audit events to stream.
type StreamFilter struct {
	Namespace string
	// After is the id the read starts above ("" for the first).
	After   string
	Actions []string
	// Queue and TaskID, when set, keep the events of that queue, or about
	// (or done under the lease of) that task.
	Queue, TaskID string
	// Public reads only public events.
	Public bool
	// Scan, when above 0, looks only at the namespace's newest Scan
	// events above After (a task's trail, bounded however busy the
	// namespace is); 0 looks at every one.
	Scan  int
	Limit int
}

// StreamEvent is an audit event as the stream reads it.
type StreamEvent struct {
	tessera.AuditEvent
	// Title is the title of the task the event names.
	Title string
}

// Throughput is how many events of one minute, queue and resulting state
// the audit trail holds.
type Throughput struct {
	Minute time.Time
	Queue  string
	State  string
	Count  int
}

// QueuePause is a paused queue.
type QueuePause struct {
	Namespace string
	Queue     string
	PausedBy  string
	PausedAt  time.Time
}

// TaskSearch selects tasks for the console's list and its bulk actions.
type TaskSearch struct {
	// States are stored states, any of which matches; none: any state.
	States []string
	// RunAtUpTo keeps tasks whose run_at is at or before it, RunAtAfter
	// those whose run_at is after it (a visible ready or scheduled, see
	// tessera.StoredFilter); zero: no bound.
	RunAtUpTo, RunAtAfter time.Time
	Queue                 string
	Label                 string
	// Title keeps tasks whose title contains it, ASCII letters matched
	// without regard to case.
	Title string
	// After and Before bound the ids, exclusive ("": no bound): ids are
	// ULIDs, so a creation time range is an id range (tessera.IDFloor),
	// and Before is also where the previous page ended.
	After, Before string
	Limit         int
}

// EventOrder is what a backend tells of the order its audit events
// commit in. Ids are made inside the transaction, before it commits: with
// several writers at once, an event may commit after one with a later id,
// and a reader that has passed that later id would skip it. EventLag
// bounds how long after its id's time an event may still commit, so a
// stream reads again that far back (and skips the ids it sent); 0 when
// events commit in id order (one writer). A backend that does not say is
// read with DefaultEventLag.
type EventOrder interface {
	EventLag() time.Duration
}

// DefaultEventLag is the look back for a backend that does not tell its
// EventLag.
const DefaultEventLag = 2 * time.Second
