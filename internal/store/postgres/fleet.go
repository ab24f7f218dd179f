package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

var (
	laneGetSQL          = sqlschema.Numbered1(sqlschema.LaneGet)
	laneInsertSQL       = sqlschema.Numbered1(sqlschema.LaneInsert)
	laneListSQL         = sqlschema.Numbered1(sqlschema.LaneList)
	queueFleetEnsureSQL = sqlschema.Numbered1(sqlschema.QueueFleetEnsure)
	queuesFleetSQL      = sqlschema.Numbered1(sqlschema.QueuesFleet)
	queueFleetGetSQL    = sqlschema.Numbered1(sqlschema.QueueFleetGet)
	queueFleetPutSQL    = sqlschema.Numbered1(sqlschema.QueueFleetPut)
	groupEnsureSQL      = sqlschema.Numbered1(sqlschema.GroupEnsure)
	groupGetSQL         = sqlschema.Numbered1(sqlschema.GroupGet)
	groupListSQL        = sqlschema.Numbered1(sqlschema.GroupList)
	groupPutSQL         = sqlschema.Numbered1(sqlschema.GroupPut)
	groupLeasesSQL      = sqlschema.Numbered1(sqlschema.GroupLeases)
	claimantSeenSQL     = sqlschema.Numbered1(sqlschema.ClaimantSeen)
	claimantListSQL     = sqlschema.Numbered1(sqlschema.ClaimantList)
	laneReadySQL        = sqlschema.Numbered1(sqlschema.PostgreSQL.LaneReady())
)

// laneHeadsSQL seeks every lane's head in one statement: a round trip
// for all of them.
const laneHeadsSQL = `SELECT l.lane, h.priority, h.run_at, h.id FROM unnest($3::bigint[]) WITH ORDINALITY AS l(lane, i)
CROSS JOIN LATERAL (SELECT priority, run_at, id FROM tasks
  WHERE finished_at IS NULL AND namespace = $1 AND queue = $2 AND state = 'ready' AND lease_expires_at IS NULL AND lane = l.lane AND run_at <= $4
  ORDER BY lane, priority DESC, run_at, id LIMIT 1) h
ORDER BY l.i`

func (t *tx) LaneEnsure(ctx context.Context, ns, queue, group string, requires []string, now time.Time) (int64, bool, error) {
	req, err := sqlschema.Labels(requires)
	if err != nil {
		return 0, false, err
	}
	var id int64
	switch err := t.one(ctx, laneGetSQL, []any{ns, queue, group, req}, &id); {
	case err == nil:
		return id, false, nil
	case !errors.Is(err, store.ErrNotFound):
		return 0, false, err
	}
	switch err := t.one(ctx, laneInsertSQL, []any{ns, queue, group, req, ms(now)}, &id); {
	case errors.Is(err, store.ErrNotFound):
		// Another transaction made it first, and has committed.
		if err := t.one(ctx, laneGetSQL, []any{ns, queue, group, req}, &id); err != nil {
			return 0, false, fmt.Errorf("lane of %s/%s: %w", ns, queue, err)
		}
		return id, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("lane of %s/%s: %w", ns, queue, err)
	}
	if _, err := t.exec(ctx, queueFleetEnsureSQL, ns, queue); err != nil {
		return 0, false, err
	}
	if group != "" {
		if _, err := t.exec(ctx, groupEnsureSQL, ns, queue, group); err != nil {
			return 0, false, err
		}
	}
	return id, true, nil
}

func (t *tx) LaneList(ctx context.Context, ns, queue string) ([]store.Lane, error) {
	var out []store.Lane
	err := t.query(ctx, laneListSQL, []any{ns, queue}, func(rows pgx.Rows) error {
		var l store.Lane
		var req string
		if err := rows.Scan(&l.ID, &l.Group, &req); err != nil {
			return err
		}
		var err error
		l.Requires, err = sqlschema.ParseRequires(req)
		out = append(out, l)
		return err
	})
	return out, err
}

func (t *tx) LaneHeads(ctx context.Context, ns, queue string, lanes []int64, now time.Time) ([]store.LaneHead, error) {
	var out []store.LaneHead
	err := t.query(ctx, laneHeadsSQL, []any{ns, queue, lanes, ms(now)}, func(rows pgx.Rows) error {
		var h store.LaneHead
		var runAt int64
		if err := rows.Scan(&h.Lane, &h.Priority, &runAt, &h.TaskID); err != nil {
			return err
		}
		h.RunAt = fromMS(runAt)
		out = append(out, h)
		return nil
	})
	return out, err
}

func (t *tx) LaneReady(ctx context.Context, ns, queue string, lanes []int64, now time.Time) (map[int64]store.LaneCount, error) {
	out := make(map[int64]store.LaneCount, len(lanes))
	for _, lane := range lanes {
		var c store.LaneCount
		var n int64
		if err := t.countRows(ctx, laneReadySQL, []any{ns, queue, lane}, &n); err != nil {
			return nil, err
		}
		c.Ready = int(n)
		sql, args := sqlschema.PostgreSQL.OldestReady(ns, queue, lane)
		var runAt *int64
		if err := t.one(ctx, sqlschema.Numbered1(sql), args, &runAt); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if at := timePtr(runAt); at != nil && !at.After(now) {
			c.Oldest = *at
		}
		out[lane] = c
	}
	return out, nil
}

func (t *tx) QueuesFleet(ctx context.Context, ns string) ([]string, error) {
	var out []string
	err := t.query(ctx, queuesFleetSQL, []any{ns}, func(rows pgx.Rows) error {
		var q string
		err := rows.Scan(&q)
		out = append(out, q)
		return err
	})
	return out, err
}

// lockable adds FOR UPDATE to sql when lock is asked and the transaction
// may write.
func (t *tx) lockable(sql string, lock bool) string {
	if lock && !t.readOnly {
		return sql + ` FOR UPDATE`
	}
	return sql
}

func (t *tx) QueueFleetGet(ctx context.Context, ns, queue string, lock bool) (*store.QueueFleet, error) {
	q := &store.QueueFleet{Namespace: ns, Queue: queue}
	var at int64
	err := t.one(ctx, t.lockable(queueFleetGetSQL, lock), []any{ns, queue},
		&q.GroupMaxRunning, &q.Rate.PerSecond, &q.Rate.Burst, &q.Bucket.Tokens, &at)
	if err != nil {
		return nil, err
	}
	q.Bucket.At = fromMS(at)
	return q, nil
}

func (t *tx) QueueFleetPut(ctx context.Context, q *store.QueueFleet) error {
	_, err := t.exec(ctx, queueFleetPutSQL, q.Namespace, q.Queue, q.GroupMaxRunning, q.Rate.PerSecond, q.Rate.Burst,
		q.Bucket.Tokens, ms(q.Bucket.At))
	return err
}

// groupRow scans sqlschema.GroupCols.
type groupRow struct {
	g            store.Group
	maxRunning   *int
	at, granted  int64
	cooldownTill *int64
}

func (r *groupRow) dest() []any {
	return []any{&r.g.Group, &r.maxRunning, &r.g.Rate.PerSecond, &r.g.Rate.Burst, &r.g.Bucket.Tokens, &r.at, &r.cooldownTill, &r.granted}
}

func (r *groupRow) group(ns, queue string) store.Group {
	g := r.g
	g.Namespace, g.Queue, g.MaxRunning = ns, queue, r.maxRunning
	g.Bucket.At, g.CooldownUntil = fromMS(r.at), timePtr(r.cooldownTill)
	if r.granted != 0 {
		g.LastGranted = fromMS(r.granted)
	}
	return g
}

var groupsGetSQL = sqlschema.Numbered1(sqlschema.GroupsGet + `(SELECT unnest(?::text[]))`)

func (t *tx) GroupsGet(ctx context.Context, ns, queue string, groups []string) (map[string]store.Group, error) {
	out := make(map[string]store.Group, len(groups))
	if len(groups) == 0 {
		return out, nil
	}
	err := t.query(ctx, groupsGetSQL, []any{ns, queue, groups}, func(rows pgx.Rows) error {
		var r groupRow
		if err := rows.Scan(r.dest()...); err != nil {
			return err
		}
		g := r.group(ns, queue)
		out[g.Group] = g
		return nil
	})
	return out, err
}

func (t *tx) GroupLock(ctx context.Context, ns, queue, group string) (*store.Group, error) {
	if _, err := t.exec(ctx, groupEnsureSQL, ns, queue, group); err != nil {
		return nil, err
	}
	var r groupRow
	if err := t.one(ctx, t.lockable(groupGetSQL, true), []any{ns, queue, group}, r.dest()...); err != nil {
		return nil, err
	}
	g := r.group(ns, queue)
	return &g, nil
}

func (t *tx) GroupList(ctx context.Context, ns, queue, after string, limit int) ([]store.Group, error) {
	var out []store.Group
	err := t.query(ctx, groupListSQL, []any{ns, queue, after, limit}, func(rows pgx.Rows) error {
		var r groupRow
		if err := rows.Scan(r.dest()...); err != nil {
			return err
		}
		out = append(out, r.group(ns, queue))
		return nil
	})
	return out, err
}

func (t *tx) GroupPut(ctx context.Context, g *store.Group) error {
	_, err := t.exec(ctx, groupPutSQL, g.Namespace, g.Queue, g.Group, g.MaxRunning, g.Rate.PerSecond, g.Rate.Burst,
		g.Bucket.Tokens, ms(g.Bucket.At), msPtr(g.CooldownUntil), sqlschema.NeverZero(g.LastGranted))
	return err
}

func (t *tx) GroupLeases(ctx context.Context, ns, queue, group string, now time.Time, limit int) (int, error) {
	var n int64
	err := t.countRows(ctx, groupLeasesSQL, []any{ns, queue, ms(now), group, limit}, &n)
	return int(n), err
}

func (t *tx) ClaimantSeen(ctx context.Context, ns, queue string, capabilities []string, now time.Time) error {
	caps, err := sqlschema.Labels(capabilities)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, claimantSeenSQL, ns, queue, caps, ms(now))
	return err
}

func (t *tx) ClaimantList(ctx context.Context, ns, queue string, since time.Time, limit int) ([]store.Claimant, error) {
	var out []store.Claimant
	err := t.query(ctx, claimantListSQL, []any{ns, queue, ms(since), limit}, func(rows pgx.Rows) error {
		var caps string
		var at int64
		if err := rows.Scan(&caps, &at); err != nil {
			return err
		}
		c := store.Claimant{SeenAt: fromMS(at)}
		var err error
		c.Capabilities, err = sqlschema.ParseRequires(caps)
		out = append(out, c)
		return err
	})
	return out, err
}
