package store

import (
	"context"
	"time"
)

// SessionTx is the part of Tx that keeps anonymous demo sessions (SPEC
// §12): the global allowance, the per-address window and each session's
// quota. Everything here is shared by every node of a deployment.
type SessionTx interface {
	// SessionTake takes one session from the global allowance, a token
	// bucket holding at most capacity tokens and refilling at perHour,
	// kept in one row: when a token is there at now it is taken (ok);
	// otherwise nothing changes and wait says when the next one arrives.
	SessionTake(ctx context.Context, now time.Time, capacity, perHour float64) (ok bool, wait time.Duration, err error)
	// SessionMints counts the sessions minted by any of addrs (address
	// hashes) at or after since, and returns the oldest of those times.
	// It holds those addresses until the transaction ends: a concurrent
	// SessionMints of any of them waits, then counts what this one
	// added, so a count and the SessionMintAdd it allows, in one
	// transaction, are never raced past a limit.
	SessionMints(ctx context.Context, addrs []string, since time.Time) (n int, oldest time.Time, err error)
	// SessionMintAdd records that addr minted session at at.
	SessionMintAdd(ctx context.Context, addr, session string, at time.Time) error
	// SessionMintsPurge deletes at most limit mint records made before the
	// cutoff, and reports how many.
	SessionMintsPurge(ctx context.Context, before time.Time, limit int) (int, error)

	// SessionCreate stores a new session's quota: quota requests, none
	// used, its demo namespace not yet made.
	SessionCreate(ctx context.Context, principalID string, quota int) error
	// SessionUse counts one request against a session's quota, unless it
	// is spent. ErrNotFound if the principal has no session.
	SessionUse(ctx context.Context, principalID string) (SessionUsage, error)
	// SessionSeeded marks a session's demo namespace as made.
	SessionSeeded(ctx context.Context, principalID string) error
	// SessionsExpired returns at most limit principals whose purge time
	// is before the cutoff, soonest first, through the purge index.
	SessionsExpired(ctx context.Context, before time.Time, limit int) ([]string, error)
}

// SessionUsage is a session's quota after a request was counted.
type SessionUsage struct {
	// Counted is false when the quota was spent: nothing was counted.
	Counted bool
	Used    int
	Quota   int
	// Seeded reports whether the session's demo namespace was made.
	Seeded bool
}
