// Package store defines the persistence seam: the operations the domain
// needs, grouped in a transaction, with nothing about how a backend keeps
// them. Backends live in subpackages (sqlite, later postgres) and must pass
// the conformance suite in storetest.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when an insert collides with an existing row.
var ErrConflict = errors.New("already exists")

// PageBytes bounds what one listing holds in memory: a listing of tasks or
// records stops once the rows it returned carry this many bytes of values
// (briefs, payloads, results, record values), plus one row more, so the
// caller can tell that another page follows.
const PageBytes = 1 << 20

// Store opens transactions. Every statement runs inside one, so the meter
// can attribute rows to the request that caused them.
type Store interface {
	// Update runs fn in a serializable write transaction; an error from fn
	// rolls everything back.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction over a consistent snapshot.
	View(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// Tx is what a transaction can do, one method per domain operation, named
// noun + verb. Methods never interpret rules (states, scopes, limits); the
// core does.
type Tx interface {
	RecordTx
	AuditTx
	PublicTx

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
	NamespaceList(ctx context.Context) ([]Namespace, error)

	TaskInsert(ctx context.Context, t *tessera.Task) error
	TaskGet(ctx context.Context, ns, id string) (*tessera.Task, error)
	// TaskUpdate writes a task's mutable fields: state, attempts, run_at,
	// lease, cancel flag, result, error, progress and updated_at.
	TaskUpdate(ctx context.Context, t *tessera.Task) error
	// TaskList returns at most f.Limit tasks and stops early past PageBytes.
	TaskList(ctx context.Context, ns string, f TaskFilter) ([]tessera.Task, error)
	// TaskNextReady returns the ready task of a queue to claim next: highest
	// priority, then oldest run_at, then id; run_at must have come.
	TaskNextReady(ctx context.Context, ns, queue string, now time.Time) (*tessera.Task, error)
	// TaskLapsed returns leased tasks of a queue whose lease expired before
	// now, at most limit of them.
	TaskLapsed(ctx context.Context, ns, queue string, now time.Time, limit int) ([]tessera.Task, error)
	// TaskCounts counts tasks by queue and visible state at now.
	TaskCounts(ctx context.Context, ns string, now time.Time) ([]QueueCount, error)

	RunInsert(ctx context.Context, ns string, r *tessera.Run) error
	RunEnd(ctx context.Context, ns string, r *tessera.Run) error
	RunList(ctx context.Context, ns, taskID string) ([]tessera.Run, error)

	// TaskEventAppend stores e with the next sequence number of its task and
	// sets e.Seq.
	TaskEventAppend(ctx context.Context, ns, taskID string, e *tessera.TaskEvent) error
	TaskEventList(ctx context.Context, ns, taskID string, after int64, limit int) ([]tessera.TaskEvent, error)

	IdempotencyGet(ctx context.Context, ns, principalID, route, key string) (*Idempotency, error)
	// IdempotencyPut stores a response; ErrConflict if the key is taken.
	IdempotencyPut(ctx context.Context, e *Idempotency) error
}

// Namespace is a namespace that has been written to.
type Namespace struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// TaskFilter selects tasks for listing, newest first.
type TaskFilter struct {
	State string // a visible state, or "" for any
	Queue string
	Label string
	// Before is the id the previous page ended at ("" = from the newest).
	Before string
	Limit  int
	Now    time.Time
}

// QueueCount is the number of tasks in one queue and visible state.
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

// Refusing returns a Store that answers every call with err: what a server
// serves from when its store could not be opened (say, the storage
// allowance refused the schema's creation), so discovery still answers and
// everything else gets the honest error.
func Refusing(err error) Store { return refusing{err} }

type refusing struct{ err error }

func (r refusing) Update(context.Context, func(Tx) error) error { return r.err }
func (r refusing) View(context.Context, func(Tx) error) error   { return r.err }
func (r refusing) Close() error                                 { return nil }
