package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// bucketLevel is the SQL of the global bucket's tokens at ?1 (Unix ms),
// refilled at ?3 tokens a millisecond up to ?2: a clock that went back
// adds nothing.
const bucketLevel = `min(?2, tokens + max(?1 - updated_at, 0) * ?3)`

func (t *tx) SessionTake(ctx context.Context, now time.Time, capacity, perHour float64) (bool, time.Duration, error) {
	rate := perHour / float64(time.Hour/time.Millisecond)
	args := []any{now, capacity, rate}
	// One conditional update takes the token: whoever writes the row
	// first gets it, on any backend.
	n, err := t.c.exec(ctx, `UPDATE session_bucket SET tokens = `+bucketLevel+` - 1, updated_at = ?1
 WHERE id = 1 AND `+bucketLevel+` >= 1`, args...)
	if err != nil || n > 0 {
		return n > 0, 0, err
	}
	var level float64
	err = t.one(ctx, `SELECT `+bucketLevel+` FROM session_bucket WHERE id = 1`, args, func(s *sqlite3.Stmt) error {
		level = s.ColumnFloat(0)
		return nil
	})
	if err != nil {
		return false, 0, fmt.Errorf("session bucket: %w", err)
	}
	if rate <= 0 {
		return false, time.Hour, nil
	}
	wait := time.Duration(math.Ceil((1-level)/rate)) * time.Millisecond
	return false, wait, nil
}

// SessionMints needs no lock to hold the addresses: the one writer holds
// every row until its transaction ends.
func (t *tx) SessionMints(ctx context.Context, addrs []string, since time.Time) (int, time.Time, error) {
	total := 0
	var oldest time.Time
	for _, a := range addrs {
		err := t.one(ctx, `SELECT count(*), min(minted_at) FROM session_mints WHERE addr = ? AND minted_at >= ?`, []any{a, since},
			func(s *sqlite3.Stmt) error {
				if n := s.ColumnInt(0); n > 0 {
					total += n
					if at := colTime(s, 1); oldest.IsZero() || at.Before(oldest) {
						oldest = at
					}
				}
				return nil
			})
		if err != nil {
			return 0, time.Time{}, err
		}
	}
	return total, oldest, nil
}

func (t *tx) SessionMintAdd(ctx context.Context, addr, session string, at time.Time) error {
	_, err := t.c.exec(ctx, `INSERT INTO session_mints (addr, minted_at, session) VALUES (?, ?, ?)`, addr, at, session)
	return err
}

func (t *tx) SessionMintsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := t.c.exec(ctx, sqlschema.SessionMintsPurge, before, limit)
	return int(n), err
}

func (t *tx) SessionCreate(ctx context.Context, principalID string, quota int) error {
	_, err := t.c.exec(ctx, `INSERT INTO session_quotas (principal_id, used, quota, seeded) VALUES (?, 0, ?, 0)`, principalID, quota)
	return err
}

func (t *tx) SessionUse(ctx context.Context, principalID string) (store.SessionUsage, error) {
	var u store.SessionUsage
	scan := func(s *sqlite3.Stmt) error {
		u.Used, u.Quota, u.Seeded = s.ColumnInt(0), s.ColumnInt(1), s.ColumnBool(2)
		return nil
	}
	err := t.one(ctx, `UPDATE session_quotas SET used = used + 1 WHERE principal_id = ? AND used < quota
 RETURNING used, quota, seeded`, []any{principalID}, scan)
	if err == nil {
		u.Counted = true
		return u, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return u, err
	}
	// Spent, or no session at all.
	err = t.one(ctx, `SELECT used, quota, seeded FROM session_quotas WHERE principal_id = ?`, []any{principalID}, scan)
	return u, err
}

func (t *tx) SessionSeeded(ctx context.Context, principalID string) error {
	return mustChange(t.c.exec(ctx, `UPDATE session_quotas SET seeded = 1 WHERE principal_id = ?`, principalID))
}

func (t *tx) SessionsExpired(ctx context.Context, before time.Time, limit int) ([]string, error) {
	var ids []string
	err := t.c.query(ctx, `SELECT id FROM principals WHERE purge_at IS NOT NULL AND purge_at < ? ORDER BY purge_at LIMIT ?`,
		[]any{before, limit}, func(s *sqlite3.Stmt) error {
			ids = append(ids, s.ColumnText(0))
			return nil
		})
	return ids, err
}
