package store

import (
	"context"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// FleetTx is the part of Tx that serves claims fitted to a fleet: a
// queue's lanes (its tasks of one group and one set of required
// capabilities, each a range of the claim index in claim order), its
// groups with their limits and place in the rotation, its settings, and
// the capability sets its claimants showed. Lane 0 (no group, no
// requirement) is every plain task's, and has no row.
type FleetTx interface {
	// LaneEnsure returns the id of the lane of (ns, queue, group,
	// requires), requires in canonical order, creating it (and its queue's
	// QueueFleet row, and its group's row) when new, and reports whether
	// it did.
	LaneEnsure(ctx context.Context, ns, queue, group string, requires []string, now time.Time) (int64, bool, error)
	// LaneList returns a queue's lanes, by id: every one but lane 0.
	LaneList(ctx context.Context, ns, queue string) ([]Lane, error)
	// LaneHeads returns, of each lane given, its first claimable task
	// (ready, run_at come by now) in claim order: a seek each. Lanes with
	// none are left out.
	LaneHeads(ctx context.Context, ns, queue string, lanes []int64, now time.Time) ([]LaneHead, error)
	// LaneReady counts the ready tasks of each lane given (claimable or
	// scheduled) and finds the oldest run_at of its claimable ones.
	LaneReady(ctx context.Context, ns, queue string, lanes []int64, now time.Time) (map[int64]LaneCount, error)

	// QueuesFleet returns the namespace's queues that have a QueueFleet
	// row: the ones whose claims take the fleet path.
	QueuesFleet(ctx context.Context, ns string) ([]string, error)
	// QueueFleetGet returns a queue's row, ErrNotFound for none; with
	// lock, it is held until the transaction ends (a backend with one
	// writer holds every row so already).
	QueueFleetGet(ctx context.Context, ns, queue string, lock bool) (*QueueFleet, error)
	// QueueFleetPut writes a queue's row whole, creating it if new.
	QueueFleetPut(ctx context.Context, q *QueueFleet) error

	// GroupsGet returns the rows of the groups named, those that have
	// one, by name.
	GroupsGet(ctx context.Context, ns, queue string, groups []string) (map[string]Group, error)
	// GroupLock returns a group's row, creating an empty one when it has
	// none, and holds it until the transaction ends (a backend with one
	// writer holds every row so already).
	GroupLock(ctx context.Context, ns, queue, group string) (*Group, error)
	// GroupList returns a queue's group rows, by name, after the given
	// name, at most limit.
	GroupList(ctx context.Context, ns, queue, after string, limit int) ([]Group, error)
	// GroupPut writes a group's row whole, creating it if new.
	GroupPut(ctx context.Context, g *Group) error
	// GroupLeases counts the group's leases that expire after now — the
	// live ones — up to limit, through an index of grouped leases only.
	GroupLeases(ctx context.Context, ns, queue, group string, now time.Time, limit int) (int, error)

	// ClaimantSeen records that a claimant with these capabilities (in
	// canonical order) claimed on the queue at now.
	ClaimantSeen(ctx context.Context, ns, queue string, capabilities []string, now time.Time) error
	// ClaimantList returns the capability sets claimants showed on the
	// queue since the given time, at most limit.
	ClaimantList(ctx context.Context, ns, queue string, since time.Time, limit int) ([]Claimant, error)
}

// Lane is a queue's tasks of one group and one set of required
// capabilities.
type Lane struct {
	ID       int64
	Group    string
	Requires []string
}

// LaneHead is a lane's first claimable task, in claim order.
type LaneHead struct {
	Lane     int64
	Priority int
	RunAt    time.Time
	TaskID   string
}

// LaneCount is a lane's ready tasks and the oldest run_at of its
// claimable ones (zero for none).
type LaneCount struct {
	Ready  int
	Oldest time.Time
}

// QueueFleet is a queue's settings for fleet claims, and its rate
// bucket.
type QueueFleet struct {
	Namespace, Queue string
	// GroupMaxRunning caps each group's live leases (0: no cap) unless
	// the group overrides it.
	GroupMaxRunning int
	Rate            tessera.Rate
	Bucket          Bucket
}

// Group is a group of a queue: its overrides, cooldown, rate bucket and
// place in the rotation.
type Group struct {
	Namespace, Queue, Group string
	// MaxRunning overrides the queue's GroupMaxRunning (nil: the queue's).
	MaxRunning    *int
	Rate          tessera.Rate
	Bucket        Bucket
	CooldownUntil *time.Time
	// LastGranted is when the group was last granted a task (zero:
	// never): the rotation serves the longest-waiting group first.
	LastGranted time.Time
}

// Bucket is a token bucket's level at a time.
type Bucket struct {
	Tokens float64
	At     time.Time
}

// Claimant is a capability set a queue's claimants showed, and when last.
type Claimant struct {
	Capabilities []string
	SeenAt       time.Time
}
