package store

import (
	"context"
	"time"
)

// PublicTx is the part of Tx that serves the public state of SPEC §3.2
// and §10: health, the board and the activity feed. None of its methods
// reads a task brief, a payload, a result or a private record value, and
// none costs more than the queues or the page it answers for: backends
// keep the counts and the index of public events incrementally.
type PublicTx interface {
	// PublicCounts returns the namespace's public tasks counted by queue
	// and stored state, ordered by queue then state: one row per queue and
	// state ever used, zero counts included. A scheduled task (ready with
	// a run_at ahead) is counted as ready.
	PublicCounts(ctx context.Context, ns string) ([]QueueCount, error)
	// PublicLapsedLeases counts, per queue of queues, the leased public
	// tasks whose lease expired at or before now and that nobody has
	// noticed yet, in one indexed query. Queues without one are absent.
	PublicLapsedLeases(ctx context.Context, ns string, queues []string, now time.Time) (map[string]int, error)
	// PublicOldestReady returns, per queue of queues, the oldest run_at of
	// a public ready task whose run_at has come (the longest a claimable
	// task has waited), through the claim index without scanning the
	// queue. Queues without one are absent.
	PublicOldestReady(ctx context.Context, ns string, queues []string, now time.Time) (map[string]time.Time, error)
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
