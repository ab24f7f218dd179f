package tessera

import (
	"encoding/json"
	"time"
)

// Task states as clients see them (SPEC §1). The store keeps a task that is
// waiting for its run_at as "ready" with a future run_at, and reports it as
// "scheduled": nothing has to be written when the time comes. A task that
// waits for parents to finish is "waiting": never claimable, it becomes
// ready when the last of them succeeds. A task parked on gates (gate.go)
// is "gated": never claimable, it becomes ready when its gates are
// answered or one times out.
const (
	StateWaiting   = "waiting"
	StateGated     = "gated"
	StateScheduled = "scheduled"
	StateReady     = "ready"
	StateLeased    = "leased"
	StatePaused    = "paused"
	StateSucceeded = "succeeded"
	StateDead      = "dead"
	StateCanceled  = "canceled"
)

// States lists every client-visible state, in lifecycle order.
var States = []string{StateWaiting, StateGated, StateScheduled, StateReady, StateLeased, StatePaused, StateSucceeded, StateDead, StateCanceled}

// Terminal reports whether a task in state s is finished.
func Terminal(s string) bool {
	return s == StateSucceeded || s == StateDead || s == StateCanceled
}

// Task is a unit of work.
type Task struct {
	Namespace string          `json:"namespace"`
	ID        string          `json:"id"`
	Queue     string          `json:"queue"`
	Title     string          `json:"title"`
	Brief     string          `json:"brief"`
	Payload   json.RawMessage `json:"payload"`
	Labels    []string        `json:"labels"`
	Priority  int             `json:"priority"`
	// Requires are the capabilities a claimant must show to be granted
	// the task, sorted; none for a task anyone may take.
	Requires []string `json:"requires,omitempty"`
	// Group is who the task is for (a tenant, a repository): claims
	// rotate across a queue's groups, and a group's leases and rate may
	// be capped. Empty for none.
	Group string `json:"group,omitempty"`
	// Lane is the store's id of the task's (group, requires) in its
	// queue; 0 for neither.
	Lane int64 `json:"-"`
	// Trace is the W3C trace context its producer enqueued it in, which
	// every claim of it hands the worker to continue; nil for none.
	Trace *Trace `json:"trace,omitempty"`
	// UniqueKey, while the task is not finished, makes another enqueue of
	// the key in its queue answer this task instead of a new one.
	UniqueKey string `json:"unique_key,omitempty"`
	// DebounceKey, while the task has not been claimed, makes another
	// enqueue of the key in its queue move this task on instead.
	DebounceKey string `json:"debounce_key,omitempty"`
	// ParentResults, on a task enqueued after others, hands its parents'
	// outcomes and results to every claim of it.
	ParentResults   bool            `json:"parent_results,omitempty"`
	Public          bool            `json:"public"`
	MaxAttempts     int             `json:"max_attempts"`
	Attempts        int             `json:"attempts"`
	State           string          `json:"state"`
	RunAt           time.Time       `json:"run_at"`
	CreatedBy       string          `json:"created_by"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	CancelRequested bool            `json:"cancel_requested"`
	Result          json.RawMessage `json:"result,omitempty"`
	Error           string          `json:"error,omitempty"`
	Progress        json.RawMessage `json:"progress,omitempty"`
	// FinishedAt is when the task reached a terminal state; retention
	// deletes finished tasks some time after it.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Version counts the task's changes: the store writes a change only
	// over the version it was read at (store.Tx.TaskUpdate).
	Version int64 `json:"-"`
	// Lease is the live (or lapsed but unnoticed) lease, without its token.
	Lease *Lease `json:"lease,omitempty"`
	// LeaseLapsed, on a leased task read, says its lease is past its
	// expiry: the task goes back to its queue (or dies) as soon as a claim
	// or its holder notices; set by Show.
	LeaseLapsed bool `json:"lease_lapsed,omitempty"`
	// Dependency is what the task waits on, for a task enqueued after
	// others; nil for any other.
	Dependency *Dependency `json:"dependency,omitempty"`
	// Checkpoint is the last a run of the task left, when one did.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// GateCount counts the gates the task has had (gate.go): a claim
	// reads their answers only for a task that had one.
	GateCount int `json:"-"`
	// Gates are the task's gates, open and answered, filled when a task
	// that had any is read alone.
	Gates []Gate `json:"gates,omitempty"`
	// Runs is filled only when a task is read with its history.
	Runs []Run `json:"runs,omitempty"`
	// Deduplicated, in an enqueue's answer, says the task is not new: an
	// unfinished task already held the enqueue's unique key.
	Deduplicated bool `json:"deduplicated,omitempty"`
	// Debounced, in an enqueue's answer, says the task is not new: it
	// held the enqueue's debounce key, unclaimed, and the enqueue gave it
	// its title, brief and payload and moved its run_at.
	Debounced bool `json:"debounced,omitempty"`
	// Run is the task's current run, or its last once it ended: it lives
	// on the task's row, so a claim and the run's end write no row of
	// their own; an earlier run moves to the history when a claim starts
	// the next.
	Run *Run `json:"-"`
}

// Show makes t what a client sees at now: its visible state, and whether
// its lease has lapsed.
func (t *Task) Show(now time.Time) {
	t.State = t.VisibleState(now)
	t.LeaseLapsed = t.State == StateLeased && t.Lease != nil && !now.Before(t.Lease.ExpiresAt)
}

// VisibleState is the state a client sees at now: a ready task whose run_at
// is still ahead is scheduled.
func (t *Task) VisibleState(now time.Time) string {
	if t.State == StateReady && t.RunAt.After(now) {
		return StateScheduled
	}
	return t.State
}

// Copy returns a copy of t that shares nothing mutable with it but the
// JSON values and labels, which are never changed in place: what a change
// is written over (store.Tx.TaskUpdate takes the task as read and as
// changed).
func (t *Task) Copy() *Task {
	c := *t
	if t.Lease != nil {
		l := *t.Lease
		c.Lease = &l
	}
	if t.Run != nil {
		r := *t.Run
		c.Run = &r
	}
	return &c
}

// StateFilter selects tasks by what the store keeps: a stored state and a
// bound on run_at. StoredFilter is the one place a visible state becomes
// one.
type StateFilter struct {
	State string // a stored state, or "" for any
	// RunAtUpTo keeps tasks whose run_at is at or before it; RunAtAfter
	// those whose run_at is after it. Zero: no bound.
	RunAtUpTo, RunAtAfter time.Time
}

// StoredFilter turns a visible state (or "") at now into a StateFilter:
// scheduled is ready with run_at after now, ready is ready with run_at
// come; the others are stored as they are seen.
func StoredFilter(visible string, now time.Time) StateFilter {
	switch visible {
	case StateScheduled:
		return StateFilter{State: StateReady, RunAtAfter: now}
	case StateReady:
		return StateFilter{State: StateReady, RunAtUpTo: now}
	}
	return StateFilter{State: visible}
}

// ValueBytes is what a task's values weigh in a listing's byte budget.
func (t *Task) ValueBytes() int {
	return len(t.Brief) + len(t.Payload) + len(t.Result) + len(t.Progress)
}

// What a task does when a parent ends dead or canceled.
const (
	// ParentFailureCancel cancels the task (and, in turn, its own
	// dependents): the default.
	ParentFailureCancel = "cancel"
	// ParentFailureRun counts the failed parent as finished: the task runs
	// once its other parents are, and can read which one failed.
	ParentFailureRun = "run"
)

// Dependency is a task's parents and how many of them have not finished.
type Dependency struct {
	// After are the parents, in the order given.
	After []string `json:"after"`
	// WaitingOn counts the parents not yet finished (succeeded, or failed
	// under ParentFailureRun).
	WaitingOn       int    `json:"waiting_on"`
	OnParentFailure string `json:"on_parent_failure"`
	// FailedParent is the first parent that ended dead or canceled.
	FailedParent string `json:"failed_parent,omitempty"`
	// CanceledBy is the parent whose failure canceled the task: a retry of
	// that parent with dependents makes the task wait again.
	CanceledBy string `json:"canceled_by,omitempty"`
	// Settled are the parents already counted as finished: each is
	// counted once, whatever retries follow.
	Settled []string `json:"-"`
}

// Checkpoint is what a run left for the next attempt to resume from.
type Checkpoint struct {
	Value   json.RawMessage `json:"value"`
	Attempt int             `json:"attempt"`
	RunID   string          `json:"run_id"`
	At      time.Time       `json:"at"`
}

// Lease is a claim on a task. Token is set only in the claim response.
type Lease struct {
	TaskID    string    `json:"task_id"`
	RunID     string    `json:"run_id"`
	Holder    string    `json:"holder"`
	ExpiresAt time.Time `json:"expires_at"`
	Token     string    `json:"token,omitempty"`
	// Seconds is the lease length a heartbeat renews by default.
	Seconds int `json:"lease_seconds"`
	// TokenHash is what the store keeps; the token is the holder's secret.
	TokenHash []byte `json:"-"`
}

// Run outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeReleased  = "released"
	OutcomeLapsed    = "lapsed"
	OutcomeCanceled  = "canceled"
	// OutcomeGated ends a run that parked its task on gates: like a
	// release, it uses no attempt.
	OutcomeGated = "gated"
)

// Run is one attempt at a task.
type Run struct {
	ID        string     `json:"run_id"`
	TaskID    string     `json:"task_id"`
	Holder    string     `json:"holder"`
	Attempt   int        `json:"attempt"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Outcome   string     `json:"outcome,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Claim-event kinds delivered to a lease holder.
const (
	EventNote            = "note"
	EventCancelRequested = "cancel_requested"
	EventLeaseEnded      = "lease_ended"
)

// TaskEvent is something the holder of a task's lease should learn.
type TaskEvent struct {
	Seq  int64     `json:"seq"`
	Kind string    `json:"kind"`
	Body string    `json:"body,omitempty"`
	By   string    `json:"by,omitempty"`
	Time time.Time `json:"time"`
}

// Backoff is the wait before retry number attempts (≥ 1):
// min(10 s × 2^(attempts-1), 1 h), before jitter.
func Backoff(attempts int) time.Duration {
	if attempts < 1 {
		attempts = 1
	}
	if attempts > 20 {
		return time.Hour
	}
	return min(10*time.Second<<(attempts-1), time.Hour)
}

// Rate is a token bucket's rate: PerSecond tokens a second, at most Burst
// saved up. The zero Rate is no limit.
type Rate struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
}

// Limited reports whether r limits anything.
func (r Rate) Limited() bool { return r.PerSecond > 0 }
