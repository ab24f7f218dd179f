package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

func (t *tx) LaneEnsure(ctx context.Context, ns, queue, group string, requires []string, now time.Time) (int64, bool, error) {
	req, err := sqlschema.Labels(requires)
	if err != nil {
		return 0, false, err
	}
	var id int64
	scan := func(s *sqlite3.Stmt) error {
		id = s.ColumnInt64(0)
		return nil
	}
	switch err := t.one(ctx, sqlschema.LaneGet, []any{ns, queue, group, req}, scan); {
	case err == nil:
		return id, false, nil
	case !errors.Is(err, store.ErrNotFound):
		return 0, false, err
	}
	if err := t.one(ctx, sqlschema.LaneInsert, []any{ns, queue, group, req, now}, scan); err != nil {
		return 0, false, fmt.Errorf("lane of %s/%s: %w", ns, queue, err)
	}
	if _, err := t.c.exec(ctx, sqlschema.QueueFleetEnsure, ns, queue); err != nil {
		return 0, false, err
	}
	if group != "" {
		if _, err := t.c.exec(ctx, sqlschema.GroupEnsure, ns, queue, group); err != nil {
			return 0, false, err
		}
	}
	return id, true, nil
}

func (t *tx) LaneList(ctx context.Context, ns, queue string) ([]store.Lane, error) {
	var out []store.Lane
	err := t.c.query(ctx, sqlschema.LaneList, []any{ns, queue}, func(s *sqlite3.Stmt) error {
		req, err := sqlschema.ParseRequires(s.ColumnText(2))
		out = append(out, store.Lane{ID: s.ColumnInt64(0), Group: s.ColumnText(1), Requires: req})
		return err
	})
	return out, err
}

func (t *tx) LaneHeads(ctx context.Context, ns, queue string, lanes []int64, now time.Time) ([]store.LaneHead, error) {
	var out []store.LaneHead
	head := sqlschema.SQLite.LaneHead()
	for _, lane := range lanes {
		err := t.one(ctx, head, []any{ns, queue, lane, now}, func(s *sqlite3.Stmt) error {
			out = append(out, store.LaneHead{Lane: lane, Priority: s.ColumnInt(0), RunAt: colTime(s, 1), TaskID: s.ColumnText(2)})
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	return out, nil
}

func (t *tx) LaneReady(ctx context.Context, ns, queue string, lanes []int64, now time.Time) (map[int64]store.LaneCount, error) {
	out := make(map[int64]store.LaneCount, len(lanes))
	for _, lane := range lanes {
		var c store.LaneCount
		err := t.one(ctx, sqlschema.SQLite.LaneReady(), []any{ns, queue, lane}, func(s *sqlite3.Stmt) error {
			c.Ready = s.ColumnInt(0)
			return nil
		})
		if err != nil {
			return nil, err
		}
		sql, args := sqlschema.SQLite.OldestReady(ns, queue, lane)
		err = t.one(ctx, sql, args, func(s *sqlite3.Stmt) error {
			if at := colTime(s, 0); s.ColumnType(0) != sqlite3.NULL && !at.After(now) {
				c.Oldest = at
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out[lane] = c
	}
	return out, nil
}

func (t *tx) QueuesFleet(ctx context.Context, ns string) ([]string, error) {
	var out []string
	err := t.c.query(ctx, sqlschema.QueuesFleet, []any{ns}, func(s *sqlite3.Stmt) error {
		out = append(out, s.ColumnText(0))
		return nil
	})
	return out, err
}

// QueueFleetGet needs no lock: the one writer holds every row.
func (t *tx) QueueFleetGet(ctx context.Context, ns, queue string, _ bool) (*store.QueueFleet, error) {
	q := &store.QueueFleet{Namespace: ns, Queue: queue}
	err := t.one(ctx, sqlschema.QueueFleetGet, []any{ns, queue}, func(s *sqlite3.Stmt) error {
		q.GroupMaxRunning, q.Rate.PerSecond, q.Rate.Burst = s.ColumnInt(0), s.ColumnFloat(1), s.ColumnInt(2)
		q.Bucket.Tokens, q.Bucket.At = s.ColumnFloat(3), colTime(s, 4)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

func (t *tx) QueueFleetPut(ctx context.Context, q *store.QueueFleet) error {
	_, err := t.c.exec(ctx, sqlschema.QueueFleetPut, q.Namespace, q.Queue, q.GroupMaxRunning, q.Rate.PerSecond, q.Rate.Burst,
		q.Bucket.Tokens, q.Bucket.At)
	return err
}

func scanGroup(s *sqlite3.Stmt, ns, queue string) store.Group {
	g := store.Group{Namespace: ns, Queue: queue, Group: s.ColumnText(0), CooldownUntil: colTimePtr(s, 6)}
	if s.ColumnInt64(7) != 0 {
		g.LastGranted = colTime(s, 7)
	}
	if s.ColumnType(1) != sqlite3.NULL {
		n := s.ColumnInt(1)
		g.MaxRunning = &n
	}
	g.Rate.PerSecond, g.Rate.Burst = s.ColumnFloat(2), s.ColumnInt(3)
	g.Bucket.Tokens, g.Bucket.At = s.ColumnFloat(4), colTime(s, 5)
	return g
}

func (t *tx) GroupsGet(ctx context.Context, ns, queue string, groups []string) (map[string]store.Group, error) {
	out := make(map[string]store.Group, len(groups))
	if len(groups) == 0 {
		return out, nil
	}
	args := []any{ns, queue}
	for _, g := range groups {
		args = append(args, g)
	}
	err := t.c.query(ctx, sqlschema.GroupsGet+sqlschema.GroupsIn(len(groups)), args, func(s *sqlite3.Stmt) error {
		g := scanGroup(s, ns, queue)
		out[g.Group] = g
		return nil
	})
	return out, err
}

// GroupLock needs no lock: the one writer holds every row.
func (t *tx) GroupLock(ctx context.Context, ns, queue, group string) (*store.Group, error) {
	if _, err := t.c.exec(ctx, sqlschema.GroupEnsure, ns, queue, group); err != nil {
		return nil, err
	}
	var g store.Group
	err := t.one(ctx, sqlschema.GroupGet, []any{ns, queue, group}, func(s *sqlite3.Stmt) error {
		g = scanGroup(s, ns, queue)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &g, nil
}

func (t *tx) GroupList(ctx context.Context, ns, queue, after string, limit int) ([]store.Group, error) {
	var out []store.Group
	err := t.c.query(ctx, sqlschema.GroupList, []any{ns, queue, after, limit}, func(s *sqlite3.Stmt) error {
		out = append(out, scanGroup(s, ns, queue))
		return nil
	})
	return out, err
}

func (t *tx) GroupPut(ctx context.Context, g *store.Group) error {
	var maxRunning any
	if g.MaxRunning != nil {
		maxRunning = *g.MaxRunning
	}
	_, err := t.c.exec(ctx, sqlschema.GroupPut, g.Namespace, g.Queue, g.Group, maxRunning, g.Rate.PerSecond, g.Rate.Burst,
		g.Bucket.Tokens, g.Bucket.At, g.CooldownUntil, sqlschema.NeverZero(g.LastGranted))
	return err
}

func (t *tx) GroupLeases(ctx context.Context, ns, queue, group string, now time.Time, limit int) (int, error) {
	var n int
	err := t.one(ctx, sqlschema.GroupLeases, []any{ns, queue, now, group, limit}, func(s *sqlite3.Stmt) error {
		n = s.ColumnInt(0)
		return nil
	})
	return n, err
}

func (t *tx) ClaimantSeen(ctx context.Context, ns, queue string, capabilities []string, now time.Time) error {
	caps, err := sqlschema.Labels(capabilities)
	if err != nil {
		return err
	}
	_, err = t.c.exec(ctx, sqlschema.ClaimantSeen, ns, queue, caps, now)
	return err
}

func (t *tx) ClaimantList(ctx context.Context, ns, queue string, since time.Time, limit int) ([]store.Claimant, error) {
	var out []store.Claimant
	err := t.c.query(ctx, sqlschema.ClaimantList, []any{ns, queue, since, limit}, func(s *sqlite3.Stmt) error {
		caps, err := sqlschema.ParseRequires(s.ColumnText(0))
		out = append(out, store.Claimant{Capabilities: caps, SeenAt: colTime(s, 1)})
		return err
	})
	return out, err
}
