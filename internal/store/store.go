// Package store defines the persistence seam: the operations the domain
// needs, grouped in a transaction, with nothing about how a backend keeps
// them. Backends live in subpackages (sqlite, postgres) and must pass the
// conformance suite in storetest.
//
// The seam carries the guarantees itself, so they hold under any backend's
// concurrency, not only under one writer: a claim is one atomic operation,
// every other task change is conditional on the version the caller read
// (ErrStale otherwise), event numbers live on the task row, idempotency
// entries are inserted first-wins, and Update may run its function again
// after a lost race (ErrRetry).
package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when an insert collides with an existing row.
var ErrConflict = errors.New("already exists")

// ErrRetry marks a transaction that lost a race it cannot win by waiting —
// a serialization failure, a deadlock, a conditional write that found its
// row changed — and that is correct to run again from the start. Update
// does so, a bounded number of times; a function may return it (wrapped)
// to ask for that.
var ErrRetry = errors.New("transaction lost a race; run it again")

// ErrStale is what a conditional write returns when the row changed since
// the caller read it. It is an ErrRetry: run again, the caller reads the
// new row and decides anew.
var ErrStale = fmt.Errorf("row changed since it was read: %w", ErrRetry)

// TopicGap is delivered to a store's listener when topics may have been
// missed (a node's connection for them was down): the listener drops
// whatever caches they keep fresh.
const TopicGap = "\x00gap"

// MaxAttempts bounds how often Update runs its function.
const MaxAttempts = 8

// Store opens transactions. Every statement runs inside one, so the meter
// can attribute rows to the request that caused them.
type Store interface {
	// Update runs fn in a write transaction and commits it; an error from
	// fn rolls everything back.
	//
	// fn may run more than once: when it (or the backend) reports
	// ErrRetry, the transaction is rolled back and fn runs again, up to
	// MaxAttempts times. So fn must build everything it writes — ids, the
	// audit event, its one "now" — inside itself, and leave no trace
	// outside the transaction until Update has returned.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction over a consistent snapshot.
	View(ctx context.Context, fn func(Tx) error) error
	// Listen sets the function that receives every topic notified by a
	// committed transaction (Tx.Notify) on any node of the deployment,
	// this one included, and TopicGap whenever some may have been missed:
	// when the way other nodes' topics arrive is found broken, and again
	// once it is back. Set once, before serving.
	Listen(fn func(topic string))
	Close() error
}

// Tx is what a transaction can do, one method per domain operation, named
// noun + verb. Methods never interpret rules (states, scopes, limits); the
// core does.
type Tx interface {
	RecordTx
	AuditTx
	PublicTx
	SessionTx
	DepTx
	GateTx
	ConsoleTx
	FleetTx

	// Notify queues topic for every node's listener (Store.Listen), to be
	// delivered once this transaction commits; a rolled-back transaction
	// notifies nothing. Topics are advisory wake-ups and cache drops:
	// delivery is at most once, so a listener must tolerate a miss (a
	// long-poll times out and looks again).
	Notify(ctx context.Context, topic string)

	PrincipalCreate(ctx context.Context, p *tessera.Principal) error
	PrincipalGet(ctx context.Context, id string) (*tessera.Principal, error)
	PrincipalUpdate(ctx context.Context, p *tessera.Principal) error
	// PrincipalList returns principals ordered by id, after the given id.
	PrincipalList(ctx context.Context, after string, limit int) ([]tessera.Principal, error)
	// PrincipalAny reports whether any principal exists: the bootstrap test
	// of an empty store.
	PrincipalAny(ctx context.Context) (bool, error)

	KeyCreate(ctx context.Context, k *tessera.Key) error
	// KeyLookup returns a key with its principal: the one read on the
	// authentication path.
	KeyLookup(ctx context.Context, id string) (*tessera.Key, *tessera.Principal, error)
	KeyList(ctx context.Context, after string, limit int) ([]tessera.Key, error)
	KeyRevoke(ctx context.Context, id string, at time.Time) error

	// NamespaceEnsure records a namespace, reporting whether it was new.
	NamespaceEnsure(ctx context.Context, name string, now time.Time) (bool, error)
	// NamespaceList returns namespaces ordered by name, after the given
	// name.
	NamespaceList(ctx context.Context, after string, limit int) ([]Namespace, error)
	// NamespacePurge deletes at most limit rows of the namespace's data —
	// tasks with their runs, events and counts, records, buckets, blob
	// metadata, uploads, settings, idempotency entries — and reports how
	// many it deleted; once nothing is left it deletes the namespace's own
	// row and reports 0. The audit trail stays for its retention window.
	NamespacePurge(ctx context.Context, ns string, limit int) (int, error)

	TaskInsert(ctx context.Context, t *tessera.Task) error
	TaskGet(ctx context.Context, ns, id string) (*tessera.Task, error)
	// TaskHold is TaskGet that also keeps the task from changing until the
	// transaction ends: a write that only names the task (a record or an
	// upload bound to its lease's run) changes no task row for a
	// conditional write to catch, so it holds the row instead, and a lapse
	// or re-claim on another node waits for it. A backend with one writer
	// holds every row so already.
	TaskHold(ctx context.Context, ns, id string) (*tessera.Task, error)
	// TaskUpdate writes after over the stored task, if the stored task is
	// still at before.Version (the version before was read at): only the
	// mutable fields that differ between the two (state, attempts, run_at,
	// lease, run, cancel flag, result, error, progress, finished_at,
	// updated_at; title, brief and payload, which a debounced enqueue
	// replaces) are written, and the version goes up by one (after.Version
	// is set to it). A task that changed meanwhile is ErrStale and nothing
	// is written; a task that is gone is ErrNotFound.
	TaskUpdate(ctx context.Context, before, after *tessera.Task) error
	// TaskByUniqueKey returns the unfinished task of the queue that holds
	// the unique key (a task holds its key from its insert until it
	// finishes, and again if it is taken back from finished); ErrNotFound
	// when none does. TaskInsert and TaskUpdate take a key another task
	// holds only to fail with ErrConflict.
	TaskByUniqueKey(ctx context.Context, ns, queue, key string) (*tessera.Task, error)
	// DebounceHolder returns the id of the task a debounce key of the
	// queue points at (which may have been claimed, or purged, since);
	// ErrNotFound when it points at none. A task that finishes frees the
	// key it holds (TaskUpdate).
	DebounceHolder(ctx context.Context, ns, queue, key string) (string, error)
	// DebouncePoint points a debounce key at task to, if it points at
	// from ("": at none): ErrConflict when another write moved it first.
	DebouncePoint(ctx context.Context, ns, queue, key, from, to string) error
	// TaskGetMany returns those of the namespace's tasks named by ids that
	// exist, in no given order: what many TaskGets would return, read
	// together (a batch submit's tasks).
	TaskGetMany(ctx context.Context, ns string, ids []string) ([]tessera.Task, error)
	// TaskUpdateMany is TaskUpdate of each change, in order, sent together
	// where the backend can. A change whose task is stale or gone fails
	// it with TaskUpdate's error; the transaction is then to be rolled
	// back, as which of the others were written is not said.
	TaskUpdateMany(ctx context.Context, changes []TaskChange) error
	// TaskClaim leases the next ready task of a queue's lane — highest priority,
	// then oldest run_at, then id, run_at come — in one atomic operation
	// with its run: state leased, one more attempt, the lease of p, and a
	// run numbered by that attempt on the task's row (the run it replaces
	// goes to the history). Two concurrent claims never get one task. It
	// returns the task as leased; ErrNotFound when none is ready.
	TaskClaim(ctx context.Context, p TaskClaim) (*tessera.Task, error)
	// TaskClaimMany leases up to len(p.Runs) ready tasks of a queue in one
	// atomic operation, in claim order, each as TaskClaim leases one: the
	// shared lease of p, and its own run and token hash, the i-th task
	// taken with p.Runs[i]. It returns the tasks leased, in claim order:
	// fewer when fewer are ready, none (and no error) when none is.
	// Concurrent claims never share a task.
	TaskClaimMany(ctx context.Context, p TaskClaimMany) ([]tessera.Task, error)
	// TaskLapsed returns at most limit leased tasks of a queue whose lease
	// expired at or before now, soonest expiry first, through an index that
	// holds only leased tasks: its cost is what it returns.
	TaskLapsed(ctx context.Context, ns, queue string, now time.Time, limit int) ([]tessera.Task, error)
	// TaskList returns at most f.Limit tasks, newest first, and stops
	// early past PageBytes.
	TaskList(ctx context.Context, ns string, f TaskFilter) ([]tessera.Task, error)
	// TasksFinishedPurge deletes at most limit finished tasks (finished_at
	// set) that finished before the cutoff, with their runs and events,
	// through the finished index, and reports how many.
	TasksFinishedPurge(ctx context.Context, before time.Time, limit int) (int, error)

	// RunList returns a task's runs, oldest first: the history, then the
	// run on the task's row (tessera.Task.Run), which TaskClaim starts
	// and TaskUpdate ends.
	RunList(ctx context.Context, ns, taskID string) ([]tessera.Run, error)

	// TaskEventAppend stores e with the next sequence number of its task —
	// kept on the task row, so concurrent appends to one task serialize on
	// it and never collide — and sets e.Seq. ErrNotFound if the task is
	// gone.
	TaskEventAppend(ctx context.Context, ns, taskID string, e *tessera.TaskEvent) error
	TaskEventList(ctx context.Context, ns, taskID string, after int64, limit int) ([]tessera.TaskEvent, error)

	IdempotencyGet(ctx context.Context, ns, principalID, route, key string) (*Idempotency, error)
	// IdempotencyPut stores e unless an entry with its key exists, and
	// reports whether it stored it. A concurrent request with the same key
	// that committed first makes it false (a backend waits for a
	// concurrent insert of the key to commit or roll back before it
	// answers), so of concurrent repeats exactly one acts.
	IdempotencyPut(ctx context.Context, e *Idempotency) (bool, error)
}

// TaskClaim is what a claim writes: the queue to take from, the clock of
// the transaction, and the new lease (its TaskID is filled in).
type TaskClaim struct {
	Namespace string
	Queue     string
	// Lane is the lane of the queue to take from (FleetTx): 0 for its
	// plain tasks.
	Lane  int64
	Now   time.Time
	Lease tessera.Lease
}

// TaskChange is one task's write of a TaskUpdateMany: After over the
// task as it was read, Before.
type TaskChange struct {
	Before, After *tessera.Task
}

// TaskClaimMany is what a batch claim writes: TaskClaim's queue, clock
// and lease, whose run id and token hash are each task's own (Runs).
type TaskClaimMany struct {
	Namespace string
	Queue     string
	Lane      int64
	Now       time.Time
	// Lease is what every lease of the batch shares: holder, expiry,
	// length. Its RunID and TokenHash are unused.
	Lease tessera.Lease
	Runs  []LeaseRun
}

// LeaseRun is one lease's own part: its run and its token's hash.
type LeaseRun struct {
	RunID     string
	TokenHash []byte
}

// LeaseOf is the whole lease of p's i-th run.
func (p *TaskClaimMany) LeaseOf(i int) tessera.Lease {
	l := p.Lease
	l.RunID, l.TokenHash = p.Runs[i].RunID, p.Runs[i].TokenHash
	return l
}

// CommitStats is what a backend that commits for its requests (group
// commit) reports of it: the transactions committed and the write
// transactions answered (Writes), so Writes ÷ Commits is how many shared
// a commit. A backend that makes its commits durable itself (Syncing:
// SQLite) also reports the fsyncs of its log and the time those took,
// and the time the writes spent in each of WritePhases, summed over them
// — where a write waits, which a CPU profile does not show.
type CommitStats struct {
	Commits, Writes int64
	Syncing         bool
	Syncs           int64
	SyncTime        time.Duration
	WriteTime       [len(WritePhases)]time.Duration
}

// WritePhases are the phases of a write transaction in a group-committing
// store, in order: waiting for the committer, running its statements,
// waiting for its batch to commit (the batch's other writes, and the
// fsync before), the COMMIT, the fsync that makes it durable (and any
// batch's ahead), and the answer reaching its caller.
var WritePhases = [...]string{"queued", "running", "batched", "committing", "syncing", "answering"}

// Phases yields each of WritePhases with the time spent in it.
func (s CommitStats) Phases() iter.Seq2[string, time.Duration] {
	return func(yield func(string, time.Duration) bool) {
		for i, name := range WritePhases {
			if !yield(name, s.WriteTime[i]) {
				return
			}
		}
	}
}

// ListenerStats is what a backend that hears other nodes through a
// connection of its own (PostgreSQL's LISTEN) reports of it. While it is
// not Healthy, Store.Listen's function may miss topics, so long-polls
// must not rely on being woken.
type ListenerStats struct {
	// Healthy: connected, and its last probe was heard back in time.
	Healthy bool
	// LastHeard is when it last heard a notification, its own probes
	// included.
	LastHeard time.Time
	// Peers are the other nodes heard lately; while there are none this
	// node sends them nothing.
	Peers int
	// Sent counts the notifications this node sent the others.
	Sent int64
}

// Namespace is a namespace that has been written to.
type Namespace struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// TaskFilter selects tasks for listing, newest first. It speaks stored
// states: the core turns the visible "scheduled" and "ready" into State
// ready with a RunAt bound (tessera.StoredFilter).
type TaskFilter struct {
	tessera.StateFilter
	Queue string
	Label string
	// Before is the id the previous page ended at ("" = from the newest).
	Before string
	Limit  int
}

// QueueCount is the number of tasks in one queue and state.
type QueueCount struct {
	Queue string
	State string
	Count int
}

// Idempotency is a remembered response to a request carrying an
// Idempotency-Key, keyed by namespace + principal + route + key.
type Idempotency struct {
	Namespace   string
	PrincipalID string
	Route       string
	Key         string
	RequestHash []byte
	Response    []byte
	CreatedAt   time.Time
}

// Retry runs attempt until it succeeds, fails with an error that is not
// ErrRetry, or has run MaxAttempts times; between attempts it waits a
// short, growing, jittered pause so racing transactions fall out of step.
// Backends' Update uses it around each whole transaction.
func Retry(ctx context.Context, attempt func() error) error {
	var err error
	for i := range MaxAttempts {
		if err = attempt(); !errors.Is(err, ErrRetry) {
			return err
		}
		pause := time.Duration(1<<i) * 100 * time.Microsecond
		t := time.NewTimer(pause + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
	return fmt.Errorf("after %d attempts: %w", MaxAttempts, err)
}

// Refusing returns a Store that answers every call with err: what a server
// serves from when its store could not be opened (say, the storage
// allowance refused the schema's creation), so discovery still answers and
// everything else gets the honest error.
func Refusing(err error) Store { return refusing{err} }

type refusing struct{ err error }

func (r refusing) Update(context.Context, func(Tx) error) error { return r.err }
func (r refusing) View(context.Context, func(Tx) error) error   { return r.err }
func (r refusing) Listen(func(string))                          {}
func (r refusing) Close() error                                 { return nil }

// UnavailableError is storage that cannot serve for now — a full disk, an
// I/O error, an unreachable or restarting server, a commit whose outcome
// is unknown — with when to try again. A backend returns it for a fault
// that waiting (or a restart) may cure; the API answers it 503 unavailable
// with its hint, on every transport alike (ops.Fault).
type UnavailableError struct {
	// Message says what is wrong and what to do, in words a client may
	// read; nothing of the fault underneath, which Err keeps for the logs.
	Message    string
	RetryAfter time.Duration
	Err        error
}

// Unavailable wraps err, the fault underneath (nil for none), as an
// UnavailableError.
func Unavailable(message string, retryAfter time.Duration, err error) error {
	return &UnavailableError{Message: message, RetryAfter: retryAfter, Err: err}
}

// IsUnavailable reports whether err is, or wraps, an UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	return e.Message + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// API is the error a client sees: unavailable, the message and the hint.
func (e *UnavailableError) API() *tessera.Error {
	return &tessera.Error{Code: tessera.CodeUnavailable, RetryAfter: e.RetryAfter, Message: e.Message}
}
