package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// bucketLevel is the SQL of the global bucket's tokens at $1 (Unix ms),
// refilled at $3 tokens a millisecond up to $2: a clock that went back
// adds nothing.
const bucketLevel = `least($2::float8, tokens + greatest($1::int8 - updated_at, 0) * $3::float8)`

// SessionTake takes a token with one conditional update: concurrent takers
// wait for the row, and each re-checks the level the one before it left.
func (t *tx) SessionTake(ctx context.Context, now time.Time, capacity, perHour float64) (bool, time.Duration, error) {
	rate := perHour / float64(time.Hour/time.Millisecond)
	args := []any{ms(now), capacity, rate}
	n, err := t.exec(ctx, `UPDATE session_bucket SET tokens = `+bucketLevel+` - 1, updated_at = $1
 WHERE id = 1 AND `+bucketLevel+` >= 1`, args...)
	if err != nil || n > 0 {
		return n > 0, 0, err
	}
	var level float64
	if err := t.one(ctx, `SELECT `+bucketLevel+` FROM session_bucket WHERE id = 1`, args, &level); err != nil {
		return false, 0, fmt.Errorf("session bucket: %w", err)
	}
	if rate <= 0 {
		return false, time.Hour, nil
	}
	return false, time.Duration(math.Ceil((1-level)/rate)) * time.Millisecond, nil
}

// SessionMints holds the addresses before it counts. At READ COMMITTED
// concurrent mints would each count the others' uncommitted mints as
// absent and all pass, and a conditional INSERT … WHERE count < n has the
// same blind spot; so each mint first takes a transaction-scoped advisory
// lock per address hash (in order, so two holders of both never
// deadlock), and counts in the next statement, whose snapshot holds every
// mint committed before the lock was granted. Mints of other addresses
// never wait, and SERIALIZABLE's retries are not needed.
func (t *tx) SessionMints(ctx context.Context, addrs []string, since time.Time) (int, time.Time, error) {
	if _, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('tessera session mints ' || current_schema() || ' ' || a, 0))
 FROM (SELECT DISTINCT a FROM unnest($1::text[]) a ORDER BY a) held`, addrs); err != nil {
		return 0, time.Time{}, fmt.Errorf("hold the mints of %d addresses: %w", len(addrs), err)
	}
	var n int64
	var oldest *int64
	// Per address a range of the key: its mints in the window.
	err := t.countRows(ctx, `SELECT count(*), min(m.minted_at) FROM unnest($1::text[]) a
 JOIN session_mints m ON m.addr = a AND m.minted_at >= $2`, []any{addrs, ms(since)}, &n, &oldest)
	if err != nil || oldest == nil {
		return int(n), time.Time{}, err
	}
	return int(n), fromMS(*oldest), nil
}

func (t *tx) SessionMintAdd(ctx context.Context, addr, session string, at time.Time) error {
	_, err := t.exec(ctx, `INSERT INTO session_mints (addr, minted_at, session) VALUES ($1, $2, $3)`, addr, ms(at), session)
	return err
}

func (t *tx) SessionMintsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := t.exec(ctx, sqlschema.Numbered1(sqlschema.SessionMintsPurge), ms(before), limit)
	return int(n), err
}

func (t *tx) SessionCreate(ctx context.Context, principalID string, quota int) error {
	return t.insert(ctx, "session of "+principalID, `INSERT INTO session_quotas (principal_id, used, quota, seeded) VALUES ($1, 0, $2, false)
 ON CONFLICT DO NOTHING`, principalID, quota)
}

func (t *tx) SessionUse(ctx context.Context, principalID string) (store.SessionUsage, error) {
	var u store.SessionUsage
	err := t.one(ctx, `UPDATE session_quotas SET used = used + 1 WHERE principal_id = $1 AND used < quota
 RETURNING used, quota, seeded`, []any{principalID}, &u.Used, &u.Quota, &u.Seeded)
	if !errors.Is(err, store.ErrNotFound) {
		u.Counted = err == nil
		return u, err
	}
	// Spent, or no session at all.
	err = t.one(ctx, `SELECT used, quota, seeded FROM session_quotas WHERE principal_id = $1`, []any{principalID}, &u.Used, &u.Quota, &u.Seeded)
	return u, err
}

func (t *tx) SessionSeeded(ctx context.Context, principalID string) error {
	return mustChange(t.exec(ctx, `UPDATE session_quotas SET seeded = true WHERE principal_id = $1`, principalID))
}

func (t *tx) SessionsExpired(ctx context.Context, before time.Time, limit int) ([]string, error) {
	var ids []string
	err := t.query(ctx, `SELECT id FROM principals WHERE purge_at IS NOT NULL AND purge_at < $1 ORDER BY purge_at LIMIT $2`,
		[]any{ms(before), limit}, func(rows pgx.Rows) error {
			var id string
			err := rows.Scan(&id)
			ids = append(ids, id)
			return err
		})
	return ids, err
}
