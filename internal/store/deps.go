package store

import (
	"context"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// DepTx is the part of Tx that keeps task dependencies and checkpoints.
// Both live beside the task row, paid for only by the tasks that use them:
// a task enqueued after others has one dependency row and one edge per
// parent; a task whose run left a checkpoint has one checkpoint row.
type DepTx interface {
	// DependencyPut stores a task's dependency as given, replacing the
	// one it had.
	DependencyPut(ctx context.Context, ns, taskID string, d *tessera.Dependency) error
	// DependencyGet returns a task's dependency; ErrNotFound for a task
	// that waits on nothing.
	DependencyGet(ctx context.Context, ns, taskID string) (*tessera.Dependency, error)
	// DependencyEdgesAdd records that child waits on each of parents:
	// one edge per parent, keyed by parent, so a parent finds its
	// children with one seek however many tasks the namespace holds.
	DependencyEdgesAdd(ctx context.Context, ns, child string, parents []string) error
	// DependencyChildren returns at most limit children of parent, by id,
	// after the child after ("" from the first).
	DependencyChildren(ctx context.Context, ns, parent, after string, limit int) ([]string, error)
	// DependencyParents returns those of ids that some task waits on (that
	// have an edge as parent), in no given order: the tasks of a batch
	// whose end has children to settle.
	DependencyParents(ctx context.Context, ns string, ids []string) ([]string, error)

	// CheckpointPut stores a task's checkpoint, replacing the last.
	CheckpointPut(ctx context.Context, ns, taskID string, c *tessera.Checkpoint) error
	// CheckpointGet returns a task's last checkpoint; ErrNotFound if no
	// run left one.
	CheckpointGet(ctx context.Context, ns, taskID string) (*tessera.Checkpoint, error)

	// DepWorkPut stores (or replaces) w: what is left of settling a
	// parent's children after the transaction that finished the parent
	// did its bounded share.
	DepWorkPut(ctx context.Context, w *DepWork) error
	// DepWorkList returns at most limit pieces of work, oldest first.
	DepWorkList(ctx context.Context, limit int) ([]DepWork, error)
	// DepWorkAdvance moves w's cursor to after, if it is still at
	// w.After (ErrStale otherwise: another node took the step); done
	// deletes w instead.
	DepWorkAdvance(ctx context.Context, w *DepWork, after string, done bool) error
}

// DepWork is a parent whose children are still being settled: each child
// up to After has been; Kind says how the rest are.
type DepWork struct {
	Namespace string
	Parent    string
	Kind      string
	After     string
	// Seq orders work oldest first.
	Seq int64
}

// Kinds of DepWork.
const (
	// DepSettle settles the children of a parent that finished (its
	// state says how).
	DepSettle = "settle"
	// DepRewait makes the children a parent's failure canceled wait
	// again, after the parent was retried with its dependents.
	DepRewait = "rewait"
)
