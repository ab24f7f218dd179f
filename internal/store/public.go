package store

import (
	"context"
	"time"
)

// Visibility says which tasks a count covers: all of them, or only the
// public ones (what health and the board show without a key).
type Visibility bool

const (
	AllTasks   Visibility = false
	PublicOnly Visibility = true
)

// PublicTx is the part of Tx that serves queue statistics and the public
// state of SPEC §3.2 and §10: counts, health, the board and the activity
// feed. None of its methods reads a task brief, a payload, a result or a
// private record value, and none costs more than the queues or the page it
// answers for: backends keep the counts and the indexes incrementally.
type PublicTx interface {
	// TaskStateCounts returns the namespace's tasks counted by queue and
	// stored state, ordered by queue then state, from counts kept as tasks
	// change: its cost is the queues, not the tasks. A scheduled task
	// (ready with a run_at ahead) is counted as ready; TaskScheduled tells
	// them apart. Zero counts may be included.
	TaskStateCounts(ctx context.Context, ns string, v Visibility) ([]QueueCount, error)
	// TaskScheduled counts, per queue of queues, the ready tasks whose
	// run_at is still after now, through the ready index: its cost is the
	// scheduled tasks, not the others. Queues without one are absent.
	TaskScheduled(ctx context.Context, ns string, queues []string, now time.Time, v Visibility) (map[string]int, error)
	// TaskLapsedCounts counts, per queue of queues, the leased tasks whose
	// lease expired at or before now and that nobody has noticed yet,
	// through the lease index. Queues without one are absent.
	TaskLapsedCounts(ctx context.Context, ns string, queues []string, now time.Time, v Visibility) (map[string]int, error)
	// TaskOldestReady returns, per queue of queues, the oldest run_at of a
	// ready task whose run_at has come (the longest a claimable task has
	// waited), one seek of the ready index per queue. Queues without one
	// are absent.
	TaskOldestReady(ctx context.Context, ns string, queues []string, now time.Time, v Visibility) (map[string]time.Time, error)
	// PublicTasks returns the namespace's newest public tasks, newest
	// first, with only what the board shows.
	PublicTasks(ctx context.Context, ns string, limit int) ([]PublicTask, error)
	// AuditPublicEvents returns the namespace's public audit events newest
	// first, made at or after since and, when before is not "", with an id
	// below before, with the acting principal's display name and kind.
	AuditPublicEvents(ctx context.Context, ns string, since time.Time, before string, limit int) ([]PublicEvent, error)
}

// PublicTask is a public task as the board shows it: no brief, payload,
// result, labels or lease.
type PublicTask struct {
	ID        string
	Queue     string
	Title     string
	State     string // stored state: a scheduled task reads ready
	Priority  int
	RunAt     time.Time
	UpdatedAt time.Time
}

// PublicEvent is a public audit event, redacted for anyone to read: no
// key, principal id, address hash or status.
type PublicEvent struct {
	ID     string
	Time   time.Time
	Action string
	Target string
	RunID  string
	// Title is the title of the task the event is about, when its target
	// is a public task of the namespace.
	Title string
	// By and ByKind name the acting principal: its display name as last
	// seen in the namespace (else as it is now), and its kind.
	By     string
	ByKind string
}
