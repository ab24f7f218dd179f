package store

import (
	"context"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// GateTx is the part of Tx that keeps a task's gates (tessera.Gate):
// rows beside the task, paid for only by the tasks that have them.
type GateTx interface {
	// GatesInsert adds gates to a task; ErrConflict if one's key was
	// used by the task before (a key is unique for the task's life).
	GatesInsert(ctx context.Context, ns, taskID string, gates []tessera.Gate) error
	// GatesOf returns a task's gates, open and answered, in the order
	// they were opened (then by key).
	GatesOf(ctx context.Context, ns, taskID string) ([]tessera.Gate, error)
	// GateAnswer records a's answer to an open gate; ErrStale if the gate
	// is not open (answered, or timed out, meanwhile).
	GateAnswer(ctx context.Context, ns, taskID, key string, a *tessera.GateAnswer) error
	// GatesTimingOut returns at most limit open gates that time out, the
	// soonest first, with Namespace, TaskID, Key and TimeoutAt set: one
	// seek of an index of open gates, whatever else the store holds.
	GatesTimingOut(ctx context.Context, limit int) ([]tessera.Gate, error)
}
